/* sbuf.c — the growable text buffer of the code generator (sbuf.h). */
#include "codegen/sbuf.h"

#include <stdarg.h>

static bool sbuf_reserve(fsl_sbuf *b, size_t extra) {
  if (b->oom) return false;
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

void fsl_sbuf_printf(fsl_sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[512];
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = true;
    return;
  }
  if (!sbuf_reserve(b, (size_t)n)) return;
  if ((size_t)n < sizeof tmp) {
    memcpy(b->p + b->len, tmp, (size_t)n + 1);
  } else {
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  b->len += (size_t)n;
}

void fsl_sbuf_puts(fsl_sbuf *b, const char *s) {
  size_t n = strlen(s);
  if (!sbuf_reserve(b, n)) return;
  memcpy(b->p + b->len, s, n + 1);
  b->len += n;
}

void fsl_sbuf_free(fsl_sbuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}
