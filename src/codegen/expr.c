/*
 * expr.c — the elementwise expression printer: type names, literals and the
 * expression of each elementwise primitive over its operand expressions.
 */
#include "codegen/cg.h"

/* math function suffix: the dialect's for float ("f" in C: expf), "" for double */
static const char *fsuf(const em *e, fsl_dtype dt) { return is_f32c(dt) ? e->d->f32_math_suffix : ""; }
/* helper suffix: "f" or "d" */
static const char *hsuf(fsl_dtype dt) { return is_f32c(dt) ? "f" : "d"; }

/* A C literal for element 0 of a buffer of dtype dt. */
void fsl_cg_literal(const fsl_dialect *d, fsl_dtype dt, const void *p, char *dst) {
  if (is_f(dt)) {
    double v = fsl_load_f64(dt, p, 0);
    const char *cast = is_f32c(dt) ? "(float)" : "(double)";
    if (isnan(v)) snprintf(dst, CLEN, "%sNAN", cast);
    else if (isinf(v)) snprintf(dst, CLEN, "%s(%sINFINITY)", cast, v < 0 ? "-" : "");
    else snprintf(dst, CLEN, "%s%a", cast, v);
    return;
  }
  if (is_s(dt)) {
    int64_t v = fsl_load_i64(dt, p, 0);
    if (v == INT64_MIN) snprintf(dst, CLEN, "((int64_t)INT64_MIN)");
    else snprintf(dst, CLEN, "((%s)%lldLL)", fsl_cg_ctype(d, dt), (long long)v);
    return;
  }
  snprintf(dst, CLEN, "((%s)%lluULL)", fsl_cg_ctype(d, dt), (unsigned long long)fsl_load_u64(dt, p, 0));
}

const char *fsl_cg_float_unary(fsl_op op) {
  switch (op) {
  case FSL_OP_exp: return "exp";
  case FSL_OP_log: return "log";
  case FSL_OP_sqrt: return "sqrt";
  case FSL_OP_tanh: return "tanh";
  case FSL_OP_erf: return "erf";
  case FSL_OP_sin: return "sin";
  case FSL_OP_cos: return "cos";
  case FSL_OP_tan: return "tan";
  case FSL_OP_asin: return "asin";
  case FSL_OP_acos: return "acos";
  case FSL_OP_atan: return "atan";
  case FSL_OP_sinh: return "sinh";
  case FSL_OP_cosh: return "cosh";
  case FSL_OP_asinh: return "asinh";
  case FSL_OP_acosh: return "acosh";
  case FSL_OP_atanh: return "atanh";
  case FSL_OP_floor: return "floor";
  case FSL_OP_ceil: return "ceil";
  case FSL_OP_round: return "nearbyint";
  case FSL_OP_abs: return "fabs";
  default: return NULL;
  }
}

/* Integer types whose every value int32_t holds. */
static bool fits_i32(fsl_dtype dt) {
  return dt == FSL_DT_U8 || dt == FSL_DT_I8 || dt == FSL_DT_U16 || dt == FSL_DT_I16 || dt == FSL_DT_I32;
}

/* The one value of constant v through expands (a scalar broadcast). */
static bool const_scalar(const fsl_value *v, double *out) {
  v = fsl_cg_unexpand(v);
  if (!v->data || fsl_value_numel(v) != 1) return false;
  *out = fsl_load_f64(v->dtype, v->data, 0);
  return true;
}

/* Whether float value v is min(max(x, lo), hi) (either order) with
 * constants lo <= hi inside int8/uint8/int16/uint16 `to`'s range: what
 * QuantizeLinear's saturation computes before its cast (quant.c).  Then
 * the cast truncates a value in range, or NaN. */
