/*
 * calibrate.c — the GPU's numbers for the roofline cost model
 * (fsl_backend_cuda.calibrate), measured through the driver table
 * (driver.h) with small kernels and the library matmul, and cached per
 * device in the user's cache folder, so that plans for --backend cuda are
 * chosen for the GPU they run on (docs/gpu-backend.md, "Cost model").
 * Times are host wall clock around a launch and a synchronisation, the
 * best of a few runs after a warm-up.
 */
#include "backend/cuda/cuda.h"

#include "backend/cuda/emit.h"

#include <math.h>

#define CAL_VERSION "fissile-cuda-device-v1"

/* The calibration functions, in fissile's CUDA ABI (in, out, err: device
 * arrays of device pointers); sizes are macros the source is given. */
static const char k_cal_src[] =
    "#ifdef __CUDACC__\n"
    "typedef float4 cal_f4;\n"
    "#else\n"
    "typedef struct { float x, y, z, w; } cal_f4;\n"
    "#endif\n"
    "extern \"C\" __global__ void cal_empty(const void *const *in, void *const *out, int *err) {\n"
    "  (void)in; (void)out; (void)err; }\n"
    "extern \"C\" __global__ void cal_copy(const void *const *in, void *const *out, int *err) {\n"
    "  const cal_f4 *a = (const cal_f4 *)in[0]; cal_f4 *b = (cal_f4 *)out[0]; (void)err;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < CAL_N4;\n"
    "       i += (long long)gridDim.x * blockDim.x) b[i] = a[i]; }\n"
    "extern \"C\" __global__ void cal_elem(const void *const *in, void *const *out, int *err) {\n"
    "  float *y = (float *)out[0]; (void)in; (void)err;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < CAL_ELEMS;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    float v = y[i]; for (int r = 0; r < 64; r++) v = v * 0.999f + 0.001f; y[i] = v; } }\n";

#define ELEMS ((int64_t)1 << 22)
#define ELEM_OPS (2.0 * 64)  /* a multiply and an add, 64 times per element */
#define MM_N 1024
#define CHAIN 32             /* empty kernels per launch-cost measurement */
#define BLOCK 256

typedef struct cal {
  const fsl_cu_driver *drv;
  fsl_cu_device_info info;
  void *mod;
  void *f_empty, *f_copy, *f_elem;
  fsl_cu_ptr a, b, tab;      /* two buffers; pointer tables: {a}, {b} */
  int64_t copy_bytes;
  int64_t elems;             /* floats cal_elem updates: 4 Mi, within the buffer */
} cal;

/* Best seconds of `reps` runs of run(c, arg) each followed by a
 * synchronisation, after one warm-up run. */
static fsl_status best_time(cal *c, fsl_status (*run)(cal *, void *), void *arg, int reps, double *best) {
  *best = INFINITY;
  for (int r = 0; r <= reps; r++) {
    double t = fsl_now_s();
    FSL_TRY(run(c, arg));
    FSL_TRY(c->drv->mem.sync());
    t = fsl_now_s() - t;
    if (r > 0 && t < *best) *best = t;
  }
  if (*best <= 0) *best = 1e-9;
  return FSL_OK;
}

static unsigned wide_grid(const cal *c) { return (unsigned)((c->info.sm_count > 0 ? c->info.sm_count : 1) * 8); }

static fsl_status run_copy(cal *c, void *arg) {
  (void)arg;
  return c->drv->launch(c->f_copy, wide_grid(c), BLOCK, c->tab, c->tab + 8, c->tab + 16);
}

static fsl_status run_elem(cal *c, void *arg) {
  (void)arg;
  return c->drv->launch(c->f_elem, wide_grid(c), BLOCK, c->tab, c->tab, c->tab + 16);
}

static fsl_status run_chain(cal *c, void *arg) {
  (void)arg;
  for (int i = 0; i < CHAIN; i++) FSL_TRY(c->drv->launch(c->f_empty, 1, 1, c->tab, c->tab, c->tab + 16));
  return FSL_OK;
}

static fsl_status run_graph(cal *c, void *exec) {
  return c->drv->graph_launch(exec);
}

static fsl_status run_matmul(cal *c, void *plan) { return c->drv->matmul_run(plan); }

/* Launch cost: an empty kernel per node of a chain of CHAIN graph nodes
 * (graphs on), else CHAIN launches on the stream; per kernel. */
static fsl_status measure_launch(cal *c, bool graphs, double *launch_s) {
  double t = 0;
  if (!graphs) {
    FSL_TRY(best_time(c, run_chain, NULL, 10, &t));
    *launch_s = t / CHAIN;
    return FSL_OK;
  }
  void *graph = NULL, *exec = NULL, *prev = NULL;
  fsl_status st = c->drv->graph_create(&graph);
  for (int i = 0; i < CHAIN && st == FSL_OK; i++) {
    void *node = NULL;
    st = c->drv->graph_add_kernel(graph, c->f_empty, 1, 1, c->tab, c->tab, c->tab + 16, prev ? &prev : NULL,
                                  prev ? 1 : 0, &node);
    prev = node;
  }
  if (st == FSL_OK) st = c->drv->graph_instantiate(graph, &exec);
  if (st == FSL_OK) st = best_time(c, run_graph, exec, 10, &t);
  if (graph) c->drv->graph_destroy(graph, exec);
  if (st == FSL_OK) *launch_s = t / CHAIN;
  return st;
}

