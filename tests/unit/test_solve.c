/* test_solve.c — the kernel-selection BLP (src/orchestrate/solve.c):
 * fusion, recomputation, cycle cuts, infeasibility, the time limit, and
 * optimality against brute force on small random instances.
 * FSL_SOLVE_BENCH=1 also times a ~50k-candidate instance. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <time.h>

#include "ir/ir.h"
#include "orchestrate/orchestrate.h"

/* ---- building graphs and candidates by hand ---- */

static fsl_value *input(fsl_graph *g, const char *name) {
  fsl_value *v = fsl_graph_add_value(g, name);
  assert_non_null(v);
  assert_int_equal(fsl_graph_add_input(g, v), FSL_OK);
  return v;
}

/* A primitive node with one new output value named `name`. */
static fsl_node *node(fsl_graph *g, fsl_op op, const char *name, fsl_value *a, fsl_value *b) {
  fsl_value *in[2] = {a, b};
  fsl_value *out = fsl_graph_add_value(g, name);
  assert_non_null(out);
  fsl_node *n = fsl_graph_add_node(g, op, name, in, b ? 2 : 1, &out, 1, NULL, 0);
  assert_non_null(n);
  return n;
}

static void set_push(fsl_kernel_set *s, fsl_kernel *k) {
  if (s->n == s->cap) {
    int nc = s->cap ? 2 * s->cap : 16;
    fsl_kernel **nk = realloc(s->k, (size_t)nc * sizeof *nk);
    assert_non_null(nk);
    s->k = nk;
    s->cap = nc;
  }
  k->id = s->n;
  s->k[s->n++] = k;
}

static bool in_nodes(fsl_node *const *nodes, int n, const fsl_node *x) {
  for (int i = 0; i < n; i++)
    if (nodes[i] == x) return true;
  return false;
}

static bool in_values(fsl_value *const *vals, int n, const fsl_value *v) {
  for (int i = 0; i < n; i++)
    if (vals[i] == v) return true;
  return false;
}

/* A kernel over `nodes` (topological order) with the inputs and outputs
 * orchestrate.h defines: values read from outside; values read outside or
 * graph outputs. */
static fsl_kernel *kernel(fsl_kernel_set *s, fsl_node *const *nodes, int n, double cost) {
  fsl_kernel *k = calloc(1, sizeof *k);
  assert_non_null(k);
  k->n_nodes = n;
  k->nodes = malloc((size_t)n * sizeof *k->nodes);
  assert_non_null(k->nodes);
  memcpy(k->nodes, nodes, (size_t)n * sizeof *k->nodes);
  int cap_in = 0, cap_out = 0;
  for (int i = 0; i < n; i++) cap_in += nodes[i]->n_in, cap_out += nodes[i]->n_out;
  k->in = malloc((size_t)(cap_in + 1) * sizeof *k->in);
  k->out = malloc((size_t)(cap_out + 1) * sizeof *k->out);
  assert_non_null(k->in);
  assert_non_null(k->out);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < nodes[i]->n_in; j++) {
      fsl_value *v = nodes[i]->in[j];
      if ((v->producer && in_nodes(nodes, n, v->producer)) || in_values(k->in, k->n_in, v)) continue;
      k->in[k->n_in++] = v;
    }
    for (int j = 0; j < nodes[i]->n_out; j++) {
      fsl_value *v = nodes[i]->out[j];
      bool ext = v->is_output;
      for (int c = 0; c < v->n_cons && !ext; c++) ext = !in_nodes(nodes, n, v->cons[c]);
      if (ext) k->out[k->n_out++] = v;
    }
  }
  k->kind = FSL_KERNEL_LOOP;
  k->cost_s = cost;
  set_push(s, k);
  return k;
}

static fsl_kernel *kernel1(fsl_kernel_set *s, fsl_node *n, double cost) { return kernel(s, &n, 1, cost); }

/* Checks that `p` is executable: every kernel's inputs are graph inputs,
 * constants or written by an earlier kernel, every graph output is written,
 * and ids are positions.  Returns the summed cost. */
