/*
 * solve.c — choose kernels from a candidate set with a binary linear
 * program (Korch, ASPLOS'24, section 5), solved with CBC's C API.
 *
 * Variables: x_k in {0,1} per candidate k (chosen), and y_v in [0,1] per
 * needed value v (a non-constant, non-graph-input value that is a graph
 * output or read by some candidate: "v is materialised").
 *
 *   minimise   sum_k cost_s(k) x_k
 *   subject to y_v - sum_{j: v in out(j)} x_j <= 0     (written if materialised)
 *              x_k - y_v <= 0          for v in in(k)   (inputs materialised)
 *              y_v  = 1                for graph outputs
 *              cycle cuts (below)
 *
 * Projected onto x this is exactly Korch's "x_k <= sum of the producers of
 * each input" (y_v = max of its readers' x is feasible iff that holds), with
 * sum_k |in(k)| + sum_k |out(k)| non-zeros instead of sum_k sum_v |prod(v)|.
 *
 * Without recomputation (fsl_solve_options.no_recompute) every node that
 * depends on a runtime value gets a set-partitioning equality
 * (sum of the candidates containing it = 1).  The equalities imply the link
 * rows of the values those nodes write (the one chosen kernel computing the
 * writer writes the value whenever a chosen kernel outside it reads it), so
 * those values get neither a y column nor link entries: the LP shrinks and
 * its relaxation is nearly integral (every real model's regions prove
 * optimality in about a second).
 *
 * Cycles.  Multi-output kernels can make a BLP solution unorderable (k1
 * reads w and writes u, k2 reads u and writes w).  After each solve the
 * chosen kernels are ordered (a kernel is ready when each of its needed
 * inputs has been written by an already ordered kernel).  If some never
 * become ready, each stuck kernel k gets one blocked input b(k) (all of
 * whose chosen writers are stuck as well), and every sink strongly
 * connected component Q of the graph "k -> chosen writers of b(k)" gives the
 * cut
 *
 *   sum_{k in Q} x_k - sum_{j in W(Q)} x_j <= |Q| - 1,
 *   W(Q) = candidates outside Q that write some b(k), k in Q.
 *
 * It removes the current solution (no chosen kernel outside Q writes a b(k))
 * and no orderable selection: in any order the first kernel of Q must have
 * b(k) written by an earlier kernel, which is not in Q.  (Korch's plain cut
 * sum_{k in Q} x_k <= |Q| - 1 would also remove selections where another
 * kernel breaks the cycle.)  So the final solution is optimal among
 * orderable selections, and a known acyclic selection stays feasible in
 * every round.
 *
 * That selection is built first (greedy_select): values are levelled by the
 * least fixed point "a kernel is computable when its inputs are; a value is
 * computable when a computable kernel writes it", and each needed value is
 * given its cheapest minimum-level writer.  It detects infeasibility (naming
 * the value) and is the first incumbent.  A solution with a cycle is also
 * repaired into an incumbent (minimum-level writers for the stuck kernels'
 * missing inputs).  The best incumbent seeds every CBC solve and is the
 * answer (optimal = false) when the time limit (wall clock, over all rounds)
 * or the cut rounds run out before an orderable proven optimum.
 */
#include "orchestrate/orchestrate.h"

#include <float.h>
#include <math.h>
#include <time.h>

#include "Cbc_C_Interface.h"

#define DEFAULT_TIME_LIMIT_S 30.0
#define DEFAULT_MAX_CUTS 100
/* Largest scaled objective coefficient: CBC's absolute tolerances (cutoff
 * increment 1e-5, integrality) assume costs far above 1e-5. */
#define COST_SCALE_MAX 1e6

typedef struct solver {
  const fsl_kernel_set *cands;
  int nc;              /* candidates */
  int nv;              /* value id bound */
  bool *avail;         /* [nv] graph input or constant */
  bool *gout;          /* [nv] graph output needing a writer */
  const bool *opt_avail, *opt_need;  /* fsl_solve_options.avail / need */
  int max_bb_nodes;                  /* fsl_solve_options.max_bb_nodes (0: none) */
  /* writers of each value (CSR over value ids) */
  int *prod_start, *prod;
  /* needed inputs of each candidate (CSR over candidates, value ids) */
  int *in_start, *in;
  /* readers of each value (CSR over value ids): positions in `in` */
  int *cons_start, *cons;
  int *kofpos;         /* candidate owning each position of `in` */
  bool *bad;           /* [nc] reads a value it writes: never chosen */
  bool *part;          /* [nv] written by a node with a partition equality: its links are implied */
  int *ycol;           /* [nv] column of y_v, or -1 */
  int ny;
  /* greedy acyclic selection */
  int *vlevel, *klevel;
  bool *greedy;        /* [nc] */
  /* cycle cuts, row-wise */
  int n_cuts, *cut_start, cap_cut_start;
  int cut_nnz, cap_cut_nnz, cap_cut_val, *cut_col;
  double *cut_val, *cut_rhs, *cut_lhs;  /* row bounds: cut_lhs <= row <= cut_rhs */
  int cap_cut_rhs, cap_cut_lhs;
  /* scratch */
  int *stamp, stamp_gen;
} solver;

static void solver_free(solver *s) {
  free(s->avail); free(s->gout);
  free(s->prod_start); free(s->prod);
  free(s->in_start); free(s->in);
  free(s->cons_start); free(s->cons); free(s->kofpos);
  free(s->bad); free(s->part); free(s->ycol);
  free(s->vlevel); free(s->klevel); free(s->greedy);
  free(s->cut_start); free(s->cut_col); free(s->cut_val); free(s->cut_rhs); free(s->cut_lhs);
  free(s->stamp);
}

static fsl_status nomem(void) { return fsl_errorf(FSL_ERR_NOMEM, "solve: out of memory"); }

/* Next stamp generation: stamp[i] == stamp_gen marks i in the current set. */
static int next_gen(solver *s) { return ++s->stamp_gen; }

static bool is_avail(const fsl_value *v) { return v->is_input || v->data != NULL; }

