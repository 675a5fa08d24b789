/*
 * builder.h — building primitive graphs, with shape inference and constant
 * folding as each primitive is added.
 *
 * Every fsl_b_* call adds one primitive to b->g (or, when all its inputs are
 * constants and folding is on, evaluates it with the reference interpreter
 * and returns a constant instead).  Errors are sticky: the first failure is
 * kept in b->st with its message, and every later call returns NULL, so a
 * decomposition can chain calls and check b->st once at the end.
 * Shapes are static: every value a builder returns has a known shape.
 */
#ifndef FSL_BUILDER_H
#define FSL_BUILDER_H

#include "ir/ir.h"

/* The bytes of constants a fission may add to a model: 16x the model's own
 * constants (initializers, Constant nodes, frozen inputs), and at least
 * 256 MiB.  Folding legitimately grows constants a few times (int8 weights
 * dequantized to float, weights transposed or scaled); no real model needs
 * more, and a small file must not make the importer take gigabytes. */
#define FSL_CONST_LIMIT_FACTOR 16
#define FSL_CONST_LIMIT_MIN ((int64_t)256 << 20)
#define FSL_CONST_LIMIT_TEXT "16x the model's own constants, at least 256 MiB"

typedef struct fsl_builder {
  fsl_graph *g;
  fsl_status st;          /* first error (sticky) */
  bool fold;              /* fold primitives whose inputs are all constant */
  int64_t fold_limit;     /* bytes a folded result may grow to beyond its
                             inputs' size; 0: 64 KiB (larger broadcasts of
                             constants stay views in the graph) */
  int64_t *const_left;    /* bytes of constants (folded or made) this
                             builder's graph may still gain; NULL: no limit.
                             Shared by the builders of one fission, so a
                             model cannot grow its constants without bound
                             (a chain of Concat(x, x) doubles them per node) */
  int origin;             /* stamped on every node made (ONNX node id) */
  const char *origin_name, *origin_op;
} fsl_builder;

