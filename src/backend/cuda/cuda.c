/*
 * cuda.c — the CUDA backend (backend.h; docs/gpu-backend.md, "The CUDA
 * backend"): plans run on an NVIDIA GPU through the driver table of
 * driver.h.
 *
 * compile:
 *   - lowers the plan into steps in the CUDA C dialect (backend/gpusteps.h,
 *     shared with OpenCL): generated functions, float32 matmuls through
 *     cuBLASLt (the driver table's library matmul; FSL_CUDA_CUBLASLT=0:
 *     generated), and host steps through the reference interpreter
 *     (opaque kernels; the counted fallbacks);
 *   - compiles the source with NVRTC to a CUBIN for the device's
 *     architecture (sm_<major><minor>), cached by hash in
 *     fsl_cache_folder("cuda"), and loads it;
 *   - device memory: the kernels' outputs in one arena laid out by
 *     runtime/memplan.c (graph outputs included), graph inputs, constants
 *     (uploaded once) and values internal to a kernel in allocations of
 *     their own; every function's input and output pointer tables in one
 *     allocation uploaded once; one error word per step; page-locked host
 *     staging for the inputs and outputs;
 *   - plans are costed with the GPU's numbers (calibrate.c);
 *   - CUDA graphs: each maximal run of device steps between host steps
 *     becomes one graph whose edges are the steps' data dependencies
 *     (true, anti and output dependencies over device byte ranges, the
 *     arena reusing memory; gpusteps.h), so that independent kernels may
 *     run concurrently.  FSL_CUDA_GRAPHS=0 launches the same steps one by
 *     one on the stream instead (the comparison).
 * run: inputs to the staging memory and the device, error words cleared,
 * the graphs launched in order with the host steps between them, the error
 * words and outputs back, one synchronisation at the end.
 */
#include "backend/cuda/cuda.h"

#include "backend/cuda/dialect_cuda.h"
#include "backend/cuda/emit.h"
#include "runtime/memplan.h"

#include <nvrtc.h>

#define MAX_GROUPS 65536 /* blocks launched for a function with a block per row or tile (grid-stride beyond) */
#define LOOP_BLOCK 256   /* threads per block of a grid-stride function */

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (cuda backend)"); }

static const char *vname(const fsl_value *v) { return v->name ? v->name : "?"; }

static void cu_free(void *p);

/* Whether linear node lin runs through cuBLASLt (a LIB step): float32
 * matmuls, when the driver has a library matmul and FSL_CUDA_CUBLASLT is
 * not "0" (docs/gpu-backend.md); else the generated tiled matmul. */
static bool use_library(const fsl_node *lin) {
  const char *e = getenv("FSL_CUDA_CUBLASLT");
  if ((e && !strcmp(e, "0")) || !fsl_cuda_driver()->matmul_prepare) return false;
  return lin->op == FSL_OP_matmul && lin->n_in == 2 && lin->in[0]->dtype == FSL_DT_F32 &&
         lin->in[1]->dtype == FSL_DT_F32 && lin->out[0]->dtype == FSL_DT_F32 && lin->in[0]->rank >= 2;
}

/* Where value v lives: the arena at its planned offset, or an allocation
 * of its own (created on first use; constants are uploaded). */
static fsl_status locate(fsl_cuda_exe *x, const fsl_value *v, fsl_cu_ptr *at) {
  *at = 0; /* on every path, errors included */
  if (v->id < x->mem.n_ids && x->mem.offset[v->id] >= 0 && x->arena) {
    *at = x->arena + (fsl_cu_ptr)x->mem.offset[v->id];
    return FSL_OK;
  }
  if (!x->own[v->id]) {
    int64_t nb = fsl_value_nbytes(v);
    if (nb < 0) return fsl_errorf(FSL_ERR_SHAPE, "cuda backend: value '%s' has no static shape", vname(v));
    fsl_status st = x->drv->mem.alloc(nb > 0 ? nb : 64, &x->own[v->id]);
    if (st != FSL_OK) return fsl_error_context(st, "cuda backend: %lld bytes for '%s'", (long long)nb, vname(v));
    if (v->data && nb > 0) {
      FSL_TRY(x->drv->mem.upload(x->own[v->id], 0, v->data, nb));
      FSL_TRY(x->drv->mem.sync()); /* v->data is pageable: the copy must end before it may change */
    }
  }
  *at = x->own[v->id];
  return FSL_OK;
}