static double check_plan(const fsl_graph *g, const fsl_kernel_set *p) {
  bool *written = calloc((size_t)g->n_values + 1, sizeof *written);
  assert_non_null(written);
  double sum = 0;
  for (int i = 0; i < p->n; i++) {
    const fsl_kernel *k = p->k[i];
    assert_int_equal(k->id, i);
    for (int j = 0; j < k->n_in; j++) {
      const fsl_value *v = k->in[j];
      if (!v->is_input && !v->data && !written[v->id]) fail_msg("kernel %d reads '%s' before it is written", i, v->name);
    }
    for (int j = 0; j < k->n_out; j++) written[k->out[j]->id] = true;
    sum += k->cost_s;
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (!written[g->outputs[i]->id]) fail_msg("graph output '%s' is not written", g->outputs[i]->name);
  free(written);
  return sum;
}

static bool has_kernel(const fsl_kernel_set *p, const fsl_kernel *k) {
  for (int i = 0; i < p->n; i++)
    if (p->k[i]->n_nodes == k->n_nodes && !memcmp(p->k[i]->nodes, k->nodes, (size_t)k->n_nodes * sizeof *k->nodes))
      return true;
  return false;
}

/* ---- (1) fusion: a chain fused beats singletons ---- */
static void test_chain_fused(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *x = input(g, "x");
  fsl_node *a = node(g, FSL_OP_exp, "a", x, NULL);
  fsl_node *b = node(g, FSL_OP_neg, "b", a->out[0], NULL);
  fsl_node *c = node(g, FSL_OP_abs, "c", b->out[0], NULL);
  assert_int_equal(fsl_graph_add_output(g, c->out[0]), FSL_OK);
  fsl_kernel_set ks = {.g = g};
  kernel1(&ks, a, 1.0);
  kernel1(&ks, b, 1.0);
  kernel1(&ks, c, 1.0);
  fsl_node *ab[2] = {a, b}, *abc[3] = {a, b, c};
  kernel(&ks, ab, 2, 1.2);
  fsl_kernel *fused = kernel(&ks, abc, 3, 1.5);
  fsl_kernel_set out;
  fsl_solve_result r;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
  assert_int_equal(out.n, 1);
  assert_true(has_kernel(&out, fused));
  assert_true(out.k[0] != fused); /* a copy */
  assert_true(fabs(r.objective_s - 1.5) < 1e-9);
  assert_true(r.optimal);
  assert_int_equal(r.rounds, 1);
  assert_true(fabs(check_plan(g, &out) - 1.5) < 1e-9);
  fsl_kernel_set_free(&out);

  /* fused too expensive: the three singletons, in order */
  fused->cost_s = 3.5;
  ks.k[3]->cost_s = 2.5;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
  assert_int_equal(out.n, 3);
  assert_true(out.k[0]->nodes[0] == a && out.k[1]->nodes[0] == b && out.k[2]->nodes[0] == c);
  assert_true(fabs(r.objective_s - 3.0) < 1e-9);
  check_plan(g, &out);
  fsl_kernel_set_free(&out);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

/* ---- (2) recomputation: a = exp(x) read by b and c; reading the big `a`
 * back costs more than recomputing it in both consumers ---- */
static void test_recompute(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *x = input(g, "x");
  fsl_node *a = node(g, FSL_OP_exp, "a", x, NULL);
  fsl_node *b = node(g, FSL_OP_neg, "b", a->out[0], NULL);
  fsl_node *c = node(g, FSL_OP_abs, "c", a->out[0], NULL);
  assert_int_equal(fsl_graph_add_output(g, b->out[0]), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, c->out[0]), FSL_OK);
  fsl_kernel_set ks = {.g = g};
  kernel1(&ks, a, 1.0);
  kernel1(&ks, b, 2.0); /* reads a */
  kernel1(&ks, c, 2.0); /* reads a */
  fsl_node *ab[2] = {a, b}, *ac[2] = {a, c};
  fsl_kernel *kab = kernel(&ks, ab, 2, 1.3); /* reads x, writes a and b */
  fsl_kernel *kac = kernel(&ks, ac, 2, 1.3);
  assert_int_equal(kab->n_out, 2);
  fsl_kernel_set out;
  fsl_solve_result r;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
  assert_int_equal(out.n, 2);
  assert_true(has_kernel(&out, kab) && has_kernel(&out, kac));
  assert_true(fabs(r.objective_s - 2.6) < 1e-9);
  assert_true(r.optimal);
  check_plan(g, &out);
  fsl_kernel_set_free(&out);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

/* ---- (3) a cycle between two multi-output kernels ----
 *   u = exp(x); w = neg(x); s = add(u, w); t = mul(w, u); outputs s, t
 *   k1 = {u, s} reads w, writes u and s; k2 = {w, t} reads u, writes w and t.
 * k1 + k2 (cost 2) is the BLP optimum but cannot be ordered.  The best
 * orderable choice recomputes w: {w}, k1, k2 (3.0); without w's singleton
 * the cut forbids k1 + k2 together. */
static void test_cycle_cut(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *x = input(g, "x");
  fsl_node *nu = node(g, FSL_OP_exp, "u", x, NULL);
  fsl_node *nw = node(g, FSL_OP_neg, "w", x, NULL);
  fsl_node *ns = node(g, FSL_OP_add, "s", nu->out[0], nw->out[0]);
  fsl_node *nt = node(g, FSL_OP_mul, "t", nw->out[0], nu->out[0]);
  assert_int_equal(fsl_graph_add_output(g, ns->out[0]), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, nt->out[0]), FSL_OK);
  fsl_kernel_set ks = {.g = g};
  fsl_node *s1[2] = {nu, ns}, *s2[2] = {nw, nt};
  fsl_kernel *k1 = kernel(&ks, s1, 2, 1.0);
  fsl_kernel *k2 = kernel(&ks, s2, 2, 1.0);
  assert_int_equal(k1->n_out, 2);
  assert_int_equal(k1->n_in, 2);
  fsl_kernel *ku = kernel1(&ks, nu, 1.1);
  fsl_kernel *kw = kernel1(&ks, nw, 1.0);
  kernel1(&ks, ns, 1.2);
  kernel1(&ks, nt, 1.2);
  fsl_kernel_set out;
  fsl_solve_result r;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
  assert_true(r.rounds >= 2);
  assert_true(r.optimal);
  assert_true(fabs(r.objective_s - 3.0) < 1e-9);
  assert_int_equal(out.n, 3);
  assert_true(has_kernel(&out, kw) && has_kernel(&out, k1) && has_kernel(&out, k2));
  assert_true(fabs(check_plan(g, &out) - 3.0) < 1e-9);
  fsl_kernel_set_free(&out);

  /* w's singleton too expensive: recompute u instead, {u}, k2, k1 (3.1) */
  kw->cost_s = 100;
  ku->cost_s = 1.1;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
  assert_true(r.rounds >= 2);
  assert_true(fabs(r.objective_s - 3.1) < 1e-9);
  assert_true(has_kernel(&out, ku) && has_kernel(&out, k1) && has_kernel(&out, k2));
  check_plan(g, &out);
  fsl_kernel_set_free(&out);

  /* one cut round is enough here */
  fsl_solve_options opt = {.time_limit_s = 10, .max_cuts = 1};
  assert_int_equal(fsl_solve(&ks, &opt, &out, &r), FSL_OK);
  check_plan(g, &out);
  fsl_kernel_set_free(&out);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

/* ---- (4) infeasible: a graph output no candidate writes ---- */
static void test_infeasible(void **state) {
  (void)state;
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *x = input(g, "x");
  fsl_node *a = node(g, FSL_OP_exp, "a", x, NULL);
  fsl_node *b = node(g, FSL_OP_neg, "b", a->out[0], NULL);
  fsl_node *c = node(g, FSL_OP_abs, "c_out", a->out[0], NULL);
  assert_int_equal(fsl_graph_add_output(g, b->out[0]), FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, c->out[0]), FSL_OK);
  fsl_kernel_set ks = {.g = g};
  kernel1(&ks, a, 1.0);
  kernel1(&ks, b, 1.0);
  fsl_kernel_set out;
  fsl_solve_result r;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "c_out"));
  assert_int_equal(out.n, 0);
  fsl_kernel_set_free(&out);

  /* c's writer exists but needs a value nobody writes */
  fsl_kernel_set_free(&ks);
  ks = (fsl_kernel_set){.g = g};
  kernel1(&ks, b, 1.0);
  kernel1(&ks, c, 1.0);
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "'a'"));
  fsl_kernel_set_free(&out);

  /* a negative cost is rejected */
  fsl_kernel_set_free(&ks);
  ks = (fsl_kernel_set){.g = g};
  kernel1(&ks, a, -1.0);
  kernel1(&ks, b, 1.0);
  kernel1(&ks, c, 1.0);
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_ERR_RUNTIME);
  fsl_kernel_set_free(&out);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

