/*
 * attention.c — decompositions of Attention, RotaryEmbedding and the
 * classification losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
 *
 * Attention: per-head matmuls; grouped-query attention reshapes Q to
 * [B, kv_heads, group * S_q, D] so that K and V are never repeated.  Masks
 * (causal, boolean attn_mask, nonpad_kv_seqlen) become one boolean "keep"
 * tensor applied with where(keep, scores, -inf); a float attn_mask is added.
 * float16 / bfloat16 scores are softmaxed in float32 (or softmax_precision)
 * and the result cast back once.  Softmax subtracts the row max.
 * Losses: the target class is gathered with gather_elements on the class
 * axis; ignore_index entries are masked with where (their index clamped to
 * a valid class first); mean divides by the sum of the selected weights.
 */
#include "fission/fission.h"

#include <math.h>

/* ---- small shared helpers ---- */

/* Optional input i (NULL when omitted). */
static fsl_value *in_opt(fsl_fctx *fx, int i) { return i < fx->n_in ? fx->in[i] : NULL; }

/* x with a size-1 axis inserted at `axis` (0 <= axis <= rank). */
static fsl_value *unsqueeze(fsl_builder *b, fsl_value *x, int axis) {
  if (!x) return NULL;
  int64_t dims[FSL_MAX_RANK];
  int r = 0;
  for (int i = 0; i <= x->rank; i++) {
    if (i == axis) dims[r++] = 1;
    if (i < x->rank) dims[r++] = x->dims[i];
  }
  return fsl_b_reshape(b, x, x->rank + 1, dims);
}

/* softmax or log-softmax of x over one axis (row max subtracted). */
static fsl_value *softmax_axis(fsl_builder *b, fsl_value *x, int64_t axis, bool log) {
  if (!x) return NULL;
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, &axis, 1, true);
  fsl_value *d = fsl_b_binary(b, FSL_OP_sub, x, m);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, d);
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, e, &axis, 1, true);
  if (log) return fsl_b_binary(b, FSL_OP_sub, d, fsl_b_unary(b, FSL_OP_log, s));
  return fsl_b_binary(b, FSL_OP_div, e, s);
}

/* keep AND other (either may be NULL). */
static fsl_value *and_opt(fsl_builder *b, fsl_value *keep, fsl_value *other) {
  if (!keep) return other;
  if (!other) return keep;
  return fsl_b_binary(b, FSL_OP_and, keep, other);
}

/* ------------------------------------------------------------------ */
/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss                   */
/* ------------------------------------------------------------------ */

typedef enum loss_red { RED_NONE, RED_SUM, RED_MEAN } loss_red;

/* Reads attribute 'reduction' (none / sum / mean, default mean). */
static bool read_reduction(fsl_fctx *fx, loss_red *red) {
  const char *s = fsl_attr_str(fx->node, "reduction", "mean");
  if (!strcmp(s, "none")) *red = RED_NONE;
  else if (!strcmp(s, "sum")) *red = RED_SUM;
  else if (!strcmp(s, "mean")) *red = RED_MEAN;
  else {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'reduction' is '%s', expected none, sum or mean", s);
    return false;
  }
  return true;
}

/* Checks x [N, C, d...] (float), target [N, d...] (integer) and weight [C]. */
static bool check_loss_shapes(fsl_fctx *fx, const fsl_value *x, const fsl_value *t, const fsl_value *w) {
  char bx[96], bt[96];
  if (!fsl_dtype_is_float(x->dtype))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "input 0 must have a float dtype"), false;
  if (!fsl_dtype_is_int(t->dtype))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "input 1 (target) must have an integer dtype"), false;
  bool ok = x->rank >= 2 && t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
  for (int i = 1; ok && i < t->rank; i++) ok = t->dims[i] == x->dims[i + 1];
  if (!ok)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected input [N, C, d...] and target [N, d...], got [%s] and [%s]",
                       fsl_shape_str(x->rank, x->dims, bx, sizeof bx),
                       fsl_shape_str(t->rank, t->dims, bt, sizeof bt)), false;
  if (w && (w->rank != 1 || w->dims[0] != x->dims[1]))
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected weight [%lld], got [%s]", (long long)x->dims[1],
                       fsl_shape_str(w->rank, w->dims, bx, sizeof bx)), false;
  return true;
}

