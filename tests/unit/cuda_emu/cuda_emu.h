/*
 * cuda_emu.h — just enough of CUDA C's device side for g++ to compile the
 * functions fissile generates in the CUDA dialect and run them on the CPU
 * (tests/unit/test_cuda_codegen.c; no GPU on the test machines).  Included
 * before the CUDA prelude (src/backend/cuda/prelude.h).  Each launch runs
 * its blocks one after the other, every thread of a block as a POSIX
 * thread (launch.cc): __syncthreads() is a barrier over the block,
 * __shared__ arrays are static (one block at a time uses them), and
 * __shfl_xor_sync exchanges values through a buffer between two block-wide
 * barriers, so it is only correct where every thread of the block reaches
 * the same shuffles in the same order, as in the generated code (a
 * shuffle some threads skip hangs the emulation instead of passing).
 * Warps do not run in lock-step here: code relying on implicit warp
 * synchrony would not pass.
 */
#include <math.h>

/* <math.h> brings glibc's <stdint.h> names (int64_t is long there); the
 * prelude's typedefs (long long) then name types of their own */
#define int64_t fsl_emu_int64_t
#define uint64_t fsl_emu_uint64_t

struct fsl_emu_dim3 {
  unsigned x, y, z;
};
extern thread_local fsl_emu_dim3 threadIdx, blockIdx;
extern fsl_emu_dim3 blockDim, gridDim;
extern "C" void fsl_emu_sync(void);
extern "C" void fsl_emu_xor(const void *v, void *r, unsigned bytes, int lane_mask, unsigned members, int width);

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __syncthreads() fsl_emu_sync()

static inline float __int_as_float(int i) {
  float f;
  __builtin_memcpy(&f, &i, sizeof f);
  return f;
}
template <class T> static inline T __shfl_xor_sync(unsigned members, T v, int lane_mask, int width) {
  T r;
  fsl_emu_xor(&v, &r, sizeof v, lane_mask, members, width);
  return r;
}
static inline int atomicOr(int *p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
