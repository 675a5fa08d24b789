/*
 * driver.c — the CUDA backend's driver table over libcuda.so.1 (driver.h):
 * dlopen, cuGetProcAddress at the headers' CUDA version, the primary
 * context of one device and one stream for the process.
 */
#include "backend/cuda/driver.h"

#include <cublasLt.h>
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
  X(cuGetErrorName) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphAddChildGraphNode)

/* cuBLASLt's entry points (libcublasLt.so.13, loaded when a matmul is
 * first prepared) */
#define FSL_LT_CALLS(X)                                                                                               \
  X(cublasLtCreate) X(cublasLtGetStatusString) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)              \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)                  \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)      \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

#define FSL_CU_FIELD(f) __typeof__(&f) f;
static struct {
  FSL_CU_CALLS(FSL_CU_FIELD)
} cu;
static struct {
  FSL_LT_CALLS(FSL_CU_FIELD)
} lt;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static fsl_status g_open_st = FSL_OK;
static char g_open_err[512];
static fsl_cu_device_info g_info;
static CUcontext g_ctx;
static CUstream g_stream;
static CUstream g_capture;  /* library calls are captured on it into child graphs */

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
      (r = cu.cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
      (r = cu.cuStreamCreate(&g_capture, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
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

static fsl_status drv_upload(fsl_cu_ptr dst, int64_t off, const void *src, int64_t bytes) {
  CU_TRY("cuMemcpyHtoDAsync", cu.cuMemcpyHtoDAsync((CUdeviceptr)(dst + (uint64_t)off), src, (size_t)bytes, g_stream));
  return FSL_OK;
}

static fsl_status drv_download(void *dst, fsl_cu_ptr src, int64_t off, int64_t bytes) {
  CU_TRY("cuMemcpyDtoHAsync", cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(src + (uint64_t)off), (size_t)bytes, g_stream));
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

/* ---- cuBLASLt ---- */

#define LT_WORKSPACE_MAX ((uint64_t)32 << 20) /* bytes a matmul's algorithm may ask for */

static pthread_once_t g_lt_once = PTHREAD_ONCE_INIT;
static cublasLtHandle_t g_lt;
static char g_lt_err[512];

static void lt_open_once(void) {
  void *h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_lt_err, sizeof g_lt_err, "libcublasLt.so.13 cannot be loaded: %s", dlerror());
    return;
  }
#define FSL_LT_LOAD(f)                                                                                                \
  if (!(*(void **)&lt.f = dlsym(h, #f))) {                                                                            \
    snprintf(g_lt_err, sizeof g_lt_err, "libcublasLt has no %s", #f);                                                  \
    return;                                                                                                           \
  }
  FSL_LT_CALLS(FSL_LT_LOAD)
#undef FSL_LT_LOAD
  cublasStatus_t s = lt.cublasLtCreate(&g_lt);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(g_lt_err, sizeof g_lt_err, "cublasLtCreate: %s", lt.cublasLtGetStatusString(s));
    g_lt = NULL;
  }
}

static fsl_status lt_fail(const char *call, cublasStatus_t s) {
  return fsl_errorf(s == CUBLAS_STATUS_ALLOC_FAILED ? FSL_ERR_NOMEM : FSL_ERR_RUNTIME, "%s: %s (%d)", call,
                    lt.cublasLtGetStatusString ? lt.cublasLtGetStatusString(s) : "?", (int)s);
}
#define LT_TRY(call, expr)                                                                                            \
  do {                                                                                                                \
    cublasStatus_t s_ = (expr);                                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                                \
      st = lt_fail(call, s_);                                                                                         \
      goto out;                                                                                                       \
    }                                                                                                                 \
  } while (0)

typedef struct lt_plan {
  fsl_cu_matmul mm;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;  /* cuBLASLt's A, B, C: column-major views of B, A, C (below) */
  cublasLtMatmulAlgo_t algo;
  CUdeviceptr ws;
  size_t ws_bytes;
} lt_plan;

static void drv_matmul_free(void *plan) {
  lt_plan *q = plan;
  if (!q) return;
  if (q->op) lt.cublasLtMatmulDescDestroy(q->op);
  if (q->la) lt.cublasLtMatrixLayoutDestroy(q->la);
  if (q->lb) lt.cublasLtMatrixLayoutDestroy(q->lb);
  if (q->lc) lt.cublasLtMatrixLayoutDestroy(q->lc);
  if (q->ws) cu.cuMemFree(q->ws);
  free(q);
}

/* A column-major rows x cols float32 layout with leading dimension rows,
 * `batch` of them `stride` elements apart. */
static cublasStatus_t lt_layout(cublasLtMatrixLayout_t *l, int64_t rows, int64_t cols, int64_t batch) {
  cublasStatus_t s = lt.cublasLtMatrixLayoutCreate(l, CUDA_R_32F, (uint64_t)rows, (uint64_t)cols, rows);
  int32_t n = (int32_t)batch;
  int64_t stride = rows * cols;
  if (s == CUBLAS_STATUS_SUCCESS && batch > 1)
    s = lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n);
  if (s == CUBLAS_STATUS_SUCCESS && batch > 1)
    s = lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
  return s;
}

/*
 * Row-major C = A B is, read column-major, C^T = B^T A^T: cuBLASLt's A is
 * our B as an n x k column-major matrix (leading dimension n), its B our
 * A as k x m (leading dimension k), its C our C as n x m (leading
 * dimension n); no transposes.  CUBLAS_COMPUTE_32F: float32 products and
 * sums (TF32 only with FSL_CUDA_TF32=1).
 */
static fsl_status drv_matmul_prepare(const fsl_cu_matmul *mm, void **plan) {
  *plan = NULL;
  pthread_once(&g_lt_once, lt_open_once);
  if (!g_lt) return fsl_errorf(FSL_ERR_UNSUPPORTED, "cuBLASLt: %s", g_lt_err);
  if (mm->batch < 1 || mm->batch > INT32_MAX || mm->m < 1 || mm->n < 1 || mm->k < 1)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "cuBLASLt: matmul of %lld x [%lld, %lld] x [%lld, %lld] out of range",
                      (long long)mm->batch, (long long)mm->m, (long long)mm->k, (long long)mm->k, (long long)mm->n);
  lt_plan *q = calloc(1, sizeof *q);
  if (!q) return fsl_errorf(FSL_ERR_NOMEM, "out of memory (cuBLASLt plan)");
  q->mm = *mm;
  fsl_status st = FSL_OK;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  uint64_t ws_max = LT_WORKSPACE_MAX;
  /* float32 products and sums unless FSL_CUDA_TF32=1 opts in to TF32 tensor cores (10-bit mantissas) */
  const char *tf32 = getenv("FSL_CUDA_TF32");
  cublasComputeType_t compute = tf32 && !strcmp(tf32, "1") ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  LT_TRY("cublasLtMatmulDescCreate", lt.cublasLtMatmulDescCreate(&q->op, compute, CUDA_R_32F));
  LT_TRY("cublasLtMatrixLayoutCreate", lt_layout(&q->la, mm->n, mm->k, mm->batch));
  LT_TRY("cublasLtMatrixLayoutCreate", lt_layout(&q->lb, mm->k, mm->m, mm->batch));
  LT_TRY("cublasLtMatrixLayoutCreate", lt_layout(&q->lc, mm->n, mm->m, mm->batch));
  LT_TRY("cublasLtMatmulPreferenceCreate", lt.cublasLtMatmulPreferenceCreate(&pref));
  LT_TRY("cublasLtMatmulPreferenceSetAttribute",
         lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof ws_max));
  LT_TRY("cublasLtMatmulAlgoGetHeuristic",
         lt.cublasLtMatmulAlgoGetHeuristic(g_lt, q->op, q->la, q->lb, q->lc, q->lc, pref, 1, &res, &found));
  if (found < 1) {
    st = fsl_errorf(FSL_ERR_UNSUPPORTED, "cuBLASLt has no algorithm for this matmul");
    goto out;
  }
  q->algo = res.algo;
  q->ws_bytes = res.workspaceSize;
  /* a workspace of its own: matmuls of one graph may run concurrently */
  if (q->ws_bytes > 0) {
    CUresult r = cu.cuMemAlloc(&q->ws, q->ws_bytes);
    if (r != CUDA_SUCCESS) st = fail("cuMemAlloc (cuBLASLt workspace)", r);
  }