/* Loss of log-probabilities logp [N, C, d...] against target [N, d...]:
 * -logp[n, target, d...] * weight[target], ignore_index entries zero,
 * then reduced (mean divides by the sum of the selected weights). */
static fsl_value *class_loss(fsl_fctx *fx, fsl_value *logp, fsl_value *t, fsl_value *w, loss_red red) {
  fsl_builder *b = fx->b;
  int64_t c = logp->dims[1];
  fsl_value *mask = NULL, *tc = t;
  if (fsl_attr_find(fx->node, "ignore_index")) {
    int64_t ii = fsl_attr_int(fx->node, "ignore_index", -100);
    mask = fsl_b_binary(b, FSL_OP_eq, t, fsl_b_scalar(b, t->dtype, (double)ii));
    tc = fsl_b_where(b, mask, fsl_b_scalar(b, t->dtype, 0), t);
  }
  tc = fsl_b_binary_scalar(b, FSL_OP_max, tc, 0);
  tc = fsl_b_binary_scalar(b, FSL_OP_min, tc, (double)(c - 1));
  fsl_value *g = fsl_b_gather_elements(b, logp, unsqueeze(b, tc, 1), 1);
  fsl_value *loss = fsl_b_unary(b, FSL_OP_neg, fsl_b_reshape(b, g, t->rank, t->dims));
  fsl_value *zero = fsl_b_scalar(b, logp->dtype, 0);
  fsl_value *wsel = NULL;
  if (w) wsel = fsl_b_cast(b, fsl_b_gather(b, w, tc, 0), logp->dtype);
  if (wsel) loss = fsl_b_binary(b, FSL_OP_mul, loss, wsel);
  if (mask) {
    loss = fsl_b_where(b, mask, zero, loss);
    wsel = wsel ? fsl_b_where(b, mask, zero, wsel) : fsl_b_cast(b, fsl_b_unary(b, FSL_OP_not, mask), logp->dtype);
  }
  if (red == RED_NONE) return loss;
  fsl_value *sum = fsl_b_reduce(b, FSL_OP_reduce_sum, loss, NULL, 0, false);
  if (red == RED_SUM) return sum;
  if (!wsel) return fsl_b_binary_scalar(b, FSL_OP_div, sum, (double)fsl_value_numel(t));
  return fsl_b_binary(b, FSL_OP_div, sum, fsl_b_reduce(b, FSL_OP_reduce_sum, wsel, NULL, 0, false));
}

