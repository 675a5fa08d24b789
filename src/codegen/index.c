/*
 * index.c — index lowering: flat indices over coordinates, decomposition
 * of flat indices, movement views (reshape, permute, expand, slice,
 * window, pad, concat) and gathers as index expressions.
 */
#include "codegen/cg.h"

/* Whether coordinate string var is known to lie in [lo, hi) (e->range:
 * a tile or row segment of loops.c). */
static bool coord_within(const em *e, const char *var, int64_t lo, int64_t hi) {
  for (int q = 0; q < 2; q++)
    if (e->range[q].var && strcmp(e->range[q].var, var) == 0 && lo <= e->range[q].lo && e->range[q].hi <= hi)
      return true;
  return false;
}

static bool is_simple(const char *s) {
  if (!*s) return false;
  for (const char *p = s; *p; p++)
    if (!(*p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
      return false;
  return strlen(s) < CLEN;
}

/* dst = expr, or a fresh int64 variable holding it. */
static void hoist(em *e, const char *expr, char *dst) {
  if (is_simple(expr)) {
    snprintf(dst, CLEN, "%s", expr);
    return;
  }
  int t = fsl_cg_new_tmp(e);
  fsl_cg_line(e, "const int64_t i%d = %s;", t, expr);
  snprintf(dst, CLEN, "i%d", t);
}

static void strides_of(int rank, const int64_t *dims, int64_t *s) {
  int64_t x = 1;
  for (int i = rank - 1; i >= 0; i--) {
    s[i] = x;
    x *= dims[i];
  }
}

/* Flat row-major index of c in a value of shape (rank, dims).  Where the
 * coordinates of a decomposition (decompose) appear in order over axes
 * that are contiguous in this value (only size-1 axes between them) with
 * the same extents, their terms are the decomposed index itself times the
 * innermost stride: no division or modulo per element. */
const fsl_cg_layout *fsl_cg_in_layout(const em *e, const fsl_value *v) {
  int i = v->id < e->nv ? e->in_idx[v->id] : -1;
  if (i < 0 || !e->s->in_layout || e->s->in_layout[i].rank != v->rank || v->rank == 0) return NULL;
  return &e->s->in_layout[i];
}

const fsl_cg_layout *fsl_cg_out_layout(const em *e, int j) {
  const fsl_value *v = e->s->out[j];
  if (!e->s->out_layout || e->s->out_layout[j].rank != v->rank || v->rank == 0) return NULL;
  return &e->s->out_layout[j];
}

void fsl_cg_layout_index(em *e, const fsl_value *v, const fsl_cg_layout *lay, const coords *c, char *dst) {
  if (!lay) {
    fsl_cg_flat_index(e, v->rank, v->dims, c, dst);
    return;
  }
  int64_t pd[FSL_MAX_RANK];
  coords pc = {.rank = v->rank};
  for (int k = 0; k < v->rank; k++) {
    pd[k] = v->dims[lay->order[k]];
    snprintf(pc.c[k], CLEN, "%s", c->c[lay->order[k]]);
  }
  fsl_cg_flat_index(e, v->rank, pd, &pc, dst);
}

void fsl_cg_flat_index(em *e, int rank, const int64_t *dims, const coords *c, char *dst) {
  int64_t s[FSL_MAX_RANK];
  strides_of(rank, dims, s);
  bool used[FSL_MAX_RANK] = {false};
  char buf[1024];
  size_t o = 0;
  buf[0] = 0;
  for (int d = e->n_dec - 1; d >= 0; d--) {
    const decomp *D = &e->dec[d];
    bool shadowed = false;
    for (int q = d + 1; q < e->n_dec; q++) shadowed = shadowed || strcmp(e->dec[q].prefix, D->prefix) == 0;
    if (shadowed || D->n < 2) continue;
    int pos[FSL_MAX_RANK], p = 0;
    bool ok = true;
    for (int k = 0; k < D->n && ok; k++) {
      char name[CLEN];
      snprintf(name, CLEN, "%s%d", D->prefix, D->axes[k]);
      if (k == 0) {
        while (p < rank && strcmp(c->c[p], name) != 0) p++;
      } else {
        while (p < rank && dims[p] == 1) p++;
      }
      ok = p < rank && !used[p] && strcmp(c->c[p], name) == 0 && dims[p] == D->dims[k];
      pos[k] = p++;
    }
    if (!ok) continue;
    for (int k = 0; k < D->n; k++) used[pos[k]] = true;
    int64_t st = s[pos[D->n - 1]];
    if (o) o += (size_t)snprintf(buf + o, sizeof buf - o, " + ");
    if (st == 1) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", D->x);
    else o += (size_t)snprintf(buf + o, sizeof buf - o, "%s*%lld", D->x, (long long)st);
  }
  for (int i = 0; i < rank; i++) {
    if (used[i] || dims[i] == 1 || strcmp(c->c[i], "0") == 0) continue;
    if (o) o += (size_t)snprintf(buf + o, sizeof buf - o, " + ");
    if (s[i] == 1) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", c->c[i]);
    else o += (size_t)snprintf(buf + o, sizeof buf - o, "%s*%lld", c->c[i], (long long)s[i]);
  }
  if (!o) snprintf(buf, sizeof buf, "0");
  hoist(e, buf, dst);
}

/* c->c[a] = (outer / div) % mod (no modulo when mod is 0), declared as
 * <prefix><a>. */
static void split_part(em *e, const char *outer, int64_t div, int64_t mod, const char *prefix, int a, coords *c) {
  char q[2 * CLEN];
  if (div == 1) snprintf(q, sizeof q, "%s", outer);
  else snprintf(q, sizeof q, "(%s / %lld)", outer, (long long)div);
  if (mod) fsl_cg_line(e, "const int64_t %s%d = %s %% %lld;", prefix, a, q, (long long)mod);
  else fsl_cg_line(e, "const int64_t %s%d = %s;", prefix, a, q);
  snprintf(c->c[a], CLEN, "%s%d", prefix, a);
}

/* Coordinates of flat index `x` (an identifier) over the listed axes of a
 * shape, written into c->c[axes[k]]; size-1 axes get "0".  `prefix` gives
 * the variable name prefix (e.g. "o" -> o3 for axis 3).  The split is
 * remembered for flat_index until the scope closes. */
void fsl_cg_decompose(em *e, const char *x, int n, const int *axes, const int64_t *dims, const char *prefix,
                      coords *c) {
  int64_t inner = 1;
  for (int k = n - 1; k >= 0; k--) {
    int a = axes[k];
    int64_t d = dims[a];
    if (d == 1) {
      snprintf(c->c[a], CLEN, "0");
      continue;
    }
    bool first = true;
    for (int q = 0; q < k; q++) first = first && dims[axes[q]] == 1;
    const isplit *S = &e->split;
    if (S->var[0] && strcmp(x, S->var) == 0 && ((inner == 1 && d == S->f) || (inner > 1 && inner % S->f == 0))) {
      /* x == outer*f + k (an interleaved inner loop): its parts directly */
      if (inner == 1) snprintf(c->c[a], CLEN, "%lld", (long long)S->k);
      else split_part(e, S->outer, inner / S->f, first ? 0 : d, prefix, a, c);
      inner *= d;
      continue;
    }
    char expr[256];
    if (inner == 1 && first) snprintf(expr, sizeof expr, "%s", x);
    else if (inner == 1) snprintf(expr, sizeof expr, "%s %% %lld", x, (long long)d);
    else if (first) snprintf(expr, sizeof expr, "%s / %lld", x, (long long)inner);
    else snprintf(expr, sizeof expr, "(%s / %lld) %% %lld", x, (long long)inner, (long long)d);
    fsl_cg_line(e, "const int64_t %s%d = %s;", prefix, a, expr);
    snprintf(c->c[a], CLEN, "%s%d", prefix, a);
    inner *= d;
  }
  if (e->n_dec == e->cap_dec) {
    int cap = e->cap_dec ? e->cap_dec * 2 : 16;
    decomp *p = realloc(e->dec, sizeof *p * (size_t)cap);
    if (!p) {
      e->b->oom = true;
      return;
    }
    e->dec = p;
    e->cap_dec = cap;
  }
  decomp *D = &e->dec[e->n_dec++];
  D->depth = e->depth;
  snprintf(D->x, CLEN, "%s", x);
  snprintf(D->prefix, sizeof D->prefix, "%s", prefix);
  D->n = 0;
  for (int k = 0; k < n; k++)
    if (dims[axes[k]] != 1) {
      D->axes[D->n] = axes[k];
      D->dims[D->n++] = dims[axes[k]];
    }
}

static const int64_t *ints_attr(const fsl_node *n, const char *name) {
  const int64_t *v = NULL;
  return fsl_attr_ints(n, name, &v) >= 0 ? v : NULL;
}

/* dst = the row-major flat index of coordinates oc over axes [lo, hi) of
 * out alone (hoisted when not a single name). */
static void group_flat(em *e, const fsl_value *out, const coords *oc, int lo, int hi, char *dst) {
  char buf[1024];
  size_t o = 0;
  int64_t st = 1;
  buf[0] = 0;
  for (int k = hi - 1; k >= lo; k--) {
    if (out->dims[k] != 1) {
      if (o) o += (size_t)snprintf(buf + o, sizeof buf - o, " + ");
      if (st == 1) o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", oc->c[k]);
      else o += (size_t)snprintf(buf + o, sizeof buf - o, "%s*%lld", oc->c[k], (long long)st);
    }
    st *= out->dims[k];
  }
  hoist(e, o ? buf : "0", dst);
}

/* Axes [po, p) of out merge into the one non-1 axis of in among [qo, q):
 * that coordinate is outer*unit + (the coordinate along the last non-1
 * axis of out, unit its extent); remembered (struct quot) for a concat
 * along it. */
static void note_composed(em *e, const fsl_value *out, const coords *oc, int po, int p, const coords *ic, int qo, int q,
                          const fsl_value *in) {
  int last = p - 1, qa = qo;
  while (last >= po && out->dims[last] == 1) last--;
  while (qa < q && in->dims[qa] == 1) qa++;
  if (last < po || qa >= q || e->n_quot == (int)FSL_ARRAY_LEN(e->quot)) return;
  quot *Q = &e->quot[e->n_quot];
  group_flat(e, out, oc, po, last, Q->outer);
  snprintf(Q->var, CLEN, "%s", ic->c[qa]);
  Q->unit = out->dims[last];
  Q->depth = e->depth;
  e->n_quot++;
}

/* reshape: maps output coordinates to input coordinates group by group
 * (runs of dims with equal products), so squeezes and unsqueezes keep the
 * coordinate expressions unchanged. */
static void map_reshape(em *e, const fsl_value *in, const fsl_value *out, const coords *oc, coords *ic) {
  int ri = in->rank, ro = out->rank;
  ic->rank = ri;
  if (fsl_value_numel(in) == 0) {
    for (int i = 0; i < ri; i++) snprintf(ic->c[i], CLEN, "0");
    return;
  }
  int p = 0, q = 0;
  while (p < ro || q < ri) {
    if (q < ri && in->dims[q] == 1) {
      snprintf(ic->c[q++], CLEN, "0");
      continue;
    }
    if (p < ro && out->dims[p] == 1) {
      p++;
      continue;
    }
    if (p >= ro || q >= ri) break; /* cannot happen: equal numel */
    int po = p, qo = q;
    int64_t pO = out->dims[p++], pI = in->dims[q++];
    while (pO != pI) {
      if (pO < pI) pO *= out->dims[p++];
      else pI *= in->dims[q++];
    }
    int no = 0, ni = 0;
    for (int k = po; k < p; k++) no += out->dims[k] != 1;
    for (int k = qo; k < q; k++) ni += in->dims[k] != 1;
    if (no == 1 && ni == 1) {
      const char *src = NULL;
      for (int k = po; k < p; k++)
        if (out->dims[k] != 1) src = oc->c[k];
      for (int k = qo; k < q; k++) snprintf(ic->c[k], CLEN, "%s", in->dims[k] != 1 ? src : "0");
      continue;
    }
    /* flat index within the group, then split */
    char f[CLEN];
    group_flat(e, out, oc, po, p, f);
    int axes[FSL_MAX_RANK], n = 0;
    for (int k = qo; k < q; k++) axes[n++] = k;
    char pre[16];
    snprintf(pre, sizeof pre, "i%d_", fsl_cg_new_tmp(e));
    fsl_cg_decompose(e, f, n, axes, in->dims, pre, ic);
    if (ni == 1) note_composed(e, out, oc, po, p, ic, qo, q, in);
  }
  for (; q < ri; q++) snprintf(ic->c[q], CLEN, "0");
}

bool fsl_cg_ev_movement(em *e, const fsl_node *n, const coords *c, char *res) {
  const fsl_value *x = n->in[0], *y = n->out[0];
  coords ic;
  ic.rank = x->rank;
  char tmp[256];
  switch (n->op) {
  case FSL_OP_reshape:
    map_reshape(e, x, y, c, &ic);
    return fsl_cg_ev(e, x, &ic, res);
  case FSL_OP_permute: {
    const int64_t *perm = ints_attr(n, "perm");
    for (int i = 0; i < y->rank; i++) snprintf(ic.c[perm[i]], CLEN, "%s", c->c[i]);
    return fsl_cg_ev(e, x, &ic, res);
  }
  case FSL_OP_expand:
    for (int i = 0; i < x->rank; i++) snprintf(ic.c[i], CLEN, "%s", x->dims[i] == 1 ? "0" : c->c[i]);
    return fsl_cg_ev(e, x, &ic, res);
  case FSL_OP_slice: {
    const int64_t *st = ints_attr(n, "starts"), *sp = ints_attr(n, "steps");
    for (int i = 0; i < x->rank; i++) {
      if (x->dims[i] == 1 || y->dims[i] == 0) snprintf(ic.c[i], CLEN, "0");
      else if (st[i] == 0 && sp[i] == 1) snprintf(ic.c[i], CLEN, "%s", c->c[i]);
      else {
        snprintf(tmp, sizeof tmp, "%lld + %lld*%s", (long long)st[i], (long long)sp[i], c->c[i]);
        hoist(e, tmp, ic.c[i]);
      }
    }
    return fsl_cg_ev(e, x, &ic, res);
  }
  case FSL_OP_window: {
    const int64_t *ks = ints_attr(n, "kernel_shape"), *st = ints_attr(n, "strides"), *dl = ints_attr(n, "dilations");
    (void)ks;
    int k = y->rank - x->rank, lead = x->rank - k;
    for (int i = 0; i < lead; i++) snprintf(ic.c[i], CLEN, "%s", c->c[i]);
    for (int i = 0; i < k; i++) {
      snprintf(tmp, sizeof tmp, "%s*%lld + %s*%lld", c->c[lead + i], (long long)(st ? st[i] : 1), c->c[x->rank + i],
               (long long)(dl ? dl[i] : 1));
      hoist(e, tmp, ic.c[lead + i]);
    }
    return fsl_cg_ev(e, x, &ic, res);
  }
  case FSL_OP_pad: {
    const int64_t *pads = ints_attr(n, "pads");
    int mode = (int)fsl_attr_int(n, "mode", 0), r = x->rank;
    char cond[1024];
    size_t co = 0;
    cond[0] = 0;
    for (int i = 0; i < r; i++) {
      if (pads[i] == 0 && pads[r + i] == 0) {
        snprintf(ic.c[i], CLEN, "%s", x->dims[i] == 1 ? "0" : c->c[i]);
        continue;
      }
      char p[CLEN];
      snprintf(tmp, sizeof tmp, "%s - %lld", c->c[i], (long long)pads[i]);
      hoist(e, tmp, p);
      if (coord_within(e, c->c[i], pads[i], pads[i] + x->dims[i])) {
        /* the interior of a row split at the pads (loops.c): no border */
        snprintf(ic.c[i], CLEN, "%s", p);
        continue;
      }
      if (mode == 0) {
        co += (size_t)snprintf(cond + co, sizeof cond - co, "%s(uint64_t)%s < %lluULL", co ? " && " : "", p,
                               (unsigned long long)x->dims[i]);
        snprintf(ic.c[i], CLEN, "%s", p);
      } else {
        const char *fn = mode == 1 ? "fsl_pad_reflect" : mode == 2 ? "fsl_pad_edge" : "fsl_pad_wrap";
        snprintf(tmp, sizeof tmp, "%s(%s, %lld)", fn, p, (long long)x->dims[i]);
        hoist(e, tmp, ic.c[i]);
      }
    }
    if (mode != 0 || !co) return fsl_cg_ev(e, x, &ic, res);
    unsigned char fill[16] = {0};
    fsl_store_f64(y->dtype, fill, 0, fsl_attr_float(n, "value", 0.0));
    char lit[CLEN], sub[CLEN];
    fsl_cg_literal(e->d, y->dtype, fill, lit);
    int t = fsl_cg_new_tmp(e);
    fsl_cg_line(e, "%s t%d = %s;", fsl_cg_ctype(e->d, y->dtype), t, lit);
    fsl_cg_line(e, "if (%s) {", cond);
    fsl_cg_open_scope(e);
    if (!fsl_cg_ev(e, x, &ic, sub)) return false;
    fsl_cg_line(e, "t%d = %s;", t, sub);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    snprintf(res, CLEN, "t%d", t);
    return true;
  }
  case FSL_OP_concat: {
    int axis = (int)fsl_attr_int(n, "axis", 0);
    /* the coordinate is composed (outer*unit + r) and every boundary a
     * multiple of unit: test outer instead */
    const quot *Q = NULL;
    for (int i = e->n_quot - 1; i >= 0 && !Q; i--)
      if (strcmp(e->quot[i].var, c->c[axis]) == 0) Q = &e->quot[i];
    int64_t bound = 0;
    for (int k = 0; Q && k < n->n_in; k++) {
      bound += n->in[k]->dims[axis];
      if (bound % Q->unit) Q = NULL;
    }
    /* the coordinate's range lies within one input: that one, no test */
    int only = e->pin_node == n ? e->pin_k : -1;
    for (int64_t k = 0, lo = 0; k < n->n_in && only < 0; lo += n->in[k++]->dims[axis])
      if (coord_within(e, c->c[axis], lo, lo + n->in[k]->dims[axis])) only = (int)k;
    int t = fsl_cg_new_tmp(e);
    fsl_cg_line(e, "%s t%d;", fsl_cg_ctype(e->d, y->dtype), t);
    int64_t off = 0;
    int last = -1;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k]->dims[axis] > 0) last = k;
    bool first = true;
    for (int k = 0; k < n->n_in; k++) {
      const fsl_value *xk = n->in[k];
      int64_t len = xk->dims[axis];
      if (len == 0 || (only >= 0 && k != only)) {
        off += len;
        continue;
      }
      if (k == last || only >= 0) fsl_cg_line(e, first ? "{" : "else {");
      else if (Q) fsl_cg_line(e, "%sif (%s < %lld) {", first ? "" : "else ", Q->outer, (long long)((off + len) / Q->unit));
      else fsl_cg_line(e, "%sif (%s < %lld) {", first ? "" : "else ", c->c[axis], (long long)(off + len));
      first = false;
      fsl_cg_open_scope(e);
      coords kc = *c;
      kc.rank = xk->rank;
      if (xk->dims[axis] == 1) snprintf(kc.c[axis], CLEN, "0");
      else if (off) {
        snprintf(tmp, sizeof tmp, "%s - %lld", c->c[axis], (long long)off);
        hoist(e, tmp, kc.c[axis]);
      }
      for (int i = 0; i < xk->rank; i++)
        if (xk->dims[i] == 1) snprintf(kc.c[i], CLEN, "0");
      char sub[CLEN];
      if (!fsl_cg_ev(e, xk, &kc, sub)) return false;
      fsl_cg_line(e, "t%d = %s;", t, sub);
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
      off += len;
    }
    snprintf(res, CLEN, "t%d", t);
    return true;
  }
  default: return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "movement op %s", fsl_op_name(n->op));
  }
}

