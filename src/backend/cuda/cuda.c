/*
 * cuda.c — the CUDA backend (backend.h; docs/gpu-backend.md, "The CUDA
 * backend"): plans run on an NVIDIA GPU through the driver table of
 * driver.h, by the GPU executor (gpuexec.h: lowering in the CUDA C
 * dialect, device memory, runs).  What is CUDA's own, here:
 *   - the device's limits and name (the driver table's open);
 *   - float32 matmuls through cuBLASLt (LIB steps: the driver table's
 *     library matmul; FSL_CUDA_CUBLASLT=0: generated);
 *   - the program: the source compiled with NVRTC to a CUBIN for the
 *     device's architecture (sm_<major><minor>), cached by hash in
 *     fsl_cache_folder("cuda"), and loaded;
 *   - every function's input and output pointer tables in one allocation
 *     uploaded once;
 *   - CUDA graphs: each maximal run of device steps between host steps
 *     becomes one graph whose edges are the steps' data dependencies
 *     (true, anti and output dependencies over device byte ranges, the
 *     arena reusing memory; gpusteps.h), so that independent kernels may
 *     run concurrently.  FSL_CUDA_GRAPHS=0 launches the same steps one by
 *     one on the stream instead (the comparison);
 *   - plans are costed with the GPU's numbers (calibrate.c).
 */
#include "backend/cuda/cuda.h"

#include "backend/cuda/dialect_cuda.h"
#include "backend/cuda/emit.h"

#include <nvrtc.h>

#define MAX_GROUPS 65536 /* blocks launched for a function with a block per row or tile (grid-stride beyond) */
#define LOOP_BLOCK 256   /* threads per block of a grid-stride function */

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (cuda backend)"); }

/* The launch record of step i. */
static fsl_cuda_launch *launch_of(fsl_cuda_exe *x, int i) { return (fsl_cuda_launch *)x->gpu.launch + i; }

/* The backend's capabilities (backend.h), read once per model:
 * FSL_CUDA_CUBLASLT (docs/gpu-backend.md) leaves matmuls to the driver's
 * library matmul, if it has one.  The generated tiled matmul reads prologue
 * views in place; cuBLASLt reads plain operands, so only without it do
 * LINEAR kernels take views. */
static void cu_caps(fsl_backend_caps *out) {
  const char *e = getenv("FSL_CUDA_CUBLASLT");
  out->library = !(e && !strcmp(e, "0")) && fsl_cuda_driver()->matmul_prepare;
  out->linear_views = !out->library;
}

/* Whether linear node lin runs through cuBLASLt (a LIB step): float32
 * matmuls, when the library is on (L->ctx: the caps); else the generated
 * tiled matmul. */
static bool use_library(const fsl_lowering *L, const fsl_node *lin) {
  const fsl_backend_caps *caps = L->ctx;
  return caps && caps->library && lin->op == FSL_OP_matmul && lin->n_in == 2 && lin->in[0]->dtype == FSL_DT_F32 &&
         lin->in[1]->dtype == FSL_DT_F32 && lin->out[0]->dtype == FSL_DT_F32 && lin->in[0]->rank >= 2;
}

/* The lowering's library hook: a LIB step over the matmul's plain operands. */
static fsl_status cu_library(fsl_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp, fsl_value **z,
                             int *n_abs) {
  (void)k;
  fsl_node *lin = sp->lin;
  if (!use_library(L, lin)) return FSL_ERR_UNSUPPORTED;
  if (!fsl_lowering_add(L, FSL_STEP_LIB, ki, "matmul", sp->lin_in, 2, lin->out, 1, &lin, 1)) return oom();
  L->n_lib++;
  *z = lin->out[0];
  *n_abs = 0;
  return FSL_OK;
}

static const fsl_lowering_hooks k_hooks = {
    .library = cu_library, .library_takes = use_library, .views = true, .split_by_node = true,
};

/* The device address of value v (fsl_gpu_locate: a buffer and an offset). */
static fsl_status address(fsl_cuda_exe *x, const fsl_value *v, fsl_cu_ptr *at) {
  int64_t off;
  fsl_status st = fsl_gpu_locate(&x->gpu, v, at, &off);
  *at += (fsl_cu_ptr)off;
  return st;
}