/* Indexes values and candidates: writers, needed inputs, readers. */
static fsl_status index_problem(solver *s) {
  const fsl_kernel_set *c = s->cands;
  const fsl_graph *g = c->g;
  int nv = 0;
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i] && g->values[i]->id >= nv) nv = g->values[i]->id + 1;
  for (int k = 0; k < c->n; k++) {
    for (int i = 0; i < c->k[k]->n_in; i++) if (c->k[k]->in[i]->id >= nv) nv = c->k[k]->in[i]->id + 1;
    for (int i = 0; i < c->k[k]->n_out; i++) if (c->k[k]->out[i]->id >= nv) nv = c->k[k]->out[i]->id + 1;
  }
  for (int i = 0; i < g->n_outputs; i++) if (g->outputs[i]->id >= nv) nv = g->outputs[i]->id + 1;
  s->nv = nv;
  int nc = s->nc, sz = (nv > nc ? nv : nc) + 1;
  s->avail = calloc((size_t)nv + 1, sizeof *s->avail);
  s->gout = calloc((size_t)nv + 1, sizeof *s->gout);
  s->prod_start = calloc((size_t)nv + 2, sizeof *s->prod_start);
  s->in_start = calloc((size_t)nc + 2, sizeof *s->in_start);
  s->cons_start = calloc((size_t)nv + 2, sizeof *s->cons_start);
  s->bad = calloc((size_t)nc + 1, sizeof *s->bad);
  s->ycol = malloc(((size_t)nv + 1) * sizeof *s->ycol);
  s->stamp = calloc((size_t)sz, sizeof *s->stamp);
  if (!s->avail || !s->gout || !s->prod_start || !s->in_start || !s->cons_start || !s->bad ||
      !s->ycol || !s->stamp)
    return nomem();
  const bool *xavail = s->opt_avail, *xneed = s->opt_need;
  for (int k = 0; k < nc; k++) {
    const fsl_kernel *kk = c->k[k];
    for (int i = 0; i < kk->n_in; i++) s->avail[kk->in[i]->id] = is_avail(kk->in[i]) || (xavail && xavail[kk->in[i]->id]);
    for (int i = 0; i < kk->n_out; i++) s->avail[kk->out[i]->id] = is_avail(kk->out[i]) || (xavail && xavail[kk->out[i]->id]);
  }
  if (xneed) {
    for (int i = 0; i < g->n_values; i++) {
      const fsl_value *v = g->values[i];
      if (v && v->id < nv && xneed[v->id] && !is_avail(v) && !(xavail && xavail[v->id])) s->gout[v->id] = true;
    }
  } else {
    for (int i = 0; i < g->n_outputs; i++) {
      const fsl_value *v = g->outputs[i];
      s->avail[v->id] = is_avail(v) || (xavail && xavail[v->id]);
      if (!s->avail[v->id]) s->gout[v->id] = true;
    }
  }
  /* count writers (deduplicated per kernel) and needed inputs */
  size_t n_prod = 0, n_in = 0;
  for (int k = 0; k < nc; k++) {
    const fsl_kernel *kk = c->k[k];
    int gen = next_gen(s);
    for (int i = 0; i < kk->n_out; i++) {
      int v = kk->out[i]->id;
      if (s->stamp[v] == gen) continue;
      s->stamp[v] = gen;
      s->prod_start[v + 1]++;
      n_prod++;
    }
    for (int i = 0; i < kk->n_in; i++) {
      int v = kk->in[i]->id;
      if (s->avail[v]) continue;
      if (s->stamp[v] == -gen) continue;                      /* read twice */
      if (s->stamp[v] == gen) { s->bad[k] = true; continue; } /* reads what it writes */
      s->stamp[v] = -gen;
      s->cons_start[v + 1]++;
      s->in_start[k + 1]++;
      n_in++;
    }
  }
  if (n_prod > INT32_MAX / 2 || n_in > INT32_MAX / 4) return nomem();
  for (int v = 0; v < nv; v++) {
    s->prod_start[v + 1] += s->prod_start[v];
    s->cons_start[v + 1] += s->cons_start[v];
  }
  for (int k = 0; k < nc; k++) s->in_start[k + 1] += s->in_start[k];
  s->prod = malloc((n_prod + 1) * sizeof *s->prod);
  s->in = malloc((n_in + 1) * sizeof *s->in);
  s->cons = malloc((n_in + 1) * sizeof *s->cons);
  s->kofpos = malloc((n_in + 1) * sizeof *s->kofpos);
  int *pfill = malloc(((size_t)nv + 1) * sizeof *pfill), *cfill = malloc(((size_t)nv + 1) * sizeof *cfill);
  if (!s->prod || !s->in || !s->cons || !s->kofpos || !pfill || !cfill) {
    free(pfill); free(cfill);
    return nomem();
  }
  memcpy(pfill, s->prod_start, (size_t)nv * sizeof *pfill);
  memcpy(cfill, s->cons_start, (size_t)nv * sizeof *cfill);
  for (int k = 0; k < nc; k++) {
    const fsl_kernel *kk = c->k[k];
    int gen = next_gen(s), pos = s->in_start[k];
    for (int i = 0; i < kk->n_out; i++) {
      int v = kk->out[i]->id;
      if (s->stamp[v] == gen) continue;
      s->stamp[v] = gen;
      s->prod[pfill[v]++] = k;
    }
    for (int i = 0; i < kk->n_in; i++) {
      int v = kk->in[i]->id;
      if (s->avail[v] || s->stamp[v] == gen || s->stamp[v] == -gen) continue;
      s->stamp[v] = -gen;
      s->cons[cfill[v]++] = pos;
      s->kofpos[pos] = k;
      s->in[pos++] = v;
    }
    FSL_ASSERT(pos == s->in_start[k + 1]);
  }
  free(pfill);
  free(cfill);
  /* y columns: needed values (graph outputs or read by some candidate) */
  s->ny = 0;
  for (int v = 0; v < nv; v++)
    s->ycol[v] = (s->gout[v] || s->cons_start[v + 1] > s->cons_start[v]) ? nc + s->ny++ : -1;
  return FSL_OK;
}

static const char *value_name(const solver *s, int v) {
  const fsl_graph *g = s->cands->g;
  if (v < g->n_values && g->values[v] && g->values[v]->id == v) return g->values[v]->name;
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i] && g->values[i]->id == v) return g->values[i]->name;
  return "?";
}

