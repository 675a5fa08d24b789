/* test_cpu.c — the CPU backend (src/backend/cpu): small primitive graphs
 * built with the builder, run through plans of every shape (one kernel per
 * node, the whole graph as one kernel where legal, and each strategy's
 * plan) and compared with the reference interpreter on random inputs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <unistd.h>
#include <time.h>
#include <elf.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "backend/cpu/compile.h"
#include "backend/cpu/objcheck.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/dialect_c.h"
#include "eval/eval.h"
#include "runtime/memplan.h"
#include "fission/builder.h"
#include "test_graph.h"

/* ---- helpers ---- */

/* Compares an output of the CPU backend with the reference. */
static void compare(const fsl_value *v, const void *got, const void *want, double tol, const char *what) {
  int64_t n = fsl_value_numel(v);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    if (fsl_dtype_is_float(v->dtype)) {
      double a = fsl_load_f64(v->dtype, got, i), b = fsl_load_f64(v->dtype, want, i);
      ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= tol * fmax(1.0, fabs(b));
      if (!ok && bad < 5) fprintf(stderr, "%s: '%s'[%lld] got %.9g want %.9g\n", what, v->name, (long long)i, a, b);
    } else {
      ok = fsl_load_i64(v->dtype, got, i) == fsl_load_i64(v->dtype, want, i);
      if (!ok && bad < 5)
        fprintf(stderr, "%s: '%s'[%lld] got %lld want %lld\n", what, v->name, (long long)i,
                (long long)fsl_load_i64(v->dtype, got, i), (long long)fsl_load_i64(v->dtype, want, i));
    }
    bad += !ok;
  }
  assert_int_equal(bad, 0);
}

/* The most outputs a graph of check_graph and check_plan may have. */
#define MAX_OUTPUTS 8

/* The executable's arena (arena_bytes) is no more than the executors'
 * memory plan of p says (less where a convolution adds its residual in
 * place: sum_in_place in cpu.c), and that plan is sound. */
static void check_arena(const fsl_plan *p, int64_t arena_bytes) {
  fsl_memplan mp;
  assert_int_equal(fsl_memplan_build(p, &fsl_memplan_executor, &mp), FSL_OK);
  assert_true(arena_bytes <= mp.peak_bytes);
  assert_int_equal(fsl_memplan_verify(p, &mp), FSL_OK);
  fsl_memplan_free(&mp);
}

/* Whether oneDNN's ISA is AVX2 without AVX-512 (FSL_CPU_ISA=avx2, or such
 * a CPU): where fissile's Winograd and oneDNN's sum post-op run. */
static bool onednn_avx2_only(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 && (isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
}

/* Runs plan p on the CPU backend and compares with ref outputs. */
static void check_plan(const fsl_plan *p, void **inputs, void **want, double tol, const char *what) {
  const fsl_graph *g = p->g;
  void *exe = NULL;
  fsl_status st = fsl_backend_cpu.compile(p, &exe);
  if (st != FSL_OK) fprintf(stderr, "%s: compile: %s\n", what, fsl_last_error());
  assert_int_equal(st, FSL_OK);
  void *got[MAX_OUTPUTS] = {0};
  assert_true(g->n_outputs <= MAX_OUTPUTS);
  st = fsl_backend_cpu.run(exe, (const void *const *)inputs, got);
  if (st != FSL_OK) fprintf(stderr, "%s: run: %s\n", what, fsl_last_error());
  assert_int_equal(st, FSL_OK);
  for (int i = 0; i < g->n_outputs; i++) {
    compare(g->outputs[i], got[i], want[i], tol, what);
    free(got[i]);
  }
  /* every kernel of these plans runs natively: none falls back */
  fsl_backend_exe_info ei;
  fsl_backend_cpu.exe_info(exe, &ei);
  if (ei.n_fallback) fprintf(stderr, "%s: fallback: %s\n", what, ei.fallback_why);
  assert_int_equal(ei.n_kernels, p->kernels.n);
  assert_int_equal(ei.n_native + ei.n_fallback + ei.n_opaque, ei.n_kernels);
  assert_int_equal(ei.n_fallback, 0);
  check_arena(p, ei.arena_bytes);
  fsl_cpu_stats stats;
  fsl_cpu_exe_stats(exe, &stats);
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "%s: %d kernels, %d generated, %d onednn, %d fallback, %d opaque%s\n", what, stats.n_kernels,
            stats.n_generated, stats.n_onednn, stats.n_fallback, stats.n_opaque, stats.cache_hit ? " (cached)" : "");
  fsl_backend_cpu.free_exe(exe);
}

/* A plan made of the given kernels (node sets), verified. */
static bool hand_plan(const fsl_graph *g, fsl_plan *p, fsl_node ***sets, const int *sizes, int n) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->kernels.g = g;
  int *topo = fsl_graph_topo_index(g);
  assert_non_null(topo);
  for (int i = 0; i < n; i++) {
    fsl_kernel *k = NULL;
    const char *why = NULL;
    assert_int_equal(fsl_kernel_make(g, topo, sets[i], sizes[i], &k, &why), FSL_OK);
    if (!k) {
      if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "hand_plan: kernel %d: %s\n", i, why ? why : "?");
      free(topo);
      fsl_plan_free(p);
      return false;
    }
    if (p->kernels.n == p->kernels.cap) {
      p->kernels.cap = p->kernels.cap ? 2 * p->kernels.cap : 8;
      p->kernels.k = realloc(p->kernels.k, sizeof(fsl_kernel *) * (size_t)p->kernels.cap);
      assert_non_null(p->kernels.k);
    }
    k->id = p->kernels.n;
    p->kernels.k[p->kernels.n++] = k;
  }
  free(topo);
  return fsl_plan_verify(p) == FSL_OK;
}

/* Runs g through: one kernel per node, one kernel for everything (if
 * legal), and every strategy's plan; compares each with fsl_ref_run. */
static void check_graph(fsl_graph *g, void **inputs, double tol, const char *name) {
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  if (getenv("FSL_TEST_VERBOSE")) fsl_graph_print(g, stderr);
  void *want[MAX_OUTPUTS] = {0};
  assert_true(g->n_outputs <= MAX_OUTPUTS);
  fsl_status st = fsl_ref_run(g, (const void *const *)inputs, want);
  if (st != FSL_OK) fprintf(stderr, "%s: ref: %s\n", name, fsl_last_error());
  assert_int_equal(st, FSL_OK);
  char what[128];
  fsl_plan p;
  /* one kernel per node */
  fsl_node **one[512];
  int sizes[512];
  int n = g->n_nodes < 512 ? g->n_nodes : 512;
  for (int i = 0; i < n; i++) {
    one[i] = &g->nodes[i];
    sizes[i] = 1;
  }
  if (hand_plan(g, &p, one, sizes, n)) {
    snprintf(what, sizeof what, "%s/per-node", name);
    check_plan(&p, inputs, want, tol, what);
    fsl_plan_free(&p);
  }
  /* everything in one kernel */
  fsl_node **all = g->nodes;
  int na = g->n_nodes;
  if (hand_plan(g, &p, &all, &na, 1)) {
    snprintf(what, sizeof what, "%s/one-kernel", name);
    check_plan(&p, inputs, want, tol, what);
    fsl_plan_free(&p);
  } else if (getenv("FSL_TEST_VERBOSE")) {
    fprintf(stderr, "%s: not one legal kernel\n", name);
  }
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++) {
    if (fsl_plan_build(g, (fsl_strategy)s, NULL, &p) != FSL_OK) {
      fprintf(stderr, "%s: plan %s: %s (skipped)\n", name, fsl_strategy_name((fsl_strategy)s), fsl_last_error());
      continue;
    }
    snprintf(what, sizeof what, "%s/%s", name, fsl_strategy_name((fsl_strategy)s));
    check_plan(&p, inputs, want, tol, what);
    fsl_plan_free(&p);
  }
  for (int i = 0; i < g->n_outputs; i++) free(want[i]);
}

static void free_inputs(void **in, int n) {
  for (int i = 0; i < n; i++) free(in[i]);
}

#define B_INIT(g) {.g = (g), .st = FSL_OK, .fold = false}

/* ---- tests ---- */

/* One table of backends: the names users type are the vtables' names, the
 * host device is the CPU backend's, and the public list starts with the
 * whole-graph interpreter. */
static void test_registry(void **state) {
  (void)state;
  assert_ptr_equal(fsl_backend_find("cpu"), &fsl_backend_cpu);
  assert_ptr_equal(fsl_backend_find("plan-ref"), &fsl_backend_ref);
  assert_null(fsl_backend_find("ref")); /* not a plan backend */
  assert_null(fsl_backend_find("gpu"));
  assert_ptr_equal(fsl_backend_host(), &fsl_backend_cpu);
  const char *const *sum = NULL;
  const char *const *names = fsl_backend_names(&sum);
  assert_string_equal(names[0], "ref");
  int n = 0;
  for (; names[n]; n++) {
    assert_non_null(sum[n]);
    if (n > 0) assert_ptr_equal(fsl_backend_find(names[n]), fsl_backend_at(n - 1));
  }
  assert_int_equal(n, 1 + fsl_backend_count());
  assert_null(fsl_backend_at(fsl_backend_count()));

  /* supports: a float32 elementwise kernel is the CPU backend's own, a
   * float16 one would fall back to the reference interpreter */
  for (int f16 = 0; f16 < 2; f16++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t d[] = {3, 5};
    fsl_value *y = fsl_b_unary(&b, FSL_OP_tanh, input_dt(g, f16 ? FSL_DT_F16 : FSL_DT_F32, 2, d));
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    int *topo = fsl_graph_topo_index(g);
    fsl_kernel *k = NULL;
    assert_int_equal(fsl_kernel_make(g, topo, g->nodes, g->n_nodes, &k, NULL), FSL_OK);
    assert_non_null(k);
    assert_int_equal(fsl_backend_cpu.supports(g, k), !f16);
    fsl_kernel_free(k);
    free(topo);
    fsl_graph_free(g);
  }
}

static void test_elementwise_broadcast(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {4, 1, 5}, dy[] = {3, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx), *y = input_dt(g, FSL_DT_F32, 2, dy);
  fsl_value *s = fsl_b_binary(&b, FSL_OP_add, x, y);           /* 4x3x5 */
  fsl_value *t = fsl_b_unary(&b, FSL_OP_tanh, s);
  fsl_value *u = fsl_b_binary(&b, FSL_OP_mul, t, fsl_b_unary(&b, FSL_OP_exp, y));
  fsl_value *c = fsl_b_binary(&b, FSL_OP_gt, u, fsl_b_scalar(&b, FSL_DT_F32, 0.1));
  fsl_value *w = fsl_b_where(&b, c, fsl_b_unary(&b, FSL_OP_sigmoid, u), fsl_b_binary(&b, FSL_OP_max, s, t));
  fsl_value *q = fsl_b_binary(&b, FSL_OP_div, w, fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_unary(&b, FSL_OP_abs, x), 1.0));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, q);
  fsl_graph_add_output(g, t);
  void *in[] = {random_data(x, -2, 2), random_data(y, -2, 2)};
  check_graph(g, in, 1e-5, "elementwise");
  free_inputs(in, 2);
  fsl_graph_free(g);
}

