/*
 * opencl.c — the OpenCL backend (backend.h; docs/gpu-backend.md): plans
 * run on an OpenCL device through the driver table of opencl.h
 * (fsl_ocl_icd), by the GPU executor (gpuexec.h: lowering in the OpenCL C
 * dialect, device memory, runs).  What is OpenCL's own, here:
 *   - the device's limits and name (CL_DEVICE_MAX_WORK_GROUP_SIZE,
 *     CL_DEVICE_LOCAL_MEM_SIZE);
 *   - the program: the generated kernels of the plan built from source
 *     once per plan (device.c caches the binary);
 *   - each GEN step's kernel, its arguments (a buffer and a byte offset
 *     per value, then the error words and the step's index among them),
 *     which never change after compile, and its work sizes: work-groups of
 *     the size the code was generated for, or as large as the kernel
 *     allows for grid-stride kernels;
 *   - runs: the kernels queued one after another on the in-order queue.
 */
#include "backend/opencl/opencl.h"

#include "backend/gpuexec.h"
#include "backend/opencl/dialect_opencl.h"

#include <limits.h>

#define MAX_GROUPS 65536 /* work-groups launched for a kernel with a group per row or tile (grid-stride beyond) */
#define LOOP_GROUP 64    /* work-items per work-group of a grid-stride kernel, at most */

/* What a GEN step needs on this device. */
typedef struct ocl_launch {
  cl_kernel k;
  size_t gsize, lsize;     /* global and local work size */
} ocl_launch;

/* An OpenCL executable: the GPU executor's, then the device's objects. */
typedef struct ocl_exe {
  fsl_gpu_exe gpu;         /* gpu.launch: an ocl_launch per step */
  const fsl_ocl_driver *drv;
  const fsl_ocl_device *d;
  cl_program prog;
  bool cache_hit;
} ocl_exe;

static fsl_status ocl_open(fsl_gpu_device *dev, fsl_gpu_exe *gx) {
  const fsl_ocl_driver *drv = &fsl_ocl_icd;
  const fsl_ocl_device *d = NULL;
  FSL_TRY(drv->open(&d));
  *dev = (fsl_gpu_device){.mem = &drv->mem, .local_bytes = (long long)d->local_mem};
  dev->max_group = d->max_wg < (size_t)INT_MAX ? (int)d->max_wg : INT_MAX;
  snprintf(dev->name, sizeof dev->name, "%s", d->name);
  snprintf(dev->id, sizeof dev->id, "%s, %s", d->name, d->driver);
  ocl_exe *x = (ocl_exe *)gx;
  if (x) {
    x->drv = drv;
    x->d = d;
  }
  return FSL_OK;
}

static fsl_status ocl_build(fsl_gpu_exe *gx) {
  ocl_exe *x = (ocl_exe *)gx;
  return x->drv->build(x->d, gx->low.src.p, gx->low.src.len, &x->prog, &x->cache_hit);
}

/* Kernel k's arguments for step i, s: a buffer and its byte offset per
 * value (inputs, then outputs), then the error words and i. */
static fsl_status set_args(ocl_exe *x, int i, const fsl_step *s, cl_kernel k) {
  unsigned a = 0;
  for (int j = 0; j < s->n_in + s->n_out; j++) {
    fsl_gpu_buf buf;
    int64_t off;
    FSL_TRY(fsl_gpu_locate(&x->gpu, j < s->n_in ? s->in[j] : s->out[j - s->n_in], &buf, &off));
    cl_mem m = (cl_mem)(uintptr_t)buf;
    cl_ulong o = (cl_ulong)off;
    FSL_TRY(x->drv->set_arg(k, a++, sizeof m, &m));
    FSL_TRY(x->drv->set_arg(k, a++, sizeof o, &o));
  }
  cl_mem errs = (cl_mem)(uintptr_t)x->gpu.errs;
  cl_uint ei = (cl_uint)i;
  FSL_TRY(x->drv->set_arg(k, a++, sizeof errs, &errs));
  return x->drv->set_arg(k, a, sizeof ei, &ei);
}

