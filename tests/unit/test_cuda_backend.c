/*
 * test_cuda_backend.c — the CUDA backend (src/backend/cuda/cuda.c, over
 * the GPU executor src/backend/gpuexec.c) without a GPU.  Its driver
 * table (driver.h) is replaced by an emulating driver: device memory is
 * host memory, the module is the generated CUDA C
 * compiled by g++ against the CPU emulation of CUDA's device side
 * (cuda_emu/; NVRTC still compiles the CUBIN for sm_90, which the driver
 * checks is an ELF image), and a CUDA graph runs its kernel nodes in the
 * latest-first order its edges allow, so that a missing dependency between
 * two steps computes a wrong answer instead of passing by luck.  Every
 * strategy's plan, with CUDA graphs and step by step, is compared with
 * the reference interpreter; the graphs are checked against the steps'
 * byte ranges as the uploaded pointer tables give them (every conflicting
 * pair of steps ordered, no edge implied by others, independent branches
 * left unordered); host steps (a float16 kernel the dialect refuses) split
 * the graphs; a kernel's error word reaches the caller with the kernel
 * named.  Without a driver on the machine, the real driver's message is
 * checked.  Blocks per launch are capped at 2 in the emulation: every
 * generated function loops over its rows, tiles or elements (grid-stride),
 * so fewer blocks are correct and the emulation stays fast.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "backend/cuda/cuda.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "orchestrate/orchestrate.h"
#include "test_graph.h"
#include "cuda_emu/emu_build.h"

#define B_INIT(g) {.g = (g), .st = FSL_OK, .fold = false}
#define EMU_MAX_GRID 2

/* ---- the emulating driver ---- */

typedef struct emu_node {
  const fsl_cu_matmul *mm;  /* a library matmul node, or NULL: a kernel */
  emu_kernel fn;
  unsigned grid, block;
  fsl_cu_ptr in, out, err;
  int n_deps;
  int deps[64];  /* indices of nodes of the same graph */
  bool done;
} emu_node;

typedef struct emu_graph {
  emu_node *nodes;
  int n, cap;
} emu_graph;

static struct {
  emu_launch_fn launch;
  struct {
    unsigned char *p;
    int64_t bytes;
  } alloc[4096];
  int n_alloc;
  int launches, graph_launches, matmuls;
  struct {
    uint64_t hash;
    void *so;
  } mods[32];     /* emulations built, by the hash of their source (the same plan twice: built once) */
  int n_mods;
} E;

/* The allocation holding [p, p + bytes), or fail. */
static void check_range(fsl_cu_ptr p, int64_t bytes, const char *what) {
  for (int i = 0; i < E.n_alloc; i++) {
    uintptr_t a = (uintptr_t)E.alloc[i].p;
    if (E.alloc[i].p && p >= a && p + (uint64_t)bytes <= a + (uint64_t)E.alloc[i].bytes) return;
  }
  fail_msg("%s: [%#llx, +%lld) lies in no device allocation", what, (unsigned long long)p, (long long)bytes);
}

static fsl_status emu_open(fsl_cu_device_info *info) {
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "CUDA emulated on the CPU (cuda_emu)");
  info->sm_major = 9;
  info->sm_minor = 0;
  info->sm_count = 2;
  info->max_block_threads = 1024;
  info->shared_per_block = 48 * 1024;
  info->global_bytes = (int64_t)32 << 20; /* calibration copies 2 MiB, its matmul is 512^3 */
  info->driver_version = 13000;
  return FSL_OK;
}

static fsl_status emu_module_load(const char *source, const void *cubin, size_t cubin_bytes, void **mod) {
  assert_true(cubin_bytes > 4 && !memcmp(cubin, "\177ELF", 4)); /* NVRTC's sm_90 image */
  uint64_t hash = fsl_hash(FSL_HASH_INIT, source, strlen(source));
  void *h = NULL;
  for (int i = 0; i < E.n_mods && !h; i++)
    if (E.mods[i].hash == hash) h = E.mods[i].so;
  if (!h) {
    char dir[] = "/tmp/fsl_cuda_backend_XXXXXX";
    assert_non_null(mkdtemp(dir));
    h = emu_build(dir, source, "test_cuda_backend");
    rmdir(dir);
    if (!h) return fsl_errorf(FSL_ERR_UNSUPPORTED, "no C++ compiler for the emulation");
    assert_true(E.n_mods < 32);
    E.mods[E.n_mods].hash = hash;
    E.mods[E.n_mods++].so = h;
  }
  E.launch = (emu_launch_fn)(uintptr_t)dlsym(h, "fsl_emu_launch");
  assert_non_null(E.launch);
  *mod = h;
  return FSL_OK;
}

