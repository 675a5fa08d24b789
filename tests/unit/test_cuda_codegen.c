/*
 * test_cuda_codegen.c — the CUDA C of plans (src/backend/cuda/emit.h)
 * through NVRTC, without a GPU: every kernel of the optimal plans of
 * Debian's ONNX node tests, and of the real models when `make models` has
 * fetched them, is generated in the CUDA dialect (LOOP, REDUCE, and LINEAR
 * as prologue + matmul/conv + epilogue) and compiled by NVRTC to CUBINs
 * for sm_90 (H100) and sm_80 (A100) with no warning and no register
 * spills; ptxas's resource report is checked on kernels whose resources
 * are known.  REDUCE rows with a thread block each (warp shuffles and
 * __shared__ memory) and the tiled matmul and convolution are checked for
 * their launch and resources, and run on the CPU through a small emulation
 * of CUDA's device side (cuda_emu/: a POSIX thread per CUDA thread, g++)
 * against the reference interpreter.  Kernels the
 * dialect refuses (f16/bf16, multi-pass reductions: counted) are not
 * compiled; a kernel NVRTC rejects or warns about fails the test with its
 * log.  Running the kernels on a GPU is the CUDA runtime's job (issue 11).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include <dlfcn.h>
#include <math.h>
#include <unistd.h>

#include "backend/cuda/dialect_cuda.h"
#include "backend/cuda/emit.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "fission/fission.h"
#include "onnx/onnx_import.h"
#include "orchestrate/orchestrate.h"
#include "passes/passes.h"
#include "test_graph.h"
#include "cuda_emu/emu_build.h"

#define B_INIT(g) {.g = (g), .st = FSL_OK, .fold = false}

#define DEBIAN_NODE "/usr/share/libonnx-testdata/data/node"
#define BATCH_KERNELS 400   /* kernels per NVRTC compile */

static const char *const k_archs[] = {"sm_90", "sm_80"};

typedef struct tally {
  fsl_cuda_emitter e;  /* functions not compiled yet */
  int compiled, refused, models, skipped, kernels;
} tally;

/* Compiles what e holds for every arch: no error, no warning, and ptxas
 * reports every generated function. */
static void flush(tally *t) {
  for (size_t a = 0; t->e.n_fn > 0 && a < FSL_ARRAY_LEN(k_archs); a++) {
    fsl_cuda_build b;
    fsl_status st = fsl_cuda_compile(t->e.src.p, k_archs[a], &b);
    if (st != FSL_OK) fail_msg("%s", fsl_last_error());
    assert_true(b.cubin_bytes > 4 && !memcmp(b.cubin, "\177ELF", 4));
    for (int i = 0; i < t->e.n_fn; i++) {
      char name[32];
      snprintf(name, sizeof name, "fsl_k%d", t->e.fn[i].id);
      const fsl_cuda_usage *u = fsl_cuda_build_find(&b, name);
      if (!u || u->registers <= 0 || u->const_bytes <= 0) fail_msg("%s: no resource report for %s", k_archs[a], name);
      /* loops in a thread unroll 4 times at most (dialect_cuda.c): nothing spills */
      if (u->spill_store_bytes != 0) fail_msg("%s: %s spills %lld bytes", k_archs[a], name, (long long)u->spill_store_bytes);
    }
    fsl_cuda_build_free(&b);
  }
  t->compiled += t->e.n_fn;
  t->refused += t->e.n_refused;
  t->kernels += t->e.n_kernels;
  fsl_cuda_emitter_free(&t->e);
}

/* Plans model `path` (optimal, default device) and adds its kernels; a
 * model the front end cannot take with static shapes is skipped. */
static void add_model(tally *t, const char *path) {
  void *buf = NULL;
  size_t len = 0;
  fsl_graph *onnx = NULL, *g = NULL;
  if (fsl_read_file(path, (size_t)1 << 30, &buf, &len) != FSL_OK || fsl_onnx_import(buf, len, NULL, &onnx) != FSL_OK ||
      fsl_fission(onnx, &g) != FSL_OK || fsl_pass_cse(g) != FSL_OK || fsl_pass_dce(g) != FSL_OK ||
      fsl_graph_verify(g) != FSL_OK) {
    fsl_error_clear();
    t->skipped++;
    free(buf);
    fsl_graph_free(onnx);
    fsl_graph_free(g);
    return;
  }
  fsl_device dev;
  fsl_device_default(&dev);
  dev.linear_views = true; /* LINEAR kernels with permute/expand/slice prologues: the tiles read them in place */
  fsl_plan p;
  if (fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, &dev, &p) != FSL_OK) {
    fsl_error_clear();
    t->skipped++;
  } else {
    t->models++;
    fsl_status st = fsl_cuda_emit_plan(&t->e, &p);
    if (st != FSL_OK) fail_msg("%s: %s", path, fsl_last_error());
    if (t->e.n_fn >= BATCH_KERNELS) flush(t);
    fsl_plan_free(&p);
  }
  free(buf);
  fsl_graph_free(onnx);
  fsl_graph_free(g);
}

