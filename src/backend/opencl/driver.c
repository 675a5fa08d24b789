/*
 * driver.c — the OpenCL backend's driver table over the ICD loader
 * (fsl_ocl_icd, opencl.h): buffers, copies, kernels and launches on the
 * queue of the process's device (device.c).
 */
#include "backend/opencl/opencl.h"

/* The device `icd_open` opened; every other call comes after it. */
static const fsl_ocl_device *_Atomic g_dev;

/* FSL_OK, or the error of OpenCL call `call` that returned e (what on: `what`). */
static fsl_status check(cl_int e, const char *call, const char *what) {
  if (e == CL_SUCCESS) return FSL_OK;
  bool full = e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY;
  return fsl_errorf(full ? FSL_ERR_NOMEM : FSL_ERR_RUNTIME, "%s%s%s: %s", call, *what ? " " : "", what,
                    fsl_ocl_strerror(e));
}

static cl_mem as_mem(fsl_gpu_buf buf) { return (cl_mem)(uintptr_t)buf; }

static fsl_status icd_open(const fsl_ocl_device **d) {
  fsl_status st = fsl_ocl_device_get(d);
  if (st == FSL_OK) g_dev = *d;
  return st;
}

static fsl_status icd_alloc(int64_t bytes, fsl_gpu_buf *buf) {
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBuffer(g_dev->ctx, CL_MEM_READ_WRITE, (size_t)(bytes > 0 ? bytes : 1), NULL, &e);
  *buf = (fsl_gpu_buf)(uintptr_t)m;
  char what[32];
  snprintf(what, sizeof what, "(%lld bytes)", (long long)bytes);
  return m ? FSL_OK : check(e == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : e, "clCreateBuffer", what);
}

static void icd_free(fsl_gpu_buf buf) { clReleaseMemObject(as_mem(buf)); }

static fsl_status icd_host_alloc(int64_t bytes, void **p) {
  *p = malloc((size_t)(bytes > 0 ? bytes : 1));
  return *p ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "out of memory (%lld bytes of host staging)", (long long)bytes);
}

static fsl_status icd_upload(fsl_gpu_buf dst, int64_t off, const void *src, int64_t bytes) {
  cl_int e = clEnqueueWriteBuffer(g_dev->queue, as_mem(dst), CL_FALSE, (size_t)off, (size_t)bytes, src, 0, NULL, NULL);
  return check(e, "clEnqueueWriteBuffer", "");
}

static fsl_status icd_download(void *dst, fsl_gpu_buf src, int64_t off, int64_t bytes) {
  cl_int e = clEnqueueReadBuffer(g_dev->queue, as_mem(src), CL_FALSE, (size_t)off, (size_t)bytes, dst, 0, NULL, NULL);
  return check(e, "clEnqueueReadBuffer", "");
}

static fsl_status icd_zero32(fsl_gpu_buf buf, int64_t n) {
  const cl_int zero = 0;
  cl_int e = clEnqueueFillBuffer(g_dev->queue, as_mem(buf), &zero, sizeof zero, 0, sizeof zero * (size_t)n, 0, NULL, NULL);
  return check(e, "clEnqueueFillBuffer", "");
}

static fsl_status icd_sync(void) { return check(clFinish(g_dev->queue), "clFinish", ""); }

static void icd_program_free(cl_program prog) { clReleaseProgram(prog); }

static fsl_status icd_kernel(cl_program prog, const char *name, cl_kernel *k, uint64_t *local_bytes, size_t *max_group) {
  cl_int e = CL_SUCCESS;
  *k = clCreateKernel(prog, name, &e);
  if (!*k) return check(e == CL_SUCCESS ? CL_INVALID_KERNEL_NAME : e, "clCreateKernel", name);
  cl_ulong lmem = 0;
  *max_group = 1;
  clGetKernelWorkGroupInfo(*k, g_dev->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
  clGetKernelWorkGroupInfo(*k, g_dev->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof *max_group, max_group, NULL);
  *local_bytes = lmem;
  return FSL_OK;
}

static fsl_status icd_set_arg(cl_kernel k, unsigned i, size_t bytes, const void *value) {
  char what[32];
  snprintf(what, sizeof what, "(argument %u)", i);
  return check(clSetKernelArg(k, i, bytes, value), "clSetKernelArg", what);
}

static fsl_status icd_launch(cl_kernel k, size_t global, size_t local) {
  return check(clEnqueueNDRangeKernel(g_dev->queue, k, 1, NULL, &global, &local, 0, NULL, NULL), "clEnqueueNDRangeKernel", "");
}

static void icd_kernel_free(cl_kernel k) { clReleaseKernel(k); }

const fsl_ocl_driver fsl_ocl_icd = {
    .name = "icd",
    .mem = {.alloc = icd_alloc, .free = icd_free, .host_alloc = icd_host_alloc, .host_free = free,
            .upload = icd_upload, .download = icd_download, .zero32 = icd_zero32, .sync = icd_sync},
    .open = icd_open, .build = fsl_ocl_build, .program_free = icd_program_free,
    .kernel = icd_kernel, .set_arg = icd_set_arg, .launch = icd_launch, .kernel_free = icd_kernel_free,
};
