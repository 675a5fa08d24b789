/*
 * dialect_cuda.c — the CUDA C dialect (dialect_cuda.h) and NVRTC.
 */
#include "backend/cuda/dialect_cuda.h"

#include <nvrtc.h>

extern const char fsl_prelude_cuda[]; /* prelude.h, embedded by cmake/embed.cmake */

static void cuda_kernel_open(fsl_sbuf *b, int id, int n_in, int n_out) {
  (void)n_in;
  (void)n_out;
  fsl_sbuf_printf(b, "extern \"C\" __global__ void fsl_k%d(const void *const *in, void *const *out, int *err) {\n", id);
}

/* PARALLEL: a grid-stride loop; SERIAL and SIMD: a loop in the thread. */
static void cuda_loop_header(const fsl_cg_loop *L, char *annot, size_t acap, char *head, size_t hcap) {
  (void)acap;
  annot[0] = 0;
  if (L->kind == FSL_CG_PARALLEL)
    fsl_cg_grid_stride_line(L, "(int64_t)blockIdx.x * blockDim.x + threadIdx.x", "(int64_t)gridDim.x * blockDim.x",
                            head, hcap);
  else
    fsl_cg_for_line(L, head, hcap);
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

fsl_status fsl_cuda_compile_ptx(const char *src, const char *arch, char **ptx, size_t *ptx_len) {
  if (!src || !arch || !ptx || !ptx_len) return fsl_errorf(FSL_ERR_ARG, "fsl_cuda_compile_ptx: NULL argument");
  *ptx = NULL;
  *ptx_len = 0;
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, src, "fissile.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "NVRTC: %s", nvrtcGetErrorString(r));
  char opt_arch[64];
  snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
  const char *opts[] = {opt_arch, "--std=c++17", "-default-device"};
  r = nvrtcCompileProgram(prog, (int)FSL_ARRAY_LEN(opts), opts);
  fsl_status st = FSL_OK;
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    char log[2048] = "";
    if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
      char *full = malloc(n);
      if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS) snprintf(log, sizeof log, "%s", full);
      free(full);
    }
    st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s) rejected the generated source: %s\n%s", arch, nvrtcGetErrorString(r),
                    log);
  } else {
    size_t n = 0;
    if (nvrtcGetPTXSize(prog, &n) != NVRTC_SUCCESS || !(*ptx = malloc(n + 1))) {
      st = fsl_errorf(FSL_ERR_NOMEM, "out of memory (PTX of %zu bytes)", n);
    } else if (nvrtcGetPTX(prog, *ptx) != NVRTC_SUCCESS) {
      free(*ptx);
      *ptx = NULL;
      st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC: cannot read the PTX");
    } else {
      (*ptx)[n] = 0;
      *ptx_len = strlen(*ptx);
    }
  }
  nvrtcDestroyProgram(&prog);
  return st;
}