/* Shared body: NLL of x itself (softmax false) or of log_softmax(x). */
static fsl_status loss_op(fsl_fctx *fx, bool softmax) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *t = fsl_fx_req(fx, 1), *w = in_opt(fx, 2);
  loss_red red;
  if (!x || !t || !read_reduction(fx, &red) || !check_loss_shapes(fx, x, t, w)) return fsl_fx_done(fx);
  fsl_dtype cdt = fsl_acc_dtype(x->dtype);
  fsl_value *logp = fsl_b_cast(b, x, cdt);
  if (softmax) logp = softmax_axis(b, logp, 1, true);
  fx->out[0] = fsl_b_cast(b, class_loss(fx, logp, t, fsl_b_cast(b, w, cdt), red), x->dtype);
  if (softmax && fx->n_out > 1) fx->out[1] = fsl_b_cast(b, logp, x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX NegativeLogLikelihoodLoss (opset 12, 13, 22): -input[n, target, d...]
 *  * weight[target], ignore_index masked, reduction none / sum / mean. */
fsl_status fsl_fission_NegativeLogLikelihoodLoss(fsl_fctx *fx) { return loss_op(fx, false); }

/** ONNX SoftmaxCrossEntropyLoss (opset 12, 13): NLL of log_softmax(scores)
 *  over the class axis; optional output 1 = log_prob. */
fsl_status fsl_fission_SoftmaxCrossEntropyLoss(fsl_fctx *fx) { return loss_op(fx, true); }

/* ------------------------------------------------------------------ */
/* Attention                                                            */
/* ------------------------------------------------------------------ */

typedef struct attn_dims {
  int64_t batch, qh, kvh, sq, total, past, dh, dv;
} attn_dims;

/* [B, S, H*D] -> [B, H, S, D]. */
static fsl_value *split_heads(fsl_builder *b, fsl_value *x, int64_t heads) {
  int64_t d4[4] = {x->dims[0], x->dims[1], heads, x->dims[2] / heads};
  static const int64_t perm[4] = {0, 2, 1, 3};
  return fsl_b_permute(b, fsl_b_reshape(b, x, 4, d4), perm);
}

/* [B, H, S, D] -> [B, S, H*D]. */
static fsl_value *merge_heads(fsl_builder *b, fsl_value *x) {
  if (!x) return NULL;
  static const int64_t perm[4] = {0, 2, 1, 3};
  int64_t d3[3] = {x->dims[0], x->dims[2], x->dims[1] * x->dims[3]};
  return fsl_b_reshape(b, fsl_b_permute(b, x, perm), 3, d3);
}

/* Reads q_num_heads / kv_num_heads and splits 3-D Q, K, V into heads. */
static bool attn_to_4d(fsl_fctx *fx, fsl_value **q, fsl_value **k, fsl_value **v) {
  int64_t qh = fsl_attr_int(fx->node, "q_num_heads", 0);
  int64_t kvh = fsl_attr_int(fx->node, "kv_num_heads", 0);
  if (qh <= 0 || kvh <= 0)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "3-D inputs need attributes q_num_heads and kv_num_heads > 0"), false;
  if ((*q)->dims[2] % qh || (*k)->dims[2] % kvh || (*v)->dims[2] % kvh)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "hidden sizes %lld, %lld, %lld are not divisible by the head counts %lld, %lld",
                       (long long)(*q)->dims[2], (long long)(*k)->dims[2], (long long)(*v)->dims[2],
                       (long long)qh, (long long)kvh), false;
  *q = split_heads(fx->b, *q, qh);
  *k = split_heads(fx->b, *k, kvh);
  *v = split_heads(fx->b, *v, kvh);
  return fx->b->st == FSL_OK;
}

/* Appends the past cache (4-D, may be NULL) on the sequence axis. */
static fsl_value *with_past(fsl_builder *b, fsl_value *past, fsl_value *x) {
  if (!past || !x) return x;
  fsl_value *xs[2] = {past, x};
  return fsl_b_concat(b, xs, 2, 2);
}

/* Checks the 4-D Q, K, V shapes and fills d. */
static bool attn_check(fsl_fctx *fx, const fsl_value *q, const fsl_value *k, const fsl_value *v,
                       int64_t past, attn_dims *d) {
  char bq[96], bk[96], bv[96];
  d->batch = q->dims[0], d->qh = q->dims[1], d->sq = q->dims[2], d->dh = q->dims[3];
  d->kvh = k->dims[1], d->total = k->dims[2], d->dv = v->dims[3], d->past = past;
  bool ok = k->dims[0] == d->batch && v->dims[0] == d->batch && k->dims[3] == d->dh &&
            v->dims[1] == d->kvh && v->dims[2] == d->total && d->kvh > 0 && d->qh % d->kvh == 0;
  if (!ok)
    fsl_fx_fail(fx, FSL_ERR_SHAPE,
                "expected Q [B, H, S, D], K [B, Hkv, L, D], V [B, Hkv, L, Dv] with Hkv dividing H, got [%s], [%s], [%s]",
                fsl_shape_str(q->rank, q->dims, bq, sizeof bq), fsl_shape_str(k->rank, k->dims, bk, sizeof bk),
                fsl_shape_str(v->rank, v->dims, bv, sizeof bv));
  return ok;
}

/* Causal keep mask [S_q, L]: key j visible from query i when j <= i + past. */
static fsl_value *causal_keep(fsl_builder *b, const attn_dims *d) {
  int64_t dims[2] = {d->sq, d->total};
  fsl_value *c = fsl_b_const(b, FSL_DT_BOOL, 2, dims, NULL);
  if (!c) return NULL;
  uint8_t *m = c->data;
  for (int64_t i = 0; i < d->sq; i++)
    for (int64_t j = 0; j < d->total; j++) m[i * d->total + j] = j <= i + d->past;
  return c;
}

