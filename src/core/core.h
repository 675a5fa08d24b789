/* core.h — arena, status + diagnostics, dtype helpers, checked arithmetic. */
#ifndef FSL_CORE_H
#define FSL_CORE_H

#include "fissile.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- internal invariants (bugs, not bad input) ---- */
#define FSL_ASSERT(c)                                                        \
  do {                                                                       \
    if (!(c)) {                                                              \
      fprintf(stderr, "fissile: internal error at %s:%d: %s\n", __FILE__,    \
              __LINE__, #c);                                                 \
      abort();                                                               \
    }                                                                        \
  } while (0)

#define FSL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors: a status code plus a thread-local message ---- */
/** Sets the thread's last error message (printf-style) and returns s. */
fsl_status fsl_errorf(fsl_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Prefixes the current message with "prefix: " (for context), returns s. */
fsl_status fsl_error_context(fsl_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fsl_error_clear(void);

/* ---- progress (fsl_set_progress): the one way library code reports it ---- */
/** Gives one event to the receiver, if any (progress.c). */
void fsl_progress_emit(const char *task, const char *detail, int done, int total, double elapsed_s, bool finished);
/** Whether a receiver is set (to skip building detail strings). */
bool fsl_progress_wanted(void);

#define FSL_TRY(expr)                                                        \
  do {                                                                       \
    fsl_status fsl_try_s_ = (expr);                                          \
    if (fsl_try_s_ != FSL_OK) return fsl_try_s_;                             \
  } while (0)

/* ---- arena: everything a graph owns, freed at once ---- */
typedef struct fsl_arena_block fsl_arena_block;
typedef struct fsl_arena {
  fsl_arena_block *head;
  size_t total;  /* bytes allocated so far */
} fsl_arena;

void fsl_arena_init(fsl_arena *a);
void fsl_arena_free(fsl_arena *a);
/** Zeroed, 16-byte aligned memory; NULL on OOM or overflow. */
void *fsl_arena_alloc(fsl_arena *a, size_t n);
char *fsl_arena_strdup(fsl_arena *a, const char *s);
void *fsl_arena_memdup(fsl_arena *a, const void *p, size_t n);

/* ---- checked arithmetic (model sizes are untrusted) ---- */
/** *out = a*b; false on overflow or negative operands. */
static inline bool fsl_mul_ok(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}
/** numel of dims[0..rank); -1 if it overflows int64 or a dim is < 0. */
int64_t fsl_numel(int rank, const int64_t *dims);
/** numel * elem size in bytes; -1 on overflow. */
int64_t fsl_nbytes(fsl_dtype dt, int rank, const int64_t *dims);
/** The dims along which row-major data[rank dims] of elem-byte elements
 *  does not vary: bit i set when every slice along axis i (of extent > 1)
 *  is byte-equal to slice 0 (a broadcast materialized at full size).
 *  Axes from 32 on are never set. */
unsigned fsl_uniform_dims(const void *data, size_t elem, int rank, const int64_t *dims);

/* ---- dtypes ---- */
bool fsl_dtype_valid(fsl_dtype dt);      /* a numeric or bool type fissile executes */
bool fsl_dtype_is_float(fsl_dtype dt);   /* f16 bf16 f32 f64 */
bool fsl_dtype_is_int(fsl_dtype dt);     /* signed or unsigned integer (not bool) */
bool fsl_dtype_is_signed(fsl_dtype dt);  /* signed ints and floats */
/** Formats "2x3x4" (or "scalar") into buf; returns buf. */
char *fsl_shape_str(int rank, const int64_t *dims, char *buf, size_t len);

/* float16 / bfloat16 <-> float (IEEE 754 binary16, round to nearest even) */
float fsl_f16_to_f32(uint16_t h);
uint16_t fsl_f32_to_f16(float f);
float fsl_bf16_to_f32(uint16_t h);
uint16_t fsl_f32_to_bf16(float f);

/** Element i of a buffer of dtype dt, as double / as int64 (with C casts). */
double fsl_load_f64(fsl_dtype dt, const void *p, int64_t i);
int64_t fsl_load_i64(fsl_dtype dt, const void *p, int64_t i);
uint64_t fsl_load_u64(fsl_dtype dt, const void *p, int64_t i);
/** Stores v (converted with ONNX Cast semantics: float->int truncates,
 *  ->bool is v != 0) as element i. */
void fsl_store_f64(fsl_dtype dt, void *p, int64_t i, double v);
void fsl_store_i64(fsl_dtype dt, void *p, int64_t i, int64_t v);
void fsl_store_u64(fsl_dtype dt, void *p, int64_t i, uint64_t v);

/* ---- small utilities ---- */
/** Grows the malloc'd array *arr (elements of `size` bytes, capacity *cap)
 *  to hold at least `need` elements, doubling; false on OOM or overflow. */
bool fsl_grow(void **arr, int *cap, int need, size_t size);
/** Reads a whole file (max `limit` bytes) into malloc'd memory. */
fsl_status fsl_read_file(const char *path, size_t limit, void **buf, size_t *len);
/* Writes a whole file atomically: writer(f, ctx) writes the contents into a
 * new temporary file beside path (fsl_temp_beside), which is then flushed,
 * fsync'd and renamed over path, so path holds the old file or the whole
 * new one, never a part.  On any failure the temporary file is removed and
 * path is left as it was.  writer returns 0 or an errno value (ENOMEM, ...);
 * an error on f counts as a failure too.  The one way fissile replaces a
 * file: compiled model files, caches (OpenCL programs, device calibration),
 * the report's pages.  Errors: FSL_ERR_IO "cannot write 'PATH': REASON"
 * (folder missing or not writable, path a folder, a failed write, fsync or
 * rename, the writer's errno), FSL_ERR_ARG (NULL path or writer). */
fsl_status fsl_write_file_atomic(const char *path, int (*writer)(FILE *f, const void *ctx), const void *ctx);
/** fsl_write_file_atomic of the len bytes at buf; the same errors. */
fsl_status fsl_write_bytes_atomic(const char *path, const void *buf, size_t len);
/** Creates a new empty file "PATH.<pid>.<n>.tmp" beside path (same folder,
 *  so a rename onto path is atomic; mode 0666 less the umask, never an
 *  existing file) and returns its descriptor with its name in tmp[cap];
 *  -1 with errno set on failure (ENAMETOOLONG when the name does not fit). */
int fsl_temp_beside(const char *path, char *tmp, size_t cap);
/* The folder of one of fissile's caches, created if missing (mkdir -p), in
 * buf[cap]: $FSL_CACHE_DIR when set (every cache shares that one folder),
 * else $XDG_CACHE_HOME/fissile/SUB, ~/.cache/fissile/SUB, or
 * /tmp/fissile-<uid>/SUB (no "/SUB" when sub is NULL or "").  Users: the
 * kernel cache (sub "kernels"), the profile cache and the device
 * calibration (the root).  Errors: FSL_ERR_RUNTIME naming the folder (too
 * long, cannot be created, not a folder), FSL_ERR_ARG. */
fsl_status fsl_cache_folder(const char *sub, char *buf, size_t cap);
/** Seconds on the monotonic clock (CLOCK_MONOTONIC): differences time work. */
double fsl_now_s(void);
/** 64-bit FNV-1a hash, chainable through `h` (start with FSL_HASH_INIT). */
#define FSL_HASH_INIT 1469598103934665603ULL
uint64_t fsl_hash(uint64_t h, const void *p, size_t n);

#endif