static void test_movement(void **state) {
  (void)state;
  for (int mode = 0; mode < 4; mode++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {2, 3, 4}, perm[] = {2, 0, 1};
    fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx);
    fsl_value *p = fsl_b_permute(&b, x, perm);                     /* 4x2x3 */
    int64_t st[] = {3, 0, 0}, sp[] = {-1, 1, 2}, sz[] = {3, 2, 2};
    fsl_value *s = fsl_b_slice(&b, p, st, sp, sz);                 /* 3x2x2 */
    int64_t pads[] = {1, 0, 2, 2, 1, 0};
    fsl_value *pd = fsl_b_pad(&b, s, pads, mode, 0.5);             /* 6x3x4 */
    fsl_value *e = fsl_b_unary(&b, FSL_OP_neg, pd);
    int64_t rs[] = {6, 12};
    fsl_value *r = fsl_b_reshape(&b, e, 2, rs);
    fsl_value *r2 = fsl_b_reshape(&b, pd, 2, rs);
    fsl_value *parts[] = {r, r2, r};
    fsl_value *cc = fsl_b_concat(&b, parts, 3, 1);                 /* 6x36 */
    fsl_value *o = fsl_b_binary(&b, FSL_OP_mul, cc, cc);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, o);
    void *in[] = {random_data(x, -3, 3)};
    char name[32];
    snprintf(name, sizeof name, "movement-pad%d", mode);
    check_graph(g, in, 1e-6, name);
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* softmax over `axis` of x, the way fission writes it */
static fsl_value *softmax(fsl_builder *b, fsl_value *x, int64_t axis) {
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, fsl_b_binary(b, FSL_OP_sub, x, m));
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, e, &axis, 1, true);
  return fsl_b_binary(b, FSL_OP_div, e, s);
}

static void test_softmax(void **state) {
  (void)state;
  int64_t shapes[][3] = {{3, 4, 5}, {2, 64, 700}};
  int64_t axes[] = {1, 2};
  for (int t = 0; t < 2; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    fsl_value *x = input_dt(g, FSL_DT_F32, 3, shapes[t]);
    fsl_value *y = softmax(&b, x, axes[t]);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    void *in[] = {random_data(x, -5, 5)};
    check_graph(g, in, 1e-5, t ? "softmax-big" : "softmax");
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

static void test_layernorm(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 3, 40}, dw[] = {40};
  int64_t axis = 2;
  fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx), *w = input_dt(g, FSL_DT_F32, 1, dw), *bb = input_dt(g, FSL_DT_F32, 1, dw);
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true), 40.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(&b, FSL_OP_div,
                                       fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), &axis, 1, true),
                                       40.0);
  fsl_value *inv = fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5));
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, fsl_b_binary(&b, FSL_OP_mul, d, inv), w), bb);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, mean);
  fsl_graph_add_output(g, inv);
  void *in[] = {random_data(x, -3, 3), random_data(w, 0.5, 1.5), random_data(bb, -1, 1)};
  check_graph(g, in, 1e-5, "layernorm");
  free_inputs(in, 3);
  fsl_graph_free(g);
}

static void test_reductions_misc(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {5, 6, 7};
  fsl_value *x = input_dt(g, FSL_DT_F32, 3, dx);
  int64_t ax02[] = {0, 2}, ax1 = 1;
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, x, ax02, 2, false);          /* [6] */
  fsl_value *mn = fsl_b_reduce(&b, FSL_OP_reduce_min, x, &ax1, 1, false);         /* [5,7] */
  fsl_value *pr = fsl_b_reduce(&b, FSL_OP_reduce_prod, x, &ax1, 1, true);         /* [5,1,7] */
  fsl_value *am = fsl_b_arg(&b, FSL_OP_argmax, x, 2, false, false);               /* [5,6] */
  fsl_value *an = fsl_b_arg(&b, FSL_OP_argmin, fsl_b_unary(&b, FSL_OP_floor, x), 1, true, true);
  fsl_value *xi = fsl_b_cast(&b, x, FSL_DT_I32);
  fsl_value *si = fsl_b_reduce(&b, FSL_OP_reduce_max, xi, &ax1, 1, true);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, s);
  fsl_graph_add_output(g, mn);
  fsl_graph_add_output(g, pr);
  fsl_graph_add_output(g, am);
  fsl_graph_add_output(g, an);
  fsl_graph_add_output(g, si);
  void *in[] = {random_data(x, -3, 3)};
  check_graph(g, in, 1e-5, "reductions");
  free_inputs(in, 1);
  fsl_graph_free(g);
}

/* One pool of x: pad (pads, with `fill`), window (k, st, dl over the last
 * two or three axes) and reduce (op) over the window axes. */
static fsl_value *pool_of(fsl_builder *b, fsl_value *x, fsl_op op, const int64_t *pads, const int64_t *k,
                          const int64_t *st, const int64_t *dl, double fill) {
  int nk = x->rank - 2;
  int64_t ax[3];
  fsl_value *w = fsl_b_window(b, fsl_b_pad(b, x, pads, 0, fill), nk, k, st, dl);
  for (int i = 0; i < nk; i++) ax[i] = x->rank + i;
  return fsl_b_reduce(b, op, w, ax, nk, false);
}

/* Max and min pools whose kernels read each input row once per window
 * row and then take the max along the row's windows (codegen/columns.c,
 * separable): 3x3 stride 2 (ResNet's stem pool), a dilated 3x3 min, a
 * 3x3x3 pool over three axes and an int32 one; a 3x2 pool with asymmetric
 * pads and strides stays direct.  NaNs in the input reach exactly the
 * outputs whose windows hold one: short rows carry NaN flags per column,
 * rows of 64 or more (a 3x3/2 and a 2x2/2 pool over 150 columns, one
 * separable, one direct) note a NaN per row and run that row again for
 * the per-column flags.  A pool over H only (5x1, the H pass of a pool
 * split per axis) clamps its window loop. */
static void test_maxpool_separable(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t d2[] = {1, 3, 21, 23}, d3[] = {1, 2, 5, 6, 20}, p1[] = {0, 0, 1, 1, 0, 0, 1, 1},
          p2[] = {0, 0, 2, 2, 0, 0, 2, 2}, pa[] = {0, 0, 0, 1, 0, 0, 2, 0}, p3[] = {0, 0, 1, 1, 1, 0, 0, 1, 1, 1};
  int64_t k3[] = {3, 3, 3}, k32[] = {3, 2}, s1[] = {1, 1, 1}, s2[] = {2, 2}, s12[] = {1, 2}, dl2[] = {2, 2};
  int64_t k51[] = {5, 1}, ph[] = {0, 0, 2, 0, 0, 0, 2, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, d2), *x3 = input_dt(g, FSL_DT_F32, 5, d3);
  fsl_value *xi = input_dt(g, FSL_DT_I32, 4, d2);
  int64_t dl[] = {1, 2, 9, 150}, p0[] = {0, 0, 0, 0, 0, 0, 0, 0}, k2[] = {2, 2};
  fsl_value *xl = input_dt(g, FSL_DT_F32, 4, dl);
  fsl_value *outs[] = {
      pool_of(&b, x, FSL_OP_reduce_max, p1, k3, s2, s1, -INFINITY),
      pool_of(&b, x, FSL_OP_reduce_min, p2, k3, s1, dl2, INFINITY),
      pool_of(&b, x, FSL_OP_reduce_max, pa, k32, s12, s1, -INFINITY),
      pool_of(&b, x3, FSL_OP_reduce_max, p3, k3, s1, s1, -INFINITY),
      pool_of(&b, xi, FSL_OP_reduce_max, p1, k3, s2, s1, (double)INT32_MIN),
      pool_of(&b, xl, FSL_OP_reduce_max, p1, k3, s2, s1, -INFINITY),
      pool_of(&b, xl, FSL_OP_reduce_max, p0, k2, s2, s1, -INFINITY),
      pool_of(&b, x, FSL_OP_reduce_max, ph, k51, s1, s1, -INFINITY),
  };
  assert_int_equal(b.st, FSL_OK);
  for (int i = 0; i < 8; i++) fsl_graph_add_output(g, outs[i]);
  void *in[] = {random_data(x, -3, 3), random_data(x3, -3, 3), random_data(xi, -1000, 1000), random_data(xl, -3, 3)};
  float *xf = in[0], *x3f = in[1], *xlf = in[3];
  xf[5 * 23 + 7] = NAN, xf[21 * 23 + 40] = NAN, xf[2 * 21 * 23 + 20 * 23 + 22] = NAN;
  x3f[3 * 6 * 20 + 2 * 20 + 19] = NAN;
  xlf[4 * 150 + 77] = NAN, xlf[9 * 150 + 2 * 150 + 149] = NAN;
  check_graph(g, in, 0, "separable pools");
  free_inputs(in, 4);
  fsl_graph_free(g);
}

static void test_maxpool(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 28, 28};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
  int64_t pads[] = {0, 0, 1, 1, 0, 0, 1, 1}, k[] = {3, 3}, st[] = {2, 2}, dl[] = {1, 1}, ax[] = {4, 5};
  fsl_value *p = fsl_b_pad(&b, x, pads, 0, -INFINITY);
  fsl_value *w = fsl_b_window(&b, p, 2, k, st, dl);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, w, ax, 2, false);
  fsl_value *avg = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, w, ax, 2, false), 9.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, m);
  fsl_graph_add_output(g, avg);
  void *in[] = {random_data(x, -3, 3)};
  check_graph(g, in, 1e-5, "pool");
  free_inputs(in, 1);
  fsl_graph_free(g);
}

static void test_matmul_bias_relu(void **state) {
  (void)state;
  for (int dt = 0; dt < 2; dt++) {
    fsl_dtype T = dt ? FSL_DT_F64 : FSL_DT_F32;
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t da[] = {2, 32, 64}, dw[] = {64, 48}, db[] = {48};
    fsl_value *a = input_dt(g, T, 3, da), *w = input_dt(g, T, 2, dw), *bias = input_dt(g, T, 1, db);
    fsl_value *mm = fsl_b_matmul(&b, a, w);
    fsl_value *y = fsl_b_binary(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, mm, bias), fsl_b_scalar(&b, T, 0.0));
    fsl_value *z = fsl_b_binary(&b, FSL_OP_add, y, a == NULL ? y : fsl_b_unary(&b, FSL_OP_tanh, y));
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    void *in[] = {random_data(a, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
    check_graph(g, in, 1e-4, dt ? "matmul-f64" : "matmul");
    free_inputs(in, 3);
    fsl_graph_free(g);
  }
}

static void test_conv_bias(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 9, 9}, dw[] = {4, 3, 3, 3}, db[] = {4}, rb[] = {1, 4, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw), *bias = input_dt(g, FSL_DT_F32, 1, db);
  fsl_value *c = fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_add, c, fsl_b_reshape(&b, bias, 4, rb));
  fsl_value *z = fsl_b_unary(&b, FSL_OP_sigmoid, y);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
  check_graph(g, in, 1e-4, "conv");
  free_inputs(in, 3);
  fsl_graph_free(g);
}

