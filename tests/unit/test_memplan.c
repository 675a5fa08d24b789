/* test_memplan.c — the arena planner (src/runtime/memplan.h): hand-made
 * plans with known answers, and random plans executed against a simulated
 * arena (every value's bytes must survive until its last reader). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "runtime/memplan.h"

/* ---- building graphs and plans by hand ---- */

static fsl_value *input(fsl_graph *g, int64_t n) {
  fsl_value *v = fsl_graph_add_value(g, NULL);
  assert_non_null(v);
  v->dtype = FSL_DT_F32;
  assert_true(fsl_value_set_shape(v, 1, &n));
  assert_int_equal(fsl_graph_add_input(g, v), FSL_OK);
  return v;
}

static fsl_value *node(fsl_graph *g, fsl_op op, fsl_value *a, fsl_value *b) {
  fsl_value *in[2] = {a, b};
  fsl_value *out = fsl_graph_add_value(g, NULL);
  assert_non_null(out);
  fsl_node *n = fsl_graph_add_node(g, op, NULL, in, b ? 2 : 1, &out, 1, NULL, 0);
  assert_non_null(n);
  assert_int_equal(fsl_prim_infer(n), FSL_OK);
  return out;
}

/* A kernel over nodes [lo, hi) of g: inputs are values read and not made
 * inside, outputs values made inside and read outside or graph outputs. */
static fsl_kernel *kernel_of(const fsl_graph *g, int lo, int hi, fsl_kernel_kind kind) {
  fsl_kernel *k = calloc(1, sizeof *k);
  assert_non_null(k);
  k->kind = kind;
  k->n_nodes = hi - lo;
  k->nodes = calloc((size_t)k->n_nodes + 1, sizeof *k->nodes);
  k->in = calloc((size_t)g->n_values + 1, sizeof *k->in);
  k->out = calloc((size_t)g->n_values + 1, sizeof *k->out);
  assert_true(k->nodes && k->in && k->out);
  for (int i = lo; i < hi; i++) k->nodes[i - lo] = g->nodes[i];
  for (int i = lo; i < hi; i++) {
    const fsl_node *n = g->nodes[i];
    for (int j = 0; j < n->n_in; j++) {
      fsl_value *v = n->in[j];
      bool inside = v->producer && v->producer != NULL;
      if (inside) {
        inside = false;
        for (int q = lo; q < hi; q++) inside |= g->nodes[q] == v->producer;
      }
      bool dup = false;
      for (int q = 0; q < k->n_in; q++) dup |= k->in[q] == v;
      if (!inside && !dup) k->in[k->n_in++] = v;
    }
    for (int j = 0; j < n->n_out; j++) {
      fsl_value *v = n->out[j];
      bool outside = v->is_output;
      for (int c = 0; c < v->n_cons; c++) {
        bool in_k = false;
        for (int q = lo; q < hi; q++) in_k |= g->nodes[q] == v->cons[c];
        outside |= !in_k;
      }
      if (outside) k->out[k->n_out++] = v;
    }
  }
  return k;
}

static void plan_add(fsl_plan *p, fsl_kernel *k) {
  if (p->kernels.n == p->kernels.cap) {
    p->kernels.cap = p->kernels.cap ? 2 * p->kernels.cap : 16;
    p->kernels.k = realloc(p->kernels.k, sizeof *p->kernels.k * (size_t)p->kernels.cap);
    assert_non_null(p->kernels.k);
  }
  k->id = p->kernels.n;
  p->kernels.k[p->kernels.n++] = k;
}

/* Frees the test's own kernels; `owned` excludes repeated pointers. */
static void plan_clear(fsl_plan *p) {
  for (int i = 0; i < p->kernels.n; i++) {
    fsl_kernel *k = p->kernels.k[i];
    bool again = false;
    for (int j = i + 1; j < p->kernels.n; j++) again |= p->kernels.k[j] == k;
    if (again) continue;
    free(k->nodes);
    free(k->in);
    free(k->out);
    free(k);
  }
  free(p->kernels.k);
  memset(&p->kernels, 0, sizeof p->kernels);
}

/* ---- executing a plan against a simulated arena ---- */

/* Every 64-byte granule of the arena holds the id of the value last
 * written there.  At each step a kernel's inputs must still be intact;
 * then its outputs are written.  At the end every graph output must be. */
