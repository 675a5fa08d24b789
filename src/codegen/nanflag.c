/*
 * nanflag.c — whether a float max/min reduction must track NaN itself.
 *
 * The emitted max (min) is a plain compare-and-select, `a = v > a ? v : a`,
 * that a compiler vectorizes; it skips a NaN, so ONNX's NaN propagation
 * (ReduceMax of a row holding NaN is NaN) costs a flag per accumulator,
 * `n |= v != v`, and a select on the result.  In a softmax (ONNX Softmax's
 * fission: m = max(x), e = exp(x - m), y = e / sum(e), the max and the sum
 * over the same axes) the flag is dead: a NaN x_j makes e_j NaN whatever m
 * is, so the sum over the row is NaN and so is every y_i, as the reference
 * gives them (there m is NaN and so every e_i).  Only y and the sum may
 * leave the kernel; x - m and e differ (at the row's other elements) and
 * must not.  A row with no NaN has the same m both ways.
 */
#include "codegen/cg.h"

/* Whether value v is seen outside the kernel: a graph output, one of the
 * kernel's outputs, or read by a node of another kernel. */
static bool escapes(const em *e, const fsl_value *v) {
  if (v->is_output) return true;
  for (int i = 0; i < e->s->n_out; i++)
    if (e->s->out[i] == v) return true;
  for (int i = 0; i < v->n_cons; i++) {
    const fsl_node *c = v->cons[i];
    if (c->n_out < 1 || !c->out[0] || c->out[0]->id >= e->nv || !e->inside[c->out[0]->id]) return true;
  }
  return false;
}

/* Whether s is a keepdims float sum of x over the axes `mask`. */
static bool sum_over(const fsl_node *s, const fsl_value *x, unsigned mask) {
  return s && s->op == FSL_OP_reduce_sum && s->in[0] == x && fsl_cg_red_mask(s) == mask &&
         s->out[0]->rank == x->rank;
}

/* Whether every use of e = exp(x - m) is the row's sum of e or e divided
 * by (a broadcast of) that sum, and e stays inside the kernel. */
static bool exp_only_summed_and_divided(const em *e, const fsl_value *ex, unsigned mask) {
  if (escapes(e, ex)) return false;
  for (int i = 0; i < ex->n_cons; i++) {
    const fsl_node *c = ex->cons[i];
    if (sum_over(c, ex, mask)) continue;
    if (c->op == FSL_OP_div && c->n_in == 2 && c->in[0] == ex && c->in[1] != ex &&
        sum_over(fsl_cg_unexpand(c->in[1])->producer, ex, mask))
      continue;
    return false;
  }
  return true;
}

/* Whether every use of v (m, or a broadcast of it) is x - v whose only uses
 * are exps that exp_only_summed_and_divided accepts, all inside the kernel. */
static bool only_softmax_uses(const em *e, const fsl_value *v, const fsl_value *x, unsigned mask, int depth) {
  if (depth > 8 || escapes(e, v)) return false;
  for (int i = 0; i < v->n_cons; i++) {
    const fsl_node *c = v->cons[i];
    if (c->op == FSL_OP_expand) {
      if (!only_softmax_uses(e, c->out[0], x, mask, depth + 1)) return false;
      continue;
    }
    if (c->op != FSL_OP_sub || c->n_in != 2 || c->in[0] != x || c->in[1] != v) return false;
    const fsl_value *d = c->out[0];
    if (escapes(e, d) || d->n_cons == 0) return false;
    for (int j = 0; j < d->n_cons; j++) {
      const fsl_node *ex = d->cons[j];
      if (ex->op != FSL_OP_exp || ex->in[0] != d || !exp_only_summed_and_divided(e, ex->out[0], mask)) return false;
    }
  }
  return true;
}

bool fsl_cg_tracks_nan(const em *e, const fsl_node *n) {
  if (!is_f(n->in[0]->dtype) || (n->op != FSL_OP_reduce_max && n->op != FSL_OP_reduce_min)) return false;
  if (n->op != FSL_OP_reduce_max || !e->s) return true;
  const fsl_value *x = n->in[0], *m = n->out[0];
  if (m->rank != x->rank) return true; /* keepdims: x - m broadcasts m over the row */
  return !only_softmax_uses(e, m, x, fsl_cg_red_mask(n), 0);
}
