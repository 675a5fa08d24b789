/*
 * elementwise.c — reference semantics of the elementwise primitives.
 * Floats compute in double, signed integers in int64 (wrapping, computed
 * through uint64 so overflow is defined), unsigned integers in uint64; the
 * result is stored back with the output dtype's conversion.
 */
#include "eval/eval_internal.h"
#include <math.h>

/* ---- helpers ---- */

static int dtype_bits(fsl_dtype dt) { return (int)fsl_dtype_size(dt) * 8; }

static double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

static double sign_f(double x) {
  if (isnan(x)) return x;
  return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
}

/* ---- unary ---- */

static double unary_f(fsl_op op, double x) {
  switch (op) {
  case FSL_OP_neg: return -x;
  case FSL_OP_abs: return fabs(x);
  case FSL_OP_exp: return exp(x);
  case FSL_OP_log: return log(x);
  case FSL_OP_sqrt: return sqrt(x);
  case FSL_OP_rsqrt: return 1.0 / sqrt(x);
  case FSL_OP_recip: return 1.0 / x;
  case FSL_OP_tanh: return tanh(x);
  case FSL_OP_erf: return erf(x);
  case FSL_OP_sigmoid: return sigmoid(x);
  case FSL_OP_sin: return sin(x);
  case FSL_OP_cos: return cos(x);
  case FSL_OP_tan: return tan(x);
  case FSL_OP_asin: return asin(x);
  case FSL_OP_acos: return acos(x);
  case FSL_OP_atan: return atan(x);
  case FSL_OP_sinh: return sinh(x);
  case FSL_OP_cosh: return cosh(x);
  case FSL_OP_asinh: return asinh(x);
  case FSL_OP_acosh: return acosh(x);
  case FSL_OP_atanh: return atanh(x);
  case FSL_OP_floor: return floor(x);
  case FSL_OP_ceil: return ceil(x);
  case FSL_OP_round: return nearbyint(x);
  case FSL_OP_sign: return sign_f(x);
  default: FSL_ASSERT(!"not a float unary op"); return 0;
  }
}

static fsl_status unary_float(const fsl_node *n, const void *x, void *y, int64_t cnt) {
  fsl_dtype dt = n->in[0]->dtype;
  if (n->op == FSL_OP_isnan || n->op == FSL_OP_isinf) {
    bool pos = fsl_attr_int(n, "detect_positive", 1) != 0, neg = fsl_attr_int(n, "detect_negative", 1) != 0;
    uint8_t *o = y;
    for (int64_t i = 0; i < cnt; i++) {
      double v = fsl_load_f64(dt, x, i);
      if (n->op == FSL_OP_isnan) o[i] = isnan(v) != 0;
      else o[i] = isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
    }
    return FSL_OK;
  }
  if (dt == FSL_DT_F32) {
    const float *a = x;
    float *o = y;
    for (int64_t i = 0; i < cnt; i++) o[i] = (float)unary_f(n->op, (double)a[i]);
    return FSL_OK;
  }
  for (int64_t i = 0; i < cnt; i++) fsl_store_f64(dt, y, i, unary_f(n->op, fsl_load_f64(dt, x, i)));
  return FSL_OK;
}

static fsl_status unary_int(const fsl_node *n, const void *x, void *y, int64_t cnt) {
  fsl_dtype dt = n->in[0]->dtype;
  bool sgn = fsl_dtype_is_signed(dt);
  for (int64_t i = 0; i < cnt; i++) {
    if (dt == FSL_DT_BOOL) { /* only `not` is defined on bool */
      ((uint8_t *)y)[i] = !((const uint8_t *)x)[i];
      continue;
    }
    uint64_t u = fsl_load_u64(dt, x, i), r;
    int64_t s = (int64_t)u;
    switch (n->op) {
    case FSL_OP_neg: r = 0 - u; break;
    case FSL_OP_abs: r = (sgn && s < 0) ? 0 - u : u; break;
    case FSL_OP_sign: r = sgn ? (uint64_t)(int64_t)(s > 0 ? 1 : s < 0 ? -1 : 0) : (u != 0); break;
    case FSL_OP_not: r = ~u; break;
    default: return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "not defined on %s", fsl_dtype_name(dt));
    }
    fsl_store_u64(dt, y, i, r);
  }
  return FSL_OK;
}