/* Bounds [*lo, *hi] of the values of integer index tensor ix when they are
 * known at code-generation time: ix a constant, or a movement view
 * (reshape, expand, permute, slice) of one, which only selects elements
 * (Resize's tap tables, constant Gather indices). */
static bool const_index_range(const fsl_value *ix, int64_t *lo, int64_t *hi) {
  for (int depth = 0; ix && !ix->data && depth < FSL_MAX_RANK; depth++) {
    const fsl_node *p = ix->producer;
    if (!p || p->n_in < 1 || (p->op != FSL_OP_reshape && p->op != FSL_OP_expand && p->op != FSL_OP_permute &&
                              p->op != FSL_OP_slice))
      return false;
    ix = p->in[0];
  }
  if (!ix || !ix->data || (ix->dtype != FSL_DT_I64 && ix->dtype != FSL_DT_I32)) return false;
  int64_t n = fsl_value_numel(ix);
  if (n <= 0) return false;
  *lo = INT64_MAX;
  *hi = INT64_MIN;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = fsl_load_i64(ix->dtype, ix->data, i);
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
  return true;
}

/* Index value idx (an int expression, values of tensor ix) wrapped once and
 * checked against len; out-of-range sets FSL_KERR_INDEX and reads element
 * 0.  Constant indices are checked here instead: all in [0, len) need
 * neither the wrap nor the check (no compare, select and error bit per
 * element and per tap: GCC 12 still leaves these loops scalar),
 * all in [-len, len) only the wrap. */
