/*
 * bytes.h — binary serialisation: a growable byte buffer that writes
 * little-endian integers, doubles and length-prefixed strings, and a
 * bounds-checked reader for the same encoding.  Used for compiled model
 * files (src/aot) and the backends' exported executables.  The reader
 * never reads past its end: a short or malformed input sets `bad` and
 * yields zeros/NULL, so a caller checks `bad` once after reading a record.
 */
#ifndef FSL_CORE_BYTES_H
#define FSL_CORE_BYTES_H

#include "core/core.h"

/** A growable buffer; oom is set (and writes stop) when malloc fails. */
typedef struct fsl_bytes {
  unsigned char *p;
  size_t len, cap;
  bool oom;
} fsl_bytes;

void fsl_bytes_put(fsl_bytes *b, const void *p, size_t n);
void fsl_bytes_u32(fsl_bytes *b, uint32_t v);
void fsl_bytes_u64(fsl_bytes *b, uint64_t v);
void fsl_bytes_f64(fsl_bytes *b, double v);
/** u32 length, then the bytes (no terminator). */
void fsl_bytes_str(fsl_bytes *b, const char *s);
void fsl_bytes_free(fsl_bytes *b);

/** Reads [p, end). */
typedef struct fsl_reader {
  const unsigned char *p, *end;
  bool bad;               /* a read ran past the end or found a malformed field */
} fsl_reader;

uint32_t fsl_read_u32(fsl_reader *r);
uint64_t fsl_read_u64(fsl_reader *r);
double fsl_read_f64(fsl_reader *r);
/** The next n bytes (NULL and bad when fewer are left). */
const void *fsl_read_take(fsl_reader *r, uint64_t n);
/** A string written by fsl_bytes_str, copied NUL-terminated into buf[cap];
 *  bad when it does not fit or holds a NUL byte. */
const char *fsl_read_str(fsl_reader *r, char *buf, size_t cap);

#endif