static void emu_module_unload(void *mod) { (void)mod; /* kept for the next executable of the same source */ }

static fsl_status emu_function(void *mod, const char *name, void **fn) {
  *fn = dlsym(mod, name);
  return *fn ? FSL_OK : fsl_errorf(FSL_ERR_RUNTIME, "no function %s", name);
}

static fsl_status emu_mem_alloc(int64_t bytes, fsl_cu_ptr *p) {
  assert_true(bytes > 0 && E.n_alloc < 4096);
  unsigned char *m = malloc((size_t)bytes);
  assert_non_null(m);
  memset(m, 0xff, (size_t)bytes); /* NaN / -1: what a kernel reads before anything is written shows */
  E.alloc[E.n_alloc].p = m;
  E.alloc[E.n_alloc++].bytes = bytes;
  *p = (fsl_cu_ptr)(uintptr_t)m;
  return FSL_OK;
}

static void emu_mem_free(fsl_cu_ptr p) {
  for (int i = 0; i < E.n_alloc; i++)
    if ((fsl_cu_ptr)(uintptr_t)E.alloc[i].p == p) {
      free(E.alloc[i].p);
      E.alloc[i] = E.alloc[--E.n_alloc];
      return;
    }
  fail_msg("freeing %#llx, which is not allocated", (unsigned long long)p);
}

static fsl_status emu_host_alloc(int64_t bytes, void **p) {
  *p = malloc((size_t)(bytes > 0 ? bytes : 1));
  return *p ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "host_alloc");
}

static void emu_host_free(void *p) { free(p); }

static fsl_status emu_upload(fsl_cu_ptr dst, int64_t off, const void *src, int64_t bytes) {
  dst += (fsl_cu_ptr)off;
  check_range(dst, bytes, "upload");
  memcpy((void *)(uintptr_t)dst, src, (size_t)bytes);
  return FSL_OK;
}

static fsl_status emu_download(void *dst, fsl_cu_ptr src, int64_t off, int64_t bytes) {
  src += (fsl_cu_ptr)off;
  check_range(src, bytes, "download");
  memcpy(dst, (const void *)(uintptr_t)src, (size_t)bytes);
  return FSL_OK;
}

static fsl_status emu_zero32(fsl_cu_ptr p, int64_t n) {
  check_range(p, 4 * n, "zero32");
  memset((void *)(uintptr_t)p, 0, (size_t)(4 * n));
  return FSL_OK;
}

static void emu_run(emu_kernel fn, unsigned grid, unsigned block, fsl_cu_ptr in, fsl_cu_ptr out, fsl_cu_ptr err) {
  check_range(in, 8, "input table");
  check_range(err, 4, "error word");
  int bad = 0;
  unsigned g = grid < EMU_MAX_GRID ? grid : EMU_MAX_GRID;
  assert_true(grid >= 1 && block >= 1 && block <= 1024);
  assert_int_equal(E.launch(fn, g, block, (const void *const *)(uintptr_t)in, (void *const *)(uintptr_t)out,
                            (int *)(uintptr_t)err, &bad),
                   0);
  assert_int_equal(bad, 0);
}

static fsl_status emu_launch(void *fn, unsigned grid, unsigned block, fsl_cu_ptr in, fsl_cu_ptr out, fsl_cu_ptr err) {
  E.launches++;
  emu_run((emu_kernel)(uintptr_t)fn, grid, block, in, out, err);
  return FSL_OK;
}

static fsl_status emu_sync(void) { return FSL_OK; }

/* The library matmul: the plan is a copy of the request; run in row-major
 * terms on the host (float32 products summed in double). */
