/*
 * window.c — REDUCE kernels over sliding windows (pooling): window rows
 * (nested loops over the window, clamped to the input where the padding is
 * the reduction's identity) and window columns (a SIMD loop across the
 * output's innermost axis, one accumulator per output element), cg.h.
 */
#include "codegen/cg.h"

#include <math.h>

/* Whether v reads a window view (pooling's sliding windows) through the
 * kernel's elementwise and movement nodes. */
static bool windowed(const em *e, const fsl_value *v, int depth) {
  if (!e->inside[v->id] || depth > 16) return false;
  const fsl_node *n = v->producer;
  if (n->op == FSL_OP_window) return true;
  fsl_kind k = fsl_op_get(n->op)->kind;
  if (k != FSL_KIND_ELEMENTWISE && k != FSL_KIND_MOVEMENT) return false;
  for (int i = 0; i < n->n_in; i++)
    if (windowed(e, n->in[i], depth + 1)) return true;
  return false;
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

/* A window row: the coordinates are the loop variables (no division or
 * modulo per element), and the pad bounds of the outer window axes are
 * invariant in the innermost loop (cg.h). */
bool fsl_cg_win_plan(em *e, const fsl_node *n, const int *axes, int na, const coords *oc, fsl_cg_win_row *w) {
  const fsl_value *x = n->in[0];
  memset(w, 0, sizeof *w);
  for (int q = 0; q < na; q++)
    if (x->dims[axes[q]] > 1) w->axis[w->nn++] = axes[q];
  if (e->grp || w->nn < 2 || n->op == FSL_OP_argmax || n->op == FSL_OP_argmin || !windowed(e, x, 0)) return false;
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
  const int64_t *st = NULL, *dl = NULL;
  bool has_st = fsl_attr_ints(win, "strides", &st) == k, has_dl = fsl_attr_ints(win, "dilations", &dl) == k;
  const fsl_value *X = pad->in[0];
  for (int q = 0; q < w->nn; q++) {
    int i = w->axis[q] - R, a = lead + i;
    long long s = has_st ? st[i] : 1, d = has_dl ? dl[i] : 1, pb = pads[a], len = X->dims[a], K = x->dims[w->axis[q]];
    /* o*s + j*d - pb in [0, len)  <=>  j in [ceil((pb - o*s)/d), ceil((len + pb - o*s)/d)) */
    int t = fsl_cg_new_tmp(e), u = fsl_cg_new_tmp(e);
    fsl_cg_line(e, "const int64_t i%d = %lld - %s*%lld, i%d = %lld - %s*%lld;", t, pb, oc->c[a], s, u, len + pb, oc->c[a], s);
    fsl_cg_line(e, "const int64_t jl%d_ = i%d <= 0 ? 0 : (i%d + %lld) / %lld;", w->axis[q], t, t, d - 1, d);
    fsl_cg_line(e, "const int64_t jh%d_ = i%d <= 0 ? 0 : (i%d + %lld) / %lld < %lld ? (i%d + %lld) / %lld : %lld;",
                w->axis[q], u, u, d - 1, d, K, u, d - 1, d, K);
    snprintf(w->lo[q], CLEN, "jl%d_", w->axis[q]);
    snprintf(w->hi[q], CLEN, "jh%d_", w->axis[q]);
  }
  w->win = win;
  w->src = X;
  return true;
}

/* The element of a clamped window row (w->src) at the row's coordinates
 * c: X at o*s + j*d - pb on the window axes. */
bool fsl_cg_win_ev(em *e, const fsl_cg_win_row *w, const coords *c, char *v) {
  const fsl_node *win = w->win, *pad = win->in[0]->producer;
  const fsl_value *X = w->src, *x = win->out[0];
  int R = X->rank, k = x->rank - R, lead = R - k;
  const int64_t *st = NULL, *dl = NULL, *pads = NULL;
  bool has_st = fsl_attr_ints(win, "strides", &st) == k, has_dl = fsl_attr_ints(win, "dilations", &dl) == k;
  fsl_attr_ints(pad, "pads", &pads);
  coords ic;
  ic.rank = R;
  for (int a = 0; a < R; a++) {
    if (a < lead || X->dims[a] == 1) {
      snprintf(ic.c[a], CLEN, "%s", X->dims[a] == 1 ? "0" : c->c[a]);
      continue;
    }
    int i = a - lead, t = fsl_cg_new_tmp(e);
    fsl_cg_line(e, "const int64_t i%d = %s*%lld + %s*%lld - %lld;", t, c->c[a], (long long)(has_st ? st[i] : 1),
                c->c[R + i], (long long)(has_dl ? dl[i] : 1), (long long)pads[a]);
    snprintf(ic.c[a], CLEN, "i%d", t);
  }
  return fsl_cg_ev(e, X, &ic, v);
}

/* The update of accumulator a<k>[o] (NaN flag n<k>[o]) by value v. */
static void col_update(em *e, const fsl_node *n, int k, const char *o, const char *v, const fsl_cg_red_acc *a) {
  bool fl = is_f(n->in[0]->dtype);
  const char *sym = n->op == FSL_OP_reduce_sum ? "+" : "*";
  switch (n->op) {
  case FSL_OP_reduce_sum:
  case FSL_OP_reduce_prod:
    fsl_cg_line(e, "a%d[%s] %s= (%s)%s;", k, o, sym, a->type, v);
    break;
  default: {
    const char *cmp = n->op == FSL_OP_reduce_max ? ">" : "<";
    if (fl) fsl_cg_line(e, "n%d[%s] |= %s != %s;", k, o, v, v);
    fsl_cg_line(e, "a%d[%s] = (%s)%s %s a%d[%s] ? (%s)%s : a%d[%s];", k, o, a->type, v, cmp, k, o, a->type, v, k, o);
  }
  }
}

/* Whether v depends on value y through the kernel's nodes. */
static bool depends(const em *e, const fsl_value *v, const fsl_value *y, int depth) {
  if (v == y) return true;
  if (!e->inside[v->id] || depth > 64) return false;
  const fsl_node *n = v->producer;
  for (int i = 0; i < n->n_in; i++)
    if (depends(e, n->in[i], y, depth + 1)) return true;
  return false;
}

#define COL_MIN 8               /* the innermost kept axis: at least a vector */
#define COL_BYTES (32 * 1024)   /* accumulators of a row: in L1 */

bool fsl_cg_win_cols(em *e, const fsl_node **red, int nr, const int *cls, const coords *oc, bool *used) {
  const fsl_cg_spec *s = e->s;
  const fsl_value *x0 = red[0]->in[0];
  *used = false;
  if (e->d->par_min == 0 || e->grp) return true;
  for (int j = 0; j < s->n_out; j++)
    if (cls[j] != 1) return true;
  long long bytes = 0;
  int r = x0->rank, la = -1;
  unsigned m0 = fsl_cg_red_mask(red[0]);
  for (int i = 0; i < r; i++)
    if (!(m0 & (1u << i)) && x0->dims[i] > 1) la = i;
  if (la < 0 || x0->dims[la] < COL_MIN) return true;
  int64_t L = x0->dims[la];
  for (int k = 0; k < nr; k++) {
    fsl_op op = red[k]->op;
    if ((op != FSL_OP_reduce_sum && op != FSL_OP_reduce_prod && op != FSL_OP_reduce_max && op != FSL_OP_reduce_min) ||
        !windowed(e, red[k]->in[0], 0))
      return true;
    for (int j = 0; j < nr; j++)
      if (depends(e, red[k]->in[0], red[j]->out[0], 0)) return true; /* a row's reductions one after another */
    bytes += (long long)L * ((is_f(x0->dtype) && (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)) ? 8 : 12);
  }
  if (bytes > COL_BYTES) return true;
  *used = true;
  int kept[FSL_MAX_RANK], nk = 0, ja[FSL_MAX_RANK], nj = 0;
  int64_t rows = 1, inner = 1;
  for (int i = 0; i < r; i++) {
    if (m0 & (1u << i)) {
      inner *= x0->dims[i];
      if (x0->dims[i] > 1) ja[nj++] = i;
    } else if (i != la) {
      kept[nk++] = i;
      rows *= x0->dims[i];
    }
  }
  char o[CLEN], nL[32];
  snprintf(o, CLEN, "o%d", la);
  snprintf(nL, sizeof nL, "%lld", (long long)L);
  fsl_cg_row_loop_open(e, rows, inner * L);
  coords c;
  c.rank = r;
  for (int i = 0; i < r; i++) snprintf(c.c[i], CLEN, "0");
  fsl_cg_decompose(e, "o_", nk, kept, x0->dims, "o", &c);
  snprintf(c.c[la], CLEN, "%s", o);
  fsl_cg_red_acc a[FSL_MAX_RANK * 8];
  bool nan[FSL_MAX_RANK * 8];
  if (nr > (int)(sizeof a / sizeof a[0])) return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "too many reductions in one kernel");
  for (int k = 0; k < nr; k++) {
    fsl_cg_red_acc_of(e->d, red[k], &a[k]);
    nan[k] = is_f(x0->dtype) && (red[k]->op == FSL_OP_reduce_max || red[k]->op == FSL_OP_reduce_min);
    fsl_cg_line(e, "%s a%d[%lld];", a[k].type, k, (long long)L);
    if (nan[k]) fsl_cg_line(e, "int n%d[%lld];", k, (long long)L);
  }
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = "0", .hi = nL});
  fsl_cg_open_scope(e);
  for (int k = 0; k < nr; k++) {
    fsl_cg_line(e, "a%d[%s] = %s;", k, o, a[k].init);
    if (nan[k]) fsl_cg_line(e, "n%d[%s] = 0;", k, o);
  }
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  /* the window loops, then the SIMD loop across the innermost kept axis */
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "j", o);
  char jv[FSL_MAX_RANK][CLEN], jd[FSL_MAX_RANK][32];
  for (int q = 0; q < nj; q++) {
    snprintf(jv[q], CLEN, "j%d", ja[q]);
    snprintf(jd[q], sizeof jd[q], "%lld", (long long)x0->dims[ja[q]]);
    memcpy(c.c[ja[q]], jv[q], CLEN);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = jv[q], .lo = "0", .hi = jd[q]});
    fsl_cg_open_scope(e);
  }
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = "0", .hi = nL, .n_red = 1, .red = {"|:e_"}});
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  bool ok = true;
  for (int k = 0; k < nr && ok; k++) {
    char v[CLEN];
    ok = fsl_cg_ev(e, red[k]->in[0], &c, v);
    if (ok) col_update(e, red[k], k, o, v, &a[k]);
  }
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  for (int q = 0; q < nj; q++) {
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  fsl_cg_loop_end(e, &lc);
  if (!ok) return false;
  /* the outputs, element by element of the innermost kept axis */
  fsl_cg_loop_begin(e, &lc, "", o);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = "0", .hi = nL, .n_red = 1, .red = {"|:e_"}});
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  for (int k = 0; k < nr; k++) {
    const char *Y = fsl_cg_ctype(e->d, red[k]->out[0]->dtype);
    if (nan[k]) fsl_cg_line(e, "const %s r%d = n%d[%s] ? (%s)NAN : (%s)a%d[%s];", Y, k, k, o, Y, Y, k, o);
    else fsl_cg_line(e, "const %s r%d = (%s)a%d[%s];", Y, k, Y, k, o);
  }
  e->n_red = nr;
  for (int j = 0; j < s->n_out && ok; j++) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_loop_end(e, &lc);
  fsl_cg_line(e, "err_ |= e_;");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  return ok;
}
