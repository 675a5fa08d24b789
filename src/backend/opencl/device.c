/*
 * device.c — the OpenCL device of the OpenCL backend (opencl.h): platform
 * and device discovery (FSL_OPENCL_DEVICE), one context and in-order
 * queue per process, and program builds cached by hash.
 */
#include "backend/opencl/opencl.h"

#include <ctype.h>
#include <pthread.h>

static fsl_ocl_device g_dev;
static fsl_status g_dev_st = FSL_OK;
static char g_dev_err[512];
static bool g_dev_done;
static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;

const char *fsl_ocl_strerror(cl_int e) {
  switch (e) {
  case CL_SUCCESS: return "CL_SUCCESS";
  case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
  case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
  case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
  case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
  case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
  case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
  case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
  case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
  case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
  case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
  case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
  case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
  case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
  case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
  case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
  case -1001: return "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform is installed)";
  default: return "OpenCL error";
  }
}

/* Case-insensitive substring test. */
static bool contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return true;
  }
  return n == 0;
}

static bool has_ext(const char *exts, const char *ext) {
  size_t n = strlen(ext);
  for (const char *p = exts; (p = strstr(p, ext)) != NULL; p += n)
    if ((p == exts || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return true;
  return false;
}

#define MAX_DEVS 32

/* Picks the device: FSL_OPENCL_DEVICE as an index over every device of
 * every platform (0, 1, ...), or as a case-insensitive substring of
 * "<platform> / <device>"; else the first GPU, else the first device. */
static fsl_status open_device(fsl_ocl_device *d) {
  cl_platform_id plats[8];
  cl_uint np = 0;
  cl_int rc = clGetPlatformIDs(8, plats, &np);
  if (rc != CL_SUCCESS || np == 0)
    return fsl_errorf(FSL_ERR_UNSUPPORTED,
                      "opencl backend: no OpenCL platform found (%s; install an OpenCL driver, e.g. Debian's "
                      "pocl-opencl-icd for the CPU, and check /etc/OpenCL/vendors)",
                      rc == CL_SUCCESS ? "no platforms" : fsl_ocl_strerror(rc));
  cl_platform_id dp[MAX_DEVS];
  cl_device_id dd[MAX_DEVS];
  char names[MAX_DEVS][256];
  int nd = 0;
  for (cl_uint p = 0; p < np && nd < MAX_DEVS; p++) {
    char pname[128] = "";
    clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    cl_device_id ids[MAX_DEVS];
    cl_uint n = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVS, ids, &n) != CL_SUCCESS) continue;
    for (cl_uint i = 0; i < n && nd < MAX_DEVS; i++) {
      char dname[120] = "";
      clGetDeviceInfo(ids[i], CL_DEVICE_NAME, sizeof dname, dname, NULL);
      dp[nd] = plats[p];
      dd[nd] = ids[i];
      snprintf(names[nd], sizeof names[nd], "%s / %s", pname, dname);
      nd++;
    }
  }
  if (nd == 0) return fsl_errorf(FSL_ERR_UNSUPPORTED, "opencl backend: %u OpenCL platform%s but no device", np, np == 1 ? "" : "s");
  int pick = -1;
  const char *want = getenv("FSL_OPENCL_DEVICE");
  if (want && *want) {
    char *end = NULL;
    long ix = strtol(want, &end, 10);
    if (end && *end == 0) pick = ix >= 0 && ix < nd ? (int)ix : -2;
    else
      for (int i = 0; i < nd && pick < 0; i++)
        if (contains_ci(names[i], want)) pick = i;
    if (pick < 0) {
      char list[1024] = "";
      size_t o = 0;
      for (int i = 0; i < nd && o < sizeof list; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%d: %s", i ? "; " : "", i, names[i]);
      return fsl_errorf(FSL_ERR_ARG, "opencl backend: FSL_OPENCL_DEVICE='%s' matches no device (devices: %s)", want, list);
    }
  } else {
    for (int i = 0; i < nd && pick < 0; i++) {
      cl_device_type t = 0;
      clGetDeviceInfo(dd[i], CL_DEVICE_TYPE, sizeof t, &t, NULL);
      if (t & CL_DEVICE_TYPE_GPU) pick = i;
    }
    if (pick < 0) pick = 0;
  }
  d->platform = dp[pick];
  d->device = dd[pick];
  memcpy(d->name, names[pick], sizeof d->name); /* both 256 bytes, NUL-terminated */
  clGetDeviceInfo(d->device, CL_DRIVER_VERSION, sizeof d->driver, d->driver, NULL);
  clGetDeviceInfo(d->device, CL_DEVICE_VERSION, sizeof d->version, d->version, NULL);
  char exts[8192] = "";
  clGetDeviceInfo(d->device, CL_DEVICE_EXTENSIONS, sizeof exts, exts, NULL);
  if (!has_ext(exts, "cl_khr_fp64"))
    return fsl_errorf(FSL_ERR_UNSUPPORTED,
                      "opencl backend: device '%s' lacks cl_khr_fp64, which fissile's generated OpenCL C needs "
                      "(sums accumulate in double); choose another with FSL_OPENCL_DEVICE", d->name);
  d->has_int64_atomics = has_ext(exts, "cl_khr_int64_base_atomics");
  clGetDeviceInfo(d->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof d->local_mem, &d->local_mem, NULL);
  clGetDeviceInfo(d->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof d->max_wg, &d->max_wg, NULL);
  clGetDeviceInfo(d->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof d->compute_units, &d->compute_units, NULL);
  clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(d->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
  d->correct_div_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  cl_int err = CL_SUCCESS;
  d->ctx = clCreateContext(NULL, 1, &d->device, NULL, NULL, &err);
  if (!d->ctx) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: cannot create a context on '%s': %s", d->name, fsl_ocl_strerror(err));
  d->queue = clCreateCommandQueue(d->ctx, d->device, 0, &err); /* in order */
  if (!d->queue) {
    clReleaseContext(d->ctx);
    d->ctx = NULL;
    return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: cannot create a queue on '%s': %s", d->name, fsl_ocl_strerror(err));
  }
  return FSL_OK;
}

fsl_status fsl_ocl_device_get(const fsl_ocl_device **out) {
  *out = NULL;
  pthread_mutex_lock(&g_dev_mu);
  if (!g_dev_done) {
    g_dev_st = open_device(&g_dev);
    if (g_dev_st != FSL_OK) snprintf(g_dev_err, sizeof g_dev_err, "%s", fsl_last_error());
    g_dev_done = true;
  }
  fsl_status st = g_dev_st;
  pthread_mutex_unlock(&g_dev_mu);
  if (st != FSL_OK) return fsl_errorf(st, "%s", g_dev_err);
  *out = &g_dev;
  return FSL_OK;
}

/* The build log of prog on the device, trimmed to cap bytes. */
static void build_log(const fsl_ocl_device *d, cl_program prog, char *log, size_t cap) {
  size_t n = 0;
  log[0] = 0;
  if (clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS || n == 0) return;
  char *full = malloc(n + 1);
  if (!full) return;
  if (clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, n, full, NULL) == CL_SUCCESS) {
    full[n] = 0;
    snprintf(log, cap, "%s", full);
  }
  free(full);
}

/* Writes the program's binary to path atomically, so that the cache never
 * holds a partial file; a cache that cannot be written is only slower. */
static void cache_binary(cl_program prog, const char *path) {
  size_t n = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0) return;
  unsigned char *bin = malloc(n);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS &&
      fsl_write_bytes_atomic(path, bin, n) != FSL_OK)
    fsl_error_clear();
  free(bin);
}

