/*
 * cpu_test_util.h — what the CPU backend's unit tests share (test_cpu.c,
 * test_cpu_kernels.c, test_cpu_linear.c, test_cpu_layout.c,
 * test_cpu_numerics.c): small primitive graphs built with the builder, run
 * through plans of every shape (one kernel per node, the whole graph as one
 * kernel where legal, each strategy's plan, or kernels picked by hand) on
 * the CPU backend and compared with the reference interpreter on random
 * inputs; each test program runs with a kernel cache of its own.
 */
#ifndef FSL_CPU_TEST_UTIL_H
#define FSL_CPU_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "backend/cpu/compile.h"
#include "backend/cpu/onednn.h"
#include "eval/eval.h"
#include "runtime/memplan.h"
#include "fission/builder.h"
#include "test_graph.h"

/* Compares an output of the CPU backend with the reference. */
static inline void compare(const fsl_value *v, const void *got, const void *want, double tol, const char *what) {
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
static inline void check_arena(const fsl_plan *p, int64_t arena_bytes) {
  fsl_memplan mp;
  assert_int_equal(fsl_memplan_build(p, &fsl_memplan_executor, &mp), FSL_OK);
  assert_true(arena_bytes <= mp.peak_bytes);
  assert_int_equal(fsl_memplan_verify(p, &mp), FSL_OK);
  fsl_memplan_free(&mp);
}

/* Whether oneDNN's ISA is AVX2 without AVX-512 (FSL_CPU_ISA=avx2, or such
 * a CPU): where fissile's Winograd and oneDNN's sum post-op run. */
static inline bool onednn_avx2_only(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 && (isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
}

/* Runs plan p on the CPU backend and compares with ref outputs. */
static inline void check_plan(const fsl_plan *p, void **inputs, void **want, double tol, const char *what) {
  const fsl_graph *g = p->g;
  void *exe = NULL;
  fsl_status st = fsl_backend_cpu.compile(p, NULL, &exe);
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
static inline bool hand_plan(const fsl_graph *g, fsl_plan *p, fsl_node ***sets, const int *sizes, int n) {
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
static inline void check_graph(fsl_graph *g, void **inputs, double tol, const char *name) {
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

static inline void free_inputs(void **in, int n) {
  for (int i = 0; i < n; i++) free(in[i]);
}

#define B_INIT(g) {.g = (g), .st = FSL_OK, .fold = false}

/* softmax over `axis` of x, the way fission writes it */
static inline fsl_value *softmax(fsl_builder *b, fsl_value *x, int64_t axis) {
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, fsl_b_binary(b, FSL_OP_sub, x, m));
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, e, &axis, 1, true);
  return fsl_b_binary(b, FSL_OP_div, e, s);
}

/* One pool of x: pad (pads, with `fill`), window (k, st, dl over the last
 * two or three axes) and reduce (op) over the window axes. */
static inline fsl_value *pool_of(fsl_builder *b, fsl_value *x, fsl_op op, const int64_t *pads, const int64_t *k,
                                 const int64_t *st, const int64_t *dl, double fill) {
  int nk = x->rank - 2;
  int64_t ax[3];
  fsl_value *w = fsl_b_window(b, fsl_b_pad(b, x, pads, 0, fill), nk, k, st, dl);
  for (int i = 0; i < nk; i++) ax[i] = x->rank + i;
  return fsl_b_reduce(b, op, w, ax, nk, false);
}

/* The CPU backend's counts for graph g compiled as one kernel. */
static inline fsl_cpu_stats one_kernel_stats(const fsl_graph *g) {
  fsl_node **all = g->nodes;
  int na = g->n_nodes;
  fsl_plan p;
  assert_true(hand_plan(g, &p, &all, &na, 1));
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, NULL, &exe), FSL_OK);
  fsl_cpu_stats stats;
  fsl_cpu_exe_stats(exe, &stats);
  fsl_backend_cpu.free_exe(exe);
  fsl_plan_free(&p);
  return stats;
}

/* A constant of the given dims, uniform in [-scale, scale). */
static inline fsl_value *random_const_in(fsl_builder *b, int rank, const int64_t *dims, double scale) {
  int64_t n = fsl_numel(rank, dims);
  float *p = malloc(sizeof *p * (size_t)n);
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)(scale * (2.0 * test_rnd() - 1.0));
  fsl_value *v = fsl_b_const(b, FSL_DT_F32, rank, dims, p);
  free(p);
  return v;
}

/* A constant of floats uniform in [-1, 1) (a model's initializer). */
static inline fsl_value *random_const(fsl_builder *b, int rank, const int64_t *dims) {
  return random_const_in(b, rank, dims, 1.0);
}

/* Compiles the plan of n hand-picked kernels (sets/sizes) over g on the
 * CPU backend, runs it on `in` and compares its output z with the
 * reference interpreter's; returns the executable's statistics (no kernel
 * may fall back to the reference interpreter, and the arena may not exceed
 * the executors' memory plan). */
static inline fsl_cpu_stats run_hand_plan_stats(const fsl_graph *g, fsl_node ***sets, const int *sizes, int n,
                                                void **in, const fsl_value *z, const char *what) {
  fsl_plan p;
  assert_true(hand_plan(g, &p, sets, sizes, n));
  void *exe = NULL;
  assert_int_equal(fsl_backend_cpu.compile(&p, NULL, &exe), FSL_OK);
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
static inline int run_hand_plan(const fsl_graph *g, fsl_node ***sets, const int *sizes, int n, void **in,
                                const fsl_value *z, const char *what) {
  return run_hand_plan_stats(g, sets, sizes, n, in, z, what).n_chained;
}

/* Each test program's kernel cache: a fresh directory (FSL_CACHE_DIR),
 * removed at the end (cmocka_run_group_tests' setup and teardown). */
static char g_cache[256];

static inline int cpu_test_setup(void **state) {
  (void)state;
  snprintf(g_cache, sizeof g_cache, "/tmp/fsl_test_cpu_XXXXXX");
  if (!mkdtemp(g_cache)) return -1;
  setenv("FSL_CACHE_DIR", g_cache, 1);
  return 0;
}

static inline int cpu_test_teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_cache);
  return system(cmd) == 0 ? 0 : -1;
}

#endif
