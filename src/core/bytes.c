/* bytes.c — little-endian binary writer and bounds-checked reader (bytes.h). */
#include "core/bytes.h"

void fsl_bytes_put(fsl_bytes *b, const void *p, size_t n) {
  if (b->oom || n == 0) return;
  if (n > SIZE_MAX / 2 - b->len) { b->oom = true; return; }
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    unsigned char *q = realloc(b->p, cap);
    if (!q) { b->oom = true; return; }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

void fsl_bytes_u64(fsl_bytes *b, uint64_t v) {
  unsigned char s[8];
  for (int i = 0; i < 8; i++) s[i] = (unsigned char)(v >> (8 * i));
  fsl_bytes_put(b, s, 8);
}

void fsl_bytes_u32(fsl_bytes *b, uint32_t v) {
  unsigned char s[4];
  for (int i = 0; i < 4; i++) s[i] = (unsigned char)(v >> (8 * i));
  fsl_bytes_put(b, s, 4);
}

void fsl_bytes_f64(fsl_bytes *b, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  fsl_bytes_u64(b, u);
}

void fsl_bytes_str(fsl_bytes *b, const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n > UINT32_MAX) { b->oom = true; return; }
  fsl_bytes_u32(b, (uint32_t)n);
  fsl_bytes_put(b, s, n);
}

void fsl_bytes_free(fsl_bytes *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

const void *fsl_read_take(fsl_reader *r, uint64_t n) {
  if (r->bad || n > (uint64_t)(r->end - r->p)) {
    r->bad = true;
    return NULL;
  }
  const void *p = r->p;
  r->p += n;
  return p;
}

uint64_t fsl_read_u64(fsl_reader *r) {
  const unsigned char *s = fsl_read_take(r, 8);
  uint64_t v = 0;
  for (int i = 0; s && i < 8; i++) v |= (uint64_t)s[i] << (8 * i);
  return v;
}

uint32_t fsl_read_u32(fsl_reader *r) {
  const unsigned char *s = fsl_read_take(r, 4);
  uint32_t v = 0;
  for (int i = 0; s && i < 4; i++) v |= (uint32_t)s[i] << (8 * i);
  return v;
}

double fsl_read_f64(fsl_reader *r) {
  uint64_t u = fsl_read_u64(r);
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

const char *fsl_read_str(fsl_reader *r, char *buf, size_t cap) {
  uint32_t n = fsl_read_u32(r);
  const char *s = fsl_read_take(r, n);
  if (!s || (size_t)n >= cap || memchr(s, 0, n)) {
    r->bad = true;
    if (cap) buf[0] = 0;
    return buf;
  }
  memcpy(buf, s, n);
  buf[n] = 0;
  return buf;
}
