/*
 * dialect_cuda.h — the CUDA C dialect of the code generator
 * (src/codegen/dialect.h).  Plans are rendered in it and compiled by NVRTC
 * without a GPU or a driver in emit.h; running them is the CUDA runtime's
 * job (docs/gpu-backend.md, "CUDA").
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
 * the outer loop: an element of a LOOP kernel); SERIAL and SIMD loops run
 * inside a thread, unrolled at most 4 times.  Work-groups are thread
 * blocks (group table: __shared__ memory, threadIdx.x, __syncthreads(),
 * warps of 32 lanes with __shfl_xor_sync): a REDUCE row per block of up
 * to 256 threads (a warp or less for rows of at most 32 elements), matmul
 * and convolution tiles of 16 x 16 per block.  Such a function must be
 * launched with exactly the block size the generator reports
 * (fsl_cg_launch.group_size, one dimension) and any number of blocks
 * (grid-stride over rows/tiles; fsl_cg_launch.groups have work); other
 * functions with any one-dimensional launch.  Reductions that need
 * several dependent passes are refused (no grid-wide barrier inside one
 * launch).
 */
extern const fsl_dialect fsl_dialect_cuda;

#endif
