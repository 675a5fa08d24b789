/*
 * emit.h — C source generation for the CPU backend (docs/cpu-backend.md).
 *
 * One kernel (or one piece of a kernel: the prologue or epilogue of a
 * linear kernel) becomes one C function
 *
 *     int fsl_k<ID>(const void *const *in, void *const *out);
 *
 * in[i] is the row-major data of spec->in[i], out[j] the buffer of
 * spec->out[j] (shapes are static and baked into the code).  The function
 * returns 0, or an OR of FSL_KERR_* bits on a run-time error.  Movement
 * primitives and gathers become index arithmetic on the coordinates of the
 * element being computed; elementwise primitives become C expressions; a
 * reduction becomes an accumulation loop (docs/cpu-backend.md).
 */
#ifndef FSL_CPU_EMIT_H
#define FSL_CPU_EMIT_H

#include "orchestrate/orchestrate.h"

/* Error bits returned by generated functions. */
#define FSL_KERR_INDEX 1   /* gather index out of range */
#define FSL_KERR_DIVZERO 2 /* integer division or modulo by zero */
#define FSL_KERR_NOMEM 4   /* scratch allocation failed */

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

/** What one generated function computes. */
typedef struct fsl_emit_spec {
  const fsl_graph *g;
  int id;                      /* the function is named fsl_k<id> */
  int n_nodes;
  fsl_node *const *nodes;      /* computed inside, in topological order */
  int n_in;
  fsl_value *const *in;        /* every value read that no node of `nodes` produces */
  int n_out;
  fsl_value *const *out;       /* values written (produced by `nodes`) */
} fsl_emit_spec;

/** Helper definitions every generated file starts with (includes, inline
 *  math and index helpers).  Append once per source file. */
void fsl_emit_prologue(fsl_sbuf *b);

/**
 * Appends the function for spec: a LOOP body (elementwise, movement,
 * gather nodes; one loop nest per distinct output shape) or, when the
 * nodes include reductions, a REDUCE body (fused rows when every
 * reduction shares one input shape and axes and every read of a reduction
 * result stays in its row, otherwise one pass per reduction through
 * scratch buffers).  Nothing is appended on failure.
 * Errors: FSL_ERR_UNSUPPORTED (f16/bf16/string dtypes, scatter, linear
 * nodes, an op the emitter lacks; the caller falls back to the reference
 * interpreter), FSL_ERR_NOMEM.
 */
fsl_status fsl_emit_kernel(const fsl_emit_spec *spec, fsl_sbuf *b);

/**
 * Appends fsl_k<id>(in = {a, b}, out = {c}) computing the matmul node mm
 * (docs/primitives.md: [batch.., M, K] x [batch.., K, N]) as a plain loop
 * nest: floats accumulate in double, integers in 64 bits (wrapping).
 * FSL_ERR_UNSUPPORTED for f16/bf16/bool.
 */
fsl_status fsl_emit_matmul(int id, const fsl_node *mm, fsl_sbuf *b);

#endif