out:
  if (pref) lt.cublasLtMatmulPreferenceDestroy(pref);
  if (st != FSL_OK) {
    drv_matmul_free(q);
    return st;
  }
  *plan = q;
  return FSL_OK;
}

static fsl_status lt_enqueue(const lt_plan *q, CUstream stream) {
  const float one = 1.0f, zero = 0.0f;
  fsl_status st = FSL_OK;
  LT_TRY("cublasLtMatmul", lt.cublasLtMatmul(g_lt, q->op, &one, (const void *)(uintptr_t)q->mm.b, q->la,
                                             (const void *)(uintptr_t)q->mm.a, q->lb, &zero,
                                             (void *)(uintptr_t)q->mm.c, q->lc, (void *)(uintptr_t)q->mm.c, q->lc,
                                             &q->algo, (void *)(uintptr_t)q->ws, q->ws_bytes, (cudaStream_t)stream));
out:
  return st;
}

static fsl_status drv_matmul_run(void *plan) { return lt_enqueue(plan, g_stream); }

/* The matmul captured on the capture stream into a child graph, added
 * after deps. */
static fsl_status drv_graph_add_matmul(void *graph, void *plan, void *const *deps, int n_deps, void **node) {
  CU_TRY("cuStreamBeginCapture", cu.cuStreamBeginCapture(g_capture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  fsl_status st = lt_enqueue(plan, g_capture);
  CUgraph child = NULL;
  CUresult r = cu.cuStreamEndCapture(g_capture, &child);
  if (st != FSL_OK) {
    if (child) cu.cuGraphDestroy(child);
    return st;
  }
  if (r != CUDA_SUCCESS) return fail("cuStreamEndCapture", r);
  CUgraphNode nd;
  r = cu.cuGraphAddChildGraphNode(&nd, (CUgraph)graph, (const CUgraphNode *)deps, (size_t)n_deps, child);
  cu.cuGraphDestroy(child); /* the node holds a copy */
  if (r != CUDA_SUCCESS) return fail("cuGraphAddChildGraphNode", r);
  *node = nd;
  return FSL_OK;
}

const fsl_cu_driver fsl_cu_libcuda = {
    .name = "libcuda",
    .open = drv_open,
    .module_load = drv_module_load,
    .module_unload = drv_module_unload,
    .function = drv_function,
    .mem = {.alloc = drv_mem_alloc, .free = drv_mem_free, .host_alloc = drv_host_alloc, .host_free = drv_host_free,
            .upload = drv_upload, .download = drv_download, .zero32 = drv_zero32, .sync = drv_sync},
    .launch = drv_launch,
    .graph_create = drv_graph_create,
    .graph_add_kernel = drv_graph_add_kernel,
    .graph_instantiate = drv_graph_instantiate,
    .graph_launch = drv_graph_launch,
    .graph_destroy = drv_graph_destroy,
    .matmul_prepare = drv_matmul_prepare,
    .matmul_run = drv_matmul_run,
    .graph_add_matmul = drv_graph_add_matmul,
    .matmul_free = drv_matmul_free,
};

static const fsl_cu_driver *_Atomic g_driver;

void fsl_cuda_use_driver(const fsl_cu_driver *d) { g_driver = d; }

const fsl_cu_driver *fsl_cuda_driver(void) {
  const fsl_cu_driver *d = g_driver;
  return d ? d : &fsl_cu_libcuda;
}
