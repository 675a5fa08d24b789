/*
 * opencl.h — internals of the OpenCL backend (src/backend/opencl/): the
 * device (device.c) and the backend itself (opencl.c, the vtable
 * fsl_backend_opencl in backend.h).  docs/gpu-backend.md.
 */
#ifndef FSL_OPENCL_H
#define FSL_OPENCL_H

#include "backend/backend.h"

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
