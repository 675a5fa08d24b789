/*
 * onednn.h — linear ops (matmul, conv) through oneDNN primitives, with
 * epilogue post-ops.  Used by the CPU backend (cpu.c) for LINEAR kernels.
 * Semantics of the primitives: docs/primitives.md; oneDNN: the
 * dnnl_matmul / dnnl_convolution_forward C API, "Primitive Attributes:
 * Post-ops" in the oneDNN developer guide.
 */
#ifndef FSL_CPU_ONEDNN_H
#define FSL_CPU_ONEDNN_H

#include "backend/cpu/dnnl_api.h"
#include "codegen/codegen.h"
#include "orchestrate/orchestrate.h"

typedef struct fsl_onednn_linear fsl_onednn_linear;

/**
 * Prepares a oneDNN primitive for the matmul/conv node `lin` (float32 only;
 * FSL_ERR_UNSUPPORTED otherwise, and the caller falls back to generated
 * code).  `epi` lists the epilogue nodes that follow it in a chain (each
 * takes the previous node's output as one operand; a second operand, if
 * any, comes from outside the chain, possibly through reshape/expand views,
 * e.g. a bias; a reshape that keeps the last dimension may appear in the
 * chain, as fsl_b_matmul emits after folding batch dims); the function absorbs the longest prefix of `epi` that
 * oneDNN post-ops express (eltwise: relu, tanh, sigmoid via logistic, exp,
 * gelu_erf, gelu_tanh patterns it recognises, linear/scale; binary add/mul/
 * max/min with a broadcastable operand), and sets *n_absorbed.  The
 * primitive then writes the output of epi[*n_absorbed - 1] (or of `lin`).
 * Rules measured on oneDNN 2.6 (onednn.c) make it absorb less where a
 * post-op would be slow: a full-size run-time operand of a direct conv (a
 * residual add; a whole operand only) is absorbed only where oneDNN has no
 * AVX-512 and the kernel that runs the conv alone takes it, as the sum
 * post-op (the destination filled with it first) or a binary one, given
 * in the conv's destination layout (reordered from row-major at run time,
 * unless chained: fsl_onednn_linear_chain_post), a deconvolution (conv with lhs_dilation) absorbs nothing,
 * and a 1x1 conv run as a matmul over >= 128 pixels stops at a per-channel
 * operand.  `n_threads` is the thread count (0 = default).
 */
fsl_status fsl_onednn_linear_create(const fsl_node *lin, fsl_node *const *epi, int n_epi,
                                    int n_threads, fsl_onednn_linear **out, int *n_absorbed);

/**
 * fsl_onednn_linear_create, with the absorbed prefix shortened until the
 * outside operand of every absorbed post-op is materialised before the
 * linear op runs (avail(ctx, v) true for the value
 * fsl_onednn_linear_post_value names), as a caller that runs the linear op
 * before the rest of the epilogue needs, and until `keep_residual` (when
 * not NULL) accepts every absorbed full-size operand that the primitive
 * reorders from row-major (node: the epi index, v: the value): a caller
 * whose producer of v writes a layout generated code reads (nhwc), but not
 * the one the primitive wants, keeps v there for a generated epilogue
 * instead of reordering it twice.  Same errors.
 */
fsl_status fsl_onednn_linear_create_avail(const fsl_node *lin, fsl_node *const *epi, int n_epi, int n_threads,
                                          bool (*avail)(const void *ctx, const fsl_value *v),
                                          bool (*keep_residual)(const void *ctx, const fsl_onednn_linear *op,
                                                                int node, const fsl_value *v),
                                          const void *ctx, fsl_onednn_linear **out, int *n_absorbed);

/**
 * Runs it.  `src` and `wei` are the linear node's inputs (row-major as in
 * the graph; `wei` may be NULL when the weights are constant: they were
 * captured at create time, including weights broadcast through views), `post[i]` the outside operand data of the i-th absorbed
 * binary post-op (in chain order; NULL entries for eltwise post-ops), `dst`
 * the output buffer (row-major, shape of the last absorbed node).
 */
fsl_status fsl_onednn_linear_run(fsl_onednn_linear *op, const void *src, const void *wei,
                                 const void *const *post, void *dst);
/** The value whose data fsl_onednn_linear_run expects in post[i] for the
 *  i-th absorbed epilogue node: the source reached from that node's outside
 *  operand through reshape/expand views (e.g. the bias [M], not its
 *  expanded view).  NULL when none is needed (an eltwise post-op, or a
 *  constant operand captured at create time). */
const fsl_value *fsl_onednn_linear_post_value(const fsl_onednn_linear *op, int i);
/** Whether op's output may take over the buffer of v (in place): v is the
 *  operand of op's one residual add, run as oneDNN's sum post-op (the
 *  destination starts as the operand and the primitive accumulates into
 *  it), v already lies in the destination's layout (row-major where the
 *  destination is, or chained), the primitive writes the caller's output
 *  buffer itself (no reorder after it), and no other post-op reads v.
 *  Then fsl_onednn_linear_run skips copying v into the destination when
 *  the two are one buffer.  The caller must also check that the primitive
 *  does not read v as its source or weights. */