static fsl_status measure(cal *c, bool graphs, fsl_device *m) {
  const fsl_cu_driver *drv = c->drv;
  /* copies large enough that the launch is noise: 256 MiB per buffer, at
   * most a 16th of the device's memory (at least 1 MiB) */
  c->copy_bytes = (int64_t)256 << 20;
  while (c->copy_bytes > ((int64_t)1 << 20) && c->info.global_bytes > 0 && c->copy_bytes > c->info.global_bytes / 16)
    c->copy_bytes /= 2;
  c->elems = ELEMS < c->copy_bytes / 4 ? ELEMS : c->copy_bytes / 4;
  char src[4096];
  snprintf(src, sizeof src, "#define CAL_N4 %lldLL\n#define CAL_ELEMS %lldLL\n%s", (long long)(c->copy_bytes / 16),
           (long long)c->elems, k_cal_src);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", c->info.sm_major, c->info.sm_minor);
  fsl_cuda_build b;
  fsl_status st = fsl_cuda_compile(src, arch, &b);
  if (st == FSL_OK) st = drv->module_load(src, b.cubin, b.cubin_bytes, &c->mod);
  fsl_cuda_build_free(&b);
  if (st == FSL_OK) st = drv->function(c->mod, "cal_empty", &c->f_empty);
  if (st == FSL_OK) st = drv->function(c->mod, "cal_copy", &c->f_copy);
  if (st == FSL_OK) st = drv->function(c->mod, "cal_elem", &c->f_elem);
  if (st == FSL_OK) st = drv->mem.alloc(c->copy_bytes, &c->a);
  if (st == FSL_OK) st = drv->mem.alloc(c->copy_bytes, &c->b);
  if (st == FSL_OK) st = drv->mem.alloc(24, &c->tab);
  uint64_t tab[3] = {c->a, c->b, 0}; /* the third slot is the (unused) error word */
  if (st == FSL_OK) st = drv->mem.upload(c->tab, 0, tab, sizeof tab);
  if (st == FSL_OK) st = drv->mem.zero32(c->a, c->copy_bytes / 4);
  if (st == FSL_OK) st = drv->mem.zero32(c->b, c->copy_bytes / 4);
  double t = 0;
  if (st == FSL_OK) st = measure_launch(c, graphs, &m->launch_s);
  if (st == FSL_OK) st = best_time(c, run_copy, NULL, 3, &t);
  if (st == FSL_OK) m->bandwidth = 2.0 * (double)c->copy_bytes / t;
  if (st == FSL_OK) st = best_time(c, run_elem, NULL, 3, &t);
  if (st == FSL_OK) m->elem_flops = ELEM_OPS * (double)c->elems / t;
  /* peak: what LINEAR kernels run on, the library matmul (float32, no TF32) */
  int64_t n = MM_N; /* smaller on a device with little memory */
  while (n > 64 && n * n * 4 > c->copy_bytes) n /= 2;
  if (st == FSL_OK && drv->matmul_prepare) {
    fsl_cu_matmul mm = {.batch = 1, .m = n, .n = n, .k = n, .a = c->a, .b = c->a, .c = c->b};
    void *plan = NULL;
    st = drv->matmul_prepare(&mm, &plan);
    if (st == FSL_OK) st = best_time(c, run_matmul, plan, 3, &t);
    if (st == FSL_OK) m->peak_flops = 2.0 * (double)n * (double)n * (double)n / t;
    if (plan) drv->matmul_free(plan);
  }
  if (c->tab) drv->mem.free(c->tab);
  if (c->b) drv->mem.free(c->b);
  if (c->a) drv->mem.free(c->a);
  if (c->mod) drv->module_unload(c->mod);
  if (st != FSL_OK) fsl_error_context(st, "cuda calibration on '%s'", c->info.name);
  return st;
}

typedef struct cuda_cal {
  cal *c;
  bool graphs;
} cuda_cal;

static fsl_status measure_device(void *ctx, fsl_device *m) {
  cuda_cal *cc = ctx;
  /* peak_flops stays the default's without a library matmul */
  snprintf(m->name, sizeof m->name, "cuda: %.100s%s", cc->c->info.name, cc->graphs ? "" : " (no graphs)");
  return measure(cc->c, cc->graphs, m);
}

fsl_status fsl_cuda_calibrate(fsl_device *d, int n_threads, bool force) {
  (void)n_threads; /* the device decides its parallelism */
  if (!d) return fsl_errorf(FSL_ERR_ARG, "fsl_cuda_calibrate: NULL device");
  fsl_device_default(d);
  cal c;
  memset(&c, 0, sizeof c);
  c.drv = fsl_cuda_driver();
  FSL_TRY(c.drv->open(&c.info));
  const char *gr = getenv("FSL_CUDA_GRAPHS");
  bool graphs = !(gr && !strcmp(gr, "0"));
  const char *tf32 = getenv("FSL_CUDA_TF32"); /* the library matmul's peak differs with TF32 */
  char key[512], file[64];
  snprintf(key, sizeof key, "%s|%s|%s|sm_%d%d|%d|%d|graphs %d|tf32 %d", CAL_VERSION, c.drv->name, c.info.name,
           c.info.sm_major, c.info.sm_minor, c.info.sm_count, c.info.driver_version, graphs,
           tf32 && !strcmp(tf32, "1"));
  uint64_t h = fsl_hash(FSL_HASH_INIT, key, strlen(key));
  snprintf(file, sizeof file, "device-cuda-%016llx.txt", (unsigned long long)h);
  cuda_cal cc = {&c, graphs};
  return fsl_device_calibrate(file, CAL_VERSION, force, "cuda", measure_device, &cc, d);
}
