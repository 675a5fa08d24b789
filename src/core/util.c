/* util.c — whole-file reads, hashing and the monotonic clock. */
#include "core.h"
#include <errno.h>
#include <time.h>

fsl_status fsl_read_file(const char *path, size_t limit, void **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return fsl_errorf(FSL_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  unsigned char *p = malloc(cap);
  if (!p) { fclose(f); return fsl_errorf(FSL_ERR_NOMEM, "out of memory reading '%s'", path); }
  for (;;) {
    if (n == cap) {
      if (cap >= limit) {
        free(p); fclose(f);
        return fsl_errorf(FSL_ERR_IO, "'%s' is larger than %zu bytes", path, limit);
      }
      cap = cap * 2 > limit ? limit : cap * 2;
      unsigned char *q = realloc(p, cap);
      if (!q) { free(p); fclose(f); return fsl_errorf(FSL_ERR_NOMEM, "out of memory reading '%s'", path); }
      p = q;
    }
    size_t r = fread(p + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) { free(p); return fsl_errorf(FSL_ERR_IO, "error reading '%s'", path); }
  *buf = p;
  *len = n;
  return FSL_OK;
}

uint64_t fsl_hash(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) { h ^= s[i]; h *= 1099511628211ULL; }
  return h;
}

bool fsl_grow(void **arr, int *cap, int need, size_t size) {
  if (need <= *cap) return true;
  int nc = *cap > 0 ? *cap : 16;
  while (nc < need) {
    if (nc > (1 << 28)) return false;
    nc *= 2;
  }
  void *na = realloc(*arr, size * (size_t)nc);
  if (!na) return false;
  *arr = na;
  *cap = nc;
  return true;
}

double fsl_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