static void gather_index(em *e, const fsl_value *ix, const char *idx, int64_t len, char *dst) {
  int t = fsl_cg_new_tmp(e);
  int64_t lo, hi;
  bool known = const_index_range(ix, &lo, &hi) && lo >= -len && hi < len;
  fsl_cg_line(e, "%sint64_t i%d = (int64_t)%s;", known && lo >= 0 ? "const " : "", t, idx);
  if (!known || lo < 0) fsl_cg_line(e, "i%d = i%d < 0 ? i%d + %lld : i%d;", t, t, t, (long long)len, t);
  if (!known) {
    fsl_cg_line(e, "e_ |= (uint64_t)i%d >= %lluULL;", t, (unsigned long long)len);
    fsl_cg_line(e, "i%d = (uint64_t)i%d >= %lluULL ? 0 : i%d;", t, t, (unsigned long long)len, t);
  }
  snprintf(dst, CLEN, "i%d", t);
}

bool fsl_cg_ev_gather(em *e, const fsl_node *n, const coords *c, char *res) {
  const fsl_value *d = n->in[0], *ix = n->in[1], *y = n->out[0];
  coords dc, icd;
  dc.rank = d->rank;
  icd.rank = ix->rank;
  char iv[CLEN];
  switch (n->op) {
  case FSL_OP_gather: {
    int axis = (int)fsl_attr_int(n, "axis", 0), q = ix->rank;
    for (int i = 0; i < q; i++) snprintf(icd.c[i], CLEN, "%s", c->c[axis + i]);
    if (!fsl_cg_ev(e, ix, &icd, iv)) return false;
    for (int i = 0; i < axis; i++) snprintf(dc.c[i], CLEN, "%s", c->c[i]);
    gather_index(e, ix, iv, d->dims[axis], dc.c[axis]);
    for (int i = axis + 1; i < d->rank; i++) snprintf(dc.c[i], CLEN, "%s", c->c[i + q - 1]);
    return fsl_cg_ev(e, d, &dc, res);
  }
  case FSL_OP_gather_elements: {
    int axis = (int)fsl_attr_int(n, "axis", 0);
    if (!fsl_cg_ev(e, ix, c, iv)) return false;
    for (int i = 0; i < d->rank; i++) snprintf(dc.c[i], CLEN, "%s", c->c[i]);
    gather_index(e, ix, iv, d->dims[axis], dc.c[axis]);
    return fsl_cg_ev(e, d, &dc, res);
  }
  case FSL_OP_gather_nd: {
    int b = (int)fsl_attr_int(n, "batch_dims", 0), q = ix->rank;
    int k = (int)ix->dims[q - 1];
    for (int i = 0; i < b; i++) snprintf(dc.c[i], CLEN, "%s", c->c[i]);
    for (int t = 0; t < k; t++) {
      for (int i = 0; i < q - 1; i++) snprintf(icd.c[i], CLEN, "%s", c->c[i]);
      snprintf(icd.c[q - 1], CLEN, "%d", t);
      if (!fsl_cg_ev(e, ix, &icd, iv)) return false;
      gather_index(e, ix, iv, d->dims[b + t], dc.c[b + t]);
    }
    for (int i = b + k; i < d->rank; i++) snprintf(dc.c[i], CLEN, "%s", c->c[q - 1 + i - b - k]);
    (void)y;
    return fsl_cg_ev(e, d, &dc, res);
  }
  default: return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "%s", fsl_op_name(n->op));
  }
}