/* ---- random instances ---- */

static uint64_t rng_state;
static uint32_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 33);
}
static int rnd_int(int n) { return (int)(rnd() % (uint32_t)n); }

/*
 * A random DAG of n nodes (each reads one or two recent values) and
 * candidates: every singleton plus n_extra random convex subsets of windows
 * of the node order (up to `win` nodes).  Cost: launch + bytes in + bytes
 * out, with random value sizes, in microseconds; or random (random_cost).
 * p_x: percent of nodes reading the graph input (more: wider graphs).
 */
static fsl_graph *random_instance(int n, int n_extra, int win, int p_x, bool random_cost,
                                  fsl_kernel_set *ks) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_value *x = input(g, "x");
  fsl_node **nodes = malloc((size_t)n * sizeof *nodes);
  assert_non_null(nodes);
  for (int i = 0; i < n; i++) {
    fsl_value *a = i == 0 || rnd_int(100) < p_x ? x : nodes[i - 1 - rnd_int(i < 4 ? i : 4)]->out[0];
    fsl_value *b = NULL;
    if (i > 1 && rnd_int(2)) b = nodes[i - 1 - rnd_int(i < 6 ? i : 6)]->out[0];
    if (b == a) b = NULL;
    char name[32];
    snprintf(name, sizeof name, "v%d", i);
    nodes[i] = node(g, b ? FSL_OP_add : FSL_OP_exp, name, a, b);
  }
  for (int i = 0; i < n; i++)
    if (nodes[i]->out[0]->n_cons == 0 || i == n - 1) assert_int_equal(fsl_graph_add_output(g, nodes[i]->out[0]), FSL_OK);
  double *size = malloc((size_t)g->n_values * sizeof *size);
  assert_non_null(size);
  for (int v = 0; v < g->n_values; v++) size[v] = 1 + rnd_int(10);
  *ks = (fsl_kernel_set){.g = g};
  bool *inset = calloc((size_t)n, sizeof *inset), *taint = calloc((size_t)n, sizeof *taint);
  fsl_node **sel = malloc((size_t)n * sizeof *sel);
  assert_non_null(inset);
  assert_non_null(taint);
  assert_non_null(sel);
  for (int c = -n; c < n_extra; c++) {
    int ns = 0;
    if (c < 0) {
      sel[ns++] = nodes[c + n];
    } else {
      int lo = rnd_int(n), len = 2 + rnd_int(win - 1);
      if (lo + len > n) len = n - lo;
      for (int i = lo; i < lo + len; i++) inset[i] = rnd_int(10) < 7;
      /* convex: no node outside the set between its members both reads
       * (transitively) from the set and feeds it */
      bool convex = true;
      for (int i = lo; i < lo + len; i++) {
        taint[i] = false;
        for (int j = 0; j < nodes[i]->n_in; j++) {
          fsl_node *p = nodes[i]->in[j]->producer;
          if (!p) continue;
          int pi = p->id;  /* node ids are positions here */
          bool from = pi >= lo && (inset[pi] || taint[pi]);
          if (inset[i] && pi >= lo && !inset[pi] && taint[pi]) convex = false;
          if (!inset[i] && from) taint[i] = true;
        }
      }
      for (int i = lo; i < lo + len; i++) {
        if (inset[i] && convex) sel[ns++] = nodes[i];
        inset[i] = false;
      }
      if (ns < 2) continue;
    }
    fsl_kernel *k = kernel(ks, sel, ns, 0);
    double bytes = 0;
    for (int i = 0; i < k->n_in; i++) bytes += size[k->in[i]->id];
    for (int i = 0; i < k->n_out; i++) bytes += size[k->out[i]->id];
    k->cost_s = random_cost ? 1e-6 * (1 + rnd_int(1000)) / (k->n_out * k->n_out) : 1e-6 * (3 + bytes) * (1 + 1e-3 * rnd_int(100));
  }
  free(inset);
  free(taint);
  free(sel);
  free(size);
  free(nodes);
  return g;
}