/* Padding keep mask [B, 1, 1, L]: key j of batch n visible when j < nonpad[n]. */
static fsl_value *nonpad_keep(fsl_builder *b, fsl_value *nonpad, const attn_dims *d) {
  int64_t di[4] = {1, 1, 1, d->total}, dn[4] = {d->batch, 1, 1, 1};
  fsl_value *pos = fsl_b_const(b, FSL_DT_I64, 4, di, NULL);
  if (!pos) return NULL;
  for (int64_t j = 0; j < d->total; j++) ((int64_t *)pos->data)[j] = j;
  fsl_value *n = fsl_b_reshape(b, fsl_b_cast(b, nonpad, FSL_DT_I64), 4, dn);
  return fsl_b_binary(b, FSL_OP_lt, pos, n);
}

/* attn_mask padded on its last axis to L keys (False / -inf). */
static fsl_value *pad_mask(fsl_fctx *fx, fsl_value *m, int64_t total) {
  if (m->rank < 1 || m->dims[m->rank - 1] > total) {
    char buf[96];
    fsl_fx_fail(fx, FSL_ERR_SHAPE, "attn_mask [%s] has more than %lld keys on its last axis",
                fsl_shape_str(m->rank, m->dims, buf, sizeof buf), (long long)total);
    return NULL;
  }
  int64_t extra = total - m->dims[m->rank - 1];
  if (extra == 0) return m;
  int64_t pads[2 * FSL_MAX_RANK] = {0};
  pads[m->rank + m->rank - 1] = extra;
  return fsl_b_pad(fx->b, m, pads, 0, m->dtype == FSL_DT_BOOL ? 0.0 : -INFINITY);
}

/* Scores [B, H, S_q, L] = (Q * scale) K^T in dtype cdt, grouped so that
 * each K head serves H / Hkv query heads without being repeated. */
static fsl_value *attn_scores(fsl_builder *b, fsl_value *q, fsl_value *k, const attn_dims *d,
                              double scale, fsl_dtype cdt) {
  int64_t r = d->qh / d->kvh;
  int64_t dg[4] = {d->batch, d->kvh, r * d->sq, d->dh}, ds[4] = {d->batch, d->qh, d->sq, d->total};
  static const int64_t tr[4] = {0, 1, 3, 2};
  fsl_value *qs = fsl_b_binary_scalar(b, FSL_OP_mul, q, scale);
  fsl_value *s = fsl_b_matmul(b, fsl_b_reshape(b, qs, 4, dg), fsl_b_permute(b, k, tr));
  return fsl_b_cast(b, fsl_b_reshape(b, s, 4, ds), cdt);
}

/* probs [B, H, S_q, L] x V [B, Hkv, L, Dv] -> [B, H, S_q, Dv], grouped. */
static fsl_value *attn_apply(fsl_builder *b, fsl_value *p, fsl_value *v, const attn_dims *d) {
  int64_t r = d->qh / d->kvh;
  int64_t dg[4] = {d->batch, d->kvh, r * d->sq, d->total}, dout[4] = {d->batch, d->qh, d->sq, d->dv};
  fsl_value *o = fsl_b_matmul(b, fsl_b_reshape(b, p, 4, dg), fsl_b_cast(b, v, p ? p->dtype : v->dtype));
  return fsl_b_reshape(b, o, 4, dout);
}

/* Computation dtype of the softmax: softmax_precision, or the input's
 * (float32 for float16 / bfloat16). */
static bool attn_cdt(fsl_fctx *fx, fsl_dtype dt, fsl_dtype *cdt) {
  int64_t sp = fsl_attr_int(fx->node, "softmax_precision", 0);
  *cdt = fsl_acc_dtype(dt);
  if (sp == 0) return true;
  if (sp != FSL_DT_F32 && sp != FSL_DT_F64 && sp != FSL_DT_F16 && sp != FSL_DT_BF16)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'softmax_precision' is %lld, expected a float type",
                       (long long)sp), false;
  *cdt = (fsl_dtype)sp;
  return true;
}

/* The mask terms: *bias (float, added) and *keep (bool, where). */
static void attn_masks(fsl_fctx *fx, const attn_dims *d, fsl_dtype cdt, fsl_value **bias, fsl_value **keep) {
  fsl_builder *b = fx->b;
  fsl_value *m = in_opt(fx, 3), *nonpad = in_opt(fx, 6);
  *bias = *keep = NULL;
  if (m) {
    m = pad_mask(fx, m, d->total);
    if (m && m->dtype == FSL_DT_BOOL) *keep = m;
    else *bias = fsl_b_cast(b, m, cdt);
  }
  if (fsl_attr_int(fx->node, "is_causal", 0)) *keep = and_opt(b, *keep, causal_keep(b, d));
  if (nonpad) *keep = and_opt(b, *keep, nonpad_keep(b, nonpad, d));
}