/*
 * Levels: vlevel[v] = least number of kernel steps to compute v from the
 * graph inputs and constants (INT_MAX: not computable); klevel[k] = 1 + max
 * vlevel of its needed inputs.  Breadth-first, so values are settled in
 * nondecreasing level order.
 */
static fsl_status compute_levels(solver *s) {
  int nc = s->nc, nv = s->nv;
  s->vlevel = malloc(((size_t)nv + 1) * sizeof *s->vlevel);
  s->klevel = malloc(((size_t)nc + 1) * sizeof *s->klevel);
  int *missing = malloc(((size_t)nc + 1) * sizeof *missing);
  int *queue = malloc(((size_t)nv + 1) * sizeof *queue);
  if (!s->vlevel || !s->klevel || !missing || !queue) {
    free(missing); free(queue);
    return nomem();
  }
  int qh = 0, qt = 0;
  for (int v = 0; v < nv; v++) s->vlevel[v] = INT32_MAX;
  for (int k = 0; k < nc; k++) {
    s->klevel[k] = INT32_MAX;
    missing[k] = s->in_start[k + 1] - s->in_start[k];
  }
  /* settles kernel k at level lv: its unsettled outputs get level lv */
#define SETTLE(k, lv)                                                         \
  do {                                                                        \
    s->klevel[k] = (lv);                                                      \
    const fsl_kernel *kk_ = s->cands->k[k];                                   \
    for (int o_ = 0; o_ < kk_->n_out; o_++) {                                 \
      int w_ = kk_->out[o_]->id;                                              \
      if (s->avail[w_] || s->vlevel[w_] != INT32_MAX) continue;               \
      s->vlevel[w_] = (lv);                                                   \
      queue[qt++] = w_;                                                       \
    }                                                                         \
  } while (0)
  for (int k = 0; k < nc; k++)
    if (!s->bad[k] && missing[k] == 0) SETTLE(k, 1);
  while (qh < qt) {
    int v = queue[qh++];
    for (int p = s->cons_start[v]; p < s->cons_start[v + 1]; p++) {
      int k = s->kofpos[s->cons[p]];
      if (--missing[k] == 0 && !s->bad[k]) SETTLE(k, s->vlevel[v] + 1);
    }
  }
#undef SETTLE
  free(missing);
  free(queue);
  return FSL_OK;
}

/* Infeasible: names a graph output that cannot be computed, and a value
 * on its way that no candidate writes, if there is one. */
static fsl_status infeasible(solver *s, int out_v) {
  int nv = s->nv;
  int *stack = malloc(((size_t)nv + 1) * sizeof *stack);
  int gen = next_gen(s);
  int culprit = -1;
  if (stack) {
    int sp = 0;
    stack[sp++] = out_v;
    s->stamp[out_v] = gen;
    while (sp > 0 && culprit < 0) {
      int v = stack[--sp];
      if (s->prod_start[v + 1] == s->prod_start[v]) { culprit = v; break; }
      for (int p = s->prod_start[v]; p < s->prod_start[v + 1]; p++) {
        int k = s->prod[p];
        for (int i = s->in_start[k]; i < s->in_start[k + 1]; i++) {
          int u = s->in[i];
          if (s->vlevel[u] != INT32_MAX || s->stamp[u] == gen) continue;
          s->stamp[u] = gen;
          stack[sp++] = u;
        }
      }
    }
    free(stack);
  }
  if (culprit == out_v)
    return fsl_errorf(FSL_ERR_RUNTIME, "solve: no candidate kernel writes graph output '%s'",
                      value_name(s, out_v));
  if (culprit >= 0)
    return fsl_errorf(FSL_ERR_RUNTIME,
                      "solve: graph output '%s' cannot be computed: no candidate kernel writes "
                      "value '%s' it depends on",
                      value_name(s, out_v), value_name(s, culprit));
  return fsl_errorf(FSL_ERR_RUNTIME,
                    "solve: graph output '%s' cannot be computed: its candidate kernels only "
                    "depend on each other in cycles",
                    value_name(s, out_v));
}

/*
 * Adds to sel[] a writer for each value on the stack (and, recursively, for
 * their needed inputs): a minimum-level writer, the cheapest one unless one
 * is selected already.  Writers of level L read only values of level < L,
 * so the added kernels can always be ordered by level.  seen[] marks values
 * already handled.
 */
static void min_level_closure(solver *s, bool *sel, int *stack, int sp, bool *seen) {
  while (sp > 0) {
    int v = stack[--sp], best = -1;
    for (int p = s->prod_start[v]; p < s->prod_start[v + 1]; p++) {
      int k = s->prod[p];
      if (s->klevel[k] != s->vlevel[v]) continue;
      if (sel[k]) { best = -2; break; }
      if (best < 0 || s->cands->k[k]->cost_s < s->cands->k[best]->cost_s) best = k;
    }
    if (best == -2) continue;
    FSL_ASSERT(best >= 0);
    sel[best] = true;
    for (int i = s->in_start[best]; i < s->in_start[best + 1]; i++) {
      int u = s->in[i];
      if (!seen[u]) { seen[u] = true; stack[sp++] = u; }
    }
  }
}

/* The acyclic fallback selection (see the file comment). */
static fsl_status greedy_select(solver *s) {
  int nc = s->nc, nv = s->nv;
  s->greedy = calloc((size_t)nc + 1, sizeof *s->greedy);
  int *stack = malloc(((size_t)nv + 1) * sizeof *stack);
  bool *seen = calloc((size_t)nv + 1, sizeof *seen);
  if (!s->greedy || !stack || !seen) {
    free(stack); free(seen);
    return nomem();
  }
  int sp = 0;
  for (int v = 0; v < nv; v++)
    if (s->gout[v]) { stack[sp++] = v; seen[v] = true; }
  min_level_closure(s, s->greedy, stack, sp, seen);
  free(stack);
  free(seen);
  return FSL_OK;
}

/*
 * One CBC solve of the BLP plus the cuts so far, seeded with the orderable
 * selection `inc`.  Fills sel[k] (chosen); *from_cbc false when CBC found
 * nothing (sel is then a copy of inc).
 */