/* Cast with ONNX semantics: float -> int truncates, -> bool is x != 0. */
static fsl_status cast(const fsl_node *n, const void *x, void *y, int64_t cnt) {
  fsl_dtype from = n->in[0]->dtype, to = n->out[0]->dtype;
  if (from == to) {
    memcpy(y, x, (size_t)cnt * fsl_dtype_size(from));
    return FSL_OK;
  }
  if (fsl_dtype_is_float(from)) {
    for (int64_t i = 0; i < cnt; i++) fsl_store_f64(to, y, i, fsl_load_f64(from, x, i));
  } else if (fsl_dtype_is_signed(from)) {
    for (int64_t i = 0; i < cnt; i++) fsl_store_i64(to, y, i, fsl_load_i64(from, x, i));
  } else {
    for (int64_t i = 0; i < cnt; i++) fsl_store_u64(to, y, i, fsl_load_u64(from, x, i));
  }
  return FSL_OK;
}

/* ---- binary ---- */

static double fmod_floor(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

static double binary_f(fsl_op op, double a, double b, bool cfmod) {
  switch (op) {
  case FSL_OP_add: return a + b;
  case FSL_OP_sub: return a - b;
  case FSL_OP_mul: return a * b;
  case FSL_OP_div: return a / b;
  case FSL_OP_pow: return pow(a, b);
  case FSL_OP_max: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
  case FSL_OP_min: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
  case FSL_OP_mod: return cfmod ? fmod(a, b) : fmod_floor(a, b);
  case FSL_OP_lt: return a < b;
  case FSL_OP_le: return a <= b;
  case FSL_OP_gt: return a > b;
  case FSL_OP_ge: return a >= b;
  case FSL_OP_eq: return a == b;
  default: FSL_ASSERT(!"not a float binary op"); return 0;
  }
}

/* Integer power by squaring, wrapping; negative exponents give 1/a^-b
 * truncated (0 unless |a| == 1). */
static uint64_t ipow_s(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (uint64_t)((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e; e >>= 1) {
    if (e & 1) r *= x;
    x *= x;
  }
  return r;
}
static uint64_t ipow_u(uint64_t x, uint64_t e) {
  uint64_t r = 1;
  for (; e; e >>= 1) {
    if (e & 1) r *= x;
    x *= x;
  }
  return r;
}

/* Signed integer op on int64 (wrapping).  *ok false on division by zero. */
static uint64_t binary_s(fsl_op op, int64_t a, int64_t b, bool cfmod, int bits, bool *ok) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case FSL_OP_add: return ua + ub;
  case FSL_OP_sub: return ua - ub;
  case FSL_OP_mul: return ua * ub;
  case FSL_OP_div:
    if (b == 0) { *ok = false; return 0; }
    if (b == -1) return 0 - ua;
    return (uint64_t)(a / b);
  case FSL_OP_mod: {
    if (b == 0) { *ok = false; return 0; }
    if (b == -1) return 0;
    int64_t r = a % b;
    if (!cfmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return (uint64_t)r;
  }
  case FSL_OP_pow: return ipow_s(a, b);
  case FSL_OP_max: return (uint64_t)(a > b ? a : b);
  case FSL_OP_min: return (uint64_t)(a < b ? a : b);
  case FSL_OP_shl: return (b < 0 || b >= bits) ? 0 : ua << b;
  case FSL_OP_shr: return (b < 0 || b >= bits) ? (a < 0 ? UINT64_MAX : 0) : (uint64_t)(a >> b);
  case FSL_OP_lt: return a < b;
  case FSL_OP_le: return a <= b;
  case FSL_OP_gt: return a > b;
  case FSL_OP_ge: return a >= b;
  case FSL_OP_eq: return a == b;
  case FSL_OP_and: return ua & ub;
  case FSL_OP_or: return ua | ub;
  case FSL_OP_xor: return ua ^ ub;
  default: FSL_ASSERT(!"not an int binary op"); return 0;
  }
}

static uint64_t binary_u(fsl_op op, uint64_t a, uint64_t b, int bits, bool *ok) {
  switch (op) {
  case FSL_OP_add: return a + b;
  case FSL_OP_sub: return a - b;
  case FSL_OP_mul: return a * b;
  case FSL_OP_div:
    if (b == 0) { *ok = false; return 0; }
    return a / b;
  case FSL_OP_mod:
    if (b == 0) { *ok = false; return 0; }
    return a % b;
  case FSL_OP_pow: return ipow_u(a, b);
  case FSL_OP_max: return a > b ? a : b;
  case FSL_OP_min: return a < b ? a : b;
  case FSL_OP_shl: return b >= (uint64_t)bits ? 0 : a << b;
  case FSL_OP_shr: return b >= (uint64_t)bits ? 0 : a >> b;
  case FSL_OP_lt: return a < b;
  case FSL_OP_le: return a <= b;
  case FSL_OP_gt: return a > b;
  case FSL_OP_ge: return a >= b;
  case FSL_OP_eq: return a == b;
  case FSL_OP_and: return a & b;
  case FSL_OP_or: return a | b;
  case FSL_OP_xor: return a ^ b;
  default: FSL_ASSERT(!"not an int binary op"); return 0;
  }
}

static fsl_status binary(const fsl_node *n, const void *a, const void *b, void *y, int64_t cnt) {
  fsl_dtype dt = n->in[0]->dtype, odt = n->out[0]->dtype;
  bool cfmod = fsl_attr_int(n, "fmod", 0) != 0, ok = true;
  int bits = dtype_bits(dt);
  if (fsl_dtype_is_float(dt)) {
    if (dt == FSL_DT_F32 && odt == FSL_DT_F32) {
      const float *fa = a, *fb = b;
      float *o = y;
      for (int64_t i = 0; i < cnt; i++) o[i] = (float)binary_f(n->op, fa[i], fb[i], cfmod);
      return FSL_OK;
    }
    for (int64_t i = 0; i < cnt; i++)
      fsl_store_f64(odt, y, i, binary_f(n->op, fsl_load_f64(dt, a, i), fsl_load_f64(dt, b, i), cfmod));
    return FSL_OK;
  }
  if (dt == FSL_DT_BOOL) { /* eq, and, or, xor */
    const uint8_t *pa = a, *pb = b;
    uint8_t *o = y;
    for (int64_t i = 0; i < cnt; i++) {
      bool x = pa[i] != 0, z = pb[i] != 0;
      switch (n->op) {
      case FSL_OP_eq: o[i] = x == z; break;
      case FSL_OP_and: o[i] = x && z; break;
      case FSL_OP_or: o[i] = x || z; break;
      case FSL_OP_xor: o[i] = x != z; break;
      default: return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "not defined on bool");
      }
    }
    return FSL_OK;
  }
  bool sgn = fsl_dtype_is_signed(dt), cmp = fsl_op_bool_out(n->op);
  for (int64_t i = 0; i < cnt && ok; i++) {
    uint64_t r = sgn ? binary_s(n->op, fsl_load_i64(dt, a, i), fsl_load_i64(dt, b, i), cfmod, bits, &ok)
                     : binary_u(n->op, fsl_load_u64(dt, a, i), fsl_load_u64(dt, b, i), bits, &ok);
    if (cmp) ((uint8_t *)y)[i] = r != 0;
    else fsl_store_u64(odt, y, i, r);
  }
  if (!ok) return fsl_node_errorf(n, FSL_ERR_RUNTIME, "integer division by zero");
  return FSL_OK;
}

/* where(cond, a, b): a byte copy of the chosen element. */
static fsl_status where(const fsl_node *n, const void *const *in, void *y, int64_t cnt) {
  const uint8_t *c = in[0];
  const char *a = in[1], *b = in[2];
  size_t esz = fsl_dtype_size(n->out[0]->dtype);
  char *o = y;
  for (int64_t i = 0; i < cnt; i++) {
    const char *src = c[i] ? a : b;
    memcpy(o + (size_t)i * esz, src + (size_t)i * esz, esz);
  }
  return FSL_OK;
}

fsl_status fsl_ref_elementwise(const fsl_node *n, const void *const *in, void *out) {
  int64_t cnt = fsl_value_numel(n->out[0]);
  if (n->op == FSL_OP_where) return where(n, in, out, cnt);
  if (n->op == FSL_OP_cast) return cast(n, in[0], out, cnt);
  if (n->n_in == 2) return binary(n, in[0], in[1], out, cnt);
  if (fsl_dtype_is_float(n->in[0]->dtype)) return unary_float(n, in[0], out, cnt);
  return unary_int(n, in[0], out, cnt);
}