/* The cuBLASLt plan of LIB step s (a matmul over its operands' bytes). */
static fsl_status prepare_library(fsl_cuda_exe *x, const fsl_gpu_step *s, void **plan) {
  const fsl_node *lin = s->nodes[0];
  const fsl_value *a = lin->in[0], *b = lin->in[1];
  fsl_cu_matmul mm = {.batch = 1, .m = a->dims[a->rank - 2], .k = a->dims[a->rank - 1], .n = b->dims[b->rank - 1]};
  for (int i = 0; i < a->rank - 2; i++) mm.batch *= a->dims[i];
  FSL_TRY(locate(x, s->in[0], &mm.a));
  FSL_TRY(locate(x, s->in[1], &mm.b));
  FSL_TRY(locate(x, s->out[0], &mm.c));
  fsl_status st = x->drv->matmul_prepare(&mm, plan);
  if (st != FSL_OK) {
    char label[160];
    fsl_gpu_kernel_label(x->p, s->kernel, label, sizeof label);
    fsl_error_context(st, "cuda backend, %s", label);
  }
  return st;
}

/* The byte range of v on the device, for the dependency analysis. */
static fsl_gpu_range where(void *ctx, const fsl_value *v) {
  fsl_cuda_exe *x = ctx;
  fsl_cu_ptr at = 0;
  if (locate(x, v, &at) != FSL_OK) fsl_error_clear(); /* located at compile already: cannot fail here */
  return (fsl_gpu_range){.buffer = 0, .off = (int64_t)at, .bytes = fsl_value_nbytes(v)};
}

