/* util.c — whole-file reads, atomic whole-file writes, hashing and the
 * monotonic clock. */
#include "core.h"
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

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

int fsl_temp_beside(const char *path, char *tmp, size_t cap) {
  static unsigned counter;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    int len = snprintf(tmp, cap, "%s.%ld.%u.tmp", path, (long)getpid(), n);
    if (len < 0 || (size_t)len >= cap) {
      errno = ENAMETOOLONG;
      return -1;
    }
    /* mode 0666 less the umask, as fopen gives; O_EXCL: never another's file */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

fsl_status fsl_write_file_atomic(const char *path, int (*writer)(FILE *f, const void *ctx), const void *ctx) {
  if (!path || !writer) return fsl_errorf(FSL_ERR_ARG, "fsl_write_file_atomic: NULL argument");
  char tmp[4200];
  int fd = fsl_temp_beside(path, tmp, sizeof tmp);
  if (fd < 0) return fsl_errorf(FSL_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    int err = errno;
    close(fd);
    unlink(tmp);
    return fsl_errorf(FSL_ERR_IO, "cannot write '%s': %s", path, strerror(err));
  }
  errno = 0;
  int err = writer(f, ctx);
  if (!err && ferror(f)) err = errno ? errno : EIO;
  if (fflush(f) != 0 && !err) err = errno ? errno : EIO;
  if (!err && fsync(fileno(f)) != 0) err = errno;
  if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
  if (!err && rename(tmp, path) != 0) err = errno;
  if (err) {
    unlink(tmp);
    return fsl_errorf(FSL_ERR_IO, "cannot write '%s': %s", path, strerror(err));
  }
  return FSL_OK;
}

typedef struct { const void *buf; size_t len; } bytes_ctx;

static int bytes_writer(FILE *f, const void *ctx) {
  const bytes_ctx *b = ctx;
  if (b->len == 0) return 0; /* buf may be NULL */
  return fwrite(b->buf, 1, b->len, f) == b->len ? 0 : errno ? errno : EIO;
}

fsl_status fsl_write_bytes_atomic(const char *path, const void *buf, size_t len) {
  if (!buf && len) return fsl_errorf(FSL_ERR_ARG, "fsl_write_bytes_atomic: NULL argument");
  bytes_ctx b = {buf, len};
  return fsl_write_file_atomic(path, bytes_writer, &b);
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