/* The CPU backend's counts for graph g compiled as one kernel. */
static fsl_cpu_stats one_kernel_stats(const fsl_graph *g) {
  fsl_node **all = g->nodes;
  int na = g->n_nodes;
  fsl_plan p;
  assert_true(hand_plan(g, &p, &all, &na, 1));
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, &exe), FSL_OK);
  fsl_cpu_stats stats;
  fsl_cpu_exe_stats(exe, &stats);
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  return stats;
}

static int run_hand_plan(const fsl_graph *g, fsl_node ***sets, const int *sizes, int n, void **in, const fsl_value *z,
                         const char *what);

/* Depthwise convolutions that oneDNN would run between two reorders are
 * generated row by row (fsl_cpu_lower_generated, fsl_codegen_conv_rows):
 * the flat pass over "same"-padded rows (3x3, 5x5, dilated, a channel
 * multiplier), the per-row pass (stride 2, stride 2 along the rows only
 * with as many output columns as input ones, asymmetric and no padding,
 * rows too short for any interior row) and the per-tap passes (a 9x9
 * window), each with a bias and HardSwish epilogue, against the reference
 * under every plan, with inputs of odd sizes; the one-kernel plan of one
 * channel per group runs no oneDNN primitive. */
static void test_depthwise_rows(void **state) {
  (void)state;
  static const struct {
    int64_t c, mult, h, w, k, sh, sw, d, pads[4];
  } cases[] = {
      {8, 1, 13, 13, 3, 1, 1, 1, {1, 1, 1, 1}}, {3, 2, 9, 11, 5, 1, 1, 1, {2, 2, 2, 2}},
      {4, 1, 9, 9, 3, 1, 1, 2, {2, 2, 2, 2}},   {8, 1, 12, 10, 3, 2, 2, 1, {1, 1, 1, 1}},
      {4, 1, 10, 9, 3, 2, 1, 1, {1, 1, 1, 1}},  {5, 1, 7, 9, 3, 1, 1, 1, {0, 1, 1, 0}},
      {6, 1, 8, 8, 3, 1, 1, 1, {0, 0, 0, 0}},   {4, 1, 2, 5, 3, 1, 1, 1, {1, 1, 1, 1}},
      {4, 1, 11, 12, 9, 1, 1, 1, {4, 4, 4, 4}},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t m = cases[t].c * cases[t].mult;
    int64_t dx[] = {2, cases[t].c, cases[t].h, cases[t].w}, dw[] = {m, 1, cases[t].k, cases[t].k}, db[] = {m},
            rb[] = {1, m, 1, 1};
    int64_t st[] = {cases[t].sh, cases[t].sw}, dl[] = {cases[t].d, cases[t].d};
    fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
    fsl_value *bias = input_dt(g, FSL_DT_F32, 1, db);
    fsl_value *c = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, st, dl, cases[t].pads, cases[t].c, NULL),
                                fsl_b_reshape(&b, bias, 4, rb));
    fsl_value *hs = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                    fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, c, 1.0 / 6.0), 0.5), 1.0), 0.0);
    fsl_value *z = fsl_b_binary(&b, FSL_OP_mul, c, hs);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    void *in[] = {random_data(x, -1, 1), random_data(w, -1, 1), random_data(bias, -1, 1)};
    char what[64];
    snprintf(what, sizeof what, "depthwise-%zu", t);
    check_graph(g, in, 1e-4, what);
    fsl_cpu_stats stats = one_kernel_stats(g);
    /* oneDNN may run a channel multiplier's convolution on the plain data
     * (its gemm), with no reorder to save */
    assert_int_equal(stats.n_fallback, 0);
    if (cases[t].mult == 1) {
      assert_int_equal(stats.n_onednn, 0);
      assert_int_equal(stats.n_generated, 1);
    }
    free_inputs(in, 3);
    fsl_graph_free(g);
  }
}

/* A constant of floats uniform in [-1, 1) (a model's initializer). */
/* A constant of the given dims, uniform in [-scale, scale). */
static fsl_value *random_const_in(fsl_builder *b, int rank, const int64_t *dims, double scale) {
  int64_t n = fsl_numel(rank, dims);
  float *p = malloc(sizeof *p * (size_t)n);
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)(scale * (2.0 * test_rnd() - 1.0));
  fsl_value *v = fsl_b_const(b, FSL_DT_F32, rank, dims, p);
  free(p);
  return v;
}

static fsl_value *random_const(fsl_builder *b, int rank, const int64_t *dims) {
  return random_const_in(b, rank, dims, 1.0);
}

/* y = HardSigmoid(lin + bias) for lin a matmul of x [rows, K] by w [K, N]
 * (conv false) or a pointwise convolution of x [rows, K, 1, 1] by w
 * [N, K, 1, 1] at its single position (conv true), w and bias constants;
 * returns x, the graph's input. */
static fsl_value *gemv_graph(fsl_graph *g, bool conv, int64_t rows, int64_t K, int64_t N) {
  fsl_builder b = B_INIT(g);
  int64_t dxm[] = {rows, K}, dwm[] = {K, N}, dxc[] = {rows, K, 1, 1}, dwc[] = {N, K, 1, 1}, db[] = {N},
          rb[] = {1, N, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, conv ? 4 : 2, conv ? dxc : dxm);
  fsl_value *w = random_const(&b, conv ? 4 : 2, conv ? dwc : dwm), *bias = random_const(&b, 1, db);
  fsl_value *lin = conv ? fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL),
                                       fsl_b_reshape(&b, bias, 4, rb))
                        : fsl_b_binary(&b, FSL_OP_add, fsl_b_matmul(&b, x, w), bias);
  fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                 fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, lin, 0.2), 0.5), 1.0), 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  return x;
}

/* Teardown: a failed assertion inside test_gemv_generated's FSL_NO_ONEDNN
 * part must not leave oneDNN off for the tests after it. */
static int unset_no_onednn(void **state) {
  (void)state;
  unsetenv("FSL_NO_ONEDNN");
  return 0;
}

/* One-row matmuls and pointwise convolutions at one position (GEMVs: the
 * fully connected layers of squeeze-and-excitation) run as generated code
 * with the epilogue oneDNN would absorb (fsl_cpu_lower_generated): column
 * blocks of a matmul (block widths with a narrower last one, fewer
 * columns than a block) and dot products of a convolution (four output
 * channels at a time and the rest one by one), against the reference
 * under every plan; the one-kernel plan runs no oneDNN primitive.  Near
 * misses keep oneDNN: two rows, and weights over 1 MiB.  With oneDNN
 * kept out (FSL_NO_ONEDNN) the same code runs those as well. */
static void test_gemv_generated(void **state) {
  (void)state;
  static const struct {
    bool conv;
    int64_t rows, K, N;
    int generated; /* 1: the one-kernel plan runs generated code only; 0: oneDNN */
  } cases[] = {
      {false, 1, 37, 144, 1}, {false, 1, 64, 77, 1}, {false, 1, 576, 8, 1}, {false, 1, 5, 3, 1},
      {true, 1, 37, 11, 1},   {true, 1, 96, 24, 1},  {true, 1, 16, 3, 1},   {false, 2, 37, 144, 0},
      {true, 2, 37, 11, 0},   {false, 1, 1024, 300, 0},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    for (int no_dnn = 0; no_dnn < 2; no_dnn++) {
      if (no_dnn && cases[t].generated) continue;
      if (no_dnn) setenv("FSL_NO_ONEDNN", "1", 1);
      fsl_graph *g = fsl_graph_new();
      fsl_value *x = gemv_graph(g, cases[t].conv, cases[t].rows, cases[t].K, cases[t].N);
      void *in[] = {random_data(x, -1, 1)};
      char what[64];
      snprintf(what, sizeof what, "gemv-%zu%s", t, no_dnn ? "-no-onednn" : "");
      check_graph(g, in, 1e-4, what);
      fsl_cpu_stats stats = one_kernel_stats(g);
      assert_int_equal(stats.n_fallback, 0);
      if (cases[t].generated || no_dnn) {
        assert_int_equal(stats.n_onednn, 0);
        assert_int_equal(stats.n_generated, 1);
      } else if (!getenv("FSL_NO_ONEDNN")) {
        assert_int_equal(stats.n_onednn, 1);
      }
      free_inputs(in, 1);
      fsl_graph_free(g);
      if (no_dnn) unsetenv("FSL_NO_ONEDNN");
    }
  }
}

/* conv -> conv chains (fsl_cpu_chain_layouts): a SiLU and a HardSwish
 * absorbed as post-ops, a value read by two convs and by nothing else, and
 * one also read by generated code (kept row-major).  Every plan matches the
 * reference (the per-node plan also has generated code reading conv
 * outputs in oneDNN's layout where that is nhwc), and a plan of one kernel
 * per conv passes the values that feed only convs between oneDNN
 * primitives in their layout. */
static void test_conv_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, dw[] = {16, 16, 3, 3}, db[] = {16}, rb[] = {1, 16, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *bias = input_dt(g, FSL_DT_F32, 1, db);
  fsl_value *h = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL), fsl_b_reshape(&b, bias, 4, rb));
  fsl_value *a = fsl_b_binary(&b, FSL_OP_mul, h, fsl_b_unary(&b, FSL_OP_sigmoid, h)); /* SiLU */
  fsl_value *c = fsl_b_conv(&b, a, w, st, dl, pads, 1, NULL);
  fsl_value *hs = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                  fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, c, 1.0 / 6.0), 0.5), 1.0), 0.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_mul, c, hs); /* HardSwish */
  fsl_value *e1 = fsl_b_conv(&b, d, w, st, dl, pads, 1, NULL), *e2 = fsl_b_conv(&b, d, w, st, dl, pads, 1, NULL);
  fsl_value *f = fsl_b_conv(&b, e2, w, st, dl, pads, 1, NULL);
  fsl_value *z = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_add, e1, f), e2);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3), random_data(bias, -1, 1)};
  check_graph(g, in, 1e-4, "conv-chain");
  /* one kernel per conv with the nodes after it (the first also with the
   * bias reshape before it): the SiLU and HardSwish outputs feed only
   * convs; the value of the second conv over d also feeds the final adds */
  fsl_node **sets[8];
  int sizes[8], n = 0, n_conv = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    bool conv = g->nodes[i]->op == FSL_OP_conv;
    if (n == 0 || (conv && n_conv++ > 0)) {
      assert_true(n < 8);
      sets[n] = &g->nodes[i], sizes[n++] = 0;
    }
    sizes[n - 1]++;
  }
  int chained = run_hand_plan(g, sets, sizes, n, in, z, "conv-chain/per-conv");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "conv-chain/per-conv: %d values chained\n", chained);
  /* at least the SiLU and HardSwish outputs; the others too where oneDNN's
   * layout is a permutation that generated code reads (nhwc, not nChw8c) */
  assert_true(chained >= 2);
  free_inputs(in, 3);
  fsl_graph_free(g);
}