/* A small source first: a clear message when NVRTC itself is broken;
 * then the errors: a rejected source, a warning, a virtual arch. */
static void test_nvrtc_smoke(void **state) {
  (void)state;
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_cuda, &src);
  fsl_sbuf_puts(&src, "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = fsl_expf(fsl_maxf(y[0], 1.0f)); }\n");
  fsl_cuda_build b;
  for (size_t a = 0; a < FSL_ARRAY_LEN(k_archs); a++) {
    if (fsl_cuda_compile(src.p, k_archs[a], &b) != FSL_OK) fail_msg("%s", fsl_last_error());
    assert_int_equal(b.n, 1);
    assert_non_null(fsl_cuda_build_find(&b, "k"));
    assert_null(fsl_cuda_build_find(&b, "fsl_k0"));
    fsl_cuda_build_free(&b);
  }
  fsl_sbuf_free(&src);
  /* a source NVRTC rejects: an error with its log, not a crash */
  assert_int_equal(fsl_cuda_compile("__global__ void k( {", "sm_90", &b), FSL_ERR_RUNTIME);
  assert_null(b.cubin);
  assert_non_null(strstr(fsl_last_error(), "NVRTC (sm_90) rejected"));
  /* a warning (a missing return) is an error too, with the log */
  assert_int_equal(fsl_cuda_compile("__device__ int f(int x) { if (x) return 1; }\n"
                                    "extern \"C\" __global__ void k(int *y) { y[0] = f(y[1]); }", "sm_80", &b),
                   FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "warnings are errors"));
  assert_non_null(strstr(fsl_last_error(), "missing return"));
  fsl_cuda_build_free(&b);
  /* only real architectures: a CUBIN needs ptxas */
  assert_int_equal(fsl_cuda_compile("", "compute_90", &b), FSL_ERR_ARG);
  assert_int_equal(fsl_cuda_compile("", "sm_90;rm -rf", &b), FSL_ERR_ARG);
  fsl_error_clear();
}

/* ptxas's report, read per kernel: behaviour, not exact numbers. */
static void test_resources(void **state) {
  (void)state;
  const char *src =
      "extern \"C\" __global__ void plain(const float *x, float *y) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
      "y[i] = x[i] * 2.0f; }\n"
      /* a large array indexed at run time lives in local memory (the stack frame) */
      "extern \"C\" __global__ void local(const float *x, float *y, int n) { float a[1024]; "
      "for (int i = 0; i < 1024; i++) a[i] = x[i * n]; y[threadIdx.x] = a[n & 1023] + a[(n * 7) & 1023]; }\n"
      "extern \"C\" __global__ void shared(float *y) { __shared__ float s[256]; s[threadIdx.x] = y[threadIdx.x]; "
      "__syncthreads(); y[threadIdx.x] = s[255 - threadIdx.x]; }\n";
  for (size_t a = 0; a < FSL_ARRAY_LEN(k_archs); a++) {
    fsl_cuda_build b;
    if (fsl_cuda_compile(src, k_archs[a], &b) != FSL_OK) fail_msg("%s", fsl_last_error());
    assert_int_equal(b.n, 3);
    const fsl_cuda_usage *p = fsl_cuda_build_find(&b, "plain"), *l = fsl_cuda_build_find(&b, "local"),
                         *s = fsl_cuda_build_find(&b, "shared");
    assert_true(p && l && s);
    assert_true(p->registers > 0 && p->registers < 64);
    assert_int_equal(p->stack_bytes, 0);
    assert_int_equal(p->spill_store_bytes, 0);
    assert_int_equal(p->shared_bytes, 0);
    assert_true(p->const_bytes >= 16); /* two pointer parameters, at least */
    assert_true(l->stack_bytes >= 4096);
    assert_true(l->spill_store_bytes >= 0 && l->spill_load_bytes >= 0);
    assert_true(s->shared_bytes >= 1024);
    assert_true(s->barriers >= 1);
    fsl_cuda_build_free(&b);
  }
}