static fsl_status emu_matmul_prepare(const fsl_cu_matmul *mm, void **plan) {
  assert_true(mm->batch >= 1 && mm->m >= 1 && mm->n >= 1 && mm->k >= 1);
  check_range(mm->a, 4 * mm->batch * mm->m * mm->k, "matmul A");
  check_range(mm->b, 4 * mm->batch * mm->k * mm->n, "matmul B");
  check_range(mm->c, 4 * mm->batch * mm->m * mm->n, "matmul C");
  fsl_cu_matmul *q = malloc(sizeof *q);
  assert_non_null(q);
  *q = *mm;
  *plan = q;
  return FSL_OK;
}

static void emu_matmul_exec(const fsl_cu_matmul *mm) {
  const float *a = (const float *)(uintptr_t)mm->a, *b = (const float *)(uintptr_t)mm->b;
  float *c = (float *)(uintptr_t)mm->c;
  for (int64_t t = 0; t < mm->batch; t++)
    for (int64_t i = 0; i < mm->m; i++)
      for (int64_t j = 0; j < mm->n; j++) {
        double acc = 0;
        for (int64_t k = 0; k < mm->k; k++) acc += (double)a[(t * mm->m + i) * mm->k + k] * b[(t * mm->k + k) * mm->n + j];
        c[(t * mm->m + i) * mm->n + j] = (float)acc;
      }
  E.matmuls++;
}

static fsl_status emu_matmul_run(void *plan) {
  emu_matmul_exec(plan);
  return FSL_OK;
}

static void emu_matmul_free(void *plan) { free(plan); }

static fsl_status emu_graph_create(void **graph) {
  *graph = calloc(1, sizeof(emu_graph));
  return *graph ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "graph");
}

static fsl_status emu_graph_add_kernel(void *graph, void *fn, unsigned grid, unsigned block, fsl_cu_ptr in,
                                       fsl_cu_ptr out, fsl_cu_ptr err, void *const *deps, int n_deps, void **node) {
  emu_graph *gr = graph;
  assert_true(n_deps <= 64);
  assert_true(fsl_grow((void **)&gr->nodes, &gr->cap, gr->n + 1, sizeof *gr->nodes));
  emu_node *nd = &gr->nodes[gr->n];
  memset(nd, 0, sizeof *nd);
  *nd = (emu_node){.fn = (emu_kernel)(uintptr_t)fn, .grid = grid, .block = block, .in = in, .out = out, .err = err};
  for (int i = 0; i < n_deps; i++) {
    intptr_t d = (intptr_t)deps[i] - 1; /* node handles are index + 1 */
    assert_true(d >= 0 && d < gr->n);
    nd->deps[nd->n_deps++] = (int)d;
  }
  *node = (void *)(intptr_t)(gr->n + 1);
  gr->n++;
  return FSL_OK;
}

static fsl_status emu_graph_add_matmul(void *graph, void *plan, void *const *deps, int n_deps, void **node) {
  emu_graph *gr = graph;
  FSL_TRY(emu_graph_add_kernel(graph, NULL, 1, 1, 0, 0, 0, deps, n_deps, node));
  gr->nodes[gr->n - 1].mm = plan;
  return FSL_OK;
}

static fsl_status emu_graph_instantiate(void *graph, void **exec) {
  *exec = graph;
  return FSL_OK;
}

/* Runs the nodes latest-first among those whose dependencies are done:
 * the order furthest from the steps' own that the edges allow. */
static fsl_status emu_graph_launch(void *exec) {
  emu_graph *gr = exec;
  E.graph_launches++;
  for (int i = 0; i < gr->n; i++) gr->nodes[i].done = false;
  for (int left = gr->n; left > 0; left--) {
    int pick = -1;
    for (int i = gr->n - 1; i >= 0 && pick < 0; i--) {
      emu_node *nd = &gr->nodes[i];
      bool ready = !nd->done;
      for (int k = 0; k < nd->n_deps && ready; k++) ready = gr->nodes[nd->deps[k]].done;
      if (ready) pick = i;
    }
    assert_true(pick >= 0);
    emu_node *nd = &gr->nodes[pick];
    if (nd->mm) emu_matmul_exec(nd->mm);
    else emu_run(nd->fn, nd->grid, nd->block, nd->in, nd->out, nd->err);
    nd->done = true;
  }
  return FSL_OK;
}