static bool clamped_into(const fsl_value *v, fsl_dtype to) {
  double lo = to == FSL_DT_U8 || to == FSL_DT_U16 ? 0 : to == FSL_DT_I8 ? -128 : to == FSL_DT_I16 ? -32768 : 1;
  double hi = to == FSL_DT_U8 ? 255 : to == FSL_DT_I8 ? 127 : to == FSL_DT_U16 ? 65535 : to == FSL_DT_I16 ? 32767 : 0;
  bool has_lo = false, has_hi = false;
  for (int k = 0; k < 2 && v->producer && v->producer->n_in == 2; k++) {
    const fsl_node *p = v->producer;
    double c;
    if (p->op == FSL_OP_max && !has_lo && const_scalar(p->in[1], &c) && c >= lo && c <= hi) has_lo = true;
    else if (p->op == FSL_OP_min && !has_hi && const_scalar(p->in[1], &c) && c >= lo && c <= hi) has_hi = true;
    else break;
    v = p->in[0];
  }
  return has_lo && has_hi;
}

static bool ew_cast(em *e, const fsl_node *n, const char *a, char *ex, size_t cap) {
  fsl_dtype from = n->in[0]->dtype, to = n->out[0]->dtype;
  const char *T = fsl_cg_ctype(e->d, to);
  if (from == to) snprintf(ex, cap, "%s", a);
  else if (to == FSL_DT_BOOL) snprintf(ex, cap, "(uint8_t)(%s != 0)", a);
  else if (is_f(from) && is_f(to)) snprintf(ex, cap, "(%s)%s", T, a);
  /* a saturated float (QuantizeLinear): truncation through int32, NaN to 0
   * as fsl_f2i; vector conversions where the int64 path is scalar */
  else if (is_f(from) && clamped_into(n->in[0], to)) snprintf(ex, cap, "(%s)(int32_t)(%s == %s ? %s : 0)", T, a, a, a);
  else if (is_f(from)) snprintf(ex, cap, "(%s)%s((double)%s)", T, is_s(to) ? "fsl_f2i" : "fsl_f2u", a);
  /* up to 32 bits: int32_t holds the value, one rounding to the float type as through int64 */
  else if (is_f(to) && fits_i32(from)) snprintf(ex, cap, "(%s)(int32_t)%s", T, a);
  else if (is_f(to)) snprintf(ex, cap, "(%s)(double)(%s)%s", T, is_s(from) ? "int64_t" : "uint64_t", a);
  else snprintf(ex, cap, "(%s)(%s)%s", T, is_s(from) ? "int64_t" : "uint64_t", a);
  return true;
}

/* Whether v = x - m with m, through broadcasts, a keepdims reduce_max of
 * x itself: every element is at most its row's max, so v <= 0 or NaN
 * (NaN or +inf in the row), exact in float (ONNX Softmax's fission). */
static bool below_its_max(const fsl_value *v) {
  const fsl_node *s = v->producer;
  if (!s || s->op != FSL_OP_sub || s->n_in != 2) return false;
  const fsl_value *x = s->in[0], *m = fsl_cg_unexpand(s->in[1]);
  const fsl_node *r = m->producer;
  return r && r->op == FSL_OP_reduce_max && r->in[0] == x && m->rank == x->rank;
}

