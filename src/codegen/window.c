/*
 * window.c — REDUCE rows over sliding windows (pooling): nested loops over
 * the window, clamped to the input where the padding is the reduction's
 * identity (cg.h).
 */
#include "codegen/cg.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether v reads a window view (pooling's sliding windows) through the
 * kernel's elementwise and movement nodes. */
bool fsl_cg_windowed(const em *e, const fsl_value *v, int depth) {
  if (!e->inside[v->id] || depth > 16) return false;
  const fsl_node *n = v->producer;
  if (n->op == FSL_OP_window) return true;
  fsl_kind k = fsl_op_get(n->op)->kind;
  if (k != FSL_KIND_ELEMENTWISE && k != FSL_KIND_MOVEMENT) return false;
  for (int i = 0; i < n->n_in; i++)
    if (fsl_cg_windowed(e, n->in[i], depth + 1)) return true;
  return false;
}

/* Whether v is a kernel input read in a layout, or elementwise work over
 * such inputs (all in one layout, *lay) and broadcasts of plain inputs or
 * constants (a bias, a ReLU's zero): each element of v then reads its
 * layout inputs at its own position, so a row of v along the layout's
 * innermost axis reads contiguous memory. */
static bool layout_source(const em *e, const fsl_value *v, const fsl_cg_layout **lay, int depth) {
  if (depth > 16) return false;
  if (!e->inside[v->id]) {
    const fsl_cg_layout *l = fsl_cg_in_layout(e, v);
    /* one layout: the same order over the rank (entries past it are not set) */
    if (!l) return false;
    if (*lay && ((*lay)->rank != l->rank || memcmp((*lay)->order, l->order, sizeof *l->order * (size_t)l->rank)))
      return false;
    *lay = l;
    return true;
  }
  const fsl_node *n = v->producer;
  if (n->op == FSL_OP_expand) return !e->inside[n->in[0]->id] && !fsl_cg_in_layout(e, n->in[0]);
  if (fsl_op_get(n->op)->kind != FSL_KIND_ELEMENTWISE) return false;
  for (int i = 0; i < n->n_in; i++)
    if (!fsl_value_same_shape(n->in[i], v) || !layout_source(e, n->in[i], lay, depth + 1)) return false;
  return true;
}

/* X of window node w (the value under a pad inside the kernel) and the
 * layout it is read in (layout_source: an input, or elementwise work over
 * inputs, in one layout), or NULL. */
static const fsl_cg_layout *window_source_layout(const em *e, const fsl_node *w, const fsl_value **X) {
  *X = w->in[0];
  if (e->inside[(*X)->id] && (*X)->producer->op == FSL_OP_pad) *X = (*X)->producer->in[0];
  const fsl_cg_layout *lay = NULL;
  return layout_source(e, *X, &lay, 0) ? lay : NULL;
}

/* Whether kernel input or value v is read in a layout or depends, through
 * the kernel's nodes, on an input read in a layout (dep: per value id). */
static bool from_layout(const em *e, const bool *dep, const fsl_value *v) {
  return v->id < e->nv && (dep[v->id] || (!e->inside[v->id] && fsl_cg_in_layout(e, v)));
}

int fsl_cg_layout_windows(const em *e) {
  if (!e->s->in_layout) return 0;
  /* propagated forward until nothing changes, with no depth limit: a chain
   * of pools (SPP's three 5x5 max pools in one kernel) is deeper than the
   * 16 nodes a recursive walk stopped at, and a walk that assumed a layout
   * there refused such kernels over plain inputs */
  bool *dep = calloc((size_t)(e->nv > 0 ? e->nv : 1), sizeof *dep);
  if (!dep) return INT_MAX; /* refuses the kernel rather than guess */
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < e->s->n_nodes; i++) {
      const fsl_node *n = e->s->nodes[i];
      bool d = false;
      for (int k = 0; k < n->n_in && !d; k++) d = from_layout(e, dep, n->in[k]);
      for (int k = 0; k < n->n_out && d; k++)
        if (n->out[k]->id < e->nv && !dep[n->out[k]->id]) changed = dep[n->out[k]->id] = true;
    }
  }
  int count = 0;
  for (int i = 0; i < e->s->n_nodes; i++)
    count += e->s->nodes[i]->op == FSL_OP_window && from_layout(e, dep, e->s->nodes[i]->in[0]);
  free(dep);
  return count;
}