static fsl_status cu_open(fsl_gpu_device *dev, fsl_gpu_exe *gx) {
  const fsl_cu_driver *drv = fsl_cuda_driver();
  fsl_cu_device_info info;
  memset(&info, 0, sizeof info);
  FSL_TRY(drv->open(&info));
  dev->mem = &drv->mem;
  snprintf(dev->name, sizeof dev->name, "%s", info.name);
  snprintf(dev->id, sizeof dev->id, "%s, sm_%d%d, driver %d", info.name, info.sm_major, info.sm_minor,
           info.driver_version);
  dev->max_group = info.max_block_threads;
  /* static shared memory: the dialect's 48 KiB, less where the device has less */
  dev->local_bytes = fsl_dialect_cuda.group->local_bytes;
  if (info.shared_per_block > 0 && info.shared_per_block < dev->local_bytes) dev->local_bytes = info.shared_per_block;
  fsl_cuda_exe *x = (fsl_cuda_exe *)gx;
  if (x) {
    x->drv = drv;
    x->info = info;
    const char *gr = getenv("FSL_CUDA_GRAPHS"); /* docs/gpu-backend.md: 0 launches step by step */
    x->graphs = !(gr && !strcmp(gr, "0"));
  }
  return FSL_OK;
}

/* The CUBIN of src for x's device: from the cache, else NVRTC (cached). */
static fsl_status build_cubin(fsl_cuda_exe *x, const char *arch, void **cubin, size_t *bytes) {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  const char *src = x->gpu.low.src.p ? x->gpu.low.src.p : "";
  uint64_t h = fsl_hash(FSL_HASH_INIT, src, strlen(src));
  h = fsl_hash(h, arch, strlen(arch));
  h = fsl_hash(h, &major, sizeof major);
  h = fsl_hash(h, &minor, sizeof minor);
  char dir[1024], path[1100] = "";
  bool cache = fsl_cache_folder("cuda", dir, sizeof dir) == FSL_OK;
  if (!cache) fsl_error_clear(); /* no cache: compile every time */
  else snprintf(path, sizeof path, "%s/%016llx.cubin", dir, (unsigned long long)h);
  if (cache && fsl_read_file(path, (size_t)1 << 30, cubin, bytes) == FSL_OK && *bytes > 4 &&
      !memcmp(*cubin, "\177ELF", 4))
    return FSL_OK;
  fsl_error_clear();
  free(*cubin);
  *cubin = NULL;
  fsl_cuda_build b;
  fsl_status st = fsl_cuda_compile(src, arch, &b);
  if (st == FSL_OK) {
    *cubin = b.cubin;
    *bytes = b.cubin_bytes;
    b.cubin = NULL;
    if (cache && fsl_write_bytes_atomic(path, *cubin, *bytes) != FSL_OK) fsl_error_clear();
  }
  fsl_cuda_build_free(&b);
  return st;
}

/* The module of the generated source, compiled for the device's architecture. */
static fsl_status cu_build(fsl_gpu_exe *gx) {
  fsl_cuda_exe *x = (fsl_cuda_exe *)gx;
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", x->info.sm_major, x->info.sm_minor);
  void *cubin = NULL;
  size_t cubin_bytes = 0;
  fsl_status st = build_cubin(x, arch, &cubin, &cubin_bytes);
  if (st == FSL_OK) st = x->drv->module_load(gx->low.src.p, cubin, cubin_bytes, &x->module);
  free(cubin);
  return st;
}

/* The cuBLASLt plan of LIB step s (a matmul over its operands' bytes). */
static fsl_status prepare_library(fsl_cuda_exe *x, const fsl_step *s, void **plan) {
  const fsl_node *lin = s->nodes[0];
  const fsl_value *a = lin->in[0], *b = lin->in[1];
  fsl_cu_matmul mm = {.batch = 1, .m = a->dims[a->rank - 2], .k = a->dims[a->rank - 1], .n = b->dims[b->rank - 1]};
  for (int i = 0; i < a->rank - 2; i++) mm.batch *= a->dims[i];
  FSL_TRY(address(x, s->in[0], &mm.a));
  FSL_TRY(address(x, s->in[1], &mm.b));
  FSL_TRY(address(x, s->out[0], &mm.c));
  fsl_status st = x->drv->matmul_prepare(&mm, plan);
  if (st != FSL_OK) {
    char label[160];
    fsl_gpu_kernel_label(x->gpu.p, s->kernel, label, sizeof label);
    fsl_error_context(st, "cuda backend, %s", label);
  }
  return st;
}

