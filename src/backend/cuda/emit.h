/*
 * emit.h — the CUDA C of a plan (emit.c) and its compilation by NVRTC to
 * CUBINs with ptxas's resource report (nvrtc.c).  Neither needs a GPU or
 * the driver (libnvrtc only; libcuda is never linked).  The public entry
 * is fsl_model_emit (include/fissile.h, src/api_cuda.c); the unit
 * test compiles many plans in one source through these.
 * docs/gpu-backend.md, "CUDA".
 */
#ifndef FSL_CUDA_EMIT_H
#define FSL_CUDA_EMIT_H

#include "codegen/sbuf.h"
#include "orchestrate/orchestrate.h"

/** CUDA C generated so far: one or more plans' kernels in one source. */
typedef struct fsl_cuda_emitter {
  fsl_sbuf src;              /* the prelude, then every generated function */
  int next_id;               /* the next function is fsl_k<next_id> */
  fsl_cuda_function *fn;     /* generated functions, in source order (launch set, usage unset) */
  int n_fn, cap_fn;
  char **refused;            /* "kernel K (OP 'NODE'): why", one per refused plan kernel */
  int n_refused, cap_refused;
  int n_kernels, n_generated, n_opaque;  /* plan kernels seen, generated entirely, opaque */
} fsl_cuda_emitter;

/**
 * Appends the CUDA C of every kernel of plan p (over p->g) to e (zeroed
 * before the first plan; the prelude comes first): a pass over the steps of
 * p lowered in the CUDA dialect with every linear op generated
 * (fsl_lower_plan with fsl_gpu_generated, lowering.h: what the CUDA backend runs with cuBLASLt
 * off), its functions numbered on from e->next_id.  Each GEN step is a
 * function: a LOOP or REDUCE kernel whole (one per node when it needs
 * several passes); a LINEAR kernel as a generated prologue (when its
 * operands are more than reshapes), a generated matmul or direct
 * convolution, and a generated epilogue (codegen/linsplit.h).  Opaque
 * kernels are counted, not generated; a kernel with a part the dialect
 * refuses (f16/bf16, scatters, integer conv: a host step in the backend)
 * is listed in e->refused with its ONNX node and reason, not an error (its
 * generated parts are still functions).  Function `kernel` fields index
 * p's kernels; their block_threads/blocks say how to launch them (a
 * REDUCE row per block, a tiled matmul or convolution: the block size the
 * code assumes; fsl_cg_launch from the code generator).
 * Errors: FSL_ERR_NOMEM, a code generator error other than
 * FSL_ERR_UNSUPPORTED (a bug: names the kernel).
 */
fsl_status fsl_cuda_emit_plan(fsl_cuda_emitter *e, const fsl_plan *p);
void fsl_cuda_emitter_free(fsl_cuda_emitter *e);

/** ptxas's report for one function of a compiled source. */
typedef struct fsl_cuda_kernel_usage {
  char name[64];             /* the entry function's name */
  fsl_cuda_usage u;
} fsl_cuda_kernel_usage;

/** One NVRTC compile of a source for a real architecture. */
typedef struct fsl_cuda_build {
  double compile_s;          /* NVRTC wall seconds */
  void *cubin;               /* the ELF image (malloc'd) */
  size_t cubin_bytes;
  int n;                     /* entry functions, in ptxas's order */
  fsl_cuda_kernel_usage *k;
} fsl_cuda_build;

/**
 * Compiles CUDA C `src` with NVRTC for real architecture `arch` ("sm_90",
 * "sm_80": a CUBIN, so ptxas runs) with ptxas -v, and fills *out (zeroed
 * first; fsl_cuda_build_free, also after an error) with the CUBIN and
 * every entry function's registers, barriers, stack, spills and shared
 * memory from ptxas's log and its constant banks from the CUBIN's ELF
 * sections (.nv.constant<N>.<function>; every offset bounds-checked).
 * Errors: FSL_ERR_ARG (NULL, an arch that is not "sm_<digits>[a-z]"),
 * FSL_ERR_RUNTIME when NVRTC fails, or its log holds a line that is not
 * one of ptxas's resource lines (a warning: treated as an error), with the
 * log (trimmed to about 4 kB) and the arch; or when the CUBIN is not a
 * well-formed ELF; FSL_ERR_NOMEM.
 */
fsl_status fsl_cuda_compile(const char *src, const char *arch, fsl_cuda_build *out);
void fsl_cuda_build_free(fsl_cuda_build *b);
/** The usage of entry function `name` in b, NULL when ptxas did not list it. */
const fsl_cuda_usage *fsl_cuda_build_find(const fsl_cuda_build *b, const char *name);

#endif