static void emu_graph_destroy(void *graph, void *exec) {
  (void)exec;
  emu_graph *gr = graph;
  if (gr) free(gr->nodes);
  free(gr);
}

static const fsl_cu_driver k_emu = {
    .name = "cuda_emu",
    .open = emu_open,
    .module_load = emu_module_load,
    .module_unload = emu_module_unload,
    .function = emu_function,
    .mem = {.alloc = emu_mem_alloc, .free = emu_mem_free, .host_alloc = emu_host_alloc, .host_free = emu_host_free,
            .upload = emu_upload, .download = emu_download, .zero32 = emu_zero32, .sync = emu_sync},
    .launch = emu_launch,
    .graph_create = emu_graph_create,
    .graph_add_kernel = emu_graph_add_kernel,
    .graph_instantiate = emu_graph_instantiate,
    .graph_launch = emu_graph_launch,
    .graph_destroy = emu_graph_destroy,
    .matmul_prepare = emu_matmul_prepare,
    .matmul_run = emu_matmul_run,
    .graph_add_matmul = emu_graph_add_matmul,
    .matmul_free = emu_matmul_free,
};

/* ---- checks ---- */

static bool have_cxx(void) { return system("c++ --version > /dev/null 2>&1") == 0; }

/* The launch records of x's steps. */
static const fsl_cuda_launch *launches(const fsl_cuda_exe *x) { return x->gpu.launch; }

/* Byte range k of device step i (inputs, then outputs) as the uploaded
 * pointer table (a kernel) or the matmul's request (a library step) says. */
static void step_range(const fsl_cuda_exe *x, int i, int k, uint64_t *lo, uint64_t *hi) {
  const fsl_step *s = &x->gpu.low.steps[i];
  const fsl_value *v = k < s->n_in ? s->in[k] : s->out[k - s->n_in];
  if (s->kind == FSL_STEP_LIB) {
    const fsl_cu_matmul *mm = launches(x)[i].lib;
    *lo = k == 0 ? mm->a : k == 1 ? mm->b : mm->c;
  } else {
    const uint64_t *tab = (const uint64_t *)(uintptr_t)(k < s->n_in ? launches(x)[i].in : launches(x)[i].out);
    *lo = tab[k < s->n_in ? k : k - s->n_in];
  }
  *hi = *lo + (uint64_t)fsl_value_nbytes(v);
  check_range(*lo, fsl_value_nbytes(v), "a kernel operand");
}

/* Whether step b (later) touches bytes step a writes, or writes bytes a
 * reads; *war_only: only the latter (an anti-dependency: the arena gave
 * b's output the bytes of a value a read). */
static bool steps_conflict(const fsl_cuda_exe *x, int a, int b, bool *war_only) {
  const fsl_step *sa = &x->gpu.low.steps[a], *sb = &x->gpu.low.steps[b];
  bool war = false, other = false;
  for (int i = 0; i < sa->n_in + sa->n_out; i++)
    for (int j = 0; j < sb->n_in + sb->n_out; j++) {
      if (i < sa->n_in && j < sb->n_in) continue;
      uint64_t al, ah, bl, bh;
      step_range(x, a, i, &al, &ah);
      step_range(x, b, j, &bl, &bh);
      if (al < bh && bl < ah && al < ah && bl < bh) {
        if (i < sa->n_in) war = true;
        else other = true;
      }
    }
  *war_only = war && !other;
  return war || other;
}

/* reach[i * n + j]: node j is reachable from node i in gr (i < j). */
static bool *reachability(const emu_graph *gr) {
  int n = gr->n;
  bool *r = calloc((size_t)n * (size_t)(n > 0 ? n : 1), sizeof(bool));
  assert_non_null(r);
  for (int j = 0; j < n; j++)
    for (int k = 0; k < gr->nodes[j].n_deps; k++) {
      int d = gr->nodes[j].deps[k];
      assert_true(d < j); /* edges follow the step order */
      r[(size_t)d * n + j] = true;
      for (int a = 0; a < d; a++)
        if (r[(size_t)a * n + d]) r[(size_t)a * n + j] = true;
    }
  return r;
}

