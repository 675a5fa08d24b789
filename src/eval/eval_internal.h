/*
 * eval_internal.h — the reference interpreter's op families, shared between
 * the files of src/eval/.  Each family evaluates primitive nodes
 * whose shapes fsl_prim_infer() has already checked (fsl_ref_eval re-checks
 * before dispatching), so index arithmetic here may rely on the shape rules.
 */
#ifndef FSL_EVAL_INTERNAL_H
#define FSL_EVAL_INTERNAL_H

#include "eval/eval.h"

/** Row-major element strides of a shape. */
void fsl_ref_strides(int rank, const int64_t *dims, int64_t *strides);

/**
 * Strided copy: for every index c of the output shape (rank, odims),
 * dst[flat(c)] = src[base + sum_i c_i * istr[i]] (element units, esz bytes
 * per element).
 */
void fsl_ref_strided_copy(size_t esz, int rank, const int64_t *odims, const int64_t *istr,
                          int64_t base, const void *src, void *dst);

/** Elementwise primitives: unary, binary, where, cast. */
fsl_status fsl_ref_elementwise(const fsl_node *n, const void *const *in, void *out);
/** reduce_sum/max/min/prod, argmax/argmin. */
fsl_status fsl_ref_reduce(const fsl_node *n, const void *const *in, void *out);
/** reshape, permute, expand, slice, pad, concat, window. */
fsl_status fsl_ref_movement(const fsl_node *n, const void *const *in, void *out);
/** gather, gather_elements, gather_nd, scatter_elements, scatter_nd. */
fsl_status fsl_ref_gather(const fsl_node *n, const void *const *in, void *out);
/** matmul, conv. */
fsl_status fsl_ref_linear(const fsl_node *n, const void *const *in, void *out);

/** Reads an INTS attribute (already validated by the shape rule); NULL if absent. */
static inline const int64_t *fsl_ref_ints(const fsl_node *n, const char *name) {
  const int64_t *v = NULL;
  return fsl_attr_ints(n, name, &v) >= 0 ? v : NULL;
}

#endif