static void simulate(const fsl_plan *p, const fsl_memplan *mp) {
  int64_t n_gran = mp->peak_bytes / FSL_MEMPLAN_ALIGN + 1;
  int *tag = malloc(sizeof *tag * (size_t)n_gran);
  assert_non_null(tag);
  for (int64_t i = 0; i < n_gran; i++) tag[i] = -1;
#define GRANULES(v) \
  for (int64_t gi = mp->offset[(v)->id] / FSL_MEMPLAN_ALIGN, \
               ge = (mp->offset[(v)->id] + mp->size[(v)->id] + FSL_MEMPLAN_ALIGN - 1) / FSL_MEMPLAN_ALIGN; gi < ge; gi++)
  for (int s = 0; s < p->kernels.n; s++) {
    const fsl_kernel *k = p->kernels.k[s];
    for (int j = 0; j < k->n_in; j++) {
      const fsl_value *v = k->in[j];
      if (v->is_input || v->data) continue;
      assert_true(mp->offset[v->id] >= 0);
      GRANULES(v) assert_int_equal(tag[gi], v->id);
    }
    for (int j = 0; j < k->n_out; j++) {
      const fsl_value *v = k->out[j];
      assert_true(mp->offset[v->id] >= 0);
      assert_int_equal(mp->offset[v->id] % FSL_MEMPLAN_ALIGN, 0);
      assert_true(mp->offset[v->id] + mp->size[v->id] <= mp->peak_bytes);
      GRANULES(v) tag[gi] = v->id;
    }
  }
  for (int i = 0; i < p->g->n_outputs; i++) {
    const fsl_value *v = p->g->outputs[i];
    if (v->is_input || v->data) continue;
    GRANULES(v) assert_int_equal(tag[gi], v->id);
  }
#undef GRANULES
  free(tag);
}

/* ---- hand-made plans ---- */

/* a -> exp -> b -> neg -> c -> abs -> d (output), one kernel per node. */
static void test_chain(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, 1024);
  fsl_value *b = node(g, FSL_OP_exp, a, NULL);
  fsl_value *c = node(g, FSL_OP_neg, b, NULL);
  fsl_value *d = node(g, FSL_OP_abs, c, NULL);
  assert_int_equal(fsl_graph_add_output(g, d), FSL_OK);
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  for (int i = 0; i < 3; i++) plan_add(&p, kernel_of(g, i, i + 1, FSL_KERNEL_LOOP));

  fsl_memplan mp;
  assert_int_equal(fsl_memplan_build(&p, NULL, &mp), FSL_OK);
  assert_int_equal(mp.n_planned, 3);
  assert_int_equal(mp.n_inplace, 0);
  assert_int_equal(mp.offset[a->id], -1);  /* graph input: external */
  assert_int_equal(mp.peak_bytes, 2 * 4096);  /* b and d share, c between */
  assert_int_equal(mp.offset[b->id], mp.offset[d->id]);
  assert_int_equal(mp.total_bytes, 3 * 4096);
  assert_int_equal(mp.live_bytes, 2 * 4096);
  assert_int_equal(fsl_memplan_verify(&p, &mp), FSL_OK);
  simulate(&p, &mp);
  fsl_memplan_free(&mp);
  fsl_memplan_free(&mp);  /* idempotent */

  fsl_memplan_options opt = {.inplace = true};
  assert_int_equal(fsl_memplan_build(&p, &opt, &mp), FSL_OK);
  assert_int_equal(mp.n_inplace, 2);
  assert_int_equal(mp.alias[c->id], b->id);
  assert_int_equal(mp.alias[d->id], c->id);
  assert_int_equal(mp.peak_bytes, 4096);
  assert_int_equal(fsl_memplan_verify(&p, &mp), FSL_OK);
  simulate(&p, &mp);
  fsl_memplan_free(&mp);

  /* as the executors run: graph outputs in buffers of their own, so only
   * b and c are planned, c in place over b */
  assert_int_equal(fsl_memplan_build(&p, &fsl_memplan_executor, &mp), FSL_OK);
  assert_int_equal(mp.offset[d->id], -1);
  assert_int_equal(mp.n_planned, 2);
  assert_int_equal(mp.alias[c->id], b->id);
  assert_int_equal(mp.alias[d->id], -1);
  assert_int_equal(mp.peak_bytes, 4096);
  assert_int_equal(fsl_memplan_verify(&p, &mp), FSL_OK);
  fsl_memplan_free(&mp);

  /* a kernel that reads b after the third: b lives on, nothing in place over it */
  fsl_kernel *again = kernel_of(g, 1, 2, FSL_KERNEL_LOOP);
  plan_add(&p, again);
  assert_int_equal(fsl_memplan_build(&p, &opt, &mp), FSL_OK);
  assert_int_equal(mp.alias[c->id], -1);
  assert_int_equal(mp.last[b->id], 3);
  assert_int_equal(mp.last[c->id], 3);  /* written again at step 3 */
  simulate(&p, &mp);
  fsl_memplan_free(&mp);

  plan_clear(&p);
  fsl_graph_free(g);
}

