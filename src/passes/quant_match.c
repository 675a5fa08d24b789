/*
 * quant_match.c — DequantizeLinear and QuantizeLinear after fission,
 * per tensor (quant_match.h).
 */
#include "passes/quant_match.h"

#include <math.h>

static bool is8(fsl_dtype dt) { return dt == FSL_DT_U8 || dt == FSL_DT_I8; }

static void range8(fsl_dtype dt, double *lo, double *hi) {
  *lo = dt == FSL_DT_U8 ? 0 : -128;
  *hi = dt == FSL_DT_U8 ? 255 : 127;
}

bool fsl_const_operand(const fsl_node *n, double *c, int *which) {
  if (n->n_in != 2 || !n->in[0] || !n->in[1]) return false;
  for (int i = 0; i < 2; i++)
    if (fsl_value_uniform_view(n->in[i], c)) {
      *which = i;
      return true;
    }
  return false;
}

bool fsl_match_dequant(const fsl_value *v, fsl_dequant *d) {
  if (!v || v->dtype != FSL_DT_F32 || !v->producer || v->producer->op != FSL_OP_mul) return false;
  const fsl_node *m = v->producer;
  if (m->n_in != 2 || !m->in[0] || !fsl_value_uniform_view(m->in[1], &d->scale) || !(d->scale > 0) ||
      !isfinite(d->scale))
    return false;
  const fsl_value *x = m->in[0];
  d->zero = 0;
  if (x->producer && x->producer->op == FSL_OP_sub) {
    const fsl_node *s = x->producer;
    if (s->n_in != 2 || !s->in[0] || !fsl_value_uniform_view(s->in[1], &d->zero) || d->zero != floor(d->zero))
      return false;
    x = s->in[0];
  }
  if (!x->producer || x->producer->op != FSL_OP_cast || x->producer->n_in < 1 || !x->producer->in[0]) return false;
  d->q = x->producer->in[0];
  if (!is8(d->q->dtype)) return false;
  double lo, hi;
  range8(d->q->dtype, &lo, &hi);
  return d->zero >= lo && d->zero <= hi && fsl_value_numel(d->q) == fsl_value_numel(v);
}

bool fsl_match_quant(const fsl_value *y, fsl_quant *q) {
  if (!y || !is8(y->dtype) || !y->producer || y->producer->op != FSL_OP_cast || y->producer->n_in != 1) return false;
  double lo, hi, c;
  int w;
  range8(y->dtype, &lo, &hi);
  const fsl_value *v = y->producer->in[0];
  /* min(., hi), max(., lo): exactly the type's range */
  if (!v || !v->producer || v->producer->op != FSL_OP_min || !fsl_const_operand(v->producer, &c, &w) || c != hi)
    return false;
  v = v->producer->in[1 - w];
  if (!v->producer || v->producer->op != FSL_OP_max || !fsl_const_operand(v->producer, &c, &w) || c != lo) return false;
  v = v->producer->in[1 - w];
  q->zero = 0;
  if (v->producer && v->producer->op == FSL_OP_add) {
    if (!fsl_const_operand(v->producer, &q->zero, &w) || q->zero != floor(q->zero) || q->zero < lo || q->zero > hi)
      return false;
    v = v->producer->in[1 - w];
  }
  if (!v->producer || v->producer->op != FSL_OP_round || v->producer->n_in != 1 || v->dtype != FSL_DT_F32)
    return false;
  v = v->producer->in[0];
  if (!v || !v->producer || v->dtype != FSL_DT_F32) return false;
  const fsl_node *m = v->producer;
  if (m->op == FSL_OP_div && m->n_in == 2 && m->in[0] && fsl_value_uniform_view(m->in[1], &q->scale)) {
    q->by_recip = false, q->x = m->in[0];
  } else if (m->op == FSL_OP_mul && fsl_const_operand(m, &q->scale, &w)) {
    q->by_recip = true, q->x = m->in[1 - w];
  } else {
    return false;
  }
  q->dtype = y->dtype;
  return q->scale > 0 && isfinite(q->scale) && q->x->dtype == FSL_DT_F32;
}

bool fsl_quant_scalar(const fsl_quant *q, double c, double *out) {
  float x = (float)c, s = (float)q->scale;
  if (isnan(x)) return false;
  float t = nearbyintf(q->by_recip ? x * s : x / s) + (float)q->zero;
  double lo, hi;
  range8(q->dtype, &lo, &hi);
  *out = t < lo ? lo : t > hi ? hi : t;
  return true;
}