/** ONNX Attention (opset 23, 24): softmax(softcap(Q K^T * scale) + mask) V,
 *  3-D or 4-D inputs, GQA, KV cache (present_key / present_value) and the
 *  qk_matmul_output modes (0 raw, 1 softcapped, 2 masked, 3 softmax). */
fsl_status fsl_fission_Attention(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *q = fsl_fx_req(fx, 0), *k = fsl_fx_req(fx, 1), *v = fsl_fx_req(fx, 2);
  fsl_value *pk = in_opt(fx, 4), *pv = in_opt(fx, 5);
  if (!q || !k || !v) return fsl_fx_done(fx);
  if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected Q, K, V all 3-D or all 4-D, got ranks %d, %d, %d", q->rank,
                       k->rank, v->rank);
  if (!fsl_dtype_is_float(q->dtype)) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "Q must have a float dtype");
  bool is3d = q->rank == 3;
  if ((pk && pk->rank != 4) || (pv && pv->rank != 4) || (!pk) != (!pv))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected past_key and past_value both 4-D or both omitted");
  if (is3d && !attn_to_4d(fx, &q, &k, &v)) return fsl_fx_done(fx);
  k = with_past(b, pk, k);
  v = with_past(b, pv, v);
  attn_dims d;
  fsl_dtype dt = q->dtype, cdt;
  if (!k || !v || !attn_check(fx, q, k, v, pk ? pk->dims[2] : 0, &d) || !attn_cdt(fx, dt, &cdt))
    return fsl_fx_done(fx);
  double scale = fsl_attr_find(fx->node, "scale") ? fsl_attr_float(fx->node, "scale", 1.0)
                                                   : 1.0 / sqrt((double)d.dh);
  double softcap = fsl_attr_float(fx->node, "softcap", 0.0);
  int64_t mode = fsl_attr_int(fx->node, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'qk_matmul_output_mode' is %lld, expected 0..3", (long long)mode);
  fsl_value *s = attn_scores(b, q, k, &d, scale, cdt), *raw = s;
  if (softcap > 0.0)
    s = fsl_b_binary_scalar(b, FSL_OP_mul, fsl_b_unary(b, FSL_OP_tanh, fsl_b_binary_scalar(b, FSL_OP_div, s, softcap)),
                            softcap);
  fsl_value *qk = mode == 0 ? raw : s, *bias, *keep;
  attn_masks(fx, &d, cdt, &bias, &keep);
  if (bias) s = fsl_b_binary(b, FSL_OP_add, s, bias);
  if (keep) s = fsl_b_where(b, keep, s, fsl_b_scalar(b, cdt, -INFINITY));
  if (mode == 2) qk = s;
  fsl_value *p = softmax_axis(b, s, 3, false);
  if (mode == 3) qk = p;
  fsl_value *o = fsl_b_cast(b, attn_apply(b, p, v, &d), dt);
  fx->out[0] = is3d ? merge_heads(b, o) : o;
  if (fx->n_out > 1) fx->out[1] = k;
  if (fx->n_out > 2) fx->out[2] = v;
  if (fx->n_out > 3) fx->out[3] = fsl_b_cast(b, qk, dt);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* RotaryEmbedding                                                      */
/* ------------------------------------------------------------------ */

/* cos / sin cache as [B, 1, S, half] (4-D X) or [B, S, 1, half] (3-D X,
 * split into heads); gathered by position_ids when given. */
static fsl_value *rope_cache(fsl_builder *b, fsl_value *cache, fsl_value *pos, bool x4d, fsl_dtype dt) {
  if (pos) cache = fsl_b_gather(b, cache, pos, 0);
  if (!cache) return NULL;
  return fsl_b_cast(b, unsqueeze(b, cache, x4d ? 1 : 2), dt);
}

/* Rotates x (last axis = rot dims): halves or even/odd pairs. */
static fsl_value *rope_rotate(fsl_builder *b, fsl_value *x, fsl_value *cs, fsl_value *sn, bool inter) {
  int r = x->rank;
  int64_t half = x->dims[r - 1] / 2;
  fsl_value *x1, *x2;
  if (inter) {
    int64_t dp[FSL_MAX_RANK];
    memcpy(dp, x->dims, sizeof(int64_t) * (size_t)r);
    dp[r - 1] = half, dp[r] = 2;
    fsl_value *xp = fsl_b_reshape(b, x, r + 1, dp);
    x1 = fsl_b_reshape(b, fsl_b_slice_axis(b, xp, r, 0, 1), r, dp);
    x2 = fsl_b_reshape(b, fsl_b_slice_axis(b, xp, r, 1, 1), r, dp);
  } else {
    x1 = fsl_b_slice_axis(b, x, r - 1, 0, half);
    x2 = fsl_b_slice_axis(b, x, r - 1, half, half);
  }
  fsl_value *re = fsl_b_binary(b, FSL_OP_sub, fsl_b_binary(b, FSL_OP_mul, cs, x1), fsl_b_binary(b, FSL_OP_mul, sn, x2));
  fsl_value *im = fsl_b_binary(b, FSL_OP_add, fsl_b_binary(b, FSL_OP_mul, sn, x1), fsl_b_binary(b, FSL_OP_mul, cs, x2));
  if (!re || !im) return NULL;
  if (!inter) {
    fsl_value *parts[2] = {re, im};
    return fsl_b_concat(b, parts, 2, r - 1);
  }
  fsl_value *parts[2] = {unsqueeze(b, re, r), unsqueeze(b, im, r)};
  return fsl_b_reshape(b, fsl_b_concat(b, parts, 2, r), r, x->dims);
}

/** ONNX RotaryEmbedding (opset 23): rotary position embedding of the first
 *  rotary_embedding_dim features of each head (halves or interleaved). */
fsl_status fsl_fission_RotaryEmbedding(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *cs = fsl_fx_req(fx, 1), *sn = fsl_fx_req(fx, 2), *pos = in_opt(fx, 3);
  if (!x || !cs || !sn) return fsl_fx_done(fx);
  if (x->rank != 3 && x->rank != 4) return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected X 3-D or 4-D, got rank %d", x->rank);
  bool x4d = x->rank == 4;
  fsl_value *xh = x;
  if (!x4d) {
    int64_t nh = fsl_attr_int(fx->node, "num_heads", 0);
    if (nh <= 0 || x->dims[2] % nh)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "3-D X needs attribute num_heads > 0 dividing %lld", (long long)x->dims[2]);
    int64_t d4[4] = {x->dims[0], x->dims[1], nh, x->dims[2] / nh};
    xh = fsl_b_reshape(b, x, 4, d4);
    if (!xh) return fsl_fx_done(fx);
  }
  int64_t head = xh->dims[3];
  int64_t rot = fsl_attr_int(fx->node, "rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot < 0 || rot > head || rot % 2)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "rotary_embedding_dim %lld must be even and <= head size %lld",
                       (long long)rot, (long long)head);
  fsl_dtype cdt = fsl_acc_dtype(x->dtype);
  fsl_value *c4 = rope_cache(b, cs, pos, x4d, cdt), *s4 = rope_cache(b, sn, pos, x4d, cdt);
  if (!c4 || !s4) return fsl_fx_done(fx);
  if (c4->dims[3] != rot / 2 || s4->dims[3] != rot / 2)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "cos/sin cache last dim %lld, %lld, expected rotary_embedding_dim/2 = %lld",
                       (long long)c4->dims[3], (long long)s4->dims[3], (long long)(rot / 2));
  fsl_value *xc = fsl_b_cast(b, xh, cdt);
  fsl_value *y = rope_rotate(b, rot < head ? fsl_b_slice_axis(b, xc, 3, 0, rot) : xc, c4, s4,
                             fsl_attr_int(fx->node, "interleaved", 0) != 0);
  if (y && rot < head) {
    fsl_value *parts[2] = {y, fsl_b_slice_axis(b, xc, 3, rot, head - rot)};
    y = fsl_b_concat(b, parts, 2, 3);
  }
  fx->out[0] = fsl_b_cast(b, fsl_b_reshape(b, y, x->rank, x->dims), x->dtype);
  return fsl_fx_done(fx);
}
