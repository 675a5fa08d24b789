/*
 * codegen.h — the neutral code generator: kernels of a plan (LOOP and
 * REDUCE kernels, the prologue and epilogue pieces of LINEAR kernels, and a
 * plain matmul) lowered to loops over index expressions and printed as
 * source text in a C-style dialect (dialect.h).  The CPU backend prints
 * C with OpenMP (backend/cpu/dialect_c.c); a GPU backend adds a dialect,
 * not a code generator.  docs/cpu-backend.md describes the generated code.
 *
 * One kernel (or piece) becomes one function
 *
 *     fsl_k<ID>(in, out)
 *
 * whose signature the dialect prints: in[i] is the row-major data of
 * spec->in[i], out[j] the buffer of spec->out[j] (shapes are static and
 * baked into the code).  It returns 0, or an OR of FSL_KERR_* bits on a
 * run-time error.  Movement primitives and gathers become index arithmetic
 * on the coordinates of the element being computed; elementwise primitives
 * become expressions; a reduction becomes an accumulation loop.
 */
#ifndef FSL_CODEGEN_H
#define FSL_CODEGEN_H

#include "codegen/dialect.h"
#include "codegen/sbuf.h"
#include "ir/ir.h"

/* Error bits returned by generated functions. */
#define FSL_KERR_INDEX 1   /* gather index out of range */
#define FSL_KERR_DIVZERO 2 /* integer division or modulo by zero */
#define FSL_KERR_NOMEM 4   /* scratch allocation failed */

/** What one generated function computes. */
/** How a kernel input or output is stored: its axes in memory order,
 *  outermost first (e.g. {0, 2, 3, 1}: an [N, C, H, W] value stored NHWC,
 *  as oneDNN writes and reads it; backend/cpu/lower.h "layout chaining"),
 *  dense; rank 0 means row-major.  A LOOP nest writing an output with a
 *  layout runs along its memory order. */
typedef struct fsl_cg_layout {
  int rank;
  int order[FSL_MAX_RANK];
} fsl_cg_layout;

typedef struct fsl_cg_spec {
  const fsl_graph *g;
  int id;                      /* the function is named fsl_k<id> */
  int n_nodes;
  fsl_node *const *nodes;      /* computed inside, in topological order */
  int n_in;
  fsl_value *const *in;        /* every value read that no node of `nodes` produces */
  const fsl_cg_layout *in_layout; /* NULL, or n_in entries: how each input is stored */
  int n_out;
  fsl_value *const *out;       /* values written (produced by `nodes`) */
  const fsl_cg_layout *out_layout; /* NULL, or n_out entries: how each output is stored (a kernel
                                      with a reduction takes none: FSL_ERR_UNSUPPORTED) */
} fsl_cg_spec;

/** How a generated kernel must be launched in a dialect with work-groups
 *  (dialect.h, fsl_cg_group); C ignores it. */
typedef struct fsl_cg_launch {
  int group_size;   /* 0: any work-group size (grid-stride loops over threads, one
                       per output element or row); else the code's work-items per
                       group, which the local size must equal */
  int64_t groups;   /* group_size > 0: work-groups that have work (a grid-stride
                       loop over groups: fewer are correct too, more idle) */
} fsl_cg_launch;

/** Appends the dialect's prelude (includes, inline math and index
 *  helpers): once per source file, before any kernel. */
void fsl_codegen_prelude(const fsl_dialect *d, fsl_sbuf *b);

/**
 * Appends the function for spec in dialect d: a LOOP body (elementwise,
 * movement, gather nodes; one loop nest per distinct output shape) or,
 * when the nodes include reductions, a REDUCE body (fused rows when every
 * reduction shares one input shape and axes and every read of a reduction
 * result stays in its row, otherwise one pass per reduction through
 * scratch buffers).  In a dialect with work-groups (d->group) a fused
 * REDUCE body runs each kept-space row with one work-group when rows have
 * more than one element and the reductions need at most
 * d->group->local_bytes of local memory (else one thread per row):
 * each work-item reduces a strided part of the row, a tree in local memory
 * combines the parts (in a dialect with warps, d->group->warp: register
 * shuffles inside each warp first, then the warps' partials through local
 * memory, none for a row of one warp; an argmax/argmin exchanges its best
 * value and index, equal values going to the lower index, with
 * select_last_index the higher: the serial scan's answer), and the row's
 * outputs are written by the work-items in the same strided parts.  *launch (may be NULL) receives how to launch
 * the kernel.  Nothing is appended on failure.
 * Errors: FSL_ERR_UNSUPPORTED (a dtype the dialect has no type for, e.g.
 * f16/bf16 in C; scatter, linear or opaque nodes; the caller falls back to
 * the reference interpreter), FSL_ERR_INVALID (an output the nodes do not
 * produce), FSL_ERR_NOMEM.
 */
fsl_status fsl_codegen_kernel(const fsl_dialect *d, const fsl_cg_spec *spec, fsl_sbuf *b, fsl_cg_launch *launch);

/** An epilogue computed inside a generated matmul or convolution, on the
 *  accumulated value before its store (linsplit.h: a closed prefix of the
 *  chain, fsl_linear_split_fused): `nodes` are the chain (elementwise
 *  nodes and reshapes reading the linear op's output or each other's, so
 *  that element i of their value comes from element i of that output, flat
 *  row-major, then optionally a path of permutes and reshapes ending at
 *  `out` that moves each element to its place in `out`) and the nodes
 *  feeding it that read neither (movement,
 *  elementwise and gather nodes over kernel inputs, e.g. a bias broadcast
 *  by `expand`); `out` is written instead of the linear op's output, with
 *  as many elements, row-major.  The function then takes
 *  in = {a, b, in[0], in[1], ...}. */
