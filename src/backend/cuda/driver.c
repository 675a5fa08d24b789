/*
 * driver.c — the CUDA backend's driver table over libcuda.so.1 (driver.h):
 * dlopen, cuGetProcAddress at the headers' CUDA version, the primary
 * context of one device and one stream for the process.
 */
#include "backend/cuda/driver.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

/* The entry points, typed as the headers declare them at CUDA_VERSION (a
 * name the headers map to a versioned one, cuMemAlloc -> cuMemAlloc_v2,
 * gets that one's type here and from cuGetProcAddress). */
#define FSL_CU_CALLS(X)                                                                                               \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)        \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamSynchronize) X(cuModuleLoadData)         \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost)             \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemsetD32Async) X(cuLaunchKernel) X(cuGraphCreate)                   \
  X(cuGraphAddKernelNode) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)   \
  X(cuGetErrorName)

#define FSL_CU_FIELD(f) __typeof__(&f) f;
static struct {
  FSL_CU_CALLS(FSL_CU_FIELD)
} cu;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static fsl_status g_open_st = FSL_OK;
static char g_open_err[512];
static fsl_cu_device_info g_info;
static CUcontext g_ctx;
static CUstream g_stream;

/* The driver's name for error r ("CUDA_ERROR_OUT_OF_MEMORY"). */
static const char *err_name(CUresult r) {
  const char *s = NULL;
  if (cu.cuGetErrorName && cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return "unknown CUDA error";
}

static fsl_status fail(const char *call, CUresult r) {
  return fsl_errorf(r == CUDA_ERROR_OUT_OF_MEMORY ? FSL_ERR_NOMEM : FSL_ERR_RUNTIME, "%s: %s (%d)", call,
                    err_name(r), (int)r);
}
#define CU_TRY(call, expr)                                                                                            \
  do {                                                                                                                \
    CUresult r_ = (expr);                                                                                             \
    if (r_ != CUDA_SUCCESS) return fail(call, r_);                                                                    \
  } while (0)

/* Loads libcuda and every entry point; a message in g_open_err when it cannot. */
static bool load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_open_err, sizeof g_open_err,
             "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded: %s); the CUDA backend needs an NVIDIA "
             "GPU and its driver",
             dlerror());
    return false;
  }
  CUresult (*get_version)(int *) = (CUresult(*)(int *))dlsym(h, "cuDriverGetVersion");
  CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(h, "cuGetProcAddress_v2");
  int version = 0;
  if (!get_version || get_version(&version) != CUDA_SUCCESS || !get_proc) {
    snprintf(g_open_err, sizeof g_open_err, "libcuda.so.1 lacks cuDriverGetVersion or cuGetProcAddress_v2 (a driver "
                                            "older than CUDA 12)");
    return false;
  }
  g_info.driver_version = version;
  if (version < CUDA_VERSION) {
    snprintf(g_open_err, sizeof g_open_err,
             "the NVIDIA driver supports CUDA %d.%d; this fissile was built with the CUDA %d.%d headers: update the "
             "driver",
             version / 1000, version % 1000 / 10, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    return false;
  }
#define FSL_CU_LOAD(f)                                                                                                \
  {                                                                                                                   \
    CUdriverProcAddressQueryResult q_ = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                                          \
    if (get_proc(#f, (void **)&cu.f, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q_) != CUDA_SUCCESS || !cu.f) {       \
      snprintf(g_open_err, sizeof g_open_err, "libcuda.so.1 has no %s for CUDA %d", #f, CUDA_VERSION);                \
      return false;                                                                                                   \
    }                                                                                                                 \
  }
  FSL_CU_CALLS(FSL_CU_LOAD)
#undef FSL_CU_LOAD
  return true;
}

static int attr(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  return cu.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
}

static void open_once(void) {
  g_open_st = FSL_ERR_UNSUPPORTED;
  if (!load()) return;
  CUresult r = cu.cuInit(0);
  int n = 0;
  if (r == CUDA_SUCCESS) r = cu.cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS || n == 0) {
    snprintf(g_open_err, sizeof g_open_err, "no CUDA device (cuInit/cuDeviceGetCount: %s, %d devices)",
             r == CUDA_SUCCESS ? "ok" : err_name(r), n);
    return;
  }
  const char *env = getenv("FSL_CUDA_DEVICE");
  int idx = env && *env ? atoi(env) : 0;
  if (idx < 0 || idx >= n) {
    g_open_st = FSL_ERR_ARG;
    snprintf(g_open_err, sizeof g_open_err, "FSL_CUDA_DEVICE=%s: this machine has %d CUDA device(s), 0 to %d", env, n,
             n - 1);
    return;
  }
  CUdevice dev;
  size_t total = 0;
  g_open_st = FSL_ERR_RUNTIME;
  if ((r = cu.cuDeviceGet(&dev, idx)) != CUDA_SUCCESS || (r = cu.cuDeviceTotalMem(&total, dev)) != CUDA_SUCCESS ||
      (r = cu.cuDeviceGetName(g_info.name, (int)sizeof g_info.name, dev)) != CUDA_SUCCESS ||
      (r = cu.cuDevicePrimaryCtxRetain(&g_ctx, dev)) != CUDA_SUCCESS || (r = cu.cuCtxSetCurrent(g_ctx)) != CUDA_SUCCESS ||
      (r = cu.cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
    snprintf(g_open_err, sizeof g_open_err, "opening CUDA device %d: %s", idx, err_name(r));
    return;
  }
  g_info.sm_major = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  g_info.sm_minor = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  g_info.sm_count = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  g_info.max_block_threads = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  g_info.shared_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  g_info.global_bytes = (int64_t)total;
  g_open_st = FSL_OK;
}

static fsl_status drv_open(fsl_cu_device_info *info) {
  pthread_once(&g_once, open_once);
  if (g_open_st != FSL_OK) return fsl_errorf(g_open_st, "%s", g_open_err);
  /* the primary context is current on the thread that opened it; make it
   * current on this one too */
  CU_TRY("cuCtxSetCurrent", cu.cuCtxSetCurrent(g_ctx));
  *info = g_info;
  return FSL_OK;
}

static fsl_status drv_module_load(const char *source, const void *cubin, size_t cubin_bytes, void **mod) {
  (void)source;
  (void)cubin_bytes;
  CUmodule m;
  CU_TRY("cuModuleLoadData", cu.cuModuleLoadData(&m, cubin));
  *mod = m;
  return FSL_OK;
}

static void drv_module_unload(void *mod) { cu.cuModuleUnload((CUmodule)mod); }

static fsl_status drv_function(void *mod, const char *name, void **fn) {
  CUfunction f;
  CU_TRY("cuModuleGetFunction", cu.cuModuleGetFunction(&f, (CUmodule)mod, name));
  *fn = f;
  return FSL_OK;
}

static fsl_status drv_mem_alloc(int64_t bytes, fsl_cu_ptr *p) {
  CUdeviceptr d;
  CU_TRY("cuMemAlloc", cu.cuMemAlloc(&d, (size_t)(bytes > 0 ? bytes : 1)));
  *p = (fsl_cu_ptr)d;
  return FSL_OK;
}

static void drv_mem_free(fsl_cu_ptr p) { cu.cuMemFree((CUdeviceptr)p); }

static fsl_status drv_host_alloc(int64_t bytes, void **p) {
  CU_TRY("cuMemAllocHost", cu.cuMemAllocHost(p, (size_t)(bytes > 0 ? bytes : 1)));
  return FSL_OK;
}

static void drv_host_free(void *p) { cu.cuMemFreeHost(p); }

static fsl_status drv_upload(fsl_cu_ptr dst, const void *src, int64_t bytes) {
  CU_TRY("cuMemcpyHtoDAsync", cu.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, (size_t)bytes, g_stream));
  return FSL_OK;
}

static fsl_status drv_download(void *dst, fsl_cu_ptr src, int64_t bytes) {
  CU_TRY("cuMemcpyDtoHAsync", cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, (size_t)bytes, g_stream));
  return FSL_OK;
}

