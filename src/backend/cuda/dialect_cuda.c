/*
 * dialect_cuda.c — the CUDA C dialect (dialect_cuda.h).
 */
#include "backend/cuda/dialect_cuda.h"

#include "backend/gpudialect.h"

extern const char fsl_prelude_cuda[]; /* prelude.h, embedded by cmake/embed.cmake */

static void cuda_kernel_open(fsl_sbuf *b, int id, int n_in, int n_out) {
  (void)n_in;
  (void)n_out;
  fsl_sbuf_printf(b, "extern \"C\" __global__ void fsl_k%d(const void *const *in, void *const *out, int *err) {\n", id);
}

/* PARALLEL: a grid-stride loop over threads; GROUPS: the same over
 * blocks (a REDUCE row or matmul tile per block); LANES: over the threads
 * of the block (step: the block size the code assumes); SERIAL and SIMD:
 * a loop in the thread.  Loops in a thread (LANES included) are unrolled
 * at most 4 times: with constant trip counts NVVM otherwise unrolls a
 * row's 256-element sum block completely and ptxas keeps every load in
 * flight (an EfficientViT layer norm: 255 registers and 17 kB of spills
 * per thread on sm_90; with unroll 4: no spills). */
static const fsl_gpu_loops cuda_loops = {
    .item = "(int64_t)blockIdx.x * blockDim.x + threadIdx.x", .items = "(int64_t)gridDim.x * blockDim.x",
    .group = "(int64_t)blockIdx.x", .groups = "(int64_t)gridDim.x", .unroll = "#pragma unroll 4",
};

static void cuda_loop_header(const fsl_cg_loop *L, char *annot, size_t acap, char *head, size_t hcap) {
  fsl_gpu_loop_header(&cuda_loops, L, annot, acap, head, hcap);
}

/* The value of v in the lane this one's XOR mask, within aligned runs of
 * `lanes` lanes of the warp; the member mask names the `active` lanes
 * that run it (a block of fewer than 32 threads: its own). */
static void cuda_warp_xor(char *dst, size_t cap, const char *v, const char *mask, int lanes, int active) {
  char members[16];
  if (active >= 32) snprintf(members, sizeof members, "0xffffffffu");
  else snprintf(members, sizeof members, "0x%xu", (1u << active) - 1u);
  snprintf(dst, cap, "__shfl_xor_sync(%s, %s, %s, %d)", members, v, mask, lanes);
}

/* 256 threads (8 warps) per REDUCE row, a warp or less for rows of at
 * most 32 elements (rows sharing a block of up to 256); 16 x 16 matmul and convolution tiles; within the 48
 * KiB of static __shared__ memory a block may have on every architecture
 * since sm_20 (sm_80 and sm_90 included). */
static const fsl_cg_group cuda_group = {
    .size = 256, .tile = 16, .local_bytes = 49152,
    .local_kw = "__shared__ ", .local_id = "(int64_t)threadIdx.x", .barrier = "__syncthreads();",
    .warp = 32, .warp_xor = cuda_warp_xor,
};

const fsl_dialect fsl_dialect_cuda = {
    FSL_GPU_DIALECT_COMMON,
    .name = "cuda", .prelude = fsl_prelude_cuda, .restrict_kw = "__restrict__ ", .buf_space = "",
    .ret_err = "if (err_) atomicOr(err, err_);",
    .kernel_open = cuda_kernel_open, .loop_header = cuda_loop_header, .group = &cuda_group,
};