/* Compiles the plan of n hand-picked kernels (sets/sizes) over g on the
 * CPU backend, runs it on `in` and compares its output z with the
 * reference interpreter's; returns the executable's statistics (no kernel
 * may fall back to the reference interpreter, and the arena may not exceed
 * the executors' memory plan). */
static fsl_cpu_stats run_hand_plan_stats(const fsl_graph *g, fsl_node ***sets, const int *sizes, int n, void **in,
                                         const fsl_value *z, const char *what) {
  fsl_plan p;
  assert_true(hand_plan(g, &p, sets, sizes, n));
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, &exe), FSL_OK);
  fsl_cpu_stats stats;
  fsl_cpu_exe_stats(exe, &stats);
  assert_int_equal(stats.n_fallback, 0); /* every kernel generated or run by oneDNN */
  void *got[1] = {0}, *want[1] = {0};
  assert_int_equal(fsl_backend_cpu.run(exe, (const void *const *)in, got), FSL_OK);
  assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
  compare(z, got[0], want[0], 1e-4, what);
  fsl_backend_exe_info ei;
  fsl_backend_cpu.exe_info(exe, &ei);
  check_arena(&p, ei.arena_bytes);
  free(got[0]), free(want[0]);
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  return stats;
}

/* run_hand_plan_stats's count of the values the lowering passed between
 * steps in a oneDNN layout (fsl_cpu_stats.n_chained). */
static int run_hand_plan(const fsl_graph *g, fsl_node ***sets, const int *sizes, int n, void **in, const fsl_value *z,
                         const char *what) {
  return run_hand_plan_stats(g, sets, sizes, n, in, z, what).n_chained;
}

/* A channel concat between 1x1 convolutions (YOLOX's CSP blocks), one
 * kernel per node: the concat's generated kernel reads the conv outputs and
 * writes its result in the layouts the convs use, wherever an elementwise
 * kernel in its place would (a dense permutation such as nhwc; generated
 * code reads none of oneDNN's blocked layouts; an add in its place is the
 * yardstick), and the results match the reference.  Returns the values
 * chained. */
static int concat_chain_run(bool cat) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 8, 10, 10}, dw[] = {8, 8, 1, 1}, dw3[] = {8, cat ? 16 : 8, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w1 = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *w2 = input_dt(g, FSL_DT_F32, 4, dw), *w3 = input_dt(g, FSL_DT_F32, 4, dw3);
  fsl_value *w4 = input_dt(g, FSL_DT_F32, 4, dw3);
  fsl_value *c1 = fsl_b_conv(&b, x, w1, st, dl, pads, 1, NULL), *c2 = fsl_b_conv(&b, x, w2, st, dl, pads, 1, NULL);
  fsl_value *parts[] = {c1, c2};
  fsl_value *m = cat ? fsl_b_concat(&b, parts, 2, 1) : fsl_b_binary(&b, FSL_OP_add, c1, c2);
  fsl_value *z = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, m, w3, st, dl, pads, 1, NULL),
                              fsl_b_conv(&b, m, w4, st, dl, pads, 1, NULL));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w1, -0.3, 0.3), random_data(w2, -0.3, 0.3),
                random_data(w3, -0.3, 0.3), random_data(w4, -0.3, 0.3)};
  fsl_node **sets[16];
  int sizes[16];
  assert_true(g->n_nodes <= 16);
  for (int i = 0; i < g->n_nodes; i++) sets[i] = &g->nodes[i], sizes[i] = 1;
  int chained = run_hand_plan(g, sets, sizes, g->n_nodes, in, z, cat ? "concat-chain" : "add-chain");
  free_inputs(in, 5);
  fsl_graph_free(g);
  return chained;
}

static void test_concat_chain(void **state) {
  (void)state;
  int with_cat = concat_chain_run(true), with_add = concat_chain_run(false);
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "concat-chain: %d values chained (add: %d)\n", with_cat, with_add);
  /* where the add chains (its output into the convs, the conv outputs into
   * the final add), the concat chains those and also the two conv outputs
   * it reads (the add runs in place over one of them, which keeps them
   * row-major); where the add chains nothing, neither does the concat */
  if (with_add == 0) assert_int_equal(with_cat, 0);
  else assert_true(with_cat >= with_add + 2);
}

/* A residual block: h = SiLU(x) (a generated kernel) feeds a 1x1 conv and,
 * when `residual`, also the final add (z = conv(h) + h; otherwise
 * z = conv(h) + x).  A generated reader next to the conv does not keep h
 * row-major: h is written in the conv's layout and the add reads it there,
 * so as many values are chained either way.  Returns the values chained. */
static int residual_chain_run(bool residual) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 10, 10}, dw[] = {16, 16, 1, 1}, st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *h = fsl_b_binary(&b, FSL_OP_mul, x, fsl_b_unary(&b, FSL_OP_sigmoid, x));
  fsl_value *z = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, h, w, st, dl, pads, 1, NULL), residual ? h : x);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3)};
  /* kernels: SiLU (sigmoid + mul), conv, add */
  assert_int_equal(g->n_nodes, 4);
  fsl_node **sets[3] = {&g->nodes[0], &g->nodes[2], &g->nodes[3]};
  int sizes[3] = {2, 1, 1};
  int chained = run_hand_plan(g, sets, sizes, 3, in, z, residual ? "residual-chain" : "plain-chain");
  free_inputs(in, 2);
  fsl_graph_free(g);
  return chained;
}

static void test_residual_chain(void **state) {
  (void)state;
  int with_res = residual_chain_run(true), without = residual_chain_run(false);
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "residual-chain: %d values chained (without: %d)\n", with_res, without);
  assert_int_equal(with_res, without);
}

/* Residual adds absorbed by the convolution that computes the other
 * operand (a binary post-op over the full tensor, given in the conv's
 * destination layout; fsl_onednn_linear_post_chainable): ResNet's basic
 * blocks, y2 = relu(conv(y1) + b + y0), and one conv whose residual is its
 * own source, z = relu(conv(y2) + b + y2).  One kernel per conv with the
 * nodes after it.  y0 (read by a conv as its source and by another as its
 * residual), y1 and y2 (source and residual of the same conv) stay in
 * oneDNN's layout whatever it is (nChw8c with AVX2, which generated code
 * does not read; with AVX-512, where the residual is not absorbed,
 * generated epilogues add it in nhwc), and the result matches the
 * reference; so does a plan of one kernel per node. */
static void test_residual_post_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, dw[] = {16, 16, 3, 3}, db[] = {16}, rb[] = {1, 16, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *bias = input_dt(g, FSL_DT_F32, 1, db), *w[4], *y[4];
  for (int i = 0; i < 4; i++) w[i] = input_dt(g, FSL_DT_F32, 4, dw);
  for (int i = 0; i < 4; i++) {
    fsl_value *rbias = fsl_b_reshape(&b, bias, 4, rb); /* each kernel: the bias reshape, conv, add, ... */
    fsl_value *c = fsl_b_conv(&b, i ? y[i - 1] : x, w[i], st, dl, pads, 1, NULL);
    c = fsl_b_binary(&b, FSL_OP_add, c, rbias);
    if (i >= 2) c = fsl_b_binary(&b, FSL_OP_add, c, i == 2 ? y[0] : y[2]);
    y[i] = fsl_b_binary_scalar(&b, FSL_OP_max, c, 0.0);
  }
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y[3]);
  void *in[] = {random_data(x, -1, 1),        random_data(bias, -1, 1),     random_data(w[0], -0.2, 0.2),
                random_data(w[1], -0.2, 0.2), random_data(w[2], -0.2, 0.2), random_data(w[3], -0.2, 0.2)};
  fsl_node **sets[40];
  int sizes[40], n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_reshape && g->nodes[i]->in[0] == bias) sets[n] = &g->nodes[i], sizes[n++] = 0;
    sizes[n - 1]++;
  }
  assert_int_equal(n, 4);
  int chained = run_hand_plan(g, sets, sizes, n, in, y[3], "residual-post-chain");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "residual-post-chain: %d values chained\n", chained);
  assert_true(chained >= 3);
  assert_true(g->n_nodes <= 40);
  for (int i = 0; i < g->n_nodes; i++) sets[i] = &g->nodes[i], sizes[i] = 1;
  run_hand_plan(g, sets, sizes, g->n_nodes, in, y[3], "residual-post-chain/per-node");
  free_inputs(in, 6);
  fsl_graph_free(g);
}

/* Dense 3x3 stride-1 convolutions with constant weights that oneDNN runs
 * as its direct kernel over nChw8c (no AVX-512, FSL_CPU_ISA=avx2: oneDNN
 * has no Winograd there) run as fissile's F(2x2,3x3) Winograd
 * (backend/cpu/winograd.c) with the epilogue steps it takes: bias, the
 * residual as oneDNN's sum, ReLU (y1); a per-channel scale and a clip to
 * [0, 6] as ReLU plus a scalar min, asymmetric pads, odd sizes (y2);
 * HardSwish (y3); SiLU (y4, no pads); a tanh it does not take keeps
 * oneDNN's direct kernel (y5).  96 channels (FSL_WINOGRAD_MIN_CHANNELS),
 * two images, so tiles cross image borders.
 * Every plan matches the reference; one kernel per convolution and its
 * epilogue runs four of the five convolutions as Winograd where oneDNN's
 * ISA is AVX2, none where oneDNN has Winograd of its own (AVX-512). */