static fsl_status solve_once(solver *s, double time_limit, const bool *inc, bool *sel, bool *from_cbc,
                             bool *optimal) {
  int nc = s->nc, ny = s->ny, ncols = nc + ny;
  int n_link = s->in_start[nc];
  int nrows = ny + n_link + s->n_cuts;
  size_t nnz = 0;
  for (int k = 0; k < nc; k++)
    for (int i = 0; i < s->cands->k[k]->n_out; i++) nnz++;
  nnz += (size_t)ny + 2 * (size_t)n_link + (size_t)s->cut_nnz;
  CoinBigIndex *start = calloc((size_t)ncols + 1, sizeof *start);
  int *index = malloc((nnz + 1) * sizeof *index);
  double *value = malloc((nnz + 1) * sizeof *value);
  double *collb = calloc((size_t)ncols + 1, sizeof *collb);
  double *colub = malloc(((size_t)ncols + 1) * sizeof *colub);
  double *obj = calloc((size_t)ncols + 1, sizeof *obj);
  double *rowub = calloc((size_t)nrows + 1, sizeof *rowub);
  double *rowlb = malloc(((size_t)nrows + 1) * sizeof *rowlb);
  double *init = calloc((size_t)ncols + 1, sizeof *init);
  /* cut entries by column: count then fill */
  int *cut_cnt = calloc((size_t)ncols + 1, sizeof *cut_cnt);
  int *cut_pos = malloc(((size_t)s->cut_nnz + 1) * sizeof *cut_pos);
  Cbc_Model *m = NULL;
  fsl_status st = FSL_OK;
  if (!start || !index || !value || !collb || !colub || !obj || !rowub || !rowlb || !init || !cut_cnt || !cut_pos) {
    st = nomem();
    goto done;
  }
  double maxc = 0;
  for (int k = 0; k < nc; k++) maxc = fmax(maxc, s->cands->k[k]->cost_s);
  double scale = maxc > 0 ? COST_SCALE_MAX / maxc : 1.0;
  /* column counts */
  for (int c = 0; c < s->cut_nnz; c++) cut_cnt[s->cut_col[c] + 1]++;
  for (int c = 0; c < ncols; c++) cut_cnt[c + 1] += cut_cnt[c];
  {
    int *fill = malloc(((size_t)ncols + 1) * sizeof *fill);
    if (!fill) { st = nomem(); goto done; }
    memcpy(fill, cut_cnt, (size_t)ncols * sizeof *fill);
    for (int r = 0; r < s->n_cuts; r++)
      for (int c = s->cut_start[r]; c < s->cut_start[r + 1]; c++) cut_pos[fill[s->cut_col[c]]++] = c;
    free(fill);
  }
  /* cut row of entry c: binary search in cut_start */
  CoinBigIndex e = 0;
  for (int k = 0; k < nc; k++) {
    const fsl_kernel *kk = s->cands->k[k];
    start[k] = e;
    int gen = next_gen(s);
    for (int i = 0; i < kk->n_out; i++) {
      int v = kk->out[i]->id;
      if (s->ycol[v] < 0 || s->stamp[v] == gen) continue;
      s->stamp[v] = gen;
      index[e] = s->ycol[v] - nc;
      value[e++] = -1.0;
    }
    for (int i = s->in_start[k]; i < s->in_start[k + 1]; i++) {
      if (s->part && s->part[s->in[i]]) continue;  /* implied by the partition rows */
      index[e] = ny + i;
      value[e++] = 1.0;
    }
    for (int c = cut_cnt[k]; c < cut_cnt[k + 1]; c++) {
      int pos = cut_pos[c], lo = 0, hi = s->n_cuts - 1;
      while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (s->cut_start[mid] <= pos) lo = mid;
        else hi = mid - 1;
      }
      index[e] = ny + n_link + lo;
      value[e++] = s->cut_val[pos];
    }
    colub[k] = s->bad[k] ? 0.0 : 1.0;
    obj[k] = kk->cost_s * scale;
    init[k] = inc[k] ? 1.0 : 0.0;
  }
  for (int v = 0; v < s->nv; v++) {
    int col = s->ycol[v];
    if (col < 0) continue;
    start[col] = e;
    index[e] = col - nc;
    value[e++] = 1.0;
    for (int p = s->cons_start[v]; p < s->cons_start[v + 1] && !(s->part && s->part[v]); p++) {
      index[e] = ny + s->cons[p];
      value[e++] = -1.0;
    }
    collb[col] = s->gout[v] ? 1.0 : 0.0;
    colub[col] = 1.0;
    bool written = false;
    for (int p = s->prod_start[v]; p < s->prod_start[v + 1] && !written; p++) written = inc[s->prod[p]];
    init[col] = written ? 1.0 : 0.0;
  }
  start[ncols] = e;
  FSL_ASSERT((size_t)e <= nnz);
  for (int r = 0; r < nrows; r++) rowlb[r] = -DBL_MAX;
  for (int r = 0; r < s->n_cuts; r++) {
    rowlb[ny + n_link + r] = s->cut_lhs[r];
    rowub[ny + n_link + r] = s->cut_rhs[r];
  }

  m = Cbc_newModel();
  if (!m) { st = nomem(); goto done; }
  Cbc_loadProblem(m, ncols, nrows, start, index, value, collb, colub, obj, rowlb, rowub);
  for (int k = 0; k < nc; k++) Cbc_setInteger(m, k);
  Cbc_setLogLevel(m, 0);
  Cbc_setMaximumSeconds(m, time_limit);
  if (s->max_bb_nodes > 0) Cbc_setMaximumNodes(m, s->max_bb_nodes);
  Cbc_setParameter(m, "slogLevel", "0");        /* Clp (LP) messages too */
  Cbc_setParameter(m, "timeMode", "elapsed");  /* wall clock, not CPU time */
  /* near-equal plans abound (costs differ in the last digits): stop within
   * 0.1% of the bound; CBC's cut generators cost more than they gain here */
  Cbc_setParameter(m, "ratioGap", "0.001");
  Cbc_setParameter(m, "cuts", "off");
  /* CBC 2.10's CglPreProcess::postProcess crashes on some of these models
   * (seen on PP-OCR det): no preprocessing */
  Cbc_setParameter(m, "preprocess", "off");
  Cbc_setInitialSolution(m, init);
  Cbc_solve(m);
  const double *x = Cbc_bestSolution(m);
  *optimal = false;
  *from_cbc = false;
  if (x) {
    /* trust but verify: the solution must satisfy the covering rows */
    bool ok = true;
    for (int k = 0; k < nc; k++) sel[k] = x[k] > 0.5 && !s->bad[k];
    for (int v = 0; v < s->nv && ok; v++) {
      bool needed = s->gout[v], written = false;
      for (int p = s->cons_start[v]; p < s->cons_start[v + 1] && !needed; p++) {
        needed = sel[s->kofpos[s->cons[p]]];
      }
      for (int p = s->prod_start[v]; p < s->prod_start[v + 1] && !written; p++) written = sel[s->prod[p]];
      if (needed && !written) ok = false;
    }
    if (ok) {
      *from_cbc = true;
      *optimal = Cbc_isProvenOptimal(m) != 0;
    }
  }
  if (!*from_cbc) memcpy(sel, inc, (size_t)nc * sizeof *sel);