/* Whether the selection mask is executable (some order exists). */
static bool selection_valid(const fsl_kernel_set *ks, uint32_t mask) {
  const fsl_graph *g = ks->g;
  bool written[64] = {false}, done[32] = {false};
  FSL_ASSERT(g->n_values <= 64 && ks->n <= 32);
  for (bool progress = true; progress;) {
    progress = false;
    for (int k = 0; k < ks->n; k++) {
      if (!(mask >> k & 1) || done[k]) continue;
      bool ready = true;
      for (int i = 0; i < ks->k[k]->n_in && ready; i++)
        ready = ks->k[k]->in[i]->is_input || written[ks->k[k]->in[i]->id];
      if (!ready) continue;
      done[k] = progress = true;
      for (int i = 0; i < ks->k[k]->n_out; i++) written[ks->k[k]->out[i]->id] = true;
    }
  }
  for (int k = 0; k < ks->n; k++)
    if ((mask >> k & 1) && !done[k]) return false;
  for (int i = 0; i < g->n_outputs; i++)
    if (!written[g->outputs[i]->id]) return false;
  return true;
}

/* ---- optimality against brute force on small instances ---- */
static void test_brute_force(void **state) {
  (void)state;
  int multi_round = 0;
  for (int trial = 0; trial < 400; trial++) {
    rng_state = 1000 + (uint64_t)trial;
    fsl_kernel_set ks;
    fsl_graph *g = random_instance(6, 40, 6, 60, true, &ks);
    while (ks.n > 15) fsl_kernel_free(ks.k[--ks.n]);
    double best = INFINITY;
    for (uint32_t m = 1; m < (1u << ks.n); m++) {
      double c = 0;
      for (int k = 0; k < ks.n; k++)
        if (m >> k & 1) c += ks.k[k]->cost_s;
      if (c < best && selection_valid(&ks, m)) best = c;
    }
    fsl_kernel_set out;
    fsl_solve_result r;
    assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
    double got = check_plan(g, &out);
    assert_true(fabs(got - r.objective_s) < 1e-12);
    if (fabs(got - best) > 1e-9 * best) fail_msg("trial %d: solver %.9g, brute force %.9g", trial, got, best);
    assert_true(r.optimal);
    multi_round += r.rounds > 1;
    fsl_kernel_set_free(&out);
    fsl_kernel_set_free(&ks);
    fsl_graph_free(g);
  }
  print_message("brute force: 400 instances, %d needed cycle cuts\n", multi_round);
}