int fsl_cg_layout_window_axis(const em *e, const fsl_value *x) {
  if (!e->inside[x->id] || x->producer->op != FSL_OP_window) return -1;
  const fsl_value *X;
  const fsl_cg_layout *lay = window_source_layout(e, x->producer, &X);
  int R = X->rank, lead = 2 * R - x->rank;
  if (!lay || R < 1) return -1;
  int inner = lay->order[R - 1];
  return inner >= 0 && inner < lead && X->dims[inner] > 1 ? inner : -1;
}

/* Whether a constant pad before the window adds only the reduction's
 * identity (-inf for max, +inf for min, 0 for sum, 1 for product). */
static bool pad_is_identity(const fsl_node *pad, fsl_op op) {
  if (fsl_attr_int(pad, "mode", 0) != 0) return false;
  double f = fsl_attr_float(pad, "value", 0.0);
  bool fl = is_f(pad->out[0]->dtype);
  switch (op) {
  case FSL_OP_reduce_sum: return f == 0.0;
  case FSL_OP_reduce_prod: return f == 1.0;
  case FSL_OP_reduce_max: return fl && isinf(f) && f < 0;
  case FSL_OP_reduce_min: return fl && isinf(f) && f > 0;
  default: return false;
  }
}

/* Declares at the current position the bounds <p>l<id>_ and <p>h<id>_ of
 * the values z in [0, K) for which v*m + z*div - pb lies in [0, len):
 * z in [ceil((pb - v*m)/div), ceil((len + pb - v*m)/div)) clamped to
 * [0, K) (v: a variable in scope; m, div >= 1); lo and hi get their names. */
static void clamp_range(em *e, const char *v, long long m, long long pb, long long len, long long div, long long K,
                        const char *p, int id, char *lo, char *hi) {
  int t = fsl_cg_new_tmp(e), u = fsl_cg_new_tmp(e);
  fsl_cg_line(e, "const int64_t i%d = %lld - %s*%lld, i%d = %lld - %s*%lld;", t, pb, v, m, u, len + pb, v, m);
  fsl_cg_line(e, "const int64_t %sl%d_ = i%d <= 0 ? 0 : (i%d + %lld) / %lld;", p, id, t, t, div - 1, div);
  fsl_cg_line(e, "const int64_t %sh%d_ = i%d <= 0 ? 0 : (i%d + %lld) / %lld < %lld ? (i%d + %lld) / %lld : %lld;", p, id,
              u, u, div - 1, div, K, u, div - 1, div, K);
  snprintf(lo, CLEN, "%sl%d_", p, id);
  snprintf(hi, CLEN, "%sh%d_", p, id);
}

/* A window row: the coordinates are the loop variables (no division or
 * modulo per element), and the pad bounds of the outer window axes are
 * invariant in the innermost loop (cg.h). */
