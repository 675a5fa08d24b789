/*
 * value.c — the element of a value at coordinates: loads, literals, the
 * memo, hoisting of loop invariants, and dispatch by the producer's kind.
 */
#include "codegen/cg.h"

bool fsl_cg_ev(em *e, const fsl_value *v, const coords *c, char *res);

bool fsl_cg_supported_dtype(em *e, const fsl_value *v) {
  if (!fsl_cg_ctype(e->d, v->dtype))
    return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "dtype %s of value '%s'", fsl_dtype_name(v->dtype), v->name ? v->name : "?");
  return true;
}

/* Load of an outside value (or scratch buffer) at c, stored in layout lay
 * (NULL: row-major): the flat index over the dims in memory order. */
static bool load(em *e, const fsl_value *v, const char *buf, const coords *c, const fsl_cg_layout *lay, char *res) {
  char idx[CLEN];
  fsl_cg_layout_index(e, v, lay, c, idx);
  int t = fsl_cg_new_tmp(e);
  char at[2 * CLEN + 8], ld[2 * CLEN + 48];
  snprintf(at, sizeof at, "%s[%s]", buf, idx);
  fsl_cg_conv(e->d, v->dtype, true, at, ld, sizeof ld);
  fsl_cg_line(e, "const %s t%d = %s;", fsl_cg_ctype(e->d, v->dtype), t, ld);
  snprintf(res, CLEN, "t%d", t);
  return true;
}

static bool ev_reduce_read(em *e, const fsl_value *v, const coords *c, char *res) {
  int k = e->red_idx[v->id];
  if (e->mode == MODE_PASSES) {
    char buf[16];
    snprintf(buf, sizeof buf, "s%d", k);
    return load(e, v, buf, c, NULL, res);
  }
  if (k >= e->n_red) return fsl_cg_fail(e, FSL_ERR_INVALID, "reduction read before it is computed");
  /* the row's accumulator is valid only at this row's kept coordinates */
  for (int i = 0; i < v->rank; i++) {
    if (v->dims[i] == 1) continue;
    char want[CLEN];
    snprintf(want, CLEN, "o%d", i);
    if (strcmp(c->c[i], want) != 0) {
      e->fused_fail = true;
      return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "reduction read outside its row");
    }
  }
  snprintf(res, CLEN, "r%d", k);
  return true;
}

/* Whether a use of v (in the whole graph, through arithmetic and
 * movement) rounds or compares it, so that v must be exactly the rounded
 * quotient (a quantizing x / scale must not become x * (1 / scale)). */
static bool rounding_read(const fsl_value *v, int depth) {
  if (depth > 6) return false; /* far enough: other roundings dominate */
  for (int i = 0; i < v->n_cons; i++) {
    const fsl_node *n = v->cons[i];
    fsl_kind kind = fsl_op_get(n->op)->kind;
    switch (n->op) {
    case FSL_OP_add: case FSL_OP_sub: case FSL_OP_mul: case FSL_OP_div: case FSL_OP_neg: case FSL_OP_abs:
    case FSL_OP_exp: case FSL_OP_log: case FSL_OP_sqrt: case FSL_OP_rsqrt: case FSL_OP_recip: case FSL_OP_tanh:
    case FSL_OP_erf: case FSL_OP_sigmoid: case FSL_OP_max: case FSL_OP_min: case FSL_OP_pow:
    case FSL_OP_reduce_max: case FSL_OP_reduce_min:
      break;
    case FSL_OP_reduce_sum: case FSL_OP_reduce_prod: continue; /* mixes many values */
    case FSL_OP_cast:
      if (!is_f(n->out[0]->dtype)) return true;
      break;
    default:
      if (kind == FSL_KIND_LINEAR) continue;
      if (kind != FSL_KIND_MOVEMENT) return true;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && rounding_read(n->out[k], depth + 1)) return true;
  }
  return false;
}

/* Constants up to this size are checked for broadcast dims (const_broadcast). */
#define BCAST_CHECK_BYTES (256 * 1024)

/* The dims along which constant v does not vary (bit i: every slice along
 * axis i equals slice 0), for constants up to BCAST_CHECK_BYTES: a
 * broadcast that constant folding materialized at full size (a scalar or
 * per-channel operand expanded to the activation's shape, fission/builder.c
 * folds growth up to 64 KiB) is then read at coordinate 0 along those
 * dims, so loads of it are loop invariants (hoisted) or literals instead
 * of one more full-size stream per element. */
static unsigned const_broadcast(const fsl_value *v) {
  size_t es = fsl_dtype_size(v->dtype);
  int64_t n = fsl_value_numel(v);
  if (!v->data || es == 0 || n <= 1 || n > (int64_t)(BCAST_CHECK_BYTES / es)) return 0;
  return fsl_uniform_dims(v->data, es, v->rank, v->dims);
}