fsl_status fsl_ocl_build(const fsl_ocl_device *d, const char *src, size_t len, cl_program *out, bool *cache_hit) {
  *out = NULL;
  *cache_hit = false;
  const char *opts = d->correct_div_sqrt ? "-cl-fp32-correctly-rounded-divide-sqrt" : "";
  uint64_t h = fsl_hash(FSL_HASH_INIT, src, len);
  h = fsl_hash(h, d->name, strlen(d->name));
  h = fsl_hash(h, d->driver, strlen(d->driver));
  h = fsl_hash(h, d->version, strlen(d->version));
  h = fsl_hash(h, opts, strlen(opts));
  char dir[FSL_OCL_PATH_MAX], path[FSL_OCL_PATH_MAX + 32] = "";
  bool cache = fsl_cache_folder("opencl", dir, sizeof dir) == FSL_OK;
  if (!cache) fsl_error_clear(); /* no cache: build every time */
  else snprintf(path, sizeof path, "%s/%016llx.bin", dir, (unsigned long long)h);
  cl_int err = CL_SUCCESS;
  void *bin = NULL;
  size_t blen = 0;
  if (cache && fsl_read_file(path, (size_t)1 << 30, &bin, &blen) == FSL_OK && blen > 0) {
    const unsigned char *b = bin;
    cl_int bst = CL_SUCCESS;
    cl_program prog = clCreateProgramWithBinary(d->ctx, 1, &d->device, &blen, &b, &bst, &err);
    free(bin);
    if (prog && err == CL_SUCCESS && bst == CL_SUCCESS && clBuildProgram(prog, 1, &d->device, opts, NULL, NULL) == CL_SUCCESS) {
      *out = prog;
      *cache_hit = true;
      return FSL_OK;
    }
    if (prog) clReleaseProgram(prog); /* a stale or foreign binary: build from source */
  }
  fsl_error_clear();
  cl_program prog = clCreateProgramWithSource(d->ctx, 1, &src, &len, &err);
  if (!prog) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: cannot create the program: %s", fsl_ocl_strerror(err));
  err = clBuildProgram(prog, 1, &d->device, opts, NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[4096];
    build_log(d, prog, log, sizeof log);
    clReleaseProgram(prog);
    return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: '%s' rejected the generated program (%s); build log:\n%s", d->name,
                      fsl_ocl_strerror(err), log[0] ? log : "(empty)");
  }
  if (cache) cache_binary(prog, path);
  *out = prog;
  return FSL_OK;
}