done:
  if (m) Cbc_deleteModel(m);
  free(start); free(index); free(value); free(collb); free(colub); free(obj);
  free(rowub); free(rowlb); free(init); free(cut_cnt); free(cut_pos);
  return st;
}

/* Adds the cut for the stuck set Q (local ids q[0..nq)), whose kernels'
 * blocked inputs are blk[]. */
static fsl_status add_cut(solver *s, const int *q, int nq, const int *blk) {
  int gen = next_gen(s);
  for (int i = 0; i < nq; i++) s->stamp[q[i]] = gen;
  int need = s->cut_nnz + nq;
  for (int i = 0; i < nq; i++) {
    int v = blk[i];
    need += s->prod_start[v + 1] - s->prod_start[v];
  }
  if (!fsl_grow((void **)&s->cut_col, &s->cap_cut_nnz, need, sizeof *s->cut_col)) return nomem();
  if (!fsl_grow((void **)&s->cut_val, &s->cap_cut_val, need, sizeof *s->cut_val)) return nomem();
  if (!fsl_grow((void **)&s->cut_start, &s->cap_cut_start, s->n_cuts + 2, sizeof *s->cut_start)) return nomem();
  if (!fsl_grow((void **)&s->cut_rhs, &s->cap_cut_rhs, s->n_cuts + 1, sizeof *s->cut_rhs)) return nomem();
  if (!fsl_grow((void **)&s->cut_lhs, &s->cap_cut_lhs, s->n_cuts + 1, sizeof *s->cut_lhs)) return nomem();
  if (s->n_cuts == 0) s->cut_start[0] = 0;
  for (int i = 0; i < nq; i++) {
    s->cut_col[s->cut_nnz] = q[i];
    s->cut_val[s->cut_nnz++] = 1.0;
  }
  for (int i = 0; i < nq; i++) {
    int v = blk[i];
    for (int p = s->prod_start[v]; p < s->prod_start[v + 1]; p++) {
      int j = s->prod[p];
      if (s->stamp[j] == gen || s->stamp[j] == -gen) continue;
      s->stamp[j] = -gen;
      s->cut_col[s->cut_nnz] = j;
      s->cut_val[s->cut_nnz++] = -1.0;
    }
  }
  s->cut_lhs[s->n_cuts] = -DBL_MAX;
  s->cut_rhs[s->n_cuts] = (double)(nq - 1);
  s->cut_start[++s->n_cuts] = s->cut_nnz;
  return FSL_OK;
}

/* Adds the row lhs <= sum_{k in cols} x_k <= rhs (shares the cut storage). */
static fsl_status add_row(solver *s, const int *cols, int n, double lhs, double rhs) {
  if (!fsl_grow((void **)&s->cut_col, &s->cap_cut_nnz, s->cut_nnz + n, sizeof *s->cut_col)) return nomem();
  if (!fsl_grow((void **)&s->cut_val, &s->cap_cut_val, s->cut_nnz + n, sizeof *s->cut_val)) return nomem();
  if (!fsl_grow((void **)&s->cut_start, &s->cap_cut_start, s->n_cuts + 2, sizeof *s->cut_start)) return nomem();
  if (!fsl_grow((void **)&s->cut_rhs, &s->cap_cut_rhs, s->n_cuts + 1, sizeof *s->cut_rhs)) return nomem();
  if (!fsl_grow((void **)&s->cut_lhs, &s->cap_cut_lhs, s->n_cuts + 1, sizeof *s->cut_lhs)) return nomem();
  if (s->n_cuts == 0) s->cut_start[0] = 0;
  for (int i = 0; i < n; i++) {
    s->cut_col[s->cut_nnz] = cols[i];
    s->cut_val[s->cut_nnz++] = 1.0;
  }
  s->cut_lhs[s->n_cuts] = lhs;
  s->cut_rhs[s->n_cuts] = rhs;
  s->cut_start[++s->n_cuts] = s->cut_nnz;
  return FSL_OK;
}

/*
 * No recomputation: every node that depends on a runtime value lies in
 * exactly one chosen kernel (nodes computed from constants only, e.g. a
 * shared broadcast weight, may still be recomputed).  A set-partitioning
 * equality per node: every node of a (dead-code-free) graph is needed, and
 * a kernel's outputs are all its values read outside it, so the equalities
 * imply the Korch rows; their LP relaxation is far tighter (set
 * partitioning polytopes are often integral or nearly so).
 */