static void test_winograd_conv(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 96, 17, 17}, dw[] = {96, 96, 3, 3}, dc[] = {1, 96, 1, 1}, st[] = {1, 1}, dl[] = {1, 1};
  int64_t pads1[] = {1, 1, 1, 1}, pads2[] = {1, 0, 0, 1}, pads4[] = {0, 0, 0, 0};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w[5];
  for (int i = 0; i < 5; i++) w[i] = random_const_in(&b, 4, dw, 0.06); /* outputs of order 1 */
  fsl_value *bias = random_const(&b, 4, dc), *scale = random_const(&b, 4, dc);
  fsl_value *c1 = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, x, w[0], st, dl, pads1, 1, NULL), bias);
  fsl_value *y1 = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, c1, x), 0.0);
  fsl_value *c2 = fsl_b_binary(&b, FSL_OP_mul, fsl_b_conv(&b, y1, w[1], st, dl, pads2, 1, NULL), scale);
  fsl_value *y2 = fsl_b_binary_scalar(&b, FSL_OP_min, fsl_b_binary_scalar(&b, FSL_OP_max, c2, 0.0), 6.0);
  fsl_value *c3 = fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, y2, w[2], st, dl, pads1, 1, NULL), bias);
  fsl_value *hs = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary_scalar(&b, FSL_OP_min,
                  fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_binary_scalar(&b, FSL_OP_mul, c3, 1.0 / 6.0), 0.5), 1.0), 0.0);
  fsl_value *y3 = fsl_b_binary(&b, FSL_OP_mul, c3, hs);
  fsl_value *c4 = fsl_b_conv(&b, y3, w[3], st, dl, pads4, 1, NULL);
  fsl_value *y4 = fsl_b_binary(&b, FSL_OP_mul, c4, fsl_b_unary(&b, FSL_OP_sigmoid, c4));
  fsl_value *y5 = fsl_b_unary(&b, FSL_OP_tanh, fsl_b_conv(&b, y4, w[4], st, dl, pads1, 1, NULL));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y5);
  void *in[] = {random_data(x, -1, 1)};
  check_graph(g, in, 1e-4, "winograd");
  fsl_node **sets[5];
  int sizes[5], n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_conv) sets[n] = &g->nodes[i], sizes[n++] = 0;
    assert_true(n > 0 && n <= 5);
    sizes[n - 1]++;
  }
  fsl_cpu_stats stats = run_hand_plan_stats(g, sets, sizes, n, in, y5, "winograd/per-conv");
  bool avx2_only = onednn_avx2_only();
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "winograd: %d of %d oneDNN steps (avx2 only: %d)\n", stats.n_winograd, stats.n_onednn, avx2_only);
  assert_int_equal(stats.n_onednn, 5);
  assert_int_equal(stats.n_winograd, avx2_only ? 4 : 0);
  free_inputs(in, 1);
  fsl_graph_free(g);
}

/* A residual add that a convolution runs as oneDNN's sum post-op (AVX2;
 * none with AVX-512) writes over the residual where the residual dies
 * there (sum_in_place in cpu.c): a block of 1x1 convolutions (channels-last
 * on AVX2 under 128 pixels, so every value stays in the layout the next
 * step reads)
 * a = relu(conv1(x)), b = relu(conv2(a)), y = relu(conv3(b) + a), then
 * z = 2 y, one kernel per conv with the nodes after it and one for the
 * scale.  Once with y the
 * output of the block (a dies at conv3: in place where the sum post-op
 * runs) and once with a also read by the scale, z = 2 y + a (a lives on:
 * never in place); the results match the reference either way
 * (run_hand_plan_stats, which also bounds the arena). */
static void test_residual_sum_in_place(void **state) {
  (void)state;
  bool avx2_only = onednn_avx2_only();
  for (int keep = 0; keep < 2; keep++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {1, 16, 10, 10}, dw[] = {16, 16, 1, 1}, st[] = {1, 1}, dl[] = {1, 1}, pads[] = {0, 0, 0, 0};
    fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx);
    fsl_value *w1 = random_const_in(&b, 4, dw, 0.1), *w2 = random_const_in(&b, 4, dw, 0.1), *w3 = random_const_in(&b, 4, dw, 0.1);
    fsl_value *a = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_conv(&b, x, w1, st, dl, pads, 1, NULL), 0.0);
    fsl_value *bb = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_conv(&b, a, w2, st, dl, pads, 1, NULL), 0.0);
    fsl_value *y = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, fsl_b_conv(&b, bb, w3, st, dl, pads, 1, NULL), a), 0.0);
    fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_mul, y, 2.0);
    if (keep) z = fsl_b_binary(&b, FSL_OP_add, z, a);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, z);
    void *in[] = {random_data(x, -1, 1)};
    fsl_node **sets[4];
    int sizes[4] = {0}, n = 0;
    bool after_y = false; /* the nodes after y's (the scale, its scalar's views) make the last kernel */
    for (int i = 0; i < g->n_nodes; i++) {
      if ((g->nodes[i]->op == FSL_OP_conv && n < 3) || (after_y && n == 3)) sets[n] = &g->nodes[i], n++;
      assert_true(n > 0 && n <= 4);
      sizes[n - 1]++;
      after_y = after_y || g->nodes[i] == y->producer;
    }
    assert_int_equal(n, 4);
    fsl_cpu_stats stats = run_hand_plan_stats(g, sets, sizes, n, in, z, keep ? "sum in place/kept" : "sum in place");
    if (getenv("FSL_TEST_VERBOSE"))
      fprintf(stderr, "sum in place (keep %d): %d (avx2 only: %d), %d chained\n", keep, stats.n_sum_in_place, avx2_only,
              stats.n_chained);
    assert_int_equal(stats.n_sum_in_place, avx2_only && !keep ? 1 : 0);
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* A residual from a channels-last 1x1 convolution (read by another 1x1
 * convolution as its source) into a 3x3 one: z = relu(conv3(conv2(v)) + v),
 * v = conv1(x), one kernel per conv with the nodes after it.  Where the 3x3
 * convolution wants v in the same layout it absorbs it and v is chained
 * there; where it wants another (blocked nChw8c with AVX2), it leaves the
 * add to the generated epilogue (keep_residual in lower.c), which reads v
 * where it lies: v stays chained either way, and the result matches. */
static void test_residual_kept_for_epilogue(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, d1[] = {16, 16, 1, 1}, d3[] = {16, 16, 3, 3};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, p0[] = {0, 0, 0, 0}, p1[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w1 = input_dt(g, FSL_DT_F32, 4, d1);
  fsl_value *w2 = input_dt(g, FSL_DT_F32, 4, d1), *w3 = input_dt(g, FSL_DT_F32, 4, d3);
  fsl_value *v = fsl_b_conv(&b, x, w1, st, dl, p0, 1, NULL), *h = fsl_b_conv(&b, v, w2, st, dl, p0, 1, NULL);
  fsl_value *c = fsl_b_conv(&b, h, w3, st, dl, p1, 1, NULL);
  fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_binary(&b, FSL_OP_add, c, v), 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w1, -0.3, 0.3), random_data(w2, -0.3, 0.3),
                random_data(w3, -0.2, 0.2)};
  fsl_node **sets[3];
  int sizes[3], n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_conv && n < 3) sets[n] = &g->nodes[i], sizes[n++] = 0;
    sizes[n - 1]++;
  }
  assert_int_equal(n, 3);
  int chained = run_hand_plan(g, sets, sizes, n, in, z, "residual-kept");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "residual-kept: %d values chained\n", chained);
  assert_true(chained >= 1);
  free_inputs(in, 4);
  fsl_graph_free(g);
}

/* A 3 -> 16 channel convolution (channels-last: channels_last_pays, and
 * oneDNN's own choice on AVX-512) and then, in a generated kernel, a
 * reduction over `axes`: with `rows` y = h - sum(h over axes), else the
 * sum alone.  Over H and W with rows (InstanceNormalization's shape) the
 * kernel writes y row-major and its loops would read h a cache line per
 * element in nhwc, so the code generator refuses the layout and the conv
 * output is reordered to plain (kernel.c: rows_read_layout); the sum alone
 * (a global pooling, mobilenet's squeeze-excitation) reads nhwc in place as
 * columns; over C (LayerNorm over channels) the rows are contiguous in
 * nhwc and the kernel reads the layout.  Returns the values chained. */
static int reduce_chain_run(const int64_t *axes, int n_axes, bool rows) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 20, 20}, dw[] = {16, 3, 3, 3}, st[] = {1, 1}, dl[] = {1, 1}, pads[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *h = fsl_b_conv(&b, x, w, st, dl, pads, 1, NULL);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_sum, h, axes, n_axes, true);
  fsl_value *z = rows ? fsl_b_binary(&b, FSL_OP_sub, h, m) : m;
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3)};
  assert_int_equal(g->nodes[0]->op, FSL_OP_conv);
  fsl_node **sets[2] = {&g->nodes[0], &g->nodes[1]};
  int sizes[2] = {1, g->n_nodes - 1};
  const char *what = n_axes == 2 ? (rows ? "reduce-hw-chain" : "reduce-hw-only-chain") : "reduce-c-chain";
  int chained = run_hand_plan(g, sets, sizes, 2, in, z, what);
  free_inputs(in, 2);
  fsl_graph_free(g);
  return chained;
}

static void test_reduce_chain(void **state) {
  (void)state;
  int64_t hw[] = {2, 3}, c[] = {1};
  int across = reduce_chain_run(hw, 2, true), pooled = reduce_chain_run(hw, 2, false), along = reduce_chain_run(c, 1, true);
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "reduce-chain: H,W %d, H,W alone %d, C %d values chained\n", across, pooled, along);
  assert_int_equal(along, 1);  /* the layout is channels-last ... */
  assert_int_equal(pooled, 1); /* ... which a sum over H,W alone reads as columns ... */
  assert_int_equal(across, 0); /* ... and one with rows of H,W to write does not read */
}

/* A 3 -> 16 channel convolution (channels-last, as in reduce_chain_run)
 * and then, in a generated kernel, a pool of its output (pads, k, st, fill,
 * reduce op): the kernel reads the conv's layout as columns along the
 * channels (fsl_cg_layout_window_axis), the taps contiguous and clamped, and
 * writes row-major.  A NaN in x reaches every channel of the conv output
 * at the pixels it touches, so the pool's NaN flags run along the
 * channels.  POOL_ABS pools the conv output's absolute value: the window's
 * source is elementwise work over the input, computed per tap on the
 * contiguous row of channels, so it reads the layout too.  Two kernels
 * cannot, so the code generator refuses the layout rather than stride
 * along the channels, and the conv output is reordered to plain:
 * POOL_TWICE sums each window minus its max (a reduction reading another,
 * which the columns form does not take).  POOL_DEEP chains six pools in the kernel (an SPP
 * block's, deeper than 16 nodes): only the first could read the layout, so
 * the conv output is reordered, and the kernel is still generated, not run
 * by the reference interpreter (run_hand_plan asserts no fallback).
 * Returns the values chained. */