/* The graphs of x against its steps: one node per GEN step, every
 * conflicting pair ordered, no redundant edge; returns the pairs of
 * nodes left unordered (concurrency). */
static int check_graphs(const fsl_cuda_exe *x, int *war_only) {
  int unordered = 0, covered = 0;
  *war_only = 0;
  for (int s = 0; s < x->n_seg; s++) {
    const fsl_cuda_segment *sg = &x->seg[s];
    const emu_graph *gr = sg->exec;
    assert_int_equal(gr->n, sg->hi - sg->lo);
    covered += gr->n;
    for (int i = sg->lo; i < sg->hi; i++) assert_int_not_equal(x->gpu.low.steps[i].kind, FSL_STEP_HOST);
    if (s > 0) assert_true(sg->lo > x->seg[s - 1].hi); /* a host step between two graphs */
    bool *r = reachability(gr);
    int n = gr->n;
    for (int j = 0; j < n; j++) {
      for (int i = 0; i < j; i++) {
        bool w = false, c = steps_conflict(x, sg->lo + i, sg->lo + j, &w);
        *war_only += w;
        if (c && !r[(size_t)i * n + j])
          fail_msg("steps %d and %d touch the same bytes but the graph does not order them", sg->lo + i, sg->lo + j);
        if (!r[(size_t)i * n + j]) unordered++;
      }
      /* no edge implied by the others: d is no ancestor of another dependency */
      const emu_node *nd = &gr->nodes[j];
      for (int a = 0; a < nd->n_deps; a++)
        for (int b = 0; b < nd->n_deps; b++)
          if (a != b && r[(size_t)nd->deps[a] * n + nd->deps[b]])
            fail_msg("node %d: edge from %d is implied by the one from %d", j, nd->deps[a], nd->deps[b]);
    }
    free(r);
  }
  int device = 0;
  for (int i = 0; i < x->gpu.low.n_steps; i++) device += x->gpu.low.steps[i].kind != FSL_STEP_HOST;
  assert_int_equal(covered, device);
  return unordered;
}

typedef struct run_stats {
  int unordered;  /* pairs of nodes the graphs leave unordered */
  int war_only;   /* pairs of steps ordered only because the later one overwrites what the earlier read */
  int host_steps;
  int gen_steps;
  int lib_steps;  /* matmuls through the library */
  int segments;
} run_stats;

/* Compiles plan p on the CUDA backend with the emulating driver (graphs
 * on or off), runs it on inputs and compares every output with want. */