bool fsl_onednn_linear_sum_in_place(const fsl_onednn_linear *op, const fsl_value *v);
/**
 * Layout chaining (docs/cpu-backend.md, "Layout chaining").  True when the
 * output of `prod`, in the layout its primitive writes (e.g. nhwc, or
 * nChw16c), is exactly the source `cons`'s primitive reads: both reorder
 * (their primitive layout is not the caller's row-major one), the row-major
 * descriptors agree (same dims, same strides) and so do the primitive
 * ones, `cons` reads the value as its source (not as weights), and the
 * primitive layout takes at most `capacity` bytes (the value's buffer).
 * Semantics: oneDNN developer guide, "Memory Format Propagation".
 */
bool fsl_onednn_linear_chainable(const fsl_onednn_linear *prod, const fsl_onednn_linear *cons, size_t capacity);
/** Whether `op`'s primitive writes its output, value v, as a dense
 *  permutation of v's row-major layout (nhwc, not a blocked one such as
 *  nChw16c); then *lay receives the axes in memory order, for generated
 *  code that reads the value where it lies (codegen.h, fsl_cg_layout). */
bool fsl_onednn_linear_dst_layout(const fsl_onednn_linear *op, const fsl_value *v, fsl_cg_layout *lay);
/** The same for `op`'s source v (a buffer of `capacity` bytes), when op
 *  reorders it from row-major: generated code that writes v may write it
 *  in that layout (then fsl_onednn_linear_chain_src). */
bool fsl_onednn_linear_src_layout(const fsl_onednn_linear *op, const fsl_value *v, size_t capacity,
                                  fsl_cg_layout *lay);
/** From now on `cons` reads its source in its primitive's layout (no
 *  reorder from row-major), written there by a oneDNN producer
 *  (fsl_onednn_linear_chainable) or by generated code
 *  (fsl_onednn_linear_src_layout); only when every writer and reader of the
 *  value agrees: the buffer no longer holds row-major data.  Frees the
 *  reorder buffer no longer needed. */
void fsl_onednn_linear_chain_src(fsl_onednn_linear *cons);
/** From now on `prod` writes its output in its primitive's layout (no
 *  reorder to row-major), which only readers told so
 *  (fsl_onednn_linear_chain_src, or generated code given
 *  fsl_onednn_linear_dst_layout) may read.  Frees the reorder buffer no
 *  longer needed. */
void fsl_onednn_linear_chain_dst(fsl_onednn_linear *prod);
/** True when the output of `prod`, in the layout its primitive writes, is
 *  exactly the full-size binary post-op operand (a residual) that `cons`
 *  reads for its absorbed epilogue node `node` (the post[node] of
 *  fsl_onednn_linear_run), which cons otherwise reorders from row-major
 *  into its destination's layout: same row-major and primitive descriptors,
 *  at most `capacity` bytes.  oneDNN developer guide, "Primitive
 *  Attributes: Post-ops" (binary post-op operands take any memory format). */
bool fsl_onednn_linear_post_chainable(const fsl_onednn_linear *prod, const fsl_onednn_linear *cons, int node,
                                      size_t capacity);
/** The same as fsl_onednn_linear_src_layout for the full-size operand v
 *  of `op`'s absorbed node `node` (a residual it reorders from row-major):
 *  generated code that writes v may write it in that layout (then
 *  fsl_onednn_linear_chain_post). */
bool fsl_onednn_linear_post_layout(const fsl_onednn_linear *op, int node, const fsl_value *v, size_t capacity,
                                   fsl_cg_layout *lay);
/** From now on `cons` reads the operand of absorbed node `node` in its
 *  primitive layout (no reorder), as written by a chained producer
 *  (fsl_onednn_linear_post_chainable, fsl_onednn_linear_chain_dst).  Frees
 *  the reorder buffer no longer needed. */
void fsl_onednn_linear_chain_post(fsl_onednn_linear *cons, int node);

/** True when `op` reorders both its source from row-major and its result
 *  back at every run (no activation chained, no constant source): around
 *  the primitive it moves its input and output twice more. */
bool fsl_onednn_linear_reorders_both(const fsl_onednn_linear *op);

/** True when `op` reads its source and absorbed operands and writes its
 *  result in the caller's row-major layout (no reorder, nothing chained):
 *  generated code can take its place on the same buffers. */
bool fsl_onednn_linear_plain(const fsl_onednn_linear *op);

#define FSL_INT8_MAX_CASTS 8