/* Whether every node of g lies in exactly one kernel of the mask (no
 * recomputation; the instances have no constant-only nodes). */
static bool selection_partitions(const fsl_kernel_set *ks, uint32_t mask) {
  int cover[64] = {0};
  FSL_ASSERT(ks->g->next_node_id <= 64);
  for (int k = 0; k < ks->n; k++)
    if (mask >> k & 1)
      for (int i = 0; i < ks->k[k]->n_nodes; i++) cover[ks->k[k]->nodes[i]->id]++;
  for (int i = 0; i < ks->g->n_nodes; i++)
    if (cover[ks->g->nodes[i]->id] != 1) return false;
  return true;
}

/* ---- no recomputation (set-partitioning equalities) against brute force ---- */
static void test_brute_force_partition(void **state) {
  (void)state;
  for (int trial = 0; trial < 300; trial++) {
    rng_state = 5000 + (uint64_t)trial;
    fsl_kernel_set ks;
    fsl_graph *g = random_instance(7, 40, 6, 40, trial % 2 == 0, &ks);
    while (ks.n > 16) fsl_kernel_free(ks.k[--ks.n]);
    double best = INFINITY;
    for (uint32_t m = 1; m < (1u << ks.n); m++) {
      double c = 0;
      for (int k = 0; k < ks.n; k++)
        if (m >> k & 1) c += ks.k[k]->cost_s;
      if (c < best && selection_partitions(&ks, m) && selection_valid(&ks, m)) best = c;
    }
    fsl_solve_options opt = {.time_limit_s = 10, .no_recompute = true};
    fsl_kernel_set out;
    fsl_solve_result r;
    assert_int_equal(fsl_solve(&ks, &opt, &out, &r), FSL_OK);
    double got = check_plan(g, &out);
    if (fabs(got - best) > 1e-9 * best) fail_msg("trial %d: solver %.9g, brute force %.9g", trial, got, best);
    assert_true(r.optimal);
    int cover[64] = {0};
    for (int k = 0; k < out.n; k++)
      for (int i = 0; i < out.k[k]->n_nodes; i++) cover[out.k[k]->nodes[i]->id]++;
    for (int i = 0; i < g->n_nodes; i++) assert_int_equal(cover[g->nodes[i]->id], 1);
    fsl_kernel_set_free(&out);
    fsl_kernel_set_free(&ks);
    fsl_graph_free(g);
  }
}