static run_stats check_plan(fsl_graph *g, fsl_plan *p, void **inputs, void **want, bool graphs, const char *what) {
  run_stats rs = {0};
  setenv("FSL_CUDA_GRAPHS", graphs ? "1" : "0", 1);
  fsl_cuda_use_driver(&k_emu);
  void *exe = NULL;
  fsl_status st = fsl_backend_cuda.compile(p, NULL, &exe);
  if (st != FSL_OK) fail_msg("%s: compile: %s", what, fsl_last_error());
  const fsl_cuda_exe *x = exe;
  assert_int_equal(x->graphs, graphs);
  for (int i = 0; i < x->gpu.low.n_steps; i++) {
    if (x->gpu.low.steps[i].kind == FSL_STEP_HOST) rs.host_steps++;
    else if (x->gpu.low.steps[i].kind == FSL_STEP_LIB) rs.lib_steps++;
    else rs.gen_steps++;
  }
  rs.segments = x->n_seg;
  if (graphs) rs.unordered = check_graphs(x, &rs.war_only);
  else assert_int_equal(x->n_seg, 0);
  E.launches = E.graph_launches = E.matmuls = 0;
  void *got[4] = {0};
  const int runs = graphs ? 2 : 1; /* a second run reuses everything */
  for (int rep = 0; rep < runs; rep++) {
    st = fsl_backend_cuda.run(exe, (const void *const *)inputs, got);
    if (st != FSL_OK) fail_msg("%s: run: %s", what, fsl_last_error());
    for (int o = 0; o < g->n_outputs; o++) {
      const fsl_value *v = g->outputs[o];
      int bad = 0;
      for (int64_t i = 0; i < fsl_value_numel(v); i++) {
        double a = fsl_load_f64(v->dtype, got[o], i), b = fsl_load_f64(v->dtype, want[o], i);
        if (!(fabs(a - b) <= 1e-4 * fmax(1.0, fabs(b))) && bad++ < 5)
          fprintf(stderr, "%s: output %d [%lld] got %.9g want %.9g\n", what, o, (long long)i, a, b);
      }
      if (bad) fail_msg("%s: output %d differs from the reference", what, o);
      free(got[o]);
      got[o] = NULL;
    }
  }
  assert_int_equal(E.graph_launches, graphs ? runs * x->n_seg : 0);
  assert_int_equal(E.launches, graphs ? 0 : runs * rs.gen_steps);
  assert_int_equal(E.matmuls, runs * rs.lib_steps);
  fsl_backend_exe_info ei;
  fsl_backend_cuda.exe_info(exe, &ei);
  assert_int_equal(ei.n_kernels, p->kernels.n);
  assert_int_equal(ei.arena_bytes, x->gpu.mem->peak_bytes);
  fsl_backend_cuda.free_exe(exe);
  assert_int_equal(E.n_alloc, 0); /* everything the executable allocated is freed */
  fsl_cuda_use_driver(NULL);
  unsetenv("FSL_CUDA_GRAPHS");
  return rs;
}

/* x[48, 300]: two independent branches (max(x, 0) and 2 sigmoid(x)), their
 * sum, a softmax over rows (REDUCE), a matmul with a bias (LINEAR + its
 * epilogue), and, when `host`, a float16 round trip the dialect refuses
 * (a host step between two graphs). */
static fsl_graph *branches_graph(bool host) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t xd[2] = {48, 300}, wd[2] = {300, 40}, bd[1] = {40}, ax[1] = {1};
  fsl_value *x = input(g, "x", 2, xd);
  set_origin(&b, 0, "relu", "Relu");
  fsl_value *a = fsl_b_binary_scalar(&b, FSL_OP_max, x, 0.0);
  set_origin(&b, 1, "sigmoid", "Sigmoid");
  fsl_value *s = fsl_b_unary(&b, FSL_OP_sigmoid, x);
  set_origin(&b, 2, "twice", "Mul");
  s = fsl_b_binary_scalar(&b, FSL_OP_mul, s, 2.0);
  set_origin(&b, 3, "sum", "Add");
  fsl_value *c = fsl_b_binary(&b, FSL_OP_add, a, s);
  if (host) {
    set_origin(&b, 4, "to_half", "Cast");
    c = fsl_b_cast(&b, c, FSL_DT_F16);
    set_origin(&b, 5, "neg_half", "Neg");
    c = fsl_b_unary(&b, FSL_OP_neg, c);
    set_origin(&b, 6, "to_float", "Cast");
    c = fsl_b_cast(&b, c, FSL_DT_F32);
  }
  set_origin(&b, 7, "softmax", "Softmax");
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, c, ax, 1, true);
  fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, c, m));
  fsl_value *sm = fsl_b_binary(&b, FSL_OP_div, e, fsl_b_reduce(&b, FSL_OP_reduce_sum, e, ax, 1, true));
  set_origin(&b, 8, "fc", "Gemm");
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, fsl_b_matmul(&b, sm, const_f32(&b, 2, wd, 7)), const_f32(&b, 1, bd, 9));
  set_origin(&b, 9, "relu2", "Relu");
  y = fsl_b_binary_scalar(&b, FSL_OP_max, y, 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, c);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  return g;
}

/* x[48, 300]: a = sigmoid(x), b = sum of a's rows, c = exp(x), y = c * b.
 * Unfused, c can take a's bytes in the arena once b has read them: the
 * kernel writing c must wait for the one reading a (an anti-dependency,
 * no data flows between them). */