typedef struct fsl_cg_epilogue {
  const fsl_graph *g;
  int n_nodes;
  fsl_node *const *nodes;    /* topological order */
  int n_in;
  fsl_value *const *in;      /* every value the nodes read besides the linear op's output and what they produce */
  const fsl_value *out;      /* the value stored: produced by nodes (or the linear op's output when
                                there are none), shaped as the linear op's output */
  /* Operand views (a tiled matmul only; else FSL_ERR_UNSUPPORTED): when
   * src[i] is set, operand i of the linear op is computed from src[i] by
   * the one-input movement nodes `views` (topological order), which the
   * tile loads evaluate as index expressions; in[i] is then src[i]. */
  fsl_value *src[2];
  int n_views;
  fsl_node *const *views;
} fsl_cg_epilogue;

/**
 * Appends fsl_k<id>(in = {a, b}, out = {c}) computing the matmul node mm
 * (docs/primitives.md: [batch.., M, K] x [batch.., K, N]), over k in
 * order.  In a dialect whose threads work alone (C: par_min > 0) as column
 * blocks: one PARALLEL iteration per row of c and block of at most 64
 * columns (an even number of blocks where more than one), the block's sums
 * in a local array (floats in their own type, as oneDNN; integers in 64
 * bits, wrapping), each k one SIMD pass over w's row k across the block:
 * a GEMV (M = 1) streams w once.  In a dialect whose every thread runs
 * the kernel (par_min = 0, no tiles) one thread per element of c, floats
 * accumulated in double.  In a dialect with matmul tiles (d->group->tile = TL > 0, and
 * two TL x TL tiles of the element type within d->group->local_bytes) it is
 * tiled instead: one work-group of TL*TL work-items per TL x TL tile of c,
 * the K axis in steps of TL through two local-memory tiles of a and b
 * (zero-padded past the edges of odd sizes), the same order of additions.
 * With epi (may be NULL) each element of c is rounded to its type, run
 * through the epilogue and stored as epi->out (in = {a, b, epi->in..}).
 * *launch (may be NULL) receives how to launch the kernel.
 * FSL_ERR_UNSUPPORTED for f16/bf16/bool and for an epilogue the generator
 * cannot take (nothing appended).
 */
fsl_status fsl_codegen_matmul(const fsl_dialect *d, int id, const fsl_node *mm, const fsl_cg_epilogue *epi, fsl_sbuf *b,
                              fsl_cg_launch *launch);

/**
 * Appends fsl_k<id>(in = {x, w}, out = {y}) computing the conv node cv
 * (docs/primitives.md: x [N, C, s..], w [M, C/group, k..]; strides,
 * dilations, pads, group, lhs_dilation) as a direct convolution: one
 * PARALLEL iteration per output element, accumulated in double over the
 * input channels of its group, then the window, in order.  In a dialect
 * with matmul tiles (as fsl_codegen_matmul) it is an implicit matmul per
 * image and group instead: the weights [M/group, C/group * window] times
 * the input under the window [C/group * window, output positions], one
 * work-group per TL x TL tile of output channels x positions, both
 * operands through local tiles (zero in the padding and past the edges),
 * the same order of additions.  With epi (may be NULL) as for
 * fsl_codegen_matmul.  A depthwise convolution in C runs row by row
 * instead (fsl_codegen_conv_rows).  *launch (may be NULL) receives how to
 * launch the kernel.  Float dtypes only: FSL_ERR_UNSUPPORTED otherwise.
 */
fsl_status fsl_codegen_conv(const fsl_dialect *d, int id, const fsl_node *cv, const fsl_cg_epilogue *epi, fsl_sbuf *b,
                            fsl_cg_launch *launch);

/**
 * Whether fsl_codegen_conv computes conv node cv row by row in dialect d:
 * a 2-D depthwise convolution (x [N, C, H, W], w [M, 1, KH, KW], group =
 * C, any strides, dilations and pads, no lhs_dilation, at most 4096 output
 * columns) in a dialect whose threads work alone (C: par_min > 0, no
 * work-groups).  There each PARALLEL iteration is one output row, kept in
 * a local array of the element type (not double; float's rounding, as in
 * oneDNN), one SIMD pass along it per window tap over the columns whose
 * input lies inside the image, then stored through the epilogue: no
 * branch or division per element.
 */
bool fsl_codegen_conv_rows(const fsl_dialect *d, const fsl_node *cv);

/**
 * Whether fsl_codegen_conv computes conv node cv as dot products in
 * dialect d: a pointwise convolution at a single position (x [N, C, 1..],
 * w [M, C, 1..], y [N, M, 1..], one group: the fully connected layers of
 * squeeze-and-excitation blocks) in a dialect whose threads work alone
 * (C).  There y[n, m] is the dot product of x's row n and w's row m, four
 * output channels per PARALLEL iteration, summed in the element type with
 * SIMD reductions (reassociated, as oneDNN's GEMV).
 */
bool fsl_codegen_conv_dot(const fsl_dialect *d, const fsl_node *cv);

#endif