static fsl_status add_partition_rows(solver *s) {
  const fsl_graph *g = s->cands->g;
  int maxid = g->next_node_id;
  int *cnt = calloc((size_t)maxid + 2, sizeof *cnt);
  bool *cderiv = calloc((size_t)g->n_values + 1, sizeof *cderiv);
  if (!cnt || !cderiv) { free(cnt); free(cderiv); return nomem(); }
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *nd = g->nodes[i];
    bool c = nd->n_in > 0;
    for (int k = 0; k < nd->n_in && c; k++) c = nd->in[k] && (nd->in[k]->data || cderiv[nd->in[k]->id]);
    for (int k = 0; k < nd->n_out; k++)
      if (nd->out[k]) cderiv[nd->out[k]->id] = c;
  }
  for (int k = 0; k < s->nc; k++)
    for (int i = 0; i < s->cands->k[k]->n_nodes; i++) cnt[s->cands->k[k]->nodes[i]->id + 1]++;
  for (int i = 0; i < maxid; i++) cnt[i + 1] += cnt[i];
  s->part = calloc((size_t)s->nv + 1, sizeof *s->part);
  int *members = malloc(((size_t)cnt[maxid] + 1) * sizeof *members);
  int *fill = malloc(((size_t)maxid + 1) * sizeof *fill);
  fsl_status st = members && fill && s->part ? FSL_OK : nomem();
  if (st == FSL_OK) {
    memcpy(fill, cnt, (size_t)maxid * sizeof *fill);
    for (int k = 0; k < s->nc; k++)
      for (int i = 0; i < s->cands->k[k]->n_nodes; i++) members[fill[s->cands->k[k]->nodes[i]->id]++] = k;
    for (int i = 0; i < g->n_nodes && st == FSL_OK; i++) {
      const fsl_node *nd = g->nodes[i];
      int a = cnt[nd->id], b = cnt[nd->id + 1];
      bool cd = nd->n_out > 0 && nd->out[0] && cderiv[nd->out[0]->id];
      if (b > a && !cd) {
        st = add_row(s, members + a, b - a, 1.0, 1.0);
        for (int k = 0; k < nd->n_out; k++)
          if (nd->out[k] && nd->out[k]->id < s->nv) s->part[nd->out[k]->id] = true;
      }
    }
  }
  free(cnt); free(cderiv); free(members); free(fill);
  return st;
}

/*
 * Orders the selection sel[] (Kahn over "needed input written"): ord[0..*n)
 * gets the kernels that can run, in order; written[v] (nv entries) whether
 * they write v.  Kernels of sel not in ord are stuck on a cycle.
 */
static fsl_status order_sel(solver *s, const bool *sel, int *ord, int *n_ord, bool *written) {
  int nc = s->nc;
  int *missing = malloc(((size_t)nc + 1) * sizeof *missing);
  if (!missing) return nomem();
  memset(written, 0, (size_t)s->nv * sizeof *written);
  int n = 0, head = 0;
  for (int k = 0; k < nc; k++) {
    missing[k] = s->in_start[k + 1] - s->in_start[k];
    if (sel[k] && missing[k] == 0) ord[n++] = k;
  }
  while (head < n) {
    const fsl_kernel *kk = s->cands->k[ord[head++]];
    for (int i = 0; i < kk->n_out; i++) {
      int v = kk->out[i]->id;
      if (written[v]) continue;
      written[v] = true;
      for (int p = s->cons_start[v]; p < s->cons_start[v + 1]; p++) {
        int j = s->kofpos[s->cons[p]];
        if (sel[j] && --missing[j] == 0) ord[n++] = j;
      }
    }
  }
  *n_ord = n;
  free(missing);
  return FSL_OK;
}

/*
 * The selection sel[] ordered as ord[0..n_ord) with stuck kernels left:
 * adds one cut per sink strongly connected component of the graph "stuck k
 * -> chosen writers of its blocked input" (see the file comment).
 */
static fsl_status cycle_cuts(solver *s, const bool *sel, const int *ord, int n_ord, const bool *written) {
  int nc = s->nc;
  fsl_status st = FSL_OK;
  int n_sel = 0;
  for (int k = 0; k < nc; k++) n_sel += sel[k];
  int r = n_sel - n_ord;
  int *loc = malloc(((size_t)nc + 1) * sizeof *loc);
  int *glob = malloc(((size_t)r + 1) * sizeof *glob);
  int *blk = malloc(((size_t)r + 1) * sizeof *blk);
  int *idx = malloc(((size_t)r + 1) * sizeof *idx), *low = malloc(((size_t)r + 1) * sizeof *low);
  int *stk = malloc(((size_t)r + 1) * sizeof *stk), *cs = malloc(((size_t)r + 1) * sizeof *cs);
  int *ep = malloc(((size_t)r + 1) * sizeof *ep), *comp = malloc(((size_t)r + 1) * sizeof *comp);
  bool *onstk = calloc((size_t)r + 1, sizeof *onstk), *not_sink = NULL;
  int *q = malloc(((size_t)r + 1) * sizeof *q), *qblk = malloc(((size_t)r + 1) * sizeof *qblk);
  if (!loc || !glob || !blk || !idx || !low || !stk || !cs || !ep || !comp || !onstk || !q || !qblk) {
    st = nomem();
    goto done;
  }
  for (int k = 0; k < nc; k++) loc[k] = sel[k] ? 0 : -1;
  for (int i = 0; i < n_ord; i++) loc[ord[i]] = -1;
  int nr = 0;
  for (int k = 0; k < nc; k++)
    if (loc[k] == 0) { loc[k] = nr; glob[nr++] = k; }
  FSL_ASSERT(nr == r && r > 0);
  for (int a = 0; a < r; a++) {
    int k = glob[a], best = -1, best_w = INT32_MAX;
    for (int i = s->in_start[k]; i < s->in_start[k + 1]; i++) {
      int v = s->in[i];
      if (written[v]) continue;
      int w = 0;
      for (int p = s->prod_start[v]; p < s->prod_start[v + 1]; p++) w += sel[s->prod[p]];
      if (w < best_w) { best_w = w; best = v; }
    }
    FSL_ASSERT(best >= 0 && best_w > 0);  /* sel satisfies the BLP rows */
    blk[a] = best;
  }
  /* iterative Tarjan; edges of a: chosen writers of blk[a] (all stuck) */
  int counter = 0, sp = 0, ncomp = 0;
  for (int a = 0; a < r; a++) idx[a] = -1;
  for (int root = 0; root < r; root++) {
    if (idx[root] >= 0) continue;
    int csp = 0;
    cs[csp] = root;
    ep[csp++] = s->prod_start[blk[root]];
    idx[root] = low[root] = counter++;
    stk[sp++] = root;
    onstk[root] = true;
    while (csp > 0) {
      int a = cs[csp - 1], v = blk[a];
      if (ep[csp - 1] < s->prod_start[v + 1]) {
        int j = s->prod[ep[csp - 1]++];
        if (!sel[j] || loc[j] < 0) continue;
        int b = loc[j];
        if (idx[b] < 0) {
          idx[b] = low[b] = counter++;
          stk[sp++] = b;
          onstk[b] = true;
          cs[csp] = b;
          ep[csp++] = s->prod_start[blk[b]];
        } else if (onstk[b] && idx[b] < low[a]) {
          low[a] = idx[b];
        }
        continue;
      }
      csp--;
      if (csp > 0 && low[a] < low[cs[csp - 1]]) low[cs[csp - 1]] = low[a];
      if (low[a] != idx[a]) continue;
      int b;
      do {
        b = stk[--sp];
        onstk[b] = false;
        comp[b] = ncomp;
      } while (b != a);
      ncomp++;
    }
  }
  /* sink components: no edge to another component */
  not_sink = calloc((size_t)ncomp + 1, sizeof *not_sink);
  if (!not_sink) { st = nomem(); goto done; }
  for (int a = 0; a < r; a++)
    for (int p = s->prod_start[blk[a]]; p < s->prod_start[blk[a] + 1]; p++) {
      int j = s->prod[p];
      if (sel[j] && loc[j] >= 0 && comp[loc[j]] != comp[a]) not_sink[comp[a]] = true;
    }
  for (int c = 0; c < ncomp && st == FSL_OK; c++) {
    if (not_sink[c]) continue;
    int nq = 0;
    for (int a = 0; a < r; a++)
      if (comp[a] == c) { q[nq] = glob[a]; qblk[nq++] = blk[a]; }
    st = add_cut(s, q, nq, qblk);
  }
done:
  free(loc); free(glob); free(blk); free(idx); free(low); free(stk); free(cs); free(ep);
  free(comp); free(onstk); free(q); free(qblk); free(not_sink);
  return st;
}