static fsl_graph *reuse_graph(void) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t xd[2] = {48, 300}, ax[1] = {1};
  fsl_value *x = input(g, "x", 2, xd);
  set_origin(&b, 0, "sigmoid", "Sigmoid");
  fsl_value *a = fsl_b_unary(&b, FSL_OP_sigmoid, x);
  set_origin(&b, 1, "rowsum", "ReduceSum");
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, a, ax, 1, true);
  set_origin(&b, 2, "exp", "Exp");
  fsl_value *c = fsl_b_unary(&b, FSL_OP_exp, x);
  set_origin(&b, 3, "scale", "Mul");
  fsl_value *y = fsl_b_binary(&b, FSL_OP_mul, c, s);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  return g;
}

static void check_graph_all(fsl_graph *g, bool host, const char *name) {
  void *in[1] = {random_data(g->inputs[0], -3, 3)};
  void *want[4] = {0};
  assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
  for (int si = 0; si < FSL_STRATEGY_COUNT; si++) {
    fsl_plan p;
    assert_int_equal(fsl_plan_build(g, (fsl_strategy)si, NULL, &p), FSL_OK);
    /* graphs on, off, and on with the generated matmul instead of the library's */
    for (int variant = 0; variant < 3; variant++) {
      bool graphs = variant != 1, library = variant != 2;
      char what[128];
      snprintf(what, sizeof what, "%s, %s, graphs %s, library matmul %s", name, fsl_strategy_name((fsl_strategy)si),
               graphs ? "on" : "off", library ? "on" : "off");
      if (!library) setenv("FSL_CUDA_CUBLASLT", "0", 1);
      run_stats rs = check_plan(g, &p, in, want, graphs, what);
      unsetenv("FSL_CUDA_CUBLASLT");
      assert_int_equal(rs.lib_steps, library && strcmp(name, "arena reuse") ? 1 : 0);
      if (host) assert_true(rs.host_steps >= 1);
      else assert_int_equal(rs.host_steps, 0);
      if (graphs && si == FSL_STRATEGY_UNFUSED && strcmp(name, "arena reuse")) {
        /* max(x, 0) and sigmoid(x) are independent kernels: unordered in the graph */
        assert_true(rs.unordered > 0);
        assert_int_equal(rs.segments, host ? 2 : 1);
      }
      if (graphs && si == FSL_STRATEGY_UNFUSED && !strcmp(name, "arena reuse")) assert_true(rs.war_only > 0);
    }
    fsl_plan_free(&p);
  }
  for (int o = 0; o < g->n_outputs; o++) free(want[o]);
  free(in[0]);
}

static void test_plans_in_emulation(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  fsl_graph *g = branches_graph(false);
  check_graph_all(g, false, "branches");
  fsl_graph_free(g);
  g = branches_graph(true);
  check_graph_all(g, true, "branches + float16 on the host");
  fsl_graph_free(g);
  g = reuse_graph();
  check_graph_all(g, false, "arena reuse");
  fsl_graph_free(g);
}

/* A Gather whose index (a graph input) is out of range: the kernel's error
 * word makes run fail naming the kernel, and the next good run works. */
static void test_error_word(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dd[2] = {10, 4}, id[1] = {3};
  fsl_value *data = input(g, "data", 2, dd);
  fsl_value *idx = input_dt(g, FSL_DT_I64, 1, id);
  set_origin(&b, 0, "the_gather", "Gather");
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_mul, fsl_b_gather(&b, data, idx, 0), 3.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, NULL, &p), FSL_OK);
  fsl_cuda_use_driver(&k_emu);
  void *exe = NULL;
  if (fsl_backend_cuda.compile(&p, NULL, &exe) != FSL_OK) fail_msg("%s", fsl_last_error());
  float d[40];
  fill(d, 40, 3);
  int64_t good[3] = {1, 9, -2}, bad[3] = {1, 10, 0};
  void *out[1] = {0};
  const void *in_bad[2] = {d, bad}, *in_good[2] = {d, good};
  assert_int_equal(fsl_backend_cuda.run(exe, in_bad, out), FSL_ERR_RUNTIME);
  assert_null(out[0]);
  assert_non_null(strstr(fsl_last_error(), "gather index out of range"));
  assert_non_null(strstr(fsl_last_error(), "the_gather"));
  assert_int_equal(fsl_backend_cuda.run(exe, in_good, out), FSL_OK);
  const float *yo = out[0];
  for (int i = 0; i < 4; i++) {
    assert_float_equal(yo[i], 3 * d[4 + i], 1e-6);
    assert_float_equal(yo[4 + i], 3 * d[36 + i], 1e-6);
    assert_float_equal(yo[8 + i], 3 * d[32 + i], 1e-6);
  }
  free(out[0]);
  fsl_backend_cuda.free_exe(exe);
  fsl_cuda_use_driver(NULL);
  fsl_plan_free(&p);
  fsl_graph_free(g);
}