/* may_alias: the executor's own in-place rule for a non-elementwise
 * kernel.  b = exp(a), c = b + a in a LINEAR kernel, d = |c| (output):
 * asked about b (which dies at c's kernel, same shape) and not about the
 * graph input a, c goes in place over b when the hook says so, and the
 * plan stays sound; when b lives on past that kernel the hook is not
 * asked. */
static int g_asked;
static const fsl_value *g_allow;
static bool allow_one(const void *ctx, int step, const fsl_kernel *k, const fsl_value *y, const fsl_value *x) {
  assert_ptr_equal(ctx, &g_asked);
  assert_int_equal(step, 1);
  assert_int_equal(k->kind, FSL_KERNEL_LINEAR);
  assert_ptr_equal(y, k->out[0]);
  g_asked++;
  return x == g_allow;
}

static void test_may_alias(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, 1024);
  fsl_value *b = node(g, FSL_OP_exp, a, NULL);
  fsl_value *c = node(g, FSL_OP_add, b, a);
  fsl_value *d = node(g, FSL_OP_abs, c, NULL);
  assert_int_equal(fsl_graph_add_output(g, d), FSL_OK);
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  plan_add(&p, kernel_of(g, 0, 1, FSL_KERNEL_LOOP));
  plan_add(&p, kernel_of(g, 1, 2, FSL_KERNEL_LINEAR));
  plan_add(&p, kernel_of(g, 2, 3, FSL_KERNEL_LOOP));
  fsl_memplan mp;
  fsl_memplan_options opt = {.inplace = true, .may_alias = allow_one, .alias_ctx = &g_asked};
  for (int allow = 0; allow < 2; allow++) {
    g_asked = 0, g_allow = allow ? b : NULL;
    assert_int_equal(fsl_memplan_build(&p, &opt, &mp), FSL_OK);
    assert_int_equal(g_asked, 1); /* b only: a is a graph input */
    assert_int_equal(mp.alias[c->id], allow ? b->id : -1);
    assert_int_equal(mp.alias[d->id], c->id); /* the elementwise rule as before */
    assert_int_equal(mp.peak_bytes, allow ? 4096 : 2 * 4096);
    assert_int_equal(fsl_memplan_verify(&p, &mp), FSL_OK);
    simulate(&p, &mp);
    fsl_memplan_free(&mp);
  }
  /* b written again after c's kernel (so live there): never asked */
  plan_add(&p, kernel_of(g, 0, 1, FSL_KERNEL_LOOP));
  g_asked = 0, g_allow = b;
  assert_int_equal(fsl_memplan_build(&p, &opt, &mp), FSL_OK);
  assert_int_equal(g_asked, 0);
  assert_int_equal(mp.alias[c->id], -1);
  simulate(&p, &mp);
  fsl_memplan_free(&mp);
  plan_clear(&p);
  fsl_graph_free(g);
}

/* A kernel that reads a value nothing has written is rejected; so is a
 * graph output no kernel writes. */