static fsl_status drv_zero32(fsl_cu_ptr p, int64_t n) {
  CU_TRY("cuMemsetD32Async", cu.cuMemsetD32Async((CUdeviceptr)p, 0, (size_t)n, g_stream));
  return FSL_OK;
}

static fsl_status drv_launch(void *fn, unsigned grid, unsigned block, fsl_cu_ptr in, fsl_cu_ptr out, fsl_cu_ptr err) {
  CUdeviceptr a[3] = {(CUdeviceptr)in, (CUdeviceptr)out, (CUdeviceptr)err};
  void *args[3] = {&a[0], &a[1], &a[2]};
  CU_TRY("cuLaunchKernel", cu.cuLaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, 0, g_stream, args, NULL));
  return FSL_OK;
}

static fsl_status drv_sync(void) {
  CU_TRY("cuStreamSynchronize", cu.cuStreamSynchronize(g_stream));
  return FSL_OK;
}

static fsl_status drv_graph_create(void **graph) {
  CUgraph gr;
  CU_TRY("cuGraphCreate", cu.cuGraphCreate(&gr, 0));
  *graph = gr;
  return FSL_OK;
}

static fsl_status drv_graph_add_kernel(void *graph, void *fn, unsigned grid, unsigned block, fsl_cu_ptr in,
                                       fsl_cu_ptr out, fsl_cu_ptr err, void *const *deps, int n_deps, void **node) {
  CUdeviceptr a[3] = {(CUdeviceptr)in, (CUdeviceptr)out, (CUdeviceptr)err};
  void *args[3] = {&a[0], &a[1], &a[2]};
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = (CUfunction)fn;
  kp.gridDimX = grid;
  kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = block;
  kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = args; /* copied by the call */
  CUgraphNode nd;
  CU_TRY("cuGraphAddKernelNode",
         cu.cuGraphAddKernelNode(&nd, (CUgraph)graph, (const CUgraphNode *)deps, (size_t)n_deps, &kp));
  *node = nd;
  return FSL_OK;
}