/* Makes a selection with stuck kernels orderable by adding minimum-level
 * writers for their unwritten inputs (see min_level_closure). */
static fsl_status repair(solver *s, bool *sel, const int *ord, int n_ord, const bool *written) {
  int nc = s->nc, nv = s->nv;
  int *stack = malloc(((size_t)s->in_start[nc] + 1) * sizeof *stack);
  bool *seen = calloc((size_t)nv + 1, sizeof *seen), *ordered = calloc((size_t)nc + 1, sizeof *ordered);
  if (!stack || !seen || !ordered) {
    free(stack); free(seen); free(ordered);
    return nomem();
  }
  for (int i = 0; i < n_ord; i++) ordered[ord[i]] = true;
  int sp = 0;
  for (int k = 0; k < nc; k++) {
    if (!sel[k] || ordered[k]) continue;
    for (int i = s->in_start[k]; i < s->in_start[k + 1]; i++) {
      int v = s->in[i];
      if (!written[v] && !seen[v]) { seen[v] = true; stack[sp++] = v; }
    }
  }
  min_level_closure(s, sel, stack, sp, seen);
  free(stack);
  free(seen);
  free(ordered);
  return FSL_OK;
}

/* A deep copy of k with its own malloc'd arrays (freed by fsl_kernel_free). */
static fsl_kernel *kernel_copy(const fsl_kernel *k) {
  fsl_kernel *c = malloc(sizeof *c);
  if (!c) return NULL;
  *c = *k;
  c->nodes = NULL;
  c->in = NULL;
  c->out = NULL;
  if (k->n_nodes > 0) c->nodes = malloc((size_t)k->n_nodes * sizeof *c->nodes);
  if (k->n_in > 0) c->in = malloc((size_t)k->n_in * sizeof *c->in);
  if (k->n_out > 0) c->out = malloc((size_t)k->n_out * sizeof *c->out);
  if ((k->n_nodes > 0 && !c->nodes) || (k->n_in > 0 && !c->in) || (k->n_out > 0 && !c->out)) {
    free(c->nodes); free(c->in); free(c->out); free(c);
    return NULL;
  }
  if (k->n_nodes > 0) memcpy(c->nodes, k->nodes, (size_t)k->n_nodes * sizeof *c->nodes);
  if (k->n_in > 0) memcpy(c->in, k->in, (size_t)k->n_in * sizeof *c->in);
  if (k->n_out > 0) memcpy(c->out, k->out, (size_t)k->n_out * sizeof *c->out);
  return c;
}

/*
 * Drops ordered kernels whose outputs no later kernel reads (from them) and
 * that write no graph output: walks the order backwards tracking which
 * values are still needed.  keep[i] for ord[i].
 */
static fsl_status drop_unused(solver *s, const int *ord, int n, bool *keep) {
  bool *need = calloc((size_t)s->nv + 1, sizeof *need);
  if (!need) return nomem();
  memcpy(need, s->gout, (size_t)s->nv * sizeof *need);
  for (int i = n - 1; i >= 0; i--) {
    const fsl_kernel *kk = s->cands->k[ord[i]];
    keep[i] = false;
    for (int o = 0; o < kk->n_out && !keep[i]; o++) keep[i] = need[kk->out[o]->id];
    if (!keep[i]) continue;
    for (int o = 0; o < kk->n_out; o++) need[kk->out[o]->id] = false;
    for (int p = s->in_start[ord[i]]; p < s->in_start[ord[i] + 1]; p++) need[s->in[p]] = true;
  }
  free(need);
  return FSL_OK;
}

/*
 * fsl_solve (orchestrate.h).  opt NULL or fields <= 0: defaults (30 s wall
 * clock over all rounds, 100 cut rounds).  When time or cut rounds run out,
 * the best orderable selection found is returned with res->optimal false.
 * Errors: FSL_ERR_RUNTIME naming a graph output that no selection can
 * compute (and the missing value), or a candidate with a negative or
 * non-finite cost; FSL_ERR_ARG for NULL arguments; FSL_ERR_NOMEM.
 */