enum { POOL_ONCE, POOL_TWICE, POOL_ABS, POOL_DEEP };
static int pool_chain_run(fsl_op op, const int64_t *pads, const int64_t *k, const int64_t *st, double fill, int form,
                          const char *what) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 3, 20, 17}, dw[] = {16, 3, 3, 3}, s1[] = {1, 1}, dl[] = {1, 1}, cp[] = {1, 1, 1, 1};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *w = input_dt(g, FSL_DT_F32, 4, dw);
  fsl_value *h = fsl_b_conv(&b, x, w, s1, dl, cp, 1, NULL);
  fsl_value *z = NULL;
  if (form == POOL_ABS) h = fsl_b_unary(&b, FSL_OP_abs, h);
  if (form == POOL_TWICE) {
    int64_t wa[] = {4, 5};
    fsl_value *win = fsl_b_window(&b, fsl_b_pad(&b, h, pads, 0, fill), 2, k, st, dl);
    fsl_value *m = fsl_b_reduce(&b, op, win, wa, 2, true);
    z = fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_sub, win, m), wa, 2, false);
  } else {
    z = pool_of(&b, h, op, pads, k, st, dl, fill);
    for (int i = 1; i < (form == POOL_DEEP ? 6 : 1); i++) z = pool_of(&b, z, op, pads, k, st, dl, fill);
  }
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(w, -0.3, 0.3)};
  ((float *)in[0])[7 * 17 + 5] = NAN;
  assert_int_equal(g->nodes[0]->op, FSL_OP_conv);
  fsl_node **sets[2] = {&g->nodes[0], &g->nodes[1]};
  int sizes[2] = {1, g->n_nodes - 1};
  int chained = run_hand_plan(g, sets, sizes, 2, in, z, what);
  free_inputs(in, 2);
  fsl_graph_free(g);
  return chained;
}

/* Pools of a channels-last convolution output read it in place: ResNet's
 * stem pool (3x3 stride 2, pad 1), an SPP pool (5x5 stride 1, pad 2), a
 * min pool and a sum (AveragePool counting the pads) with asymmetric
 * pads and strides, and a pool of elementwise work over the conv output
 * (its absolute value: ResNet's stem pool after the bias and the ReLU,
 * computed per tap on the row of channels); not a kernel that reduces its
 * windows twice or chains six pools. */
static void test_pool_chain(void **state) {
  (void)state;
  int64_t p1[] = {0, 0, 1, 1, 0, 0, 1, 1}, p2[] = {0, 0, 2, 2, 0, 0, 2, 2}, pa[] = {0, 0, 0, 1, 0, 0, 2, 0};
  int64_t k3[] = {3, 3}, k5[] = {5, 5}, k32[] = {3, 2}, s1[] = {1, 1}, s2[] = {2, 2}, s12[] = {1, 2};
  int stem = pool_chain_run(FSL_OP_reduce_max, p1, k3, s2, -INFINITY, POOL_ONCE, "pool-chain stem");
  int spp = pool_chain_run(FSL_OP_reduce_max, p2, k5, s1, -INFINITY, POOL_ONCE, "pool-chain spp");
  int mn = pool_chain_run(FSL_OP_reduce_min, pa, k32, s12, INFINITY, POOL_ONCE, "pool-chain min");
  int sum = pool_chain_run(FSL_OP_reduce_sum, pa, k32, s12, 0.0, POOL_ONCE, "pool-chain sum");
  int twice = pool_chain_run(FSL_OP_reduce_max, p1, k3, s2, -INFINITY, POOL_TWICE, "pool-chain twice");
  int absv = pool_chain_run(FSL_OP_reduce_max, p1, k3, s2, -INFINITY, POOL_ABS, "pool-chain abs");
  int deep = pool_chain_run(FSL_OP_reduce_max, p1, k3, s1, -INFINITY, POOL_DEEP, "pool-chain deep");
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "pool-chain: %d %d %d %d values chained, %d reducing twice, %d over an abs, %d six pools deep\n",
            stem, spp, mn, sum, twice, absv, deep);
  assert_int_equal(stem, 1);
  assert_int_equal(spp, 1);
  assert_int_equal(mn, 1);
  assert_int_equal(sum, 1);
  assert_int_equal(twice, 0);
  assert_int_equal(absv, 1);
  assert_int_equal(deep, 0);
}

/* EfficientViT's attention (LiteMLA): qkv = 1x1 conv, a depthwise 3x3 and
 * a grouped 1x1 conv aggregate it, and q (the first half of each head) is
 * split out of concat(qkv, agg) along channels through a reshape, then
 * ReLU.  The convolutions run on channels-last activations, grouped ones
 * too (channels_last_pays), and the generated kernel of the concat, which
 * writes a row-major graph output, reads both conv outputs in that layout
 * (its nest tiles the transposed read): qkv, the depthwise output and agg
 * all pass without a reorder, and the result matches the reference. */
static void test_attention_concat_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {1, 16, 12, 12}, dq[] = {32, 16, 1, 1}, dd[] = {32, 1, 3, 3}, dg[] = {32, 8, 1, 1};
  int64_t st[] = {1, 1}, dl[] = {1, 1}, p0[] = {0, 0, 0, 0}, p1[] = {1, 1, 1, 1}, rs[] = {1, 4, 16, 144};
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *wq = input_dt(g, FSL_DT_F32, 4, dq);
  fsl_value *wd = input_dt(g, FSL_DT_F32, 4, dd), *wg = input_dt(g, FSL_DT_F32, 4, dg);
  fsl_value *qkv = fsl_b_conv(&b, x, wq, st, dl, p0, 1, NULL);
  fsl_value *agg = fsl_b_conv(&b, fsl_b_conv(&b, qkv, wd, st, dl, p1, 32, NULL), wg, st, dl, p0, 4, NULL);
  fsl_value *parts[] = {qkv, agg};
  fsl_value *heads = fsl_b_reshape(&b, fsl_b_concat(&b, parts, 2, 1), 4, rs);
  fsl_value *z = fsl_b_binary_scalar(&b, FSL_OP_max, fsl_b_slice_axis(&b, heads, 2, 0, 8), 0.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, z);
  void *in[] = {random_data(x, -1, 1), random_data(wq, -0.3, 0.3), random_data(wd, -0.3, 0.3),
                random_data(wg, -0.3, 0.3)};
  /* kernels: each conv, then everything after them in one */
  assert_true(g->n_nodes > 3);
  for (int i = 0; i < 3; i++) assert_int_equal(g->nodes[i]->op, FSL_OP_conv);
  fsl_node **sets[4] = {&g->nodes[0], &g->nodes[1], &g->nodes[2], &g->nodes[3]};
  int sizes[4] = {1, 1, 1, g->n_nodes - 3};
  int chained = run_hand_plan(g, sets, sizes, 4, in, z, "attention-concat-chain");
  if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "attention-concat-chain: %d values chained\n", chained);
  assert_int_equal(chained, 3);
  free_inputs(in, 4);
  fsl_graph_free(g);
}

static void test_gather_ints(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dd[] = {5, 4}, di[] = {3, 2};
  fsl_value *data = input_dt(g, FSL_DT_F32, 2, dd), *idx = input_dt(g, FSL_DT_I64, 2, di);
  fsl_value *y = fsl_b_gather(&b, data, idx, 0);                                  /* 3x2x4 */
  fsl_value *y2 = fsl_b_unary(&b, FSL_OP_exp, fsl_b_gather(&b, data, idx, 1));    /* 5x3x2 */
  fsl_value *ii = fsl_b_cast(&b, fsl_b_binary_scalar(&b, FSL_OP_mul, data, 10.0), FSL_DT_I32);
  fsl_value *q = fsl_b_binary(&b, FSL_OP_div, ii, fsl_b_scalar(&b, FSL_DT_I32, -3));
  fsl_value *r = fsl_b_binary(&b, FSL_OP_mod, ii, fsl_b_scalar(&b, FSL_DT_I32, 7));
  fsl_value *m = fsl_b_binary(&b, FSL_OP_add, fsl_b_binary(&b, FSL_OP_mul, q, r), ii);
  fsl_value *f = fsl_b_cast(&b, m, FSL_DT_F32);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, y2);
  fsl_graph_add_output(g, m);
  fsl_graph_add_output(g, f);
  void *in[] = {random_data(data, -2, 2), random_data(idx, -4, 4)};
  check_graph(g, in, 1e-6, "gather");
  free_inputs(in, 2);
  fsl_graph_free(g);
}

static void test_gather_error(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dd[] = {5, 4}, di[] = {3};
  fsl_value *data = input_dt(g, FSL_DT_F32, 2, dd), *idx = input_dt(g, FSL_DT_I64, 1, di);
  fsl_value *y = fsl_b_gather(&b, data, idx, 0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_plan p;
  fsl_node **all = g->nodes;
  int na = g->n_nodes;
  assert_true(hand_plan(g, &p, &all, &na, 1));
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, &exe), FSL_OK);
  float d[20] = {0};
  int64_t ix[3] = {0, -5, 5};
  const void *in[] = {d, ix};
  void *out[1] = {(void *)1};
  assert_int_equal(fsl_backend_cpu.run(exe, in, out), FSL_ERR_RUNTIME);
  assert_null(out[0]);
  assert_non_null(strstr(fsl_last_error(), "out of range"));
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  fsl_graph_free(g);
}

static void test_large_parallel(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {300000}, dy[] = {64, 2000};
  fsl_value *x = input_dt(g, FSL_DT_F32, 1, dx), *y = input_dt(g, FSL_DT_F32, 2, dy);
  fsl_value *a = fsl_b_unary(&b, FSL_OP_sqrt, fsl_b_binary(&b, FSL_OP_mul, x, x));
  int64_t perm[] = {1, 0};
  fsl_value *t = fsl_b_binary_scalar(&b, FSL_OP_add, fsl_b_permute(&b, y, perm), 1.0);
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, a);
  fsl_graph_add_output(g, t);
  void *in[] = {random_data(x, -3, 3), random_data(y, -3, 3)};
  check_graph(g, in, 1e-6, "large");
  free_inputs(in, 2);
  fsl_graph_free(g);
}

/* fsl_k0(NULL, NULL) of a loaded object. */
static int call_k0(const fsl_cpu_so *so) {
  int (*f)(const void *const *, void *const *);
  void *p = fsl_cpu_so_kernel(so, 0);
  assert_non_null(p);
  memcpy(&f, &p, sizeof p);
  return f(NULL, NULL);
}

/* Into src: a kernel fsl_k0 returning `ret`, its source made unique by the
 * time and the process (a fresh cache entry). */
static void unique_k0(char *src, size_t cap, int ret) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(src, cap, "/* %lld.%ld %ld */ int fsl_k0(const void *const *in, void *const *out) { (void)in; "
           "(void)out; return %d; }\n", (long long)ts.tv_sec, ts.tv_nsec, (long)getpid(), ret);
}

static void test_compile_cache(void **state) {
  (void)state;
  const char *src = "int fsl_k0(const void *const *in, void *const *out) { (void)in; (void)out; return 7; }\n";
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_int_equal(call_k0(&so), 7);
  char path[1024];
  snprintf(path, sizeof path, "%s", so.path);
  fsl_cpu_so_close(&so);
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_true(so.cache_hit);
  assert_string_equal(so.path, path);
  fsl_cpu_so_close(&so);
  /* a failing compile: an error with the compiler's message, no entry */
  const char *bad = "int fsl_k0(void) { return syntax error; }\n";
  assert_int_equal(fsl_cpu_so_load(bad, NULL, &so), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "error"));
  assert_int_equal(access(so.path, F_OK), -1);
}