/* The C expression of elementwise node n over operand expressions a[]. */
bool fsl_cg_ew_expr(em *e, const fsl_node *n, char a[3][CLEN], char *ex, size_t cap) {
  fsl_dtype dt = n->in[n->op == FSL_OP_where ? 1 : 0]->dtype;
  const char *T = fsl_cg_ctype(e->d, n->out[0]->dtype);
  fsl_op op = n->op;
  if (op == FSL_OP_cast) return ew_cast(e, n, a[0], ex, cap);
  if (op == FSL_OP_where) {
    snprintf(ex, cap, "%s ? %s : %s", a[0], a[1], a[2]);
    return true;
  }
  bool cmp = op == FSL_OP_lt || op == FSL_OP_le || op == FSL_OP_gt || op == FSL_OP_ge || op == FSL_OP_eq;
  const char *cop = op == FSL_OP_lt ? "<" : op == FSL_OP_le ? "<=" : op == FSL_OP_gt ? ">" : op == FSL_OP_ge ? ">=" : "==";
  if (is_f(dt)) {
    const char *s = fsuf(e, dt), *h = hsuf(dt);
    const char *one = is_f32c(dt) ? "1.0f" : "1.0";
    /* float32: the function the op table names (ops.def; branch-free
     * fsl_expf/fsl_tanhf/fsl_erff from the prelude where they exist) */
    const fsl_op_info *oi = fsl_op_get(op);
    if (is_f32c(dt) && op == FSL_OP_exp && below_its_max(n->in[0])) {
      snprintf(ex, cap, "fsl_expf_le0(%s)", a[0]);
      return true;
    }
    if (is_f32c(dt) && oi->cfn) {
      if (n->n_in == 1) snprintf(ex, cap, "%s(%s)", oi->cfn, a[0]);
      else snprintf(ex, cap, "%s(%s, %s)", oi->cfn, a[0], a[1]);
      return true;
    }
    const char *fn = fsl_cg_float_unary(op);
    if (fn) {
      snprintf(ex, cap, "%s%s(%s)", fn, s, a[0]);
      return true;
    }
    if (cmp) {
      snprintf(ex, cap, "(uint8_t)(%s %s %s)", a[0], cop, a[1]);
      return true;
    }
    switch (op) {
    case FSL_OP_neg: snprintf(ex, cap, "-%s", a[0]); return true;
    case FSL_OP_rsqrt: snprintf(ex, cap, "%s / sqrt%s(%s)", one, s, a[0]); return true;
    case FSL_OP_recip: snprintf(ex, cap, "%s / %s", one, a[0]); return true;
    case FSL_OP_sigmoid: snprintf(ex, cap, "fsl_sigmoid%s(%s)", h, a[0]); return true;
    case FSL_OP_sign: snprintf(ex, cap, "fsl_sign%s(%s)", h, a[0]); return true;
    case FSL_OP_isnan: snprintf(ex, cap, "(uint8_t)(%s != %s)", a[0], a[0]); return true;
    case FSL_OP_isinf: {
      bool pos = fsl_attr_int(n, "detect_positive", 1) != 0, neg = fsl_attr_int(n, "detect_negative", 1) != 0;
      snprintf(ex, cap, "(uint8_t)(isinf(%s) && ((%s > 0 && %d) || (%s < 0 && %d)))", a[0], a[0], pos, a[0], neg);
      return true;
    }
    case FSL_OP_add: snprintf(ex, cap, "%s + %s", a[0], a[1]); return true;
    case FSL_OP_sub: snprintf(ex, cap, "%s - %s", a[0], a[1]); return true;
    case FSL_OP_mul: snprintf(ex, cap, "%s * %s", a[0], a[1]); return true;
    case FSL_OP_div: snprintf(ex, cap, "%s / %s", a[0], a[1]); return true;
    case FSL_OP_pow: snprintf(ex, cap, "pow%s(%s, %s)", s, a[0], a[1]); return true;
    case FSL_OP_max: snprintf(ex, cap, "fsl_max%s(%s, %s)", h, a[0], a[1]); return true;
    case FSL_OP_min: snprintf(ex, cap, "fsl_min%s(%s, %s)", h, a[0], a[1]); return true;
    case FSL_OP_mod:
      if (fsl_attr_int(n, "fmod", 0)) snprintf(ex, cap, "fmod%s(%s, %s)", s, a[0], a[1]);
      else snprintf(ex, cap, "fsl_fmodfloor%s(%s, %s)", h, a[0], a[1]);
      return true;
    default: return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "%s on %s", fsl_op_name(op), fsl_dtype_name(dt));
    }
  }
  if (dt == FSL_DT_BOOL) {
    switch (op) {
    case FSL_OP_not: snprintf(ex, cap, "(uint8_t)!%s", a[0]); return true;
    case FSL_OP_eq: snprintf(ex, cap, "(uint8_t)((%s != 0) == (%s != 0))", a[0], a[1]); return true;
    case FSL_OP_and: snprintf(ex, cap, "(uint8_t)((%s != 0) && (%s != 0))", a[0], a[1]); return true;
    case FSL_OP_or: snprintf(ex, cap, "(uint8_t)((%s != 0) || (%s != 0))", a[0], a[1]); return true;
    case FSL_OP_xor: snprintf(ex, cap, "(uint8_t)((%s != 0) != (%s != 0))", a[0], a[1]); return true;
    default: return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "%s on bool", fsl_op_name(op));
    }
  }
  bool sg = is_s(dt);
  int bits = (int)fsl_dtype_size(dt) * 8;
  const char *W = sg ? "int64_t" : "uint64_t";
  if (cmp) {
    snprintf(ex, cap, "(uint8_t)(%s %s %s)", a[0], cop, a[1]);
    return true;
  }
  switch (op) {
  case FSL_OP_neg: snprintf(ex, cap, "(%s)(0 - (uint64_t)%s)", T, a[0]); return true;
  case FSL_OP_abs:
    if (sg) snprintf(ex, cap, "(%s)(%s < 0 ? 0 - (uint64_t)%s : (uint64_t)%s)", T, a[0], a[0], a[0]);
    else snprintf(ex, cap, "%s", a[0]);
    return true;
  case FSL_OP_sign:
    if (sg) snprintf(ex, cap, "(%s)(%s > 0 ? 1 : %s < 0 ? -1 : 0)", T, a[0], a[0]);
    else snprintf(ex, cap, "(%s)(%s != 0)", T, a[0]);
    return true;
  case FSL_OP_not: snprintf(ex, cap, "(%s)~(uint64_t)%s", T, a[0]); return true;
  case FSL_OP_add: snprintf(ex, cap, "(%s)((uint64_t)%s + (uint64_t)%s)", T, a[0], a[1]); return true;
  case FSL_OP_sub: snprintf(ex, cap, "(%s)((uint64_t)%s - (uint64_t)%s)", T, a[0], a[1]); return true;
  case FSL_OP_mul: snprintf(ex, cap, "(%s)((uint64_t)%s * (uint64_t)%s)", T, a[0], a[1]); return true;
  case FSL_OP_div:
    snprintf(ex, cap, "(%s)fsl_%sdiv((%s)%s, (%s)%s, &e_)", T, sg ? "s" : "u", W, a[0], W, a[1]);
    return true;
  case FSL_OP_mod:
    if (sg)
      snprintf(ex, cap, "(%s)fsl_smod((int64_t)%s, (int64_t)%s, %d, &e_)", T, a[0], a[1],
               fsl_attr_int(n, "fmod", 0) != 0);
    else snprintf(ex, cap, "(%s)fsl_umod((uint64_t)%s, (uint64_t)%s, &e_)", T, a[0], a[1]);
    return true;
  case FSL_OP_pow: snprintf(ex, cap, "(%s)fsl_ipow%s((%s)%s, (%s)%s)", T, sg ? "s" : "u", W, a[0], W, a[1]); return true;
  case FSL_OP_max: snprintf(ex, cap, "%s > %s ? %s : %s", a[0], a[1], a[0], a[1]); return true;
  case FSL_OP_min: snprintf(ex, cap, "%s < %s ? %s : %s", a[0], a[1], a[0], a[1]); return true;
  case FSL_OP_shl:
  case FSL_OP_shr:
    snprintf(ex, cap, "(%s)fsl_sh%s%s((%s)%s, (%s)%s, %d)", T, op == FSL_OP_shl ? "l" : "r", sg ? "s" : "u", W, a[0], W,
             a[1], bits);
    return true;
  case FSL_OP_and: snprintf(ex, cap, "(%s)(%s & %s)", T, a[0], a[1]); return true;
  case FSL_OP_or: snprintf(ex, cap, "(%s)(%s | %s)", T, a[0], a[1]); return true;
  case FSL_OP_xor: snprintf(ex, cap, "(%s)(%s ^ %s)", T, a[0], a[1]); return true;
  default: return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "%s on %s", fsl_op_name(op), fsl_dtype_name(dt));
  }
}