/* ---- group kernels: launch, resources, and a run on the CPU ---- */

typedef struct gcase {
  fsl_graph *g;
  const fsl_node *lin;   /* the matmul or conv rendered alone, or NULL: every node as one kernel */
  int id;
  fsl_cg_launch launch;
  void *in[4];
  char what[64];
  int want_block;        /* block size the code must assume (0: any) */
  int lanes;             /* a REDUCE case's threads per row */
} gcase;

/* Renders case c as function fsl_k<c->id> into b. */
static void gcase_render(gcase *c, fsl_sbuf *b) {
  fsl_graph *g = c->g;
  fsl_node *nodes[32];
  assert_true(g->n_nodes <= 32);
  for (int i = 0; i < g->n_nodes; i++) nodes[i] = g->nodes[i];
  fsl_cg_spec spec = {.g = g, .id = c->id, .n_nodes = g->n_nodes, .nodes = nodes, .n_in = g->n_inputs, .in = g->inputs,
                      .n_out = g->n_outputs, .out = g->outputs};
  c->launch.group_size = -1;
  fsl_status st = !c->lin                         ? fsl_codegen_kernel(&fsl_dialect_cuda, &spec, b, &c->launch)
                  : c->lin->op == FSL_OP_matmul ? fsl_codegen_matmul(&fsl_dialect_cuda, c->id, c->lin, NULL, b, &c->launch)
                                                  : fsl_codegen_conv(&fsl_dialect_cuda, c->id, c->lin, NULL, b, &c->launch);
  if (st != FSL_OK) fail_msg("%s: %s", c->what, fsl_last_error());
  if (c->launch.group_size != c->want_block)
    fail_msg("%s: block of %d threads, want %d", c->what, c->launch.group_size, c->want_block);
}

/* Reductions as test_opencl's test_reduce_rows (reduce_rows_graph) over
 * `rows` rows of `len`. */
static void reduce_case(gcase *c, int64_t rows, int64_t len) {
  fsl_graph *g = c->g = fsl_graph_new();
  fsl_value *x = reduce_rows_graph(g, rows, len);
  c->in[0] = random_data(x, -4, 4);
  if (len == 33) ((float *)c->in[0])[rows * len - 2] = NAN; /* the last row's max and min are NaN */
  snprintf(c->what, sizeof c->what, "reduce %lld rows of %lld", (long long)rows, (long long)len);
}

/* A batched matmul [bt, m, k] x [bt, k, n] alone (rendered as the matmul
 * primitive; the builder's reshapes around it move no data). */
static void matmul_case(gcase *c, int64_t bt, int64_t m, int64_t k, int64_t n) {
  fsl_graph *g = c->g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t ad[] = {bt, m, k}, bd[] = {bt, k, n};
  fsl_value *a = input(g, "a", 3, ad), *w = input(g, "b", 3, bd);
  fsl_value *z = fsl_b_matmul(&b, a, w);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  /* the matmul primitive between reshapes (batch dims folded; the same data) */
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == FSL_OP_matmul) c->lin = g->nodes[i];
  assert_non_null(c->lin);
  assert_int_equal(fsl_value_numel(c->lin->in[0]), fsl_value_numel(a));
  assert_int_equal(fsl_value_numel(c->lin->in[1]), fsl_value_numel(w));
  c->in[0] = random_data(a, -1, 1);
  c->in[1] = random_data(w, -1, 1);
  snprintf(c->what, sizeof c->what, "matmul %lld x %lldx%lldx%lld", (long long)bt, (long long)m, (long long)k, (long long)n);
}

/* A 2-D convolution alone: n images, ci -> co channels in `group` groups,
 * size x size input, kernel ks, stride, pad. */
static void conv_case(gcase *c, int64_t n, int64_t ci, int64_t co, int64_t group, int64_t size, int64_t ks, int64_t stride,
                      int64_t pad) {
  fsl_graph *g = c->g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t xd[4] = {n, ci, size, size}, wd[4] = {co, ci / group, ks, ks};
  int64_t st[2] = {stride, stride}, dl[2] = {1, 1}, pads[4] = {pad, pad, pad, pad};
  fsl_value *x = input(g, "x", 4, xd), *w = input(g, "w", 4, wd);
  fsl_value *y = fsl_b_conv(&b, x, w, st, dl, pads, group, NULL);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  assert_int_equal(g->n_nodes, 1);
  c->lin = g->nodes[0];
  c->in[0] = random_data(x, -1, 1);
  c->in[1] = random_data(w, -1, 1);
  snprintf(c->what, sizeof c->what, "conv %lldx%lld->%lld group %lld", (long long)n, (long long)ci, (long long)co,
           (long long)group);
}

