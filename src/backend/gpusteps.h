/*
 * gpusteps.h — what the GPU backends (OpenCL, CUDA) share over a plan
 * lowered into steps (backend/lowering.h: GEN, LIB, HOST): the work-items
 * of a step, the dependencies between steps, the host steps run through
 * the reference interpreter, and the errors a step's error word reports.
 * docs/gpu-backend.md, "What runs where".
 */
#ifndef FSL_GPUSTEPS_H
#define FSL_GPUSTEPS_H

#include "backend/backend.h"
#include "backend/lowering.h"

/** The lowering hooks of a GPU dialect without a library: every linear op
 *  generated (a tiled matmul or direct convolution reading prologue views
 *  in place), kernels the dialect cannot take whole split by node (the
 *  OpenCL backend, the CUDA emitter). */
extern const fsl_lowering_hooks fsl_gpu_generated;

/** Work-items (threads) of a grid-stride GEN step: one per element of its
 *  largest output, at most 2^20; 1 when every output is a scalar (such a
 *  function has no parallel loop: every thread would run it whole, which is
 *  wrong when it writes in place). */
int64_t fsl_gpu_step_items(const fsl_step *s);

/** Where a value lives on the device, for the dependency analysis: a
 *  buffer (any id; the arena is one) and the byte range [off, off + bytes). */
typedef struct fsl_gpu_range {
  uint64_t buffer;
  int64_t off, bytes;
} fsl_gpu_range;
typedef fsl_gpu_range (*fsl_gpu_where)(void *ctx, const fsl_value *v);

/**
 * The dependencies of steps [lo, hi) of l among themselves, for launching
 * them as a graph (CUDA graphs; OpenCL events): step j depends on an
 * earlier step i of the range when one writes bytes the other reads or
 * writes (true, anti- and output dependencies: the arena reuses memory),
 * with the edges implied by others removed (a transitive reduction).
 * Ranges come from where(ctx, v).  On success deps[j - lo] is a malloc'd
 * array of n_deps[j - lo] step indices (ascending; NULL when none): free
 * each, then the arrays (fsl_gpu_deps_free).  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_gpu_step_deps(const fsl_lowering *l, int lo, int hi, fsl_gpu_where where, void *ctx, int ***deps,
                             int **n_deps);
void fsl_gpu_deps_free(int **deps, int *n_deps, int n);

/** Copies value v between the device and host memory for a HOST step. */
typedef fsl_status (*fsl_gpu_copy)(void *ctx, const fsl_value *v, void *host, int64_t bytes);

/**
 * Runs HOST step s: the values it reads to the host (to_host; constants
 * are read in place), the reference interpreter node by node, the step's
 * outputs back (to_device).  Errors: those of the copies and of
 * fsl_ref_eval, with the kernel named and "on the host"; FSL_ERR_NOMEM.
 */
fsl_status fsl_gpu_run_host(const fsl_graph *g, const fsl_step *s, fsl_gpu_copy to_host, fsl_gpu_copy to_device,
                            void *ctx, const char *backend);

/** The error a GEN step reports through its error word (FSL_KERR_* bits),
 *  naming the step's kernel and ONNX node; FSL_OK when bits is 0. */
fsl_status fsl_gpu_step_error(const fsl_plan *p, const fsl_step *s, int bits, const char *backend);

/** "kernel K (from OP 'NODE')" for messages: the ONNX node of kernel ki's
 *  first primitive. */
void fsl_gpu_kernel_label(const fsl_plan *p, int ki, char *buf, size_t len);

#endif
