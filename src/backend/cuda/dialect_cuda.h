/*
 * dialect_cuda.h — the CUDA C dialect of the code generator
 * (src/codegen/dialect.h) and NVRTC compilation of its sources.  Kernels
 * are rendered and compiled for a GPU architecture here without a GPU or
 * a driver (libnvrtc needs neither); running them is the CUDA runtime's
 * job (docs/cpu-backend.md, "Dialects").
 */
#ifndef FSL_CUDA_DIALECT_H
#define FSL_CUDA_DIALECT_H

#include "codegen/codegen.h"

/**
 * The CUDA C dialect: kernel fsl_k<ID> is
 *     extern "C" __global__ void fsl_k<ID>(const void *const *in, void *const *out, int *err)
 * where in/out are device arrays of device pointers (the same layout as
 * the C dialect's arguments) and err a device int that receives the OR of
 * every thread's FSL_KERR_* bits (atomicOr).  A PARALLEL loop is a
 * grid-stride loop over blockIdx/threadIdx (one thread per iteration of
 * the outer loop: an element of a LOOP kernel, a row of a REDUCE kernel);
 * SERIAL and SIMD loops run inside a thread.  Reductions that need several
 * dependent passes are refused (no grid-wide barrier inside one launch).
 */
extern const fsl_dialect fsl_dialect_cuda;

/**
 * Compiles CUDA C source `src` with NVRTC for virtual architecture
 * `arch` (e.g. "compute_90") into PTX.  On success *ptx receives a
 * malloc'd NUL-terminated PTX text (caller frees), *ptx_len its length
 * in bytes.  Errors: FSL_ERR_RUNTIME with NVRTC's log (trimmed to about
 * 2 kB) when the source does not compile, FSL_ERR_NOMEM.  Semantics:
 * NVRTC API (docs.nvidia.com/cuda/nvrtc).
 */
fsl_status fsl_cuda_compile_ptx(const char *src, const char *arch, char **ptx, size_t *ptx_len);

#endif