/* Runs case c in the emulation with the launch the generator reported
 * (at most 5 blocks: the rest of the rows or tiles through the
 * grid-stride loop over blocks; a kernel for any block size with 2
 * blocks of 33 threads) and compares every output with the reference. */
static void emu_check(void *h, gcase *c, double tol) {
  emu_launch_fn launch = (emu_launch_fn)(uintptr_t)dlsym(h, "fsl_emu_launch");
  char name[32];
  snprintf(name, sizeof name, "fsl_k%d", c->id);
  emu_kernel k = (emu_kernel)(uintptr_t)dlsym(h, name);
  assert_true(launch && k);
  fsl_graph *g = c->g;
  void *want[8] = {0}, *got[8] = {0};
  assert_int_equal(fsl_ref_run(g, (const void *const *)c->in, want), FSL_OK);
  for (int o = 0; o < g->n_outputs; o++) {
    got[o] = calloc(1, (size_t)fsl_value_nbytes(g->outputs[o]) + 1);
    assert_non_null(got[o]);
  }
  int err = 0, bad = 0;
  unsigned block = c->launch.group_size > 0 ? (unsigned)c->launch.group_size : 33;
  unsigned grid = c->launch.group_size > 0 ? (unsigned)(c->launch.groups < 5 ? c->launch.groups : 5) : 2;
  assert_int_equal(launch(k, grid, block, (const void *const *)c->in, got, &err, &bad), 0);
  if (bad) fail_msg("%s: a shuffle names lanes outside the block or leaves this one out", c->what);
  assert_int_equal(err, 0);
  for (int o = 0; o < g->n_outputs; o++) {
    const fsl_value *v = g->outputs[o];
    int nbad = 0;
    for (int64_t i = 0; i < fsl_value_numel(v); i++) {
      double a = fsl_load_f64(v->dtype, got[o], i), b = fsl_load_f64(v->dtype, want[o], i);
      bool ok = (a != a && b != b) || fabs(a - b) <= tol * fmax(1.0, fabs(b));
      if (!ok && nbad++ < 5)
        fprintf(stderr, "%s: output %d [%lld] got %.9g want %.9g\n", c->what, o, (long long)i, a, b);
    }
    if (nbad) fail_msg("%s: output %d: %d elements differ", c->what, o, nbad);
    free(got[o]);
    free(want[o]);
  }
}

/* REDUCE rows of 1 to 1000 elements (one thread per row for rows of one
 * element; the smallest power of two of threads covering the row up to a
 * warp, no shared memory and no barrier; beyond a warp up to 256 threads,
 * the warps' partials through __shared__ memory; rows shorter than 256
 * threads several to a block), over 3 and 130 rows and one row of 5,
 * and the tiled matmul and convolution at odd sizes: the launch each
 * reports, ptxas's shared memory and barriers on sm_90 and sm_80, and a
 * run of each in the CPU emulation against the reference (the f32 sums
 * in double: 1e-4, as test_opencl's). */