/* Calibration through the driver table: every number positive, written
 * to the cache and read back without measuring (no kernel launched), a
 * record per graph mode; force measures again. */
static void test_calibrate(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  char dir[] = "/tmp/fsl_cuda_cal_XXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("FSL_CACHE_DIR", dir, 1);
  fsl_cuda_use_driver(&k_emu);
  fsl_device d, again;
  E.launches = E.graph_launches = E.matmuls = 0;
  if (fsl_backend_cuda.calibrate(&d, 0, true) != FSL_OK) fail_msg("%s", fsl_last_error());
  assert_true(d.bandwidth > 0 && d.peak_flops > 0 && d.elem_flops > 0 && d.launch_s > 0);
  assert_non_null(strstr(d.name, "cuda: CUDA emulated"));
  assert_true(E.graph_launches > 0 && E.matmuls > 0); /* graph nodes timed, the library matmul timed */
  int launched = E.launches + E.graph_launches + E.matmuls;
  assert_int_equal(fsl_backend_cuda.calibrate(&again, 0, false), FSL_OK);
  assert_int_equal(E.launches + E.graph_launches + E.matmuls, launched); /* from the cache */
  assert_string_equal(again.name, d.name);
  assert_true(fabs(again.bandwidth - d.bandwidth) <= 1e-6 * d.bandwidth);
  assert_true(fabs(again.launch_s - d.launch_s) <= 1e-6 * d.launch_s);
  setenv("FSL_CUDA_GRAPHS", "0", 1); /* per stream launch: a record of its own */
  int graph_launches = E.graph_launches;
  assert_int_equal(fsl_backend_cuda.calibrate(&again, 0, false), FSL_OK);
  assert_int_equal(E.graph_launches, graph_launches);
  assert_non_null(strstr(again.name, "(no graphs)"));
  unsetenv("FSL_CUDA_GRAPHS");
  fsl_cuda_use_driver(NULL);
  unsetenv("FSL_CACHE_DIR");
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* The real driver on a machine without one: a clear error, no crash. */
static void test_no_driver(void **state) {
  (void)state;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    fprintf(stderr, "test_cuda_backend: this machine has an NVIDIA driver: the no-driver error is not checked\n");
    skip();
  }
  fsl_graph *g = branches_graph(false);
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_GREEDY, NULL, &p), FSL_OK);
  fsl_cuda_use_driver(NULL);
  assert_ptr_equal(fsl_cuda_driver(), &fsl_cu_libcuda);
  void *exe = (void *)1;
  assert_int_equal(fsl_backend_cuda.compile(&p, NULL, &exe), FSL_ERR_UNSUPPORTED);
  assert_null(exe);
  assert_non_null(strstr(fsl_last_error(), "no NVIDIA driver"));
  fsl_device dev;
  assert_int_equal(fsl_backend_cuda.calibrate(&dev, 0, false), FSL_ERR_UNSUPPORTED);
  assert_non_null(strstr(fsl_last_error(), "no NVIDIA driver"));
  char fp[128];
  fsl_backend_cuda.fingerprint(fp, sizeof fp);
  assert_string_equal(fp, "cuda: no device");
  /* supports needs no device: the generated kernels are the dialect's */
  for (int i = 0; i < p.kernels.n; i++) assert_true(fsl_backend_cuda.supports(g, p.kernels.k[i]));
  fsl_plan_free(&p);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_error_word),
      cmocka_unit_test(test_calibrate),
      cmocka_unit_test(test_plans_in_emulation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
