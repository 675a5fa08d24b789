/*
 * opencl.h — internals of the OpenCL backend (src/backend/opencl/): the
 * device (device.c), the driver table over it (driver.c) and the backend
 * itself (opencl.c over the GPU executor, gpuexec.h; the vtable
 * fsl_backend_opencl in backend.h).  docs/gpu-backend.md.
 */
#ifndef FSL_OPENCL_H
#define FSL_OPENCL_H

#include "backend/backend.h"
#include "backend/gpumem.h"

#include <CL/cl.h>

#define FSL_OCL_PATH_MAX 1024

/** The process's OpenCL device, context and in-order queue. */
typedef struct fsl_ocl_device {
  cl_platform_id platform;
  cl_device_id device;
  cl_context ctx;
  cl_command_queue queue;
  char name[256];             /* "<platform> / <device>" */
  char driver[128], version[128];
  cl_device_type type;
  cl_ulong local_mem;         /* bytes of local memory per work-group */
  size_t max_wg;              /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  cl_uint compute_units;
  bool correct_div_sqrt;      /* -cl-fp32-correctly-rounded-divide-sqrt is available */
  bool has_int64_atomics;
} fsl_ocl_device;

/**
 * The device every OpenCL executable of this process uses, opened on the
 * first call: FSL_OPENCL_DEVICE chooses (an index over all devices of all
 * platforms, or a case-insensitive substring of "<platform> / <device>"),
 * else the first GPU, else the first device.  Errors (kept for later
 * calls): FSL_ERR_UNSUPPORTED when there is no platform or device, or the
 * device lacks cl_khr_fp64; FSL_ERR_ARG when FSL_OPENCL_DEVICE matches
 * nothing (the message lists the devices); FSL_ERR_RUNTIME when the
 * context or queue cannot be made.
 */
fsl_status fsl_ocl_device_get(const fsl_ocl_device **out);

/**
 * Builds OpenCL C source src[0..len) for the device into *out, through the
 * binary cache (fsl_cache_folder("opencl"), keyed by the hash of the
 * source, device name, driver and version, and build options; entries
 * appear only through rename).  *cache_hit tells whether a cached binary
 * was used.  Errors: FSL_ERR_RUNTIME with the build log (trimmed to about
 * 4 kB) when the device's compiler rejects the source; nothing is cached
 * then.
 */
fsl_status fsl_ocl_build(const fsl_ocl_device *d, const char *src, size_t len, cl_program *out, bool *cache_hit);

/**
 * What the OpenCL backend (opencl.c) asks of the OpenCL runtime, as a
 * table of fissile-level operations like the CUDA backend's fsl_cu_driver
 * (cuda/driver.h), so that the GPU executor copies and waits through the
 * same calls (`mem`) for both.  Every call works on the process's device
 * and its in-order queue (fsl_ocl_device_get), which `open` opens: it
 * comes first.  Functions return FSL_OK or an error whose message names
 * the OpenCL call and its error code (FSL_ERR_NOMEM when the device is
 * out of memory).
 */
typedef struct fsl_ocl_driver {
  const char *name;          /* "icd": the ICD loader (driver.c) */
  /** Buffers (a buffer is a cl_mem handle), copies and the wait on the
   *  queue; host memory is malloc's. */
  fsl_gpu_mem mem;
  /** The process's device (fsl_ocl_device_get). */
  fsl_status (*open)(const fsl_ocl_device **d);
  /** Builds source src[0..len) for device d into *prog through the
   *  binary cache (fsl_ocl_build). */
  fsl_status (*build)(const fsl_ocl_device *d, const char *src, size_t len, cl_program *prog, bool *cache_hit);
  void (*program_free)(cl_program prog);
  /** Kernel `name` of prog, with the bytes of local memory it uses and the
   *  most work-items a work-group of it may have on the device (0 and 1
   *  when the runtime does not say). */
  fsl_status (*kernel)(cl_program prog, const char *name, cl_kernel *k, uint64_t *local_bytes, size_t *max_group);
  /** Argument i of k: the `bytes` bytes at value (a cl_mem, a cl_ulong ...). */
  fsl_status (*set_arg)(cl_kernel k, unsigned i, size_t bytes, const void *value);
  /** Queues k over `global` work-items in work-groups of `local`. */
  fsl_status (*launch)(cl_kernel k, size_t global, size_t local);
  void (*kernel_free)(cl_kernel k);
} fsl_ocl_driver;

/** The driver over the ICD loader (driver.c). */
extern const fsl_ocl_driver fsl_ocl_icd;

/**
 * The device's numbers for the roofline cost model (the backend's
 * calibrate; calibrate.c), measured with small kernels: launch_s the
 * seconds of an empty kernel launch and wait, bandwidth bytes/s of a
 * 32 MiB float4 copy (read + write counted), elem_flops multiply-adds/s
 * (2 ops each) over 1 Mi floats, peak_flops FLOP/s of a naive 256^3
 * matmul (as the generated one).  Cached in
 * fsl_cache_folder(NULL)/device-opencl-<hash of device, driver,
 * version>.txt unless force.  n_threads is ignored.  Errors: those of
 * fsl_ocl_device_get, FSL_ERR_RUNTIME; *d is the default device then.
 */
fsl_status fsl_ocl_calibrate(fsl_device *d, int n_threads, bool force);

/** The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"). */
const char *fsl_ocl_strerror(cl_int e);

#endif