/* Grid and block of GEN step s; checks them against the device. */
static fsl_status launch_shape(fsl_cuda_exe *x, const fsl_step *s, unsigned *grid, unsigned *block) {
  if (s->launch.group_size > 0) {
    if (s->launch.group_size > x->info.max_block_threads) {
      char label[160];
      fsl_gpu_kernel_label(x->gpu.p, s->kernel, label, sizeof label);
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "cuda backend, %s: needs blocks of %d threads, '%s' allows %d", label,
                        s->launch.group_size, x->info.name, x->info.max_block_threads);
    }
    int64_t ng = s->launch.groups < 1 ? 1 : s->launch.groups < MAX_GROUPS ? s->launch.groups : MAX_GROUPS;
    *block = (unsigned)s->launch.group_size;
    *grid = (unsigned)ng;
    return FSL_OK;
  }
  int64_t items = fsl_gpu_step_items(s);
  *block = items == 1 ? 1 : LOOP_BLOCK;
  *grid = (unsigned)((items + *block - 1) / *block);
  return FSL_OK;
}

/* Step i's function and launch shape (GEN), or its cuBLASLt plan (LIB). */
static fsl_status cu_prepare(fsl_gpu_exe *gx, int i) {
  fsl_cuda_exe *x = (fsl_cuda_exe *)gx;
  const fsl_step *s = &gx->low.steps[i];
  fsl_cuda_launch *L = launch_of(x, i);
  if (s->kind == FSL_STEP_LIB) return prepare_library(x, s, &L->lib);
  char name[32];
  snprintf(name, sizeof name, "fsl_k%d", s->fn_id);
  FSL_TRY(x->drv->function(x->module, name, &L->fn));
  return launch_shape(x, s, &L->grid, &L->block);
}

/* The byte range of v on the device, for the dependency analysis. */
static fsl_gpu_range where(void *ctx, const fsl_value *v) {
  fsl_cuda_exe *x = ctx;
  fsl_cu_ptr at = 0;
  if (address(x, v, &at) != FSL_OK) fsl_error_clear(); /* located at compile already: cannot fail here */
  return (fsl_gpu_range){.buffer = 0, .off = (int64_t)at, .bytes = fsl_value_nbytes(v)};
}

/* Pointer tables of every GEN step (inputs then outputs, 8 bytes each) in
 * one allocation, uploaded once; each step's error word. */
static fsl_status make_tables(fsl_cuda_exe *x) {
  const fsl_lowering *l = &x->gpu.low;
  const fsl_gpu_mem *mem = &x->drv->mem;
  int64_t n = 0;
  for (int i = 0; i < l->n_steps; i++)
    if (l->steps[i].kind == FSL_STEP_GEN) n += l->steps[i].n_in + l->steps[i].n_out;
  uint64_t *host = calloc((size_t)(n > 0 ? n : 1), sizeof *host);
  if (!host) return oom();
  fsl_status st = mem->alloc((n > 0 ? n : 1) * 8, &x->tables);
  int64_t at = 0;
  for (int i = 0; i < l->n_steps && st == FSL_OK; i++) {
    const fsl_step *s = &l->steps[i];
    fsl_cuda_launch *L = launch_of(x, i);
    if (s->kind != FSL_STEP_GEN) continue;
    L->in = x->tables + (fsl_cu_ptr)at * 8;
    for (int k = 0; k < s->n_in + s->n_out && st == FSL_OK; k++) {
      if (k == s->n_in) L->out = x->tables + (fsl_cu_ptr)at * 8;
      st = address(x, k < s->n_in ? s->in[k] : s->out[k - s->n_in], &host[at++]);
    }
    if (s->n_out == 0) L->out = x->tables + (fsl_cu_ptr)at * 8;
    L->err = x->gpu.errs + (fsl_cu_ptr)i * 4;
  }
  if (st == FSL_OK && n > 0) st = mem->upload(x->tables, 0, host, n * 8);
  if (st == FSL_OK) st = mem->sync();
  free(host);
  return st;
}

/* One CUDA graph per maximal run of device (GEN and LIB) steps, with the
 * data dependencies between them as edges. */
