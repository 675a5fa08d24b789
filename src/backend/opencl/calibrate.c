/*
 * calibrate.c — the OpenCL device's numbers for the roofline cost model
 * (fsl_backend_opencl.calibrate; opencl.h), measured on the device with
 * small kernels and cached per device in the user's cache folder, so that
 * plans for --backend opencl are chosen for the device they run on.  On
 * PoCL the device is the host CPU seen through OpenCL: the numbers are the
 * CPU's with PoCL's launch cost.
 */
#include "backend/opencl/opencl.h"

#include <math.h>

#define CAL_VERSION "fissile-opencl-device-v1"

static const char k_cal_src[] =
    "__kernel void cal_empty(__global float *p) { (void)p; }\n"
    "__kernel void cal_copy(__global const float4 *a, __global float4 *b, long n) {\n"
    "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) b[i] = a[i]; }\n"
    "__kernel void cal_elem(__global float *y, long n) {\n"
    "  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
    "    float v = y[i]; for (int r = 0; r < 64; r++) v = v * 0.999f + 0.001f; y[i] = v; } }\n"
    "__kernel void cal_mm(__global const float *a, __global const float *b, __global float *c, int n) {\n"
    "  for (int i = get_global_id(0); i < n * n; i += get_global_size(0)) {\n"
    "    int r = i / n, col = i % n; float s = 0;\n"
    "    for (int k = 0; k < n; k++) s += a[r * n + k] * b[k * n + col];\n"
    "    c[i] = s; } }\n";

#define COPY_BYTES ((size_t)32 << 20) /* per buffer */
#define ELEMS ((size_t)1 << 20)
#define ELEM_OPS (2.0 * 64)           /* a multiply and an add, 64 times per element */
#define MM_N 256

/* Best seconds of `reps` runs of kernel k over gsize work-items (after
 * one warm-up run: PoCL compiles the work-group function then). */
static double best_time(const fsl_ocl_device *d, cl_kernel k, size_t gsize, int reps, cl_int *err) {
  double best = INFINITY;
  for (int r = 0; r <= reps && *err == CL_SUCCESS; r++) {
    double t = fsl_now_s();
    *err = clEnqueueNDRangeKernel(d->queue, k, 1, NULL, &gsize, NULL, 0, NULL, NULL);
    if (*err == CL_SUCCESS) *err = clFinish(d->queue);
    t = fsl_now_s() - t;
    if (r > 0 && t < best) best = t;
  }
  return best > 0 ? best : 1e-9;
}

static fsl_status measure(const fsl_ocl_device *d, fsl_device *m) {
  cl_program prog = NULL;
  bool hit = false;
  FSL_TRY(fsl_ocl_build(d, k_cal_src, strlen(k_cal_src), &prog, &hit));
  cl_int err = CL_SUCCESS;
  cl_mem a = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, COPY_BYTES, NULL, &err);
  cl_mem b = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, COPY_BYTES, NULL, &err);
  cl_kernel ke = clCreateKernel(prog, "cal_empty", &err), kc = clCreateKernel(prog, "cal_copy", &err),
            kl = clCreateKernel(prog, "cal_elem", &err), km = clCreateKernel(prog, "cal_mm", &err);
  err = a && b && ke && kc && kl && km ? CL_SUCCESS : CL_OUT_OF_RESOURCES;
  float zero = 0;
  if (err == CL_SUCCESS) err = clEnqueueFillBuffer(d->queue, a, &zero, sizeof zero, 0, COPY_BYTES, 0, NULL, NULL);
  if (err == CL_SUCCESS) err = clEnqueueFillBuffer(d->queue, b, &zero, sizeof zero, 0, COPY_BYTES, 0, NULL, NULL);
  size_t wide = (size_t)(d->compute_units > 0 ? d->compute_units : 1) * 1024;
  cl_long n4 = (cl_long)(COPY_BYTES / 16), ne = (cl_long)ELEMS;
  cl_int mn = MM_N;
  if (err == CL_SUCCESS) {
    clSetKernelArg(ke, 0, sizeof a, &a);
    clSetKernelArg(kc, 0, sizeof a, &a);
    clSetKernelArg(kc, 1, sizeof b, &b);
    clSetKernelArg(kc, 2, sizeof n4, &n4);
    clSetKernelArg(kl, 0, sizeof a, &a);
    clSetKernelArg(kl, 1, sizeof ne, &ne);
    clSetKernelArg(km, 0, sizeof a, &a);
    clSetKernelArg(km, 1, sizeof a, &a);
    clSetKernelArg(km, 2, sizeof b, &b);
    clSetKernelArg(km, 3, sizeof mn, &mn);
  }
  if (err == CL_SUCCESS) m->launch_s = best_time(d, ke, 1, 20, &err);
  if (err == CL_SUCCESS) m->bandwidth = 2.0 * (double)COPY_BYTES / best_time(d, kc, wide, 3, &err);
  if (err == CL_SUCCESS) m->elem_flops = ELEM_OPS * (double)ELEMS / best_time(d, kl, wide, 3, &err);
  if (err == CL_SUCCESS) m->peak_flops = 2.0 * MM_N * MM_N * MM_N / best_time(d, km, (size_t)MM_N * MM_N, 2, &err);
  cl_kernel ks[] = {ke, kc, kl, km};
  for (int i = 0; i < 4; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  if (a) clReleaseMemObject(a);
  if (b) clReleaseMemObject(b);
  clReleaseProgram(prog);
  if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl calibration on '%s': %s", d->name, fsl_ocl_strerror(err));
  return FSL_OK;
}

static fsl_status measure_device(void *ctx, fsl_device *m) {
  const fsl_ocl_device *dev = ctx;
  snprintf(m->name, sizeof m->name, "opencl: %.110s", dev->name);
  return measure(dev, m);
}

fsl_status fsl_ocl_calibrate(fsl_device *d, int n_threads, bool force) {
  (void)n_threads; /* the device decides its parallelism */
  if (!d) return fsl_errorf(FSL_ERR_ARG, "fsl_ocl_calibrate: NULL device");
  fsl_device_default(d);
  const fsl_ocl_device *dev = NULL;
  FSL_TRY(fsl_ocl_device_get(&dev));
  uint64_t h = fsl_hash(FSL_HASH_INIT, CAL_VERSION, strlen(CAL_VERSION));
  h = fsl_hash(h, dev->name, strlen(dev->name));
  h = fsl_hash(h, dev->driver, strlen(dev->driver));
  h = fsl_hash(h, dev->version, strlen(dev->version));
  char file[64];
  snprintf(file, sizeof file, "device-opencl-%016llx.txt", (unsigned long long)h);
  return fsl_device_calibrate(file, CAL_VERSION, force, "opencl", measure_device, (void *)dev, d);
}