bool fsl_cg_win_plan(em *e, const fsl_node *n, const int *axes, int na, const coords *oc, int simd_axis,
                     fsl_cg_win_row *w) {
  const fsl_value *x = n->in[0];
  memset(w, 0, sizeof *w);
  w->simd_q = -1;
  for (int q = 0; q < na; q++)
    if (x->dims[axes[q]] > 1) w->axis[w->nn++] = axes[q];
  if (e->grp || w->nn < (simd_axis >= 0 ? 1 : 2) || n->op == FSL_OP_argmax || n->op == FSL_OP_argmin ||
      !fsl_cg_windowed(e, x, 0))
    return false;
  for (int q = 0; q < w->nn; q++) {
    snprintf(w->var[q], CLEN, "j%d", w->axis[q]);
    snprintf(w->lo[q], CLEN, "0");
    snprintf(w->hi[q], CLEN, "%lld", (long long)x->dims[w->axis[q]]);
  }
  const fsl_node *win = x->producer, *pad = win->in[0]->producer;
  if (win->op != FSL_OP_window || !e->inside[win->in[0]->id] || pad->op != FSL_OP_pad || !pad_is_identity(pad, n->op))
    return true;
  int R = win->in[0]->rank, k = x->rank - R, lead = R - k;
  const int64_t *pads = NULL;
  if (fsl_attr_ints(pad, "pads", &pads) != 2 * R) return true;
  for (int i = 0; i < R; i++)
    if (i < lead && (pads[i] != 0 || pads[R + i] != 0)) return true;
  for (int q = 0; q < w->nn; q++)
    if (w->axis[q] < R) return true;
  /* an axis whose window has one element is read at o*stride - pad with no
   * loop to clamp: it must have no padding */
  for (int i = 0; i < k; i++)
    if (x->dims[R + i] == 1 && (pads[lead + i] != 0 || pads[R + lead + i] != 0)) return true;
  const int64_t *st = NULL, *dl = NULL;
  bool has_st = fsl_attr_ints(win, "strides", &st) == k, has_dl = fsl_attr_ints(win, "dilations", &dl) == k;
  const fsl_value *X = pad->in[0];
  w->lead = lead;
  for (int i = 0; i < k; i++) {
    w->stride[i] = has_st ? st[i] : 1;
    w->dil[i] = has_dl ? dl[i] : 1;
    w->pad[i] = pads[lead + i];
  }
  for (int q = 0; q < w->nn; q++) {
    int i = w->axis[q] - R, a = lead + i;
    long long s = w->stride[i], d = w->dil[i], pb = w->pad[i], len = X->dims[a], K = x->dims[w->axis[q]];
    if (a == simd_axis) { /* the caller clamps its loop over a instead (fsl_cg_win_simd_range) */
      w->simd_q = q;
      continue;
    }
    /* o*s + j*d - pb in [0, len)  <=>  j in [ceil((pb - o*s)/d), ceil((len + pb - o*s)/d)) */
    clamp_range(e, oc->c[a], s, pb, len, d, K, "j", w->axis[q], w->lo[q], w->hi[q]);
  }
  w->src = X;
  return true;
}

/* The element of a clamped window row (w->src) at the row's coordinates
 * c: X at o*s + j*d - pb on the window axes. */
bool fsl_cg_win_ev(em *e, const fsl_cg_win_row *w, const coords *c, char *v) {
  return fsl_cg_win_ev_col(e, w, c, NULL, v);
}

bool fsl_cg_win_ev_col(em *e, const fsl_cg_win_row *w, const coords *c, const char *col, char *v) {
  const fsl_value *X = w->src;
  int R = X->rank, simd_a = col && w->simd_q >= 0 ? w->lead + w->axis[w->simd_q] - R : -1;
  coords ic;
  ic.rank = R;
  for (int a = 0; a < R; a++) {
    if (a < w->lead || X->dims[a] == 1) {
      snprintf(ic.c[a], CLEN, "%s", X->dims[a] == 1 ? "0" : c->c[a]);
      continue;
    }
    if (a == simd_a) {
      snprintf(ic.c[a], CLEN, "%s", col);
      continue;
    }
    int i = a - w->lead, t = fsl_cg_new_tmp(e);
    fsl_cg_line(e, "const int64_t i%d = %s*%lld + %s*%lld - %lld;", t, c->c[a], (long long)w->stride[i], c->c[R + i],
                (long long)w->dil[i], (long long)w->pad[i]);
    snprintf(ic.c[a], CLEN, "i%d", t);
  }
  return fsl_cg_ev(e, X, &ic, v);
}

/* The range [ol, oh) of the row's SIMD axis (w->simd_q's output axis, L
 * elements) whose window positions at the current value of that window
 * loop lie inside X: o*s + j*d - pb in [0, len)  <=>  o in
 * [ceil((pb - j*d)/s), ceil((len + pb - j*d)/s)), clamped to [0, L);
 * declared at the current position as ol<axis>_ and oh<axis>_. */
void fsl_cg_win_simd_range(em *e, const fsl_cg_win_row *w, int64_t L, char *lo, char *hi) {
  int q = w->simd_q, R = w->src->rank, i = w->axis[q] - R, a = w->lead + i;
  clamp_range(e, w->var[q], w->dil[i], w->pad[i], w->src->dims[a], w->stride[i], L, "o", a, lo, hi);
}