/* Kernel, arguments and work sizes of GEN step i. */
static fsl_status ocl_prepare(fsl_gpu_exe *gx, int i) {
  ocl_exe *x = (ocl_exe *)gx;
  const fsl_step *s = &gx->low.steps[i];
  ocl_launch *L = (ocl_launch *)gx->launch + i;
  char name[32], label[160];
  snprintf(name, sizeof name, "fsl_k%d", s->fn_id);
  fsl_gpu_kernel_label(gx->p, s->kernel, label, sizeof label);
  uint64_t lmem = 0;
  size_t kwg = 1;
  fsl_status st = x->drv->kernel(x->prog, name, &L->k, &lmem, &kwg);
  if (st == FSL_OK) st = set_args(x, i, s, L->k);
  if (st != FSL_OK) return fsl_error_context(st, "opencl backend, %s", label);
  if (lmem > x->d->local_mem)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "opencl backend, %s: needs %llu bytes of local memory, '%s' has %llu", label,
                      (unsigned long long)lmem, x->d->name, (unsigned long long)x->d->local_mem);
  if (s->launch.group_size > 0) {
    /* work-groups of exactly the size the code was generated for, at most
     * MAX_GROUPS of them (a grid-stride loop over groups) */
    size_t gs = (size_t)s->launch.group_size;
    if (gs > kwg)
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "opencl backend, %s: needs work-groups of %zu work-items, '%s' allows %zu for it",
                        label, gs, x->d->name, kwg);
    int64_t ng = s->launch.groups < 1 ? 1 : s->launch.groups < MAX_GROUPS ? s->launch.groups : MAX_GROUPS;
    L->lsize = gs;
    L->gsize = (size_t)ng * gs;
    return FSL_OK;
  }
  size_t items = (size_t)fsl_gpu_step_items(s), ls = items == 1 ? 1 : LOOP_GROUP;
  while (ls > 1 && (ls > kwg || ls > x->d->max_wg)) ls /= 2;
  L->lsize = ls;
  L->gsize = (items + ls - 1) / ls * ls;
  return FSL_OK;
}

/* Steps [lo, hi) queued one after another. */
static fsl_status ocl_launch_steps(fsl_gpu_exe *gx, int lo, int hi) {
  ocl_exe *x = (ocl_exe *)gx;
  for (int i = lo; i < hi; i++) {
    const ocl_launch *L = (const ocl_launch *)gx->launch + i;
    fsl_status st = x->drv->launch(L->k, L->gsize, L->lsize);
    if (st != FSL_OK)
      return fsl_error_context(st, "opencl backend, kernel %d: launching fsl_k%d", gx->low.steps[i].kernel,
                               gx->low.steps[i].fn_id);
  }
  return FSL_OK;
}

static void ocl_release(fsl_gpu_exe *gx) {
  ocl_exe *x = (ocl_exe *)gx;
  for (int i = 0; gx->launch && i < gx->low.n_steps; i++) {
    cl_kernel k = ((ocl_launch *)gx->launch)[i].k;
    if (k) x->drv->kernel_free(k);
  }
  if (x->prog) x->drv->program_free(x->prog);
}

/* The generated tiled matmul reads prologue views in place (fsl_linear_split_views). */
static void ocl_caps(fsl_backend_caps *out) { out->linear_views = true; }

static const fsl_gpu_ops k_opencl = {
    .name = "opencl", .dialect = &fsl_dialect_opencl, .hooks = &fsl_gpu_generated, .caps = ocl_caps,
    .source_env = "FSL_OPENCL_SOURCE", /* docs/gpu-backend.md: the generated program, for inspection */
    .exe_bytes = sizeof(ocl_exe), .launch_bytes = sizeof(ocl_launch),
    .open = ocl_open, .build = ocl_build, .prepare = ocl_prepare, .finish = NULL,
    .launch = ocl_launch_steps, .release = ocl_release,
};

FSL_GPU_BACKEND(fsl_backend_opencl, k_opencl, .name = "opencl",
                .summary = "generated OpenCL C on an OpenCL device (FSL_OPENCL_DEVICE; PoCL runs it on the CPU)",
                .calibrate = fsl_ocl_calibrate, .caps = ocl_caps);