/** Marks the builder failed (keeps the first error); returns NULL. */
void *fsl_b_fail(fsl_builder *b, fsl_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- constants ---- */
/** Constant of the given dtype/shape; `data` (numel elements) is copied. */
fsl_value *fsl_b_const(fsl_builder *b, fsl_dtype dt, int rank, const int64_t *dims, const void *data);
/** Host table of n x m elements of sz bytes in the graph's arena (freed
 *  with the graph), for the data of a constant about to be made from it
 *  (an iota, a mask, interpolation weights).  NULL, with b->st set, if
 *  n or m is negative, the size overflows, or the table would take the
 *  model's constants past their limit (FSL_CONST_LIMIT_*; a table counts
 *  against it, as it lives in the arena as long as the graph): a
 *  table sized by a fuzzed or absurd shape is an error, not an attempt to
 *  allocate it.  `what` names the table in the error. */
void *fsl_b_table(fsl_builder *b, int64_t n, int64_t m, size_t sz, const char *what);
/** Rank-0 constant holding v converted to dt. */
fsl_value *fsl_b_scalar(fsl_builder *b, fsl_dtype dt, double v);
/** 1-D int64 constant. */
fsl_value *fsl_b_ints(fsl_builder *b, int n, const int64_t *v);
/** Reads a constant value's elements as int64 (up to max); returns the
 *  count, or -1 (with b->st set) if v is not a constant or too long.
 *  `what` names the operand in the error ("input 'shape'"). */
int fsl_b_const_ints(fsl_builder *b, const fsl_value *v, int64_t *out, int max, const char *what);
/** Reads constant element 0 as double (scalar parameters). */
bool fsl_b_const_scalar(fsl_builder *b, const fsl_value *v, double *out, const char *what);

/* ---- the generic primitive constructor ---- */
/** Adds primitive `op` with inputs and attributes (copied); returns its
 *  output, or a folded constant. */
fsl_value *fsl_b_prim(fsl_builder *b, fsl_op op, fsl_value *const *in, int n_in,
                      const fsl_attr *attrs, int n_attrs);

/* ---- elementwise (operands are broadcast numpy-style with reshape+expand) ---- */
fsl_value *fsl_b_unary(fsl_builder *b, fsl_op op, fsl_value *x);
fsl_value *fsl_b_binary(fsl_builder *b, fsl_op op, fsl_value *x, fsl_value *y);
fsl_value *fsl_b_where(fsl_builder *b, fsl_value *c, fsl_value *x, fsl_value *y);
fsl_value *fsl_b_cast(fsl_builder *b, fsl_value *x, fsl_dtype to);
/** x op scalar(s), the scalar made in x's dtype. */
fsl_value *fsl_b_binary_scalar(fsl_builder *b, fsl_op op, fsl_value *x, double s);
/** Output shape of numpy broadcasting of a and b (ONNX "multidirectional
 *  broadcasting"); false (with b->st) if incompatible. */
bool fsl_b_broadcast_shape(fsl_builder *b, const fsl_value *x, const fsl_value *y,
                           int *rank, int64_t *dims);
/** Broadcasts x to (rank, dims): reshape to add leading 1s, then expand. */
fsl_value *fsl_b_broadcast_to(fsl_builder *b, fsl_value *x, int rank, const int64_t *dims);

/* ---- reduce ---- */
/** Reduction over axes (may be negative; n_axes 0 = all axes) of
 *  reduce_sum/max/min/prod; keepdims 0 drops the reduced axes. */
fsl_value *fsl_b_reduce(fsl_builder *b, fsl_op op, fsl_value *x, const int64_t *axes, int n_axes, bool keepdims);
/** argmax/argmin over one axis; int64 result. */
fsl_value *fsl_b_arg(fsl_builder *b, fsl_op op, fsl_value *x, int64_t axis, bool keepdims, bool select_last);

/* ---- movement ---- */
fsl_value *fsl_b_reshape(fsl_builder *b, fsl_value *x, int rank, const int64_t *dims);
fsl_value *fsl_b_permute(fsl_builder *b, fsl_value *x, const int64_t *perm);
/** Same-rank broadcast of size-1 dims to dims. */
fsl_value *fsl_b_expand(fsl_builder *b, fsl_value *x, const int64_t *dims);
/** A 1-D v of n > 1 elements reshaped to `rank` dims with its values on
 *  `axis` and 1 elsewhere (a per-channel parameter against NCHW); NULL,
 *  one-element tensors and tensors of another rank pass unchanged. */
fsl_value *fsl_b_on_axis(fsl_builder *b, fsl_value *v, int rank, int axis);
/** Normalized slice: for every axis i, out[i][j] = x[starts[i] + j*steps[i]],
 *  j < sizes[i] (steps may be negative, never 0). */
fsl_value *fsl_b_slice(fsl_builder *b, fsl_value *x, const int64_t *starts, const int64_t *steps, const int64_t *sizes);
/** Slice of one axis: [start, start+size) with step 1. */
fsl_value *fsl_b_slice_axis(fsl_builder *b, fsl_value *x, int axis, int64_t start, int64_t size);
/** pads: rank begins then rank ends (>= 0); mode 0 constant, 1 reflect,
 *  2 edge, 3 wrap; value for constant mode. */
fsl_value *fsl_b_pad(fsl_builder *b, fsl_value *x, const int64_t *pads, int mode, double value);
fsl_value *fsl_b_concat(fsl_builder *b, fsl_value *const *xs, int n, int axis);
/** Sliding windows over the last k axes: [lead..., out..., kernel...]. */
fsl_value *fsl_b_window(fsl_builder *b, fsl_value *x, int k, const int64_t *kernel,
                        const int64_t *strides, const int64_t *dilations);

/* ---- gather / scatter ---- */
fsl_value *fsl_b_gather(fsl_builder *b, fsl_value *data, fsl_value *idx, int axis);
fsl_value *fsl_b_gather_elements(fsl_builder *b, fsl_value *data, fsl_value *idx, int axis);

/* ---- linear ---- */
/** Batched matmul with numpy semantics (1-D operands promoted, batch dims
 *  broadcast): builds reshape/expand + the matmul primitive. */
fsl_value *fsl_b_matmul(fsl_builder *b, fsl_value *x, fsl_value *y);
/** conv primitive; pads has 2k entries (begins, ends); lhs_dilation may be NULL. */
fsl_value *fsl_b_conv(fsl_builder *b, fsl_value *x, fsl_value *w, const int64_t *strides,
                      const int64_t *dilations, const int64_t *pads, int64_t group,
                      const int64_t *lhs_dilation);

/* ---- helpers ---- */
/** Dtype to accumulate in: float16 / bfloat16 compute in float32 (sums,
 *  squares and exps overflow or drift in 16 bits), others as they are. */
static inline fsl_dtype fsl_acc_dtype(fsl_dtype dt) {
  return dt == FSL_DT_F16 || dt == FSL_DT_BF16 ? FSL_DT_F32 : dt;
}
/** Normalizes axis into [0, rank); fails naming `what` if out of range. */
bool fsl_b_axis(fsl_builder *b, int64_t *axis, int rank, const char *what);

#endif