static fsl_status drv_graph_instantiate(void *graph, void **exec) {
  CUgraphExec ex;
  CU_TRY("cuGraphInstantiateWithFlags", cu.cuGraphInstantiateWithFlags(&ex, (CUgraph)graph, 0));
  *exec = ex;
  return FSL_OK;
}

static fsl_status drv_graph_launch(void *exec) {
  CU_TRY("cuGraphLaunch", cu.cuGraphLaunch((CUgraphExec)exec, g_stream));
  return FSL_OK;
}

static void drv_graph_destroy(void *graph, void *exec) {
  if (exec) cu.cuGraphExecDestroy((CUgraphExec)exec);
  if (graph) cu.cuGraphDestroy((CUgraph)graph);
}

const fsl_cu_driver fsl_cu_libcuda = {
    .name = "libcuda",
    .open = drv_open,
    .module_load = drv_module_load,
    .module_unload = drv_module_unload,
    .function = drv_function,
    .mem_alloc = drv_mem_alloc,
    .mem_free = drv_mem_free,
    .host_alloc = drv_host_alloc,
    .host_free = drv_host_free,
    .upload = drv_upload,
    .download = drv_download,
    .zero32 = drv_zero32,
    .launch = drv_launch,
    .sync = drv_sync,
    .graph_create = drv_graph_create,
    .graph_add_kernel = drv_graph_add_kernel,
    .graph_instantiate = drv_graph_instantiate,
    .graph_launch = drv_graph_launch,
    .graph_destroy = drv_graph_destroy,
};

static const fsl_cu_driver *_Atomic g_driver;

void fsl_cuda_use_driver(const fsl_cu_driver *d) { g_driver = d; }

const fsl_cu_driver *fsl_cuda_driver(void) {
  const fsl_cu_driver *d = g_driver;
  return d ? d : &fsl_cu_libcuda;
}