fsl_status fsl_solve(const fsl_kernel_set *cands, const fsl_solve_options *opt,
                     fsl_kernel_set *chosen, fsl_solve_result *res) {
  if (!cands || !cands->g || !chosen || (cands->n > 0 && !cands->k))
    return fsl_errorf(FSL_ERR_ARG, "fsl_solve: expected a candidate set over a graph and an output set");
  double t0 = fsl_now_s();
  double limit = opt && opt->time_limit_s > 0 ? opt->time_limit_s : DEFAULT_TIME_LIMIT_S;
  int max_cuts = opt && opt->max_cuts > 0 ? opt->max_cuts : DEFAULT_MAX_CUTS;
  memset(chosen, 0, sizeof *chosen);
  chosen->g = cands->g;
  fsl_solve_result r = {.optimal = true, .rounds = 0, .objective_s = 0};
  for (int k = 0; k < cands->n; k++) {
    double c = cands->k[k]->cost_s;
    if (!(c >= 0) || isinf(c))
      return fsl_errorf(FSL_ERR_RUNTIME, "solve: candidate %d has cost %g; expected a finite cost >= 0", k, c);
  }
  solver s = {.cands = cands, .nc = cands->n, .opt_avail = opt ? opt->avail : NULL,
              .opt_need = opt ? opt->need : NULL, .max_bb_nodes = opt ? opt->max_bb_nodes : 0};
  bool *sel = NULL, *keep = NULL, *best_sel = NULL, *written = NULL;
  int *ord = NULL, *best_ord = NULL;
  fsl_status st = index_problem(&s);
  if (st != FSL_OK) goto out;
  st = compute_levels(&s);
  if (st != FSL_OK) goto out;
  if (opt && opt->no_recompute) {
    if ((st = add_partition_rows(&s)) != FSL_OK) goto out;
    /* values with a partitioned writer need no y column (nor link rows) */
    s.ny = 0;
    for (int v = 0; v < s.nv; v++)
      if (s.ycol[v] >= 0) s.ycol[v] = s.part[v] && !s.gout[v] ? -1 : s.nc + s.ny++;
  }
  for (int v = 0; v < s.nv; v++)
    if (s.gout[v] && s.vlevel[v] == INT32_MAX) {
      st = infeasible(&s, v);
      goto out;
    }
  st = greedy_select(&s);
  if (st != FSL_OK) goto out;
  size_t nc1 = (size_t)s.nc + 1;
  sel = calloc(nc1, sizeof *sel);
  best_sel = calloc(nc1, sizeof *best_sel);
  keep = calloc(nc1, sizeof *keep);
  ord = malloc(nc1 * sizeof *ord);
  best_ord = malloc(nc1 * sizeof *best_ord);
  written = calloc((size_t)s.nv + 1, sizeof *written);
  if (!sel || !best_sel || !keep || !ord || !best_ord || !written) { st = nomem(); goto out; }
  /* incumbent: the greedy selection, orderable by construction */
  int n_ord = 0, best_n = 0;
  double best_cost = INFINITY;
  bool best_optimal = false;
  memcpy(sel, s.greedy, (size_t)s.nc * sizeof *sel);
#define CONSIDER(is_optimal)                                                  \
  do {                                                                        \
    st = drop_unused(&s, ord, n_ord, keep);                                   \
    if (st != FSL_OK) goto out;                                               \
    double c_ = 0;                                                            \
    for (int i_ = 0; i_ < n_ord; i_++)                                        \
      if (keep[i_]) c_ += cands->k[ord[i_]]->cost_s;                          \
    if ((is_optimal) || c_ < best_cost) {                                     \
      best_cost = c_;                                                         \
      best_optimal = (is_optimal);                                            \
      best_n = 0;                                                             \
      memset(best_sel, 0, (size_t)s.nc * sizeof *best_sel);                   \
      for (int i_ = 0; i_ < n_ord; i_++)                                      \
        if (keep[i_]) { best_ord[best_n++] = ord[i_]; best_sel[ord[i_]] = true; } \
    }                                                                         \
  } while (0)
  st = order_sel(&s, sel, ord, &n_ord, written);
  if (st != FSL_OK) goto out;
  CONSIDER(false);
  while (s.ny > 0) {
    double left = limit - (fsl_now_s() - t0);
    /* out of time (also before the first CBC call, when indexing and the
     * greedy selection used up a tiny limit): the best selection so far */
    if (left <= 0 || (r.rounds > 0 && left < 0.01 * limit)) break;
    if (r.rounds > max_cuts) break;                   /* out of cut rounds: best so far */
    bool from_cbc = false, optimal = false;
    st = solve_once(&s, left, best_sel, sel, &from_cbc, &optimal);
    if (st != FSL_OK) goto out;
    r.rounds++;
    st = order_sel(&s, sel, ord, &n_ord, written);
    if (st != FSL_OK) goto out;
    int n_sel = 0;
    for (int k = 0; k < s.nc; k++) n_sel += sel[k];
    if (n_ord == n_sel) {  /* orderable: done (best so far if not proven) */
      CONSIDER(from_cbc && optimal);
      break;
    }
    st = cycle_cuts(&s, sel, ord, n_ord, written);
    if (st != FSL_OK) goto out;
    st = repair(&s, sel, ord, n_ord, written);
    if (st != FSL_OK) goto out;
    st = order_sel(&s, sel, ord, &n_ord, written);
    if (st != FSL_OK) goto out;
    CONSIDER(false);
  }
#undef CONSIDER
  r.optimal = best_optimal || s.ny == 0;
  chosen->k = calloc((size_t)best_n + 1, sizeof *chosen->k);
  if (!chosen->k) { st = nomem(); goto out; }
  chosen->cap = best_n;
  for (int i = 0; i < best_n; i++) {
    fsl_kernel *c = kernel_copy(cands->k[best_ord[i]]);
    if (!c) {
      fsl_kernel_set_free(chosen);
      memset(chosen, 0, sizeof *chosen);
      chosen->g = cands->g;
      st = nomem();
      goto out;
    }
    c->id = chosen->n;
    chosen->k[chosen->n++] = c;
    r.objective_s += c->cost_s;
  }
  if (res) *res = r;
out:
  free(sel);
  free(ord);
  free(keep);
  free(best_sel);
  free(best_ord);
  free(written);
  solver_free(&s);
  return st;
}
