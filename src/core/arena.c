/* arena.c — bump allocator; a graph frees everything it owns at once. */
#include "core.h"

struct fsl_arena_block {
  fsl_arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void fsl_arena_init(fsl_arena *a) { a->head = NULL; a->total = 0; }

void fsl_arena_free(fsl_arena *a) {
  fsl_arena_block *b = a->head;
  while (b) {
    fsl_arena_block *n = b->next;
    free(b);
    b = n;
  }
  a->head = NULL;
  a->total = 0;
}

void *fsl_arena_alloc(fsl_arena *a, size_t n) {
  if (n > ((size_t)1 << 46)) return NULL;
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  fsl_arena_block *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 64 * 1024 ? n : 64 * 1024;
    b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->used = 0;
    if (n > 64 * 1024 && a->head) { /* big block: keep the current one on top */
      b->next = a->head->next;
      a->head->next = b;
    } else {
      b->next = a->head;
      a->head = b;
    }
  }
  void *p = b->data + b->used;
  b->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

void *fsl_arena_memdup(fsl_arena *a, const void *p, size_t n) {
  void *q = fsl_arena_alloc(a, n);
  if (q && n) memcpy(q, p, n);
  return q;
}

char *fsl_arena_strdup(fsl_arena *a, const char *s) {
  if (!s) return NULL;
  return fsl_arena_memdup(a, s, strlen(s) + 1);
}