/* Reads a whole file; *len its size in bytes. */
static unsigned char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static void write_all(const char *path, const unsigned char *b, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* An object cut short is never trusted (objcheck.h): not the bytes of a
 * compiled model file, not a cache entry.  The cut that matters is the one
 * GNU ld left under a file-size limit: everything up to the section header
 * table, which dlopen does not read.  A cut-short or corrupt cache entry
 * is rebuilt, and is whole afterwards. */
static void test_object_check(void **state) {
  (void)state;
  char src[200];
  unique_k0(src, sizeof src, 11);
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_false(so.cache_hit);
  char path[1024];
  snprintf(path, sizeof path, "%s", so.path);
  fsl_cpu_so_close(&so);
  size_t len;
  unsigned char *obj = read_all(path, &len);
  assert_int_equal(fsl_cpu_elf_check(obj, len, "test"), FSL_OK);
  assert_int_equal(fsl_cpu_elf_check_file(path), FSL_OK);
  Elf64_Ehdr eh;
  memcpy(&eh, obj, sizeof eh);
  assert_true(eh.e_shoff > 0 && eh.e_shoff < len);
  /* cuts: inside the section header table (ld's), at its start, inside the
   * sections, inside the program headers and the ELF header, nothing */
  const size_t cuts[] = {len - 1, (size_t)eh.e_shoff + 1, (size_t)eh.e_shoff, len / 2, 100, 10, 0};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    assert_int_equal(fsl_cpu_elf_check(obj, cuts[i], "test"), FSL_ERR_RUNTIME);
    assert_non_null(strstr(fsl_last_error(), "cut short"));
    assert_int_equal(fsl_cpu_so_load_object(obj, cuts[i], &so), FSL_ERR_RUNTIME);
    assert_null(so.handle);
  }
  /* header fields: magic, class, machine, a section's size past the end */
  unsigned char *bad = malloc(len);
  assert_non_null(bad);
  const size_t field[] = {1, EI_CLASS, offsetof(Elf64_Ehdr, e_machine)};
  for (size_t i = 0; i < 3; i++) {
    memcpy(bad, obj, len);
    bad[field[i]] ^= 0x5a;
    assert_int_equal(fsl_cpu_elf_check(bad, len, "test"), FSL_ERR_RUNTIME);
    assert_non_null(strstr(fsl_last_error(), "wrong"));
  }
  memcpy(bad, obj, len);
  Elf64_Shdr sh;
  for (unsigned k = 1; k < eh.e_shnum; k++) { /* the first section with file bytes grows past the end */
    memcpy(&sh, bad + eh.e_shoff + k * sizeof sh, sizeof sh);
    if (sh.sh_type == SHT_NOBITS) continue;
    sh.sh_size = len;
    memcpy(bad + eh.e_shoff + k * sizeof sh, &sh, sizeof sh);
    break;
  }
  assert_int_equal(fsl_cpu_elf_check(bad, len, "test"), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "section"));
  free(bad);
  /* the whole bytes load from memory and run */
  assert_int_equal(fsl_cpu_so_load_object(obj, len, &so), FSL_OK);
  assert_int_equal(call_k0(&so), 11);
  fsl_cpu_so_close(&so);
  /* a cache entry cut as ld cut it is not a hit: it is rebuilt, whole */
  write_all(path, obj, (size_t)eh.e_shoff + 1);
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_false(so.cache_hit);
  fsl_cpu_so_close(&so);
  size_t len2;
  unsigned char *again = read_all(path, &len2);
  assert_int_equal(fsl_cpu_elf_check(again, len2, "test"), FSL_OK);
  free(again);
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_true(so.cache_hit);
  fsl_cpu_so_close(&so);
  free(obj);
}

/* Progress: a compiler run (a cache miss) is reported as task "compile",
 * from its start to its end; a cache hit reports nothing. */
typedef struct progress_log { int n_events, n_finished; char detail[64]; } progress_log;

static void log_progress(const fsl_progress *ev, void *ctx) {
  progress_log *l = ctx;
  assert_string_equal(ev->task, "compile");
  assert_true(ev->elapsed_s >= 0);
  assert_int_equal(ev->total, 1);
  if (l->n_events++ == 0) assert_false(ev->finished);
  if (ev->finished) l->n_finished++;
  snprintf(l->detail, sizeof l->detail, "%s", ev->detail);
}

static void test_compile_progress(void **state) {
  (void)state;
  char src[200];
  unique_k0(src, sizeof src, 0);
  progress_log log = {0};
  fsl_set_progress(log_progress, &log);
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src, "1 test kernel", &so), FSL_OK);
  assert_false(so.cache_hit);
  fsl_cpu_so_close(&so);
  assert_true(log.n_events >= 2);
  assert_int_equal(log.n_finished, 1);
  assert_string_equal(log.detail, "1 test kernel");
  int before = log.n_events;
  assert_int_equal(fsl_cpu_so_load(src, "1 test kernel", &so), FSL_OK);
  assert_true(so.cache_hit);
  fsl_cpu_so_close(&so);
  fsl_set_progress(NULL, NULL);
  assert_int_equal(log.n_events, before);
}

/* The prologue's inline expf / tanhf / erff (fsl_codegen_prelude), compiled
 * as generated code is (a vectorized loop), against libm in double: rel.
 * error <= 1e-6 where the result is a normal float, exact special values
 * (+-inf, NaN, signed zero, overflow to inf, underflow to 0), exp's
 * subnormal results flushed to zero, tanh's and erf's exact; fsl_expf_le0
 * equal to fsl_expf bit for bit where its argument is <= 0 or NaN. */
static void test_fast_math(void **state) {
  (void)state;
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_c, &src);
  fsl_sbuf_puts(&src, "int fsl_k0(const void *const *in, void *const *out) {\n"
                      "  const float *x = (const float *)in[0]; const int64_t n = *(const int64_t *)in[1];\n"
                      "  float *e = (float *)out[0], *t = (float *)out[1], *f = (float *)out[2], *l = (float *)out[3];\n"
                      "  for (int64_t i = 0; i < n; i++) { e[i] = fsl_expf(x[i]); t[i] = fsl_tanhf(x[i]); f[i] = fsl_erff(x[i]);\n"
                      "    l[i] = fsl_expf_le0(x[i] > 0.0f ? -x[i] : x[i]); }\n"
                      "  return 0; }\n");
  assert_false(src.oom);
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src.p, NULL, &so), FSL_OK);
  fsl_sbuf_free(&src);
  int (*fn)(const void *const *, void *const *);
  void *p = fsl_cpu_so_kernel(&so, 0);
  assert_non_null(p);
  memcpy(&fn, &p, sizeof p);
  const float special[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e-30f, 88.72f, 88.73f,
                           89.5f, 100.0f, 1e30f, -87.0f, -100.0f, -103.9f, -104.5f, -1e30f, 7.9f, -7.9f, 4.0f, 9.0f};
  int64_t ns = (int64_t)(sizeof special / sizeof special[0]), n = ns + 400000;
  float *x = malloc(sizeof(float) * (size_t)n * 5);
  assert_non_null(x);
  float *e = x + n, *t = e + n, *f = t + n, *l = f + n;
  memcpy(x, special, sizeof special);
  for (int64_t i = ns; i < n; i++) {
    double u = (double)(i - ns) / 400000.0;  /* a dense sweep of [-110, 110] plus tiny values */
    x[i] = (i & 1) ? (float)(-110.0 + 220.0 * u) : (float)((u - 0.5) * 1e-3);
  }
  const void *in[] = {x, &n};
  void *out[] = {e, t, f, l};
  assert_int_equal(fn(in, out), 0);
  /* fsl_expf_le0 (a softmax's exp of x - max x) is fsl_expf bit for bit
   * where its argument is <= 0 or NaN */
  for (int64_t i = 0; i < n; i++)
    if (!(x[i] > 0)) assert_true(isnan(x[i]) ? isnan(l[i]) : memcmp(&l[i], &e[i], sizeof(float)) == 0);
  double worst[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; i++) {
    double xi = x[i], want[3] = {exp(xi), tanh(xi), erf(xi)}, got[3] = {e[i], t[i], f[i]};
    for (int k = 0; k < 3; k++) {
      double w = want[k], g = got[k];
      if (isnan(xi)) {
        assert_true(isnan(g));
        continue;
      }
      if (w > 3.4028234663852886e38) { /* overflows float */
        assert_true(isinf(g) && g > 0);
        continue;
      }
      if (fabs(w) < 1.1754943508222875e-38) { /* subnormal or zero result: exp flushes it to zero */
        bool ok = k == 0 ? g == 0 : fabs(g - w) <= 3e-45;
        if (!ok) fprintf(stderr, "fast math %d: x=%g got %g want %g\n", k, xi, g, w);
        assert_true(ok);
        if (w == 0) assert_true(signbit(g) == signbit(w));
        continue;
      }
      double rel = fabs(g - w) / fabs(w);
      if (rel > 1e-6) fprintf(stderr, "fast math %d: x=%.9g got %.9g want %.9g\n", k, xi, g, w);
      worst[k] = fmax(worst[k], rel);
    }
  }
  if (getenv("FSL_TEST_VERBOSE"))
    fprintf(stderr, "fast math max rel. error: exp %.3g tanh %.3g erf %.3g\n", worst[0], worst[1], worst[2]);
  for (int k = 0; k < 3; k++) assert_true(worst[k] <= 1e-6);
  /* exact special values */
  assert_true(isinf(e[0]) && e[0] > 0 && e[1] == 0 && t[0] == 1 && t[1] == -1 && f[0] == 1 && f[1] == -1);
  assert_true(e[4] == 1 && e[5] == 1 && t[5] == 0 && signbit(t[5]) && f[5] == 0 && signbit(f[5]));
  assert_true(isinf(e[12]) && isinf(e[13]) && e[17] == 0 && e[18] == 0);
  free(x);
  fsl_cpu_so_close(&so);
}