/** What an int8 primitive reads for an int32 matmul/conv node (onednn_int8.c). */
typedef struct fsl_onednn_int8 {
  const fsl_value *src;        /* the 8-bit source (uint8 or int8), row-major, the node's in[0] bytes */
  const fsl_value *wei;        /* the constant 8-bit weights, the node's in[1] bytes */
  const fsl_value *zp_src;     /* a one-element run-time value the source's zero point is cast from, or NULL */
  fsl_dtype zp_dtype;          /* its dtype */
  int n_zp_casts;
  fsl_dtype zp_casts[FSL_INT8_MAX_CASTS]; /* the casts from zp_src to the zero point, applied in order */
  int32_t zp;                  /* the source's zero point when constant (0: none) */
  int32_t wzp;                 /* the weights' zero point (constant), subtracted at create time */
  bool split;                  /* without VNNI, weights beyond [-64, 64]: run as two 7-bit halves */
} fsl_onednn_int8;

/**
 * Whether oneDNN's int8 primitives can run the int32 matmul/conv node
 * `lin`: its operands are uint8/int8 values cast to int32 (through
 * reshapes), the source minus a per-tensor zero point (constant or a
 * one-element run-time value, through reshapes, expands and casts), the
 * weights constant, minus a constant per-tensor zero point, within int8.
 * The walks back stop at the first value avail(ctx, v) reports
 * materialised (NULL: at the chain's end).  Fills *q; FSL_ERR_UNSUPPORTED
 * (with the reason) otherwise.
 */
fsl_status fsl_onednn_int8_match(const fsl_node *lin, bool (*avail)(const void *ctx, const fsl_value *v),
                                 const void *ctx, fsl_onednn_int8 *q);
/**
 * Prepares the int8 primitive for `lin` as matched in *q: u8/s8 source x
 * s8 weights (packed now) -> s32 sums, the zero point subtracted by
 * oneDNN ("Primitive Attributes: Zero Points", oneDNN developer guide).
 * When epi (n_epi nodes, a chain from lin's output) starts with the cast
 * of the sums to float32, the primitive also takes the longest prefix of
 * the chain after it that oneDNN expresses as post-ops with constant
 * operands (per-channel or per-column scales and biases, activations,
 * QuantizeLinear's division, round and clamp: "Primitive Attributes:
 * Post-ops"), and the exact cast to uint8/int8 that ends a requantize
 * (fsl_onednn_exact_int8_cast) as its u8/s8 destination; else its
 * destination is float32 (the cast alone) or s32 (nothing absorbed, and
 * always with split weights).  *n_absorbed: the epi nodes it computes.
 * fsl_onednn_linear_run runs it with src = q->src's data, post[0] = the
 * data of q->zp_src (when not NULL), dst the output of the last absorbed
 * node (or lin's int32 output), row-major.  FSL_ERR_UNSUPPORTED when
 * oneDNN has no optimized implementation; FSL_ERR_NOMEM.
 */
fsl_status fsl_onednn_int8_create(const fsl_node *lin, const fsl_onednn_int8 *q, fsl_node *const *epi, int n_epi,
                                  int n_threads, fsl_onednn_linear **out, int *n_absorbed);
/** Whether oneDNN starts (its engine, after the FSL_CPU_ISA limit): then
 *  the int8 primitives take any int8 weights (without VNNI, where pairs of
 *  products add in int16, by splitting weights beyond [-64, 64] in two:
 *  onednn_int8.c). */
bool fsl_onednn_int8_available(void);
/** The zero point that q's casts make of element 0 of `data` (q->zp_dtype). */
int32_t fsl_onednn_int8_zero_point(const fsl_onednn_int8 *q, const void *data);

/** One line naming what oneDNN runs, for profiles and tests: the primitive
 *  kind, oneDNN's implementation, the dims of its src, weights and dst
 *  descriptors, and "plain" or "reordered" (whether the activations are
 *  reordered from/to the caller's row-major layout around the primitive),
 *  e.g. "matmul brg:avx512_core 128x768:768x2304:128x2304 plain" (a matmul
 *  whose batch dims were folded into M), or "convolution brgconv:avx512_core
 *  1x64x56x56:64x64x3x3:1x64x56x56 reordered"; a chained op
 *  (fsl_onednn_linear_chain_src/_dst/_post) ends in ", chained " and what
 *  is chained: "src", "dst", "residual" joined by "+" (", chained
 *  src+dst+residual").  "" for NULL. */
const char *fsl_onednn_linear_describe(const fsl_onednn_linear *op);
/** Whether op is a convolution that runs as fissile's F(2x2,3x3) Winograd
 *  (winograd.h) instead of oneDNN's direct kernel. */
bool fsl_onednn_linear_winograd(const fsl_onednn_linear *op);
void fsl_onednn_linear_free(fsl_onednn_linear *op);

/** A primitive attribute in oneDNN's "user" scratchpad mode (onednn.c,
 *  "Scratchpads": every primitive kept for run time takes the scratchpad
 *  of the thread that runs it); the caller destroys it. */
dnnl_status_t fsl_onednn_user_scratchpad_attr(dnnl_primitive_attr_t *attr);

/** Reorders from_data (layout `from`) into to_data (layout `to`) now, on
 *  the backend's engine and stream (create time only: it builds and drops a
 *  reorder primitive). */
dnnl_status_t fsl_onednn_run_reorder(fsl_cmd from, void *from_data, fsl_cmd to, void *to_data);

#endif
