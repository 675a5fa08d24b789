/*
 * lower.h — the CPU backend's part of the lowering (backend/lowering.h):
 * its library hook and its passes over the steps.  The backend (cpu.c)
 * lowers every kernel of a plan and executes the steps; the profiler
 * (profile.c) lowers candidate kernels the same way and times them, so the
 * two can never disagree (docs/cpu-backend.md).
 *
 * In the C dialect (dialect_c.h), with:
 *   - the library: a LINEAR kernel's linear op as a oneDNN primitive (a
 *     LIB step whose object is an fsl_onednn_linear) absorbing the longest
 *     usable epilogue chain as post-ops, when the caps allow oneDNN
 *     (fsl_backend_caps.library); else a generated matmul, depthwise
 *     convolution (fsl_codegen_conv_rows) or pointwise one at a single
 *     position (fsl_codegen_conv_dot); else a HOST step;
 *   - the passes, after every kernel is lowered: layout chaining
 *     (fsl_cpu_chain_layouts), then generated GEMVs and depthwise
 *     convolutions in place of oneDNN (fsl_cpu_lower_generated).
 */
#ifndef FSL_CPU_LOWER_H
#define FSL_CPU_LOWER_H

#include "backend/backend.h"
#include "backend/cpu/onednn.h"
#include "backend/lowering.h"
#include "runtime/memplan.h"

/** A generated kernel function (codegen.h): 0 or FSL_KERR_* bits. */
typedef int (*fsl_cpu_kernel_fn)(const void *const *in, void *const *out);

/** Starts a lowering of graph g in the C dialect with the CPU's hooks and
 *  capabilities `caps` (borrowed: it must outlive L) (fsl_lowering_init).
 *  Errors: FSL_ERR_NOMEM. */
fsl_status fsl_cpu_lowering_init(fsl_lowering *L, const fsl_graph *g, const fsl_backend_caps *caps);

/** The CPU's lowering hooks (oneDNN as the library; lowering.h). */
const fsl_lowering_hooks *fsl_cpu_lowering_hooks(void);

/** Runs GEN step s's loaded function (s->fn) over its argument arrays:
 *  0 or FSL_KERR_* bits. */
static inline int fsl_cpu_step_call(const fsl_step *s, const void *const *in, void *const *out) {
  fsl_cpu_kernel_fn f;
  memcpy(&f, &s->fn, sizeof f);
  return f(in, out);
}

/** The oneDNN primitive of LIB step s. */
static inline fsl_onednn_linear *fsl_cpu_step_dnn(const fsl_step *s) { return (fsl_onednn_linear *)s->lib; }

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
 *  no readers to chain to), before fsl_lowering_source.  Returns the
 *  number of values chained. */
int fsl_cpu_chain_layouts(fsl_lowering *L, const fsl_memplan *mp);

/** Each oneDNN (LIB) step whose linear op generated code runs faster becomes a
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
 *  fsl_lowering_source; ks[0..n_kernels) are the kernels lowered, by
 *  the index given to fsl_lower_kernel.  Returns the number of steps
 *  replaced. */
int fsl_cpu_lower_generated(fsl_lowering *L, fsl_kernel *const *ks, int n_kernels);

#endif