bool fsl_cg_ev(em *e, const fsl_value *v, const coords *c, char *res) {
  if (e->st != FSL_OK) return false;
  if (!fsl_cg_supported_dtype(e, v)) return false;
  coords cb;
  unsigned bm = c->rank == v->rank ? const_broadcast(v) : 0;
  if (bm) {
    int64_t nv = 1;
    cb = *c;
    for (int i = 0; i < v->rank; i++) {
      if (bm & (1u << i)) snprintf(cb.c[i], CLEN, "0");
      else nv *= v->dims[i];
    }
    if (nv == 1) { /* one value, broadcast */
      fsl_cg_literal(e->d, v->dtype, v->data, res);
      return true;
    }
    c = &cb;
  }
  if (e->epi && v == e->lin_out) {
    /* a linear op's epilogue reads its output at the stored element only (epilogue.c) */
    if (!e->lin_var[0]) return fsl_cg_fail(e, FSL_ERR_INVALID, "the linear op's output read outside its store");
    snprintf(res, CLEN, "%s", e->lin_var);
    return true;
  }
  if (v->data && fsl_value_numel(v) == 1) {
    fsl_cg_literal(e->d, v->dtype, v->data, res);
    return true;
  }
  const char *m = fsl_cg_memo_find(e, v->id, c);
  if (m) {
    snprintf(res, CLEN, "%s", m);
    return true;
  }
  if (e->pre && !e->hoisting && e->depth == e->body_depth && !fsl_cg_coords_variant(e, c)) {
    /* invariant in the current loop: computed once before it */
    fsl_sbuf *b = e->b;
    int indent = e->indent, depth = e->depth;
    e->b = e->pre;
    e->indent = e->pre_indent;
    e->depth = e->pre_depth;
    e->hoisting = true;
    bool ok = fsl_cg_ev(e, v, c, res);
    e->b = b;
    e->indent = indent;
    e->depth = depth;
    e->hoisting = false;
    return ok;
  }
  if (e->cache_on && v->id == e->cache_vid) {
    bool same = c->rank == e->cache_c.rank;
    for (int i = 0; i < c->rank && same; i++) same = strcmp(c->c[i], e->cache_c.c[i]) == 0;
    if (same) {
      char buf[16];
      snprintf(buf, sizeof buf, "out%d", e->cache_out);
      const fsl_value *o = e->s->out[e->cache_out];
      if (!load(e, o, buf, &e->cache_oc, NULL, res)) return false;
      fsl_cg_memo_add(e, v->id, c, res);
      return true;
    }
  }
  if (!e->inside[v->id]) {
    int i = e->in_idx[v->id];
    if (i < 0) return fsl_cg_fail(e, FSL_ERR_INVALID, "value '%s' is read but is no input", v->name ? v->name : "?");
    char buf[16];
    snprintf(buf, sizeof buf, "in%d", i);
    if (!load(e, v, buf, c, fsl_cg_in_layout(e, v), res)) return false;
    fsl_cg_memo_add(e, v->id, c, res);
    return true;
  }
  const fsl_node *n = v->producer;
  fsl_kind kind = fsl_op_get(n->op)->kind;
  bool ok;
  switch (kind) {
  case FSL_KIND_ELEMENTWISE: {
    char a[3][CLEN], ex[1024];
    for (int i = 0; i < n->n_in && i < 3; i++)
      if (!fsl_cg_ev(e, n->in[i], c, a[i])) return false;
    if (n->op == FSL_OP_div && is_f(v->dtype) && e->pre && !e->hoisting && !fsl_cg_ident_variant(e, a[1]) &&
        !rounding_read(v, 0)) {
      /* a loop-invariant divisor: multiply by its reciprocal (within 1.5 ulp) */
      fsl_sbuf *b = e->b;
      int indent = e->indent;
      e->b = e->pre;
      e->indent = e->pre_indent;
      e->hoisting = true;
      int r = fsl_cg_new_tmp(e);
      fsl_cg_line(e, "const %s t%d = %s / %s;", fsl_cg_ctype(e->d, v->dtype), r, is_f32c(v->dtype) ? "1.0f" : "1.0", a[1]);
      e->b = b;
      e->indent = indent;
      e->hoisting = false;
      snprintf(ex, sizeof ex, "%s * t%d", a[0], r);
    } else if (!fsl_cg_ew_expr(e, n, a, ex, sizeof ex)) {
      return false;
    }
    int t = fsl_cg_new_tmp(e);
    if (fsl_cg_half(e->d, v->dtype)) {
      /* a stored half type: each node's result rounded to it, as the reference stores it */
      char st[sizeof ex + 32], rd[sizeof ex + 64];
      fsl_cg_conv(e->d, v->dtype, false, ex, st, sizeof st);
      fsl_cg_conv(e->d, v->dtype, true, st, rd, sizeof rd);
      fsl_cg_line(e, "const %s t%d = %s;", fsl_cg_ctype(e->d, v->dtype), t, rd);
    } else {
      fsl_cg_line(e, "const %s t%d = %s;", fsl_cg_ctype(e->d, v->dtype), t, ex);
    }
    snprintf(res, CLEN, "t%d", t);
    ok = true;
    break;
  }
  case FSL_KIND_MOVEMENT: ok = fsl_cg_ev_movement(e, n, c, res); break;
  case FSL_KIND_GATHER: ok = fsl_cg_ev_gather(e, n, c, res); break;
  case FSL_KIND_REDUCE: ok = ev_reduce_read(e, v, c, res); break;
  default: return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "%s inside a generated loop", fsl_op_name(n->op));
  }
  if (ok) fsl_cg_memo_add(e, v->id, c, res);
  return ok;
}