/* rel. L2 distance of two f32 buffers */
static double rel_l2(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* Softmax over long rows (8 x 32000, float partial sums in blocks) and
 * layer norm over a large offset (cancellation in the variance): softmax
 * within 1e-5 relative of the reference per element, the normalized
 * values (about N(0, 1)) within 1e-4 absolute, rel. L2 within 1e-5. */
static void test_long_rows(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {8, 32000}, axis = 1;
  fsl_value *x = input_dt(g, FSL_DT_F32, 2, dx);
  fsl_value *y = softmax(&b, x, 1);
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, &axis, 1, true), 32000.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(
      &b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), &axis, 1, true), 32000.0);
  fsl_value *ln = fsl_b_binary(&b, FSL_OP_mul, d, fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5)));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, ln);
  float *xin = random_data(x, -8, 8);
  for (int64_t i = 0; i < 32000; i++) xin[i] += 1000.0f; /* row 0: large offset */
  void *in[] = {xin};
  void *want[2] = {0};
  assert_int_equal(fsl_ref_run(g, (const void *const *)in, want), FSL_OK);
  fsl_plan p;
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_GREEDY, NULL, &p), FSL_OK);
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, &exe), FSL_OK);
  void *got[2] = {0};
  assert_int_equal(fsl_backend_cpu.run(exe, (const void *const *)in, got), FSL_OK);
  int64_t n = 8 * 32000;
  for (int k = 0; k < 2; k++) {
    const float *a = got[k], *w = want[k];
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - w[i]) / (k ? 1.0 : fabs((double)w[i])));
    double l2 = rel_l2(a, w, n);
    if (getenv("FSL_TEST_VERBOSE")) fprintf(stderr, "long rows %d: max err %.3g, rel L2 %.3g\n", k, worst, l2);
    assert_true(worst <= (k ? 1e-4 : 1e-5));
    assert_true(l2 <= 1e-5);
    free(got[k]);
    free(want[k]);
  }
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  free_inputs(in, 1);
  fsl_graph_free(g);
}

/* Max/min reductions over vectorized rows propagate a NaN wherever it is
 * in the row; a row of -inf gives the reference's NaN softmax. */
static void test_reduce_nan(void **state) {
  (void)state;
  /* rows of 1000 and 130: the row max/min in 4 and in 2 streams (reduce.c) */
  const int64_t row_lengths[] = {1000, 130};
  for (int t = 0; t < 2; t++) {
    const int64_t L = row_lengths[t];
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t dx[] = {7, L}, axis = 1;
    fsl_value *x = input_dt(g, FSL_DT_F32, 2, dx);
    fsl_value *mx = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, false);
    fsl_value *mn = fsl_b_reduce(&b, FSL_OP_reduce_min, x, &axis, 1, false);
    fsl_value *sm = softmax(&b, x, 1);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, mx);
    fsl_graph_add_output(g, mn);
    fsl_graph_add_output(g, sm);
    float *xin = random_data(x, -3, 3);
    xin[0 * L + 0] = NAN;       /* first lane */
    xin[1 * L + L / 2 + 17] = NAN; /* middle */
    xin[2 * L + L - 1] = NAN;   /* tail */
    for (int i = 0; i < L; i++) xin[3 * L + i] = -INFINITY;
    xin[4 * L + 3] = INFINITY;
    xin[5 * L + L / 2] = 100;   /* the first element of the second half's stream */
    xin[6 * L + L - 1] = -100;  /* the last element of the last stream */
    void *in[] = {xin};
    check_graph(g, in, 1e-5, L == 1000 ? "reduce-nan" : "reduce-nan-130");
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* A softmax's max runs without its NaN flag (nanflag.c) where only the
 * quotients and the sum leave the kernel; with exp(x - max) an output too
 * it keeps the flag.  Either way NaN, a row of -inf and +inf give the
 * reference's answers, in rows (softmax over the last axis of [6, 1000])
 * and in columns (over axis 1 of [3, 16, 200]), under every plan. */
static void test_softmax_nan_outputs(void **state) {
  (void)state;
  for (int t = 0; t < 6; t++) {
    bool cols = t >= 3;
    int extra = t % 3; /* 0: y only, 1: y and the sum, 2: y and exp(x - max) */
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t d2[] = {6, 1000}, d3[] = {3, 16, 200}, axis = 1;
    fsl_value *x = cols ? input_dt(g, FSL_DT_F32, 3, d3) : input_dt(g, FSL_DT_F32, 2, d2);
    fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, true);
    fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, x, m));
    fsl_value *sum = fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true);
    fsl_value *y = fsl_b_binary(&b, FSL_OP_div, e, sum);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    if (extra == 1) fsl_graph_add_output(g, sum);
    if (extra == 2) fsl_graph_add_output(g, e);
    float *xin = random_data(x, -3, 3);
    int64_t L = cols ? 16 * 200 : 1000, st = cols ? 200 : 1; /* a row's elements and their stride */
    xin[0 * L + 0] = NAN;
    xin[1 * L + 7 * st] = NAN;
    xin[1 * L + 9 * st] = NAN;
    for (int64_t i = 0; i < (cols ? 16 : L); i++) xin[2 * L + i * st] = -INFINITY;
    if (!cols) {
      xin[3 * L + L - 1] = NAN;
      xin[4 * L + 3] = INFINITY;
    }
    void *in[] = {xin};
    char what[48];
    snprintf(what, sizeof what, "softmax-nan %s %d", cols ? "columns" : "rows", extra);
    check_graph(g, in, 1e-5, what);
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* Softmax over an outer axis (columns.c: a sweep per reduction, the
 * quotients column by column), with the max over that axis as a second,
 * kept-space output: NaN, -inf and +inf in single columns give the
 * reference's answers, in columns of 200 (a row flag, then a second sweep
 * for the per-column flags) and of 40 (per-column flags at once). */
static void test_column_softmax_nan(void **state) {
  (void)state;
  int64_t shapes[][3] = {{3, 16, 200}, {4, 10, 40}};
  for (int t = 0; t < 2; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t axis = 1, C = shapes[t][1], W = shapes[t][2];
    fsl_value *x = input_dt(g, FSL_DT_F32, 3, shapes[t]);
    fsl_value *sm = softmax(&b, x, 1);
    fsl_value *mx = fsl_b_reduce(&b, FSL_OP_reduce_max, x, &axis, 1, false);
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, sm);
    fsl_graph_add_output(g, mx);
    float *xin = random_data(x, -3, 3);
    xin[0 * C * W + 3 * W + 7] = NAN;                        /* column 7 of row 0 */
    xin[1 * C * W + (C - 1) * W + W - 1] = NAN;              /* the last column's last element */
    for (int64_t c = 0; c < C; c++) xin[2 * C * W + c * W + 5] = -INFINITY; /* a column of -inf */
    xin[2 * C * W + 4 * W + 9] = INFINITY;
    void *in[] = {xin};
    check_graph(g, in, 1e-5, t ? "column-softmax-nan-40" : "column-softmax-nan-200");
    free_inputs(in, 1);
    fsl_graph_free(g);
  }
}

/* Instance norm (reduced axes 2,3 of NCHW: one flat index, no div/mod)
 * with a per-channel scale, and a quantizing round(x / max(y)) that must
 * see the exact quotient, not a reciprocal product: 45.5 / 7 = 6.5 rounds
 * to 6, while 45.5 * (1/7) = 6.5000005 in float rounds to 7. */
static void test_norm_quantize(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = B_INIT(g);
  int64_t dx[] = {2, 3, 8, 16}, dsc[] = {1, 3, 1, 1}, ax[] = {2, 3}, dq[] = {6, 16}, last = 1;
  fsl_value *x = input_dt(g, FSL_DT_F32, 4, dx), *sc = input_dt(g, FSL_DT_F32, 4, dsc);
  fsl_value *xq = input_dt(g, FSL_DT_F32, 2, dq), *yq = input_dt(g, FSL_DT_F32, 2, dq);
  fsl_value *mean = fsl_b_binary_scalar(&b, FSL_OP_div, fsl_b_reduce(&b, FSL_OP_reduce_sum, x, ax, 2, true), 128.0);
  fsl_value *d = fsl_b_binary(&b, FSL_OP_sub, x, mean);
  fsl_value *var = fsl_b_binary_scalar(&b, FSL_OP_div,
                                       fsl_b_reduce(&b, FSL_OP_reduce_sum, fsl_b_binary(&b, FSL_OP_mul, d, d), ax, 2, true),
                                       128.0);
  fsl_value *y = fsl_b_binary(&b, FSL_OP_mul,
                              fsl_b_binary(&b, FSL_OP_mul, d, fsl_b_unary(&b, FSL_OP_rsqrt, fsl_b_binary_scalar(&b, FSL_OP_add, var, 1e-5))),
                              sc);
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, yq, &last, 1, true);
  fsl_value *q = fsl_b_unary(&b, FSL_OP_round, fsl_b_binary(&b, FSL_OP_div, xq, m));
  assert_int_equal(b.st, FSL_OK);
  fsl_graph_add_output(g, y);
  fsl_graph_add_output(g, q);
  float *xqin = random_data(xq, -50, 50), *yqin = random_data(yq, 0, 6.9);
  for (int r = 0; r < 6; r++) {
    yqin[r * 16 + 5] = 7.0f;
    xqin[r * 16 + 9] = 45.5f;
    xqin[r * 16 + 12] = -45.5f;
  }
  void *in[] = {random_data(x, -3, 3), random_data(sc, 0.5, 1.5), xqin, yqin};
  check_graph(g, in, 1e-5, "norm-quantize");
  free_inputs(in, 4);
  fsl_graph_free(g);
}

static char g_cache[256];

static int setup(void **state) {
  (void)state;
  snprintf(g_cache, sizeof g_cache, "/tmp/fsl_test_cpu_XXXXXX");
  if (!mkdtemp(g_cache)) return -1;
  setenv("FSL_CACHE_DIR", g_cache, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_cache);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_compile_cache),
      cmocka_unit_test(test_object_check),
      cmocka_unit_test(test_compile_progress),
      cmocka_unit_test(test_elementwise_broadcast),
      cmocka_unit_test(test_movement),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_reductions_misc),
      cmocka_unit_test(test_maxpool),
      cmocka_unit_test(test_maxpool_separable),
      cmocka_unit_test(test_matmul_bias_relu),
      cmocka_unit_test(test_conv_bias),
      cmocka_unit_test(test_depthwise_rows),
      cmocka_unit_test_teardown(test_gemv_generated, unset_no_onednn),
      cmocka_unit_test(test_conv_chain), cmocka_unit_test(test_concat_chain), cmocka_unit_test(test_residual_chain), cmocka_unit_test(test_residual_post_chain), cmocka_unit_test(test_winograd_conv), cmocka_unit_test(test_residual_sum_in_place), cmocka_unit_test(test_residual_kept_for_epilogue), cmocka_unit_test(test_attention_concat_chain),
      cmocka_unit_test(test_reduce_chain),
      cmocka_unit_test(test_pool_chain),
      cmocka_unit_test(test_gather_ints),
      cmocka_unit_test(test_gather_error),
      cmocka_unit_test(test_large_parallel),
      cmocka_unit_test(test_fast_math),
      cmocka_unit_test(test_long_rows),
      cmocka_unit_test(test_reduce_nan), cmocka_unit_test(test_column_softmax_nan),
      cmocka_unit_test(test_softmax_nan_outputs),
      cmocka_unit_test(test_norm_quantize),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
