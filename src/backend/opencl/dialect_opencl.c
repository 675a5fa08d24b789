/*
 * dialect_opencl.c — the OpenCL C dialect (dialect_opencl.h).
 */
#include "backend/opencl/dialect_opencl.h"

#include "backend/gpudialect.h"

extern const char fsl_prelude_opencl[]; /* prelude.h, embedded by cmake/embed.cmake */

/* One __global pointer and byte offset per buffer; in[] and out[] rebuilt
 * as local arrays so that the shared code reads them as in C. */
static void ocl_kernel_open(fsl_sbuf *b, int id, int n_in, int n_out) {
  fsl_sbuf_printf(b, "__kernel void fsl_k%d(", id);
  for (int i = 0; i < n_in + n_out; i++) fsl_sbuf_printf(b, "__global uchar *p%d, ulong o%d, ", i, i);
  fsl_sbuf_puts(b, "__global int *err_buf, uint err_i) {\n");
  fsl_sbuf_printf(b, "  __global const void *in[%d] = {", n_in > 0 ? n_in : 1);
  for (int i = 0; i < n_in; i++) fsl_sbuf_printf(b, "%sp%d + o%d", i ? ", " : "", i, i);
  fsl_sbuf_printf(b, "%s};\n  __global void *out[%d] = {", n_in ? "" : "0", n_out > 0 ? n_out : 1);
  for (int j = 0; j < n_out; j++) fsl_sbuf_printf(b, "%sp%d + o%d", j ? ", " : "", n_in + j, n_in + j);
  fsl_sbuf_printf(b, "%s};\n", n_out ? "" : "0");
}

/* PARALLEL: a grid-stride loop over work-items; GROUPS: the same over
 * work-groups; LANES: over the work-items of the group (step: the group
 * size); SERIAL and SIMD: a loop in the work-item. */
static const fsl_gpu_loops ocl_loops = {
    .item = "(int64_t)get_global_id(0)", .items = "(int64_t)get_global_size(0)",
    .group = "(int64_t)get_group_id(0)", .groups = "(int64_t)get_num_groups(0)",
};

static void ocl_loop_header(const fsl_cg_loop *L, char *annot, size_t acap, char *head, size_t hcap) {
  fsl_gpu_loop_header(&ocl_loops, L, annot, acap, head, hcap);
}

/* 64 work-items per REDUCE row, 16 x 16 matmul tiles, within the 32 KiB
 * of local memory every OpenCL 1.2 GPU has; the backend narrows these to
 * the device it runs on (opencl.c). */
static const fsl_cg_group ocl_group = {
    .size = 64, .tile = 16, .local_bytes = 32768,
    .local_kw = "__local ", .local_id = "(int64_t)get_local_id(0)", .barrier = "barrier(CLK_LOCAL_MEM_FENCE);",
};

const fsl_dialect fsl_dialect_opencl = {
    FSL_GPU_DIALECT_COMMON,
    .name = "opencl", .prelude = fsl_prelude_opencl, .restrict_kw = "restrict ", .buf_space = "__global ",
    .ret_err = "if (err_) atomic_or(err_buf + err_i, err_);",
    .kernel_open = ocl_kernel_open, .loop_header = ocl_loop_header, .group = &ocl_group,
};
