/*
 * sbuf.h — a growable text buffer (the code generator writes source into
 * it; backends hand the text to their compilers).
 */
#ifndef FSL_SBUF_H
#define FSL_SBUF_H

#include "core/core.h"

/** A growable text buffer.  `oom` is set (and later appends ignored) when
 *  an allocation fails. */
typedef struct fsl_sbuf {
  char *p;      /* NUL-terminated text (NULL while empty) */
  size_t len, cap;
  bool oom;
} fsl_sbuf;

/** Appends printf-formatted text. */
void fsl_sbuf_printf(fsl_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Appends a string verbatim. */
void fsl_sbuf_puts(fsl_sbuf *b, const char *s);
void fsl_sbuf_free(fsl_sbuf *b);

#endif
