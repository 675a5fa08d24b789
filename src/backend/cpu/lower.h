/*
 * lower.h — how the CPU backend runs a kernel: its lowering into steps.
 * The backend (cpu.c) lowers every kernel of a plan and executes the
 * steps; the profiler (profile.c) lowers candidate kernels the same way
 * and times them, so the two can never disagree (docs/cpu-backend.md).
 *
 * A kernel becomes
 *   - one GEN step: a generated C function (src/codegen, C dialect) for a
 *     LOOP or REDUCE kernel;
 *   - for a LINEAR kernel (linsplit.h): a GEN prologue when the linear op's
 *     operands are computed by more than reshapes, the linear op itself
 *     (an ONEDNN step absorbing the longest usable epilogue chain as
 *     post-ops, else a generated matmul, else a REF step) and a GEN
 *     epilogue for the rest;
 *   - a REF step (the reference interpreter, src/eval) for an
 *     opaque kernel, and as the fallback for what neither the code
 *     generator nor oneDNN can take: counted, with the first reason kept.
 */
#ifndef FSL_CPU_LOWER_H
#define FSL_CPU_LOWER_H

#include "backend/cpu/onednn.h"
#include "codegen/codegen.h"
#include "orchestrate/orchestrate.h"
#include "runtime/memplan.h"

typedef enum { FSL_CPU_STEP_GEN, FSL_CPU_STEP_ONEDNN, FSL_CPU_STEP_REF } fsl_cpu_step_kind;

/** A generated kernel function (codegen.h): 0 or FSL_KERR_* bits. */
typedef int (*fsl_cpu_kernel_fn)(const void *const *in, void *const *out);

typedef struct fsl_cpu_step {
  fsl_cpu_step_kind kind;
  int kernel;                  /* the kernel it belongs to (index given to fsl_cpu_lower_kernel) */
  int fn_id;                   /* GEN: fsl_k<fn_id> in the lowering's source */
  fsl_cpu_kernel_fn fn;        /* GEN: set once the source is compiled and loaded */
  char *code;                  /* GEN: the function's C source (owned; fsl_cpu_lowering_source) */
  fsl_cg_layout *in_layout;    /* GEN: NULL, or n_in entries: inputs kept in a oneDNN layout */
  fsl_cg_layout *out_layout;   /* GEN: NULL, or n_out entries: outputs written in one */
  fsl_onednn_linear *dnn;      /* ONEDNN (owned) */
  int n_in, n_out;
  fsl_value **in, **out;       /* read and written values (ONEDNN: src, weights, then the
                                  post-op operands, NULL for unary post-ops) */
  int n_nodes;
  fsl_node **nodes;            /* REF: evaluated in this order; GEN: the nodes it computes, in
                                  order (run again by the reference to diagnose an error);
                                  ONEDNN: the linear node, then the epilogue nodes it absorbed */
  bool fallback;               /* REF standing in for code the backend could not make */
} fsl_cpu_step;

typedef struct fsl_cpu_lowering {
  const fsl_graph *g;
  fsl_sbuf src;                /* generated C: the dialect's prelude, then (fsl_cpu_lowering_source)
                                  the GEN steps' functions */
  fsl_cpu_step *steps;
  int n_steps, cap_steps;
  bool *avail;                 /* value id -> readable by the next step (inputs, written values) */
  int next_fn;
  int n_generated, n_onednn;   /* GEN and ONEDNN steps */
  int n_fallback;              /* REF steps standing in for generated code or oneDNN */
  int n_opaque;                /* opaque kernels (REF by design) */
  int n_chained;               /* values kept in a oneDNN layout (fsl_cpu_chain_layouts) */
  char fallback_why[256];      /* the first fallback: kernel, ONNX node, reason */
} fsl_cpu_lowering;

/** Starts a lowering over graph g: the prelude in src, graph inputs and
 *  constants available.  Errors: FSL_ERR_NOMEM. */
fsl_status fsl_cpu_lowering_init(fsl_cpu_lowering *L, const fsl_graph *g);

/** Makes only the constants and the values `vals[0..n)` available (a
 *  kernel measured on its own reads nothing else). */
void fsl_cpu_lowering_avail_only(fsl_cpu_lowering *L, fsl_value *const *vals, int n);

/** Appends the steps of kernel k (labelled `ki`) and their generated C.
 *  What cannot be generated or run by oneDNN becomes a REF step (counted
 *  in n_fallback); only out-of-memory is an error (FSL_ERR_NOMEM). */
fsl_status fsl_cpu_lower_kernel(fsl_cpu_lowering *L, int ki, const fsl_kernel *k);

/** Appends the GEN steps' functions to L->src, in step order: once, after
 *  the last fsl_cpu_lower_kernel (and fsl_cpu_chain_layouts).  Errors:
 *  FSL_ERR_NOMEM. */
fsl_status fsl_cpu_lowering_source(fsl_cpu_lowering *L);

/** Layout chaining: a value written by a oneDNN step in a layout of its
 *  own (nhwc, nChw16c, ...) stays in that layout when every reader can take
 *  it there: a later oneDNN step reading it as its source in the same
 *  primitive layout (fsl_onednn_linear_chainable; e.g. consecutive
 *  convolutions), or generated code, given the layout's axis order
 *  (fsl_cg_layout) when it is a dense permutation such as nhwc
 *  (fsl_onednn_linear_dst_layout) and no value is placed in place over the
 *  buffer (mp, may be NULL).  Likewise a value generated code writes (a
 *  LOOP kernel, not in place over its input) whose every reader is a oneDNN
 *  step that reorders it to one dense permutation is written in that
 *  layout (fsl_onednn_linear_src_layout).  The reorders are dropped;
 *  generated steps are generated again.  Graph outputs stay row-major.  Call once, after every kernel of
 *  the plan is lowered (a kernel lowered alone, as the profiler does, has
 *  no readers to chain to), before fsl_cpu_lowering_source.  Returns the
 *  number of values chained (L->n_chained). */
int fsl_cpu_chain_layouts(fsl_cpu_lowering *L, const fsl_memplan *mp);

/** Each ONEDNN step whose linear op generated code runs faster becomes a
 *  GEN step computing the linear op and the epilogue oneDNN absorbed, on
 *  the row-major data (fsl_codegen_linear):
 *  - a 2-D depthwise convolution that still reorders both its source from
 *    row-major and its result back (nothing chained:
 *    fsl_onednn_linear_reorders_both), generated row by row
 *    (fsl_codegen_conv_rows).  oneDNN's depthwise kernels run on nhwc or
 *    nChw8c/16c only, so there the reorders cost more than the
 *    convolution (dwconv_hardswish 64_56: about 60%);
 *  - a GEMV on plain operands with at most 1 MiB of weights (the fully
 *    connected layers of squeeze-and-excitation blocks): a one-row f32
 *    matmul (batch 1, M 1), generated as column blocks
 *    (fsl_codegen_matmul), or an f32 pointwise convolution of one image
 *    at a single position, generated as dot products
 *    (fsl_codegen_conv_dot); both save oneDNN's fixed cost per call.
 *  Call after fsl_cpu_chain_layouts (or on kernels lowered alone), before
 *  fsl_cpu_lowering_source; ks[0..n_kernels) are the kernels lowered, by
 *  the index given to fsl_cpu_lower_kernel.  Returns the number of steps
 *  replaced. */
int fsl_cpu_lower_generated(fsl_cpu_lowering *L, fsl_kernel *const *ks, int n_kernels);

/** Frees the steps (and their oneDNN primitives), the source and the
 *  availability map. */
void fsl_cpu_lowering_free(fsl_cpu_lowering *L);

#endif
