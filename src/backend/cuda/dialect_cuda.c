/*
 * dialect_cuda.c — the CUDA C dialect (dialect_cuda.h).
 */
#include "backend/cuda/dialect_cuda.h"

extern const char fsl_prelude_cuda[]; /* prelude.h, embedded by cmake/embed.cmake */

static void cuda_kernel_open(fsl_sbuf *b, int id, int n_in, int n_out) {
  (void)n_in;
  (void)n_out;
  fsl_sbuf_printf(b, "extern \"C\" __global__ void fsl_k%d(const void *const *in, void *const *out, int *err) {\n", id);
}

/* PARALLEL: a grid-stride loop; SERIAL and SIMD: a loop in the thread,
 * unrolled at most 4 times: with constant trip counts NVVM otherwise
 * unrolls a row's 256-element sum block completely and ptxas keeps every
 * load in flight (an EfficientViT layer norm: 255 registers and 17 kB of
 * spills per thread on sm_90; with unroll 4: no spills). */
static void cuda_loop_header(const fsl_cg_loop *L, char *annot, size_t acap, char *head, size_t hcap) {
  annot[0] = 0;
  if (L->kind == FSL_CG_PARALLEL) {
    fsl_cg_grid_stride_line(L, "(int64_t)blockIdx.x * blockDim.x + threadIdx.x", "(int64_t)gridDim.x * blockDim.x",
                            head, hcap);
  } else {
    snprintf(annot, acap, "#pragma unroll 4");
    fsl_cg_for_line(L, head, hcap);
  }
}

const fsl_dialect fsl_dialect_cuda = {
    .name = "cuda",
    .prelude = fsl_prelude_cuda,
    .type_name = fsl_cg_stdint_type,
    .f32_math_suffix = "f",
    .restrict_kw = "__restrict__ ",
    .buf_space = "",
    .ret_err = "if (err_) atomicOr(err, err_);",
    .ret_ok = "",
    .multi_pass = false,
    .par_min = 0,
    .kernel_open = cuda_kernel_open,
    .loop_header = cuda_loop_header,
};