static void test_invalid(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, 8);
  fsl_value *b = node(g, FSL_OP_exp, a, NULL);
  fsl_value *c = node(g, FSL_OP_neg, b, NULL);
  assert_int_equal(fsl_graph_add_output(g, c), FSL_OK);
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  plan_add(&p, kernel_of(g, 1, 2, FSL_KERNEL_LOOP));
  fsl_memplan mp;
  assert_int_equal(fsl_memplan_build(&p, NULL, &mp), FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "before any kernel writes it"));
  plan_clear(&p);
  plan_add(&p, kernel_of(g, 0, 1, FSL_KERNEL_LOOP));
  assert_int_equal(fsl_memplan_build(&p, NULL, &mp), FSL_ERR_INVALID);
  assert_non_null(strstr(fsl_last_error(), "written by no kernel"));
  plan_clear(&p);
  fsl_graph_free(g);
}

/* The empty plan: nothing planned, a zero arena. */
static void test_empty(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  fsl_value *a = input(g, 8);
  assert_int_equal(fsl_graph_add_output(g, a), FSL_OK);
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  fsl_memplan mp;
  assert_int_equal(fsl_memplan_build(&p, NULL, &mp), FSL_OK);
  assert_int_equal(mp.peak_bytes, 0);
  assert_int_equal(mp.n_planned, 0);
  fsl_memplan_free(&mp);
  fsl_graph_free(g);
}

/* ---- random plans ---- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 33) % n;
}

/* A random graph of unary/binary elementwise nodes over a few sizes, cut
 * into kernels of 1-3 consecutive nodes of random kinds, some kernels
 * repeated later (recomputation), random graph outputs. */
static void random_case(int n_nodes, bool inplace) {
  static const int64_t sizes[] = {1, 7, 16, 100, 1024, 3000};
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *pool[512];
  int n_pool = 0;
  for (int i = 0; i < 4; i++) pool[n_pool++] = input(g, sizes[rnd(6)]);
  static const fsl_op unary[] = {FSL_OP_exp, FSL_OP_neg, FSL_OP_abs, FSL_OP_tanh};
  for (int i = 0; i < n_nodes && n_pool < 510; i++) {
    fsl_value *a = pool[n_pool - 1 - (int)rnd((uint32_t)(n_pool < 6 ? n_pool : 6))];
    fsl_value *b = NULL;
    for (int t = 0; t < 8 && !b && rnd(2); t++) {
      fsl_value *c = pool[rnd((uint32_t)n_pool)];
      if (c->dims[0] == a->dims[0]) b = c;
    }
    pool[n_pool++] = b ? node(g, FSL_OP_add, a, b) : node(g, unary[rnd(4)], a, NULL);
  }
  /* outputs: the last value and a few random ones */
  assert_int_equal(fsl_graph_add_output(g, pool[n_pool - 1]), FSL_OK);
  for (int i = 4; i < n_pool - 1; i++)
    if (rnd(8) == 0 || pool[i]->n_cons == 0) assert_int_equal(fsl_graph_add_output(g, pool[i]), FSL_OK);

  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  for (int lo = 0; lo < g->n_nodes;) {
    int hi = lo + 1 + (int)rnd(3);
    if (hi > g->n_nodes) hi = g->n_nodes;
    fsl_kernel_kind kind = rnd(4) ? FSL_KERNEL_LOOP : FSL_KERNEL_LINEAR;
    fsl_kernel *k = kernel_of(g, lo, hi, kind);
    plan_add(&p, k);
    /* recompute an earlier kernel now and then (its inputs are still written) */
    if (p.kernels.n > 2 && rnd(6) == 0) plan_add(&p, p.kernels.k[rnd((uint32_t)p.kernels.n - 1)]);
    lo = hi;
  }
  fsl_memplan_options opt = {.inplace = inplace};
  fsl_memplan mp;
  assert_int_equal(fsl_memplan_build(&p, &opt, &mp), FSL_OK);
  assert_int_equal(fsl_memplan_verify(&p, &mp), FSL_OK);
  simulate(&p, &mp);
  assert_true(mp.peak_bytes <= mp.total_bytes);
  assert_true(mp.live_bytes <= mp.peak_bytes);
  if (!inplace) assert_int_equal(mp.n_inplace, 0);
  fsl_memplan_free(&mp);
  plan_clear(&p);
  fsl_graph_free(g);
}

static void test_random(void **state) {
  (void)state;
  rng_state = 12345;
  for (int iter = 0; iter < 300; iter++) random_case(1 + (int)rnd(120), iter % 2 == 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain),
      cmocka_unit_test(test_may_alias),
      cmocka_unit_test(test_invalid),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