/* The CUBIN of src for x's device: from the cache, else NVRTC (cached). */
static fsl_status build_cubin(fsl_cuda_exe *x, const char *arch, void **cubin, size_t *bytes) {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  const char *src = x->low.src.p ? x->low.src.p : "";
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

/* Grid and block of GEN step s; checks them against the device. */
static fsl_status launch_shape(fsl_cuda_exe *x, const fsl_gpu_step *s, unsigned *grid, unsigned *block) {
  if (s->launch.group_size > 0) {
    if (s->launch.group_size > x->info.max_block_threads) {
      char label[160];
      fsl_gpu_kernel_label(x->p, s->kernel, label, sizeof label);
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

/* The end of the run of device (GEN and LIB) steps that starts at step lo:
 * one CUDA graph, launched between host steps. */
static int device_run_end(const fsl_gpu_lowering *l, int lo) {
  int hi = lo;
  while (hi < l->n_steps && l->steps[hi].kind != FSL_GPU_HOST) hi++;
  return hi;
}

/* Bytes a value takes in the page-locked staging buffer (64-byte slots). */
static int64_t staged(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/* Pointer tables of every GEN step (inputs then outputs, 8 bytes each) in
 * one allocation, uploaded once. */
static fsl_status make_tables(fsl_cuda_exe *x) {
  int64_t n = 0;
  for (int i = 0; i < x->low.n_steps; i++)
    if (x->low.steps[i].kind == FSL_GPU_GEN) n += x->low.steps[i].n_in + x->low.steps[i].n_out;
  uint64_t *host = calloc((size_t)(n > 0 ? n : 1), sizeof *host);
  if (!host) return oom();
  fsl_status st = x->drv->mem.alloc((n > 0 ? n : 1) * 8, &x->tables);
  int64_t at = 0;
  for (int i = 0; i < x->low.n_steps && st == FSL_OK; i++) {
    const fsl_gpu_step *s = &x->low.steps[i];
    if (s->kind != FSL_GPU_GEN) continue;
    x->launch[i].in = x->tables + (fsl_cu_ptr)at * 8;
    for (int k = 0; k < s->n_in + s->n_out && st == FSL_OK; k++) {
      if (k == s->n_in) x->launch[i].out = x->tables + (fsl_cu_ptr)at * 8;
      st = locate(x, k < s->n_in ? s->in[k] : s->out[k - s->n_in], &host[at++]);
    }
    if (s->n_out == 0) x->launch[i].out = x->tables + (fsl_cu_ptr)at * 8;
    x->launch[i].err = x->errs + (fsl_cu_ptr)i * 4;
  }
  if (st == FSL_OK && n > 0) st = x->drv->mem.upload(x->tables, 0, host, n * 8);
  if (st == FSL_OK) st = x->drv->mem.sync();
  free(host);
  return st;
}

/* One CUDA graph per maximal run of device (GEN and LIB) steps, with the
 * data dependencies between them as edges. */
static fsl_status make_graphs(fsl_cuda_exe *x) {
  for (int lo = 0; lo < x->low.n_steps;) {
    if (x->low.steps[lo].kind == FSL_GPU_HOST) {
      lo++;
      continue;
    }
    int hi = device_run_end(&x->low, lo);
    if (!fsl_grow((void **)&x->seg, &x->cap_seg, x->n_seg + 1, sizeof *x->seg)) return oom();
    fsl_cuda_segment *sg = &x->seg[x->n_seg++];
    memset(sg, 0, sizeof *sg);
    sg->lo = lo;
    sg->hi = hi;
    int **deps = NULL, *nd = NULL;
    fsl_status st = fsl_gpu_step_deps(&x->low, lo, hi, where, x, &deps, &nd);
    if (st == FSL_OK) st = x->drv->graph_create(&sg->graph);
    for (int i = lo; i < hi && st == FSL_OK; i++) {
      void *dn[64], **dp = dn;
      int n = nd[i - lo];
      if (n > 64 && !(dp = malloc(sizeof(void *) * (size_t)n))) st = oom();
      for (int k = 0; k < n && st == FSL_OK; k++) dp[k] = x->launch[deps[i - lo][k]].node;
      fsl_cuda_launch *L = &x->launch[i];
      if (st == FSL_OK && x->low.steps[i].kind == FSL_GPU_LIB)
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

static fsl_status cu_compile(const fsl_plan *p, void **exe) {
  if (!p || !exe || !p->g) return fsl_errorf(FSL_ERR_ARG, "cuda compile: NULL argument");
  *exe = NULL;
  const fsl_cu_driver *drv = fsl_cuda_driver();
  fsl_cu_device_info info;
  memset(&info, 0, sizeof info);
  FSL_TRY(drv->open(&info));
  fsl_cuda_exe *x = calloc(1, sizeof *x);
  if (!x) return oom();
  x->p = p;
  x->drv = drv;
  x->info = info;
  const char *gr = getenv("FSL_CUDA_GRAPHS"); /* docs/gpu-backend.md: 0 launches step by step */
  x->graphs = !(gr && !strcmp(gr, "0"));
  /* blocks and shared memory within what the device allows */
  x->grp = *fsl_dialect_cuda.group;
  while (x->grp.size > 1 && x->grp.size > info.max_block_threads) x->grp.size /= 2;
  while (x->grp.tile > 1 && x->grp.tile * x->grp.tile > info.max_block_threads) x->grp.tile /= 2;
  if (info.shared_per_block > 0 && info.shared_per_block < x->grp.local_bytes) x->grp.local_bytes = info.shared_per_block;
  x->dia = fsl_dialect_cuda;
  x->dia.group = &x->grp;
  const fsl_graph *g = p->g;
  x->own = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof *x->own);
  fsl_status st = x->own ? fsl_gpu_lower(p, &x->dia, use_library, &x->low) : oom();
  const int n_steps = x->low.n_steps;
  if (st == FSL_OK && !(x->launch = calloc((size_t)(n_steps > 0 ? n_steps : 1), sizeof *x->launch))) st = oom();
  const fsl_memplan_options mo = {.inplace = true, .external_outputs = false};
  if (st == FSL_OK) st = fsl_memplan_build(p, &mo, &x->mem);
  if (st == FSL_OK && x->mem.peak_bytes > 0) st = drv->mem.alloc(x->mem.peak_bytes, &x->arena);
  if (st == FSL_OK) st = drv->mem.alloc(4 * (n_steps > 0 ? n_steps : 1), &x->errs);
  const char *dump = getenv("FSL_CUDA_SOURCE"); /* docs/gpu-backend.md: the generated source, for inspection */
  if (st == FSL_OK && dump && *dump) {
    FILE *f = fopen(dump, "w");
    if (f) {
      fputs(x->low.src.p ? x->low.src.p : "", f);
      fclose(f);
    }
  }
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d", info.sm_major, info.sm_minor);
  void *cubin = NULL;
  size_t cubin_bytes = 0;
  if (st == FSL_OK && x->low.n_fn > 0) st = build_cubin(x, arch, &cubin, &cubin_bytes);
  if (st == FSL_OK && x->low.n_fn > 0) st = drv->module_load(x->low.src.p, cubin, cubin_bytes, &x->module);
  free(cubin);
  for (int i = 0; i < n_steps && st == FSL_OK; i++) {
    const fsl_gpu_step *s = &x->low.steps[i];
    if (s->kind == FSL_GPU_GEN) {
      char name[32];
      snprintf(name, sizeof name, "fsl_k%d", s->fn_id);
      st = drv->function(x->module, name, &x->launch[i].fn);
      if (st == FSL_OK) st = launch_shape(x, s, &x->launch[i].grid, &x->launch[i].block);
    } else if (s->kind == FSL_GPU_LIB) {
      st = prepare_library(x, s, &x->launch[i].lib);
    } else {
      fsl_cu_ptr at;
      for (int k = 0; k < s->n_out + s->n_in && st == FSL_OK; k++)
        st = locate(x, k < s->n_in ? s->in[k] : s->out[k - s->n_in], &at);
    }
  }
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++) {
    fsl_cu_ptr at;
    st = locate(x, g->inputs[i], &at);
  }
  if (st == FSL_OK) st = make_tables(x);
  if (st == FSL_OK && x->graphs) st = make_graphs(x);
  /* page-locked staging: every graph input, then every graph output */
  int64_t staging = 0;
  for (int i = 0; i < g->n_inputs; i++) staging += staged(fsl_value_nbytes(g->inputs[i]));
  for (int i = 0; i < g->n_outputs; i++) staging += staged(fsl_value_nbytes(g->outputs[i]));
  staging += 4 * (int64_t)(n_steps > 0 ? n_steps : 1);
  if (st == FSL_OK) st = drv->mem.host_alloc(staging, &x->staging);
  if (st != FSL_OK) {
    cu_free(x);
    return st;
  }
  *exe = x;
  return FSL_OK;
}

/* A HOST step's copies (fsl_gpu_copy): synchronous. */
static fsl_status copy_to_host(void *ctx, const fsl_value *v, void *host, int64_t bytes) {
  fsl_cuda_exe *x = ctx;
  fsl_cu_ptr at;
  FSL_TRY(locate(x, v, &at));
  FSL_TRY(x->drv->mem.download(host, at, 0, bytes));
  return x->drv->mem.sync();
}

static fsl_status copy_to_device(void *ctx, const fsl_value *v, void *host, int64_t bytes) {
  fsl_cuda_exe *x = ctx;
  fsl_cu_ptr at;
  FSL_TRY(locate(x, v, &at));
  FSL_TRY(x->drv->mem.upload(at, 0, host, bytes));
  return x->drv->mem.sync();
}

/* Steps [lo, hi) (GEN and LIB) on the stream: one graph launch, or one launch each. */
static fsl_status run_gen(fsl_cuda_exe *x, int lo, int hi, int *seg) {
  if (x->graphs) {
    if (*seg >= x->n_seg || x->seg[*seg].lo != lo) return fsl_errorf(FSL_ERR_INVALID, "cuda backend: graph %d missing", *seg);
    return x->drv->graph_launch(x->seg[(*seg)++].exec);
  }
  for (int i = lo; i < hi; i++) {
    const fsl_cuda_launch *L = &x->launch[i];
    fsl_status st = x->low.steps[i].kind == FSL_GPU_LIB ? x->drv->matmul_run(L->lib)
                                                        : x->drv->launch(L->fn, L->grid, L->block, L->in, L->out, L->err);
    if (st != FSL_OK) return fsl_error_context(st, "cuda backend, kernel %d", x->low.steps[i].kernel);
  }
  return FSL_OK;
}

static fsl_status cu_run(void *exe, const void *const *inputs, void **outputs) {
  fsl_cuda_exe *x = exe;
  if (!x || (!outputs && x->p->g->n_outputs > 0)) return fsl_errorf(FSL_ERR_ARG, "cuda run: NULL argument");
  const fsl_graph *g = x->p->g;
  const fsl_cu_driver *drv = x->drv;
  for (int i = 0; i < g->n_outputs; i++) outputs[i] = NULL;
  fsl_status st = FSL_OK;
  unsigned char *stage = x->staging;
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++) {
    const fsl_value *v = g->inputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (nb <= 0) continue;
    if (!inputs || !inputs[i]) {
      st = fsl_errorf(FSL_ERR_ARG, "no data for graph input '%s'", vname(v));
      break;
    }
    fsl_cu_ptr at;
    memcpy(stage, inputs[i], (size_t)nb);
    st = locate(x, v, &at);
    if (st == FSL_OK) st = drv->mem.upload(at, 0, stage, nb);
    stage += staged(nb);
  }
  const int n_steps = x->low.n_steps;
  if (st == FSL_OK && n_steps > 0) st = drv->mem.zero32(x->errs, n_steps);
  int seg = 0;
  for (int lo = 0; lo < n_steps && st == FSL_OK;) {
    const fsl_gpu_step *s = &x->low.steps[lo];
    if (s->kind == FSL_GPU_HOST) {
      st = drv->mem.sync();
      if (st == FSL_OK) st = fsl_gpu_run_host(g, s, copy_to_host, copy_to_device, x, "cuda");
      lo++;
      continue;
    }
    int hi = device_run_end(&x->low, lo);
    st = run_gen(x, lo, hi, &seg);
    lo = hi;
  }
  /* outputs into the staging memory after the inputs, the error words last */
  unsigned char *out_stage = stage;
  for (int i = 0; i < g->n_outputs && st == FSL_OK; i++) {
    const fsl_value *v = g->outputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (nb > 0 && !v->data) {
      fsl_cu_ptr at;
      st = locate(x, v, &at);
      if (st == FSL_OK) st = drv->mem.download(stage, at, 0, nb);
    }
    stage += staged(nb);
  }
  int *errs = (int *)(void *)stage;
  if (st == FSL_OK && n_steps > 0) st = drv->mem.download(errs, x->errs, 0, 4 * (int64_t)n_steps);
  fsl_status sync_st = drv->mem.sync();
  if (st == FSL_OK) st = sync_st;
  for (int i = 0; i < n_steps && st == FSL_OK; i++) st = fsl_gpu_step_error(x->p, &x->low.steps[i], errs[i], "cuda");
  stage = out_stage;
  for (int i = 0; i < g->n_outputs && st == FSL_OK; i++) {
    const fsl_value *v = g->outputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (!(outputs[i] = malloc((size_t)(nb > 0 ? nb : 1)))) {
      st = oom();
      break;
    }
    if (nb > 0) memcpy(outputs[i], v->data ? v->data : stage, (size_t)nb);
    stage += staged(nb);
  }
  if (st != FSL_OK)
    for (int i = 0; i < g->n_outputs; i++) {
      free(outputs[i]);
      outputs[i] = NULL;
    }
  return st;
}

static void cu_free(void *p) {
  fsl_cuda_exe *x = p;
  if (!x) return;
  const fsl_cu_driver *drv = x->drv;
  for (int i = 0; i < x->n_seg; i++) drv->graph_destroy(x->seg[i].graph, x->seg[i].exec);
  free(x->seg);
  for (int i = 0; x->launch && i < x->low.n_steps; i++)
    if (x->launch[i].lib) drv->matmul_free(x->launch[i].lib);
  if (x->own)
    for (int i = 0; i < x->p->g->n_values; i++)
      if (x->own[i]) drv->mem.free(x->own[i]);
  free(x->own);
  if (x->arena) drv->mem.free(x->arena);
  if (x->errs) drv->mem.free(x->errs);
  if (x->tables) drv->mem.free(x->tables);
  if (x->staging) drv->mem.host_free(x->staging);
  if (x->module) drv->module_unload(x->module);
  free(x->launch);
  fsl_memplan_free(&x->mem);
  fsl_gpu_lowering_free(&x->low);
  free(x);
}

/* The generated tiled matmul reads prologue views in place; cuBLASLt, which
 * takes the float32 matmuls unless FSL_CUDA_CUBLASLT=0, reads plain
 * operands, so only without it do LINEAR kernels take views. */
static bool cu_linear_views(void) {
  const char *e = getenv("FSL_CUDA_CUBLASLT");
  return (e && !strcmp(e, "0")) || !fsl_cuda_driver()->matmul_prepare;
}

static bool cu_supports(const fsl_graph *g, const fsl_kernel *k) { return fsl_gpu_supports(&fsl_dialect_cuda, use_library, g, k); }

static void cu_info(const void *exe, fsl_backend_exe_info *out) {
  const fsl_cuda_exe *x = exe;
  memset(out, 0, sizeof *out);
  out->arena_bytes = -1;
  if (x) fsl_gpu_exe_info(&x->low, x->mem.peak_bytes, out);
}

static void cu_fingerprint(char *buf, size_t len) {
  fsl_cu_device_info info;
  if (fsl_cuda_driver()->open(&info) == FSL_OK)
    snprintf(buf, len, "cuda: %s, sm_%d%d, driver %d", info.name, info.sm_major, info.sm_minor, info.driver_version);
  else {
    fsl_error_clear();
    snprintf(buf, len, "cuda: no device");
  }
}

const fsl_backend fsl_backend_cuda = {
    .name = "cuda",
    .summary = "generated CUDA C on an NVIDIA GPU (NVRTC, CUDA graphs; FSL_CUDA_DEVICE)",
    .calibrate = fsl_cuda_calibrate,
    .profiler_init = NULL,
    .supports = cu_supports,
    .linear_views = cu_linear_views,
    .compile = cu_compile,
    .fingerprint = cu_fingerprint,
    .export_exe = NULL,
    .import_exe = NULL,
    .run = cu_run,
    .exe_info = cu_info,
    .free_exe = cu_free,
};