/* ---- (5) the time limit: a valid plan even when CBC is cut short ---- */
static void test_time_limit(void **state) {
  (void)state;
  rng_state = 42;
  fsl_kernel_set ks;
  fsl_graph *g = random_instance(600, 12000, 12, 12, false, &ks);
  fsl_solve_options opt = {.time_limit_s = 1e-3};
  fsl_kernel_set out;
  fsl_solve_result r;
  assert_int_equal(fsl_solve(&ks, &opt, &out, &r), FSL_OK);
  double got = check_plan(g, &out);
  assert_true(fabs(got - r.objective_s) < 1e-12);
  print_message("time limit 1 ms: %d candidates -> %d kernels, %.6g s predicted, optimal %d, rounds %d\n",
                ks.n, out.n, r.objective_s, r.optimal, r.rounds);
  fsl_kernel_set_free(&out);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

/* ---- optional benchmark: ~50k candidates over ~2k values ---- */
static void test_bench(void **state) {
  (void)state;
  const char *e = getenv("FSL_SOLVE_BENCH");
  if (!e || !*e || *e == '0') skip();
  rng_state = 7;
  fsl_kernel_set ks;
  fsl_graph *g = random_instance(2000, 100000, 16, 12, false, &ks);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  fsl_kernel_set out;
  fsl_solve_result r;
  assert_int_equal(fsl_solve(&ks, NULL, &out, &r), FSL_OK);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  check_plan(g, &out);
  double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  print_message("bench: %d candidates, %d values -> %d kernels, %.6g s predicted, optimal %d, rounds %d, "
                "solve %.3f s\n",
                ks.n, g->n_values, out.n, r.objective_s, r.optimal, r.rounds, dt);
  fsl_kernel_set_free(&out);
  fsl_kernel_set_free(&ks);
  fsl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_fused), cmocka_unit_test(test_recompute),
      cmocka_unit_test(test_cycle_cut),   cmocka_unit_test(test_infeasible),
      cmocka_unit_test(test_brute_force), cmocka_unit_test(test_brute_force_partition),
      cmocka_unit_test(test_time_limit),
      cmocka_unit_test(test_bench),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