static void test_group_kernels(void **state) {
  (void)state;
  int64_t lens[] = {1, 5, 16, 31, 32, 33, 64, 255, 256, 257, 1000}, rows[] = {3, 130};
  int lanes[] = {0, 8, 16, 32, 32, 64, 64, 256, 256, 256, 256}; /* threads per row */
  enum { NR = 11 * 2 + 1, NC = NR + 4 };
  gcase cs[NC];
  memset(cs, 0, sizeof cs);
  int n = 0;
  for (int t = 0; t < 11; t++)
    for (int r = 0; r < 2; r++) {
      reduce_case(&cs[n], rows[r], lens[t]);
      /* rows shorter than a block share one: up to 256 threads, no more rows than there are */
      int R = 1;
      while (lanes[t] && R * 2 * lanes[t] <= 256 && R < rows[r]) R *= 2;
      cs[n].lanes = lanes[t];
      cs[n++].want_block = lanes[t] * R;
    }
  reduce_case(&cs[n], 1, 5); /* one row of 5: a block of 8 threads, the shuffles naming those 8 */
  cs[n].lanes = 8;
  cs[n++].want_block = 8;
  matmul_case(&cs[n++], 1, 65, 33, 17);
  matmul_case(&cs[n++], 2, 7, 13, 5);
  conv_case(&cs[n++], 1, 3, 4, 1, 5, 3, 1, 1);
  conv_case(&cs[n++], 2, 4, 6, 2, 9, 3, 2, 0);
  for (int i = NR; i < NC; i++) cs[i].want_block = 256;
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_cuda, &src);
  for (int i = 0; i < NC; i++) {
    cs[i].id = i;
    gcase_render(&cs[i], &src);
  }
  assert_false(src.oom);
  assert_non_null(strstr(src.p, "__shfl_xor_sync(0xffffffffu, a0, s_, 32)"));
  assert_non_null(strstr(src.p, "__shfl_xor_sync(0xffffffffu, a0, s_, 8)")); /* rows of 5 sharing a warp */
  assert_non_null(strstr(src.p, "__shfl_xor_sync(0xffu, a0, s_, 8)"));       /* a block of one row of 5 */
  /* ptxas: shared memory and barriers exactly where a row spans more than a warp, or a tile */
  for (size_t a = 0; a < FSL_ARRAY_LEN(k_archs); a++) {
    fsl_cuda_build b;
    if (fsl_cuda_compile(src.p, k_archs[a], &b) != FSL_OK) fail_msg("%s", fsl_last_error());
    for (int i = 0; i < NC; i++) {
      char name[32];
      snprintf(name, sizeof name, "fsl_k%d", i);
      const fsl_cuda_usage *u = fsl_cuda_build_find(&b, name);
      assert_non_null(u);
      bool multi_warp = i < NR ? cs[i].lanes > 32 : true;
      if ((u->shared_bytes > 0) != multi_warp || (u->barriers > 0) != multi_warp)
        fail_msg("%s (%s): %lld bytes of shared memory, %d barriers", cs[i].what, k_archs[a], (long long)u->shared_bytes,
                 u->barriers);
      if (i >= NR) assert_true(u->shared_bytes >= 2 * 16 * 16 * 4);
      assert_int_equal(u->spill_store_bytes, 0);
    }
    fsl_cuda_build_free(&b);
  }
  char dir[] = "/tmp/fsl_cuda_emu_XXXXXX";
  assert_non_null(mkdtemp(dir));
  void *h = emu_build(dir, src.p, "test_cuda_codegen");
  rmdir(dir);
  for (int i = 0; i < NC; i++) {
    if (h) emu_check(h, &cs[i], i < NR ? 1e-4 : 1e-5);
    for (int j = 0; j < 4; j++) free(cs[i].in[j]);
    fsl_graph_free(cs[i].g);
  }
  if (h) dlclose(h);
  fsl_sbuf_free(&src);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_node_tests_compile(void **state) {
  (void)state;
  DIR *d = opendir(DEBIAN_NODE);
  if (!d) skip();
  char **names = NULL;
  int n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "test_", 5)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      names = realloc(names, sizeof *names * (size_t)cap);
      assert_non_null(names);
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  tally t = {0};
  for (int i = 0; i < n; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", DEBIAN_NODE, names[i]);
    add_model(&t, path);
    free(names[i]);
  }
  free(names);
  /* the real models, when fetched (make models) */
  const char *models[] = {"minilm_l3", "resnet18", "mobilenet_v3_small", "segformer_b0", "yolox_nano",
                          "efficientvit_b1", "transformer_encoder", "style_transfer_small"};
  for (size_t i = 0; i < FSL_ARRAY_LEN(models); i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/models/%s.onnx", FSL_SOURCE_DIR, models[i]);
    struct stat st;
    if (stat(path, &st) == 0) add_model(&t, path);
  }
  flush(&t);
  fprintf(stderr,
          "cuda codegen: %d models planned (%d skipped), %d plan kernels: %d functions compiled by NVRTC for sm_90 and "
          "sm_80, %d kernels refused\n",
          t.models, t.skipped, t.kernels, t.compiled, t.refused);
  assert_true(t.models > 500);
  assert_true(t.compiled > 10 * t.refused);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvrtc_smoke),
      cmocka_unit_test(test_resources),
      cmocka_unit_test(test_group_kernels),
      cmocka_unit_test(test_node_tests_compile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