static fsl_status make_graphs(fsl_cuda_exe *x) {
  const fsl_lowering *l = &x->gpu.low;
  for (int lo = 0; lo < l->n_steps;) {
    if (l->steps[lo].kind == FSL_STEP_HOST) {
      lo++;
      continue;
    }
    int hi = fsl_gpu_device_run_end(l, lo);
    if (!fsl_grow((void **)&x->seg, &x->cap_seg, x->n_seg + 1, sizeof *x->seg)) return oom();
    fsl_cuda_segment *sg = &x->seg[x->n_seg++];
    memset(sg, 0, sizeof *sg);
    sg->lo = lo;
    sg->hi = hi;
    int **deps = NULL, *nd = NULL;
    fsl_status st = fsl_gpu_step_deps(l, lo, hi, where, x, &deps, &nd);
    if (st == FSL_OK) st = x->drv->graph_create(&sg->graph);
    for (int i = lo; i < hi && st == FSL_OK; i++) {
      void *dn[64], **dp = dn;
      int n = nd[i - lo];
      if (n > 64 && !(dp = malloc(sizeof(void *) * (size_t)n))) st = oom();
      for (int k = 0; k < n && st == FSL_OK; k++) dp[k] = launch_of(x, deps[i - lo][k])->node;
      fsl_cuda_launch *L = launch_of(x, i);
      if (st == FSL_OK && l->steps[i].kind == FSL_STEP_LIB)
        st = x->drv->graph_add_matmul(sg->graph, L->lib, dp, n, &L->node);
      else if (st == FSL_OK)
        st = x->drv->graph_add_kernel(sg->graph, L->fn, L->grid, L->block, L->in, L->out, L->err, dp, n, &L->node);
      if (dp != dn) free(dp);
    }
    if (st == FSL_OK) st = x->drv->graph_instantiate(sg->graph, &sg->exec);
    fsl_gpu_deps_free(deps, nd, hi - lo);
    if (st != FSL_OK) return fsl_error_context(st, "cuda backend: the graph of steps %d to %d", lo, hi - 1);
    lo = hi;
  }
  return FSL_OK;
}

static fsl_status cu_finish(fsl_gpu_exe *gx) {
  fsl_cuda_exe *x = (fsl_cuda_exe *)gx;
  FSL_TRY(make_tables(x));
  return x->graphs ? make_graphs(x) : FSL_OK;
}

/* Steps [lo, hi) (GEN and LIB) on the stream: their graph's launch, or one launch each. */
static fsl_status cu_launch(fsl_gpu_exe *gx, int lo, int hi) {
  fsl_cuda_exe *x = (fsl_cuda_exe *)gx;
  if (x->graphs) {
    for (int i = 0; i < x->n_seg; i++)
      if (x->seg[i].lo == lo) return x->drv->graph_launch(x->seg[i].exec);
    return fsl_errorf(FSL_ERR_INVALID, "cuda backend: no graph of steps %d to %d", lo, hi - 1);
  }
  for (int i = lo; i < hi; i++) {
    const fsl_cuda_launch *L = launch_of(x, i);
    fsl_status st = gx->low.steps[i].kind == FSL_STEP_LIB ? x->drv->matmul_run(L->lib)
                                                         : x->drv->launch(L->fn, L->grid, L->block, L->in, L->out, L->err);
    if (st != FSL_OK) return fsl_error_context(st, "cuda backend, kernel %d", gx->low.steps[i].kernel);
  }
  return FSL_OK;
}

static void cu_release(fsl_gpu_exe *gx) {
  fsl_cuda_exe *x = (fsl_cuda_exe *)gx;
  const fsl_cu_driver *drv = x->drv;
  for (int i = 0; i < x->n_seg; i++) drv->graph_destroy(x->seg[i].graph, x->seg[i].exec);
  free(x->seg);
  for (int i = 0; gx->launch && i < gx->low.n_steps; i++)
    if (launch_of(x, i)->lib) drv->matmul_free(launch_of(x, i)->lib);
  if (x->tables) drv->mem.free(x->tables);
  if (x->module) drv->module_unload(x->module);
}

static const fsl_gpu_ops k_cuda = {
    .name = "cuda", .dialect = &fsl_dialect_cuda, .hooks = &k_hooks, .caps = cu_caps,
    .source_env = "FSL_CUDA_SOURCE", /* docs/gpu-backend.md: the generated source, for inspection */
    .exe_bytes = sizeof(fsl_cuda_exe), .launch_bytes = sizeof(fsl_cuda_launch),
    .open = cu_open, .build = cu_build, .prepare = cu_prepare, .finish = cu_finish,
    .launch = cu_launch, .release = cu_release,
};

FSL_GPU_BACKEND(fsl_backend_cuda, k_cuda, .name = "cuda",
                .summary = "generated CUDA C on an NVIDIA GPU (NVRTC, CUDA graphs; FSL_CUDA_DEVICE)",
                .calibrate = fsl_cuda_calibrate, .caps = cu_caps);
