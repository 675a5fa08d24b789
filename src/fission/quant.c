/*
 * quant.c — decompositions of the ONNX quantization ops: the linear
 * quantization ops into elementwise primitives (plus reductions for
 * DynamicQuantizeLinear), and the quantized linear ops QLinearMatMul and
 * QLinearConv as MatMulInteger / ConvInteger (linear.c) requantized.
 *
 * Scale and zero point are per tensor (a scalar or one element), per axis
 * (1-D, length x.dims[axis]) or blocked (opset 21+: same rank as x, the
 * axis dim ceil(x.dims[axis] / block_size), each element repeated
 * block_size times).  Quantization rounds half to even and saturates to
 * the output type's range; integer types only (float8/int4 are rejected).
 * A scale known at compile time (an initializer) must be positive and
 * finite in every element: a zero, negative, NaN or infinite one is an
 * error naming the node, the input and the element, where ONNX Runtime
 * would return infinities or NaN.  DequantizeLinear's zero point has x's
 * type, as the spec requires.
 */
#include "fission/fission.h"

#include <math.h>

/* Range of an integer quantized type; false if not one fissile supports. */
static bool qrange(fsl_dtype dt, double *lo, double *hi) {
  switch (dt) {
  case FSL_DT_U8: *lo = 0; *hi = 255; return true;
  case FSL_DT_I8: *lo = -128; *hi = 127; return true;
  case FSL_DT_U16: *lo = 0; *hi = 65535; return true;
  case FSL_DT_I16: *lo = -32768; *hi = 32767; return true;
  case FSL_DT_I32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
  default: return false;
  }
}

/* Blocked parameter: repeat each element block_size times along axis and
 * cut to x.dims[axis]. */
static fsl_value *blocked_param(fsl_fctx *fx, fsl_value *v, const fsl_value *x, int axis, int64_t block) {
  fsl_builder *b = fx->b;
  if (v->rank != x->rank) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "blocked quantization needs a scale/zero point of rank %d, got rank %d",
                x->rank, v->rank);
    return NULL;
  }
  int64_t d[FSL_MAX_RANK + 1];
  int r = 0;
  for (int i = 0; i < v->rank; i++) {
    d[r++] = v->dims[i];
    if (i == axis) d[r++] = 1;
  }
  if (r > FSL_MAX_RANK) {
    fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "blocked quantization of a rank-%d tensor", x->rank);
    return NULL;
  }
  fsl_value *t = fsl_b_reshape(b, v, r, d);
  d[axis + 1] = block;
  t = fsl_b_expand(b, t, d);
  int64_t m[FSL_MAX_RANK];
  for (int i = 0; i < v->rank; i++) m[i] = v->dims[i];
  m[axis] = v->dims[axis] * block;
  t = fsl_b_reshape(b, t, v->rank, m);
  if (m[axis] > x->dims[axis]) t = fsl_b_slice_axis(b, t, axis, 0, x->dims[axis]);
  for (int i = 0; t && i < x->rank; i++)
    if (t->dims[i] != x->dims[i]) {
      fsl_fx_fail(fx, FSL_ERR_INVALID, "blocked scale/zero point dim %d (%lld) does not match input (%lld) with block_size %lld",
                  i, (long long)v->dims[i], (long long)x->dims[i], (long long)block);
      return NULL;
    }
  return t;
}

/* Makes a scale / zero point broadcastable to x per the quantization mode. */
static fsl_value *qparam(fsl_fctx *fx, fsl_value *v, const fsl_value *x, int64_t axis, int64_t block) {
  if (!v || !x) return NULL;
  if (v->rank == 0) return v;
  int64_t d[FSL_MAX_RANK] = {0};
  if (fsl_value_numel(v) == 1 && v->rank == 1) return fsl_b_reshape(fx->b, v, 0, d);
  if (!fsl_b_axis(fx->b, &axis, x->rank, "attribute axis")) return NULL;
  if (block > 0) return blocked_param(fx, v, x, (int)axis, block);
  if (v->rank != 1 || v->dims[0] != x->dims[axis]) {
    char buf[256];
    fsl_fx_fail(fx, FSL_ERR_INVALID, "per-axis scale/zero point must be 1-D of length %lld (axis %lld), got shape %s",
                (long long)x->dims[axis], (long long)axis, fsl_shape_str(v->rank, v->dims, buf, sizeof buf));
    return NULL;
  }
  for (int i = 0; i < x->rank; i++) d[i] = i == axis ? v->dims[0] : 1;
  return fsl_b_reshape(fx->b, v, x->rank, d);
}

/* Whether the constant scales among in[0..n) (named names[i]; a NULL or
 * runtime value is skipped) are positive and finite; else the node fails
 * (FSL_ERR_INVALID) naming the first bad element. */
static bool scales_ok(fsl_fctx *fx, fsl_value *const *in, const char *const *names, int n) {
  for (int i = 0; i < n; i++) {
    const fsl_value *s = in[i];
    if (!s || !s->data || !fsl_dtype_is_float(s->dtype)) continue;
    int64_t ne = fsl_value_numel(s);
    for (int64_t k = 0; k < ne; k++) {
      double v = fsl_load_f64(s->dtype, s->data, k);
      if (v > 0 && isfinite(v)) continue;
      fsl_fx_fail(fx, FSL_ERR_INVALID, "%s element %lld is %g (expected a positive finite scale)", names[i],
                  (long long)k, v);
      return false;
    }
  }
  return true;
}

static fsl_value *to_dtype(fsl_builder *b, fsl_value *v, fsl_dtype dt) {
  return v && v->dtype != dt ? fsl_b_cast(b, v, dt) : v;
}

/* float32 for float16/bfloat16/integers, else the dtype itself. */
static fsl_dtype wide_float(fsl_dtype dt) {
  return dt == FSL_DT_F64 ? FSL_DT_F64 : FSL_DT_F32;
}

/* saturate(round(q) + zp) as dtype `out`; q in float, zp in float32 (or NULL). */
static fsl_value *round_saturate(fsl_builder *b, fsl_value *q, fsl_value *zp, fsl_dtype out) {
  double lo = 0, hi = 0;
  qrange(out, &lo, &hi);
  q = fsl_b_unary(b, FSL_OP_round, q);
  if (q) q = to_dtype(b, q, wide_float(q->dtype));
  if (zp) q = fsl_b_binary(b, FSL_OP_add, q, to_dtype(b, zp, q ? q->dtype : FSL_DT_F32));
  q = fsl_b_binary_scalar(b, FSL_OP_max, q, lo);
  q = fsl_b_binary_scalar(b, FSL_OP_min, q, hi);
  return fsl_b_cast(b, q, out);
}

/** ONNX QuantizeLinear: y = saturate(round(x / y_scale) + y_zero_point). */
fsl_status fsl_fission_QuantizeLinear(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *scale = fsl_fx_req(fx, 1);
  fsl_value *zp = fx->n_in > 2 ? fx->in[2] : NULL;
  if (!x || !scale) return fsl_fx_done(fx);
  if (!scales_ok(fx, &scale, (const char *[]){"y_scale"}, 1)) return fsl_fx_done(fx);
  int64_t axis = fsl_attr_int(fx->node, "axis", 1), block = fsl_attr_int(fx->node, "block_size", 0);
  fsl_dtype out = (fsl_dtype)fsl_attr_int(fx->node, "output_dtype", 0);
  if (zp) {
    if (out && out != zp->dtype)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "output_dtype %s differs from the zero point's %s",
                         fsl_dtype_name(out), fsl_dtype_name(zp->dtype));
    out = zp->dtype;
  }
  if (!out) out = FSL_DT_U8;
  double lo, hi;
  if (!qrange(out, &lo, &hi) || out == FSL_DT_I32)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "quantization to %s (expected uint8, int8, uint16 or int16)",
                       fsl_dtype_name(out));
  if (block < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "block_size must be >= 0");
  /* the division runs in `precision`, else in float32 (double for double
   * x): float16 x / scale rounded to float16 first would move values
   * across rounding boundaries (ONNX Runtime also divides in float32) */
  fsl_dtype cd = (fsl_dtype)fsl_attr_int(fx->node, "precision", 0);
  if (!cd) cd = wide_float(x->dtype);
  if (!fsl_dtype_is_float(cd))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "precision %s (expected a float type)", fsl_dtype_name(cd));
  fsl_value *s = qparam(fx, to_dtype(b, scale, cd), x, axis, block);
  fsl_value *q = fsl_b_binary(b, FSL_OP_div, to_dtype(b, x, cd), s);
  fx->out[0] = round_saturate(b, q, zp ? qparam(fx, zp, x, axis, block) : NULL, out);
  return fsl_fx_done(fx);
}

/** ONNX DequantizeLinear: y = (x - x_zero_point) * x_scale, in float32, output
 *  in the scale's dtype (or output_dtype). */
fsl_status fsl_fission_DequantizeLinear(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *scale = fsl_fx_req(fx, 1);
  fsl_value *zp = fx->n_in > 2 ? fx->in[2] : NULL;
  if (!x || !scale) return fsl_fx_done(fx);
  if (!fsl_dtype_valid(x->dtype) || fsl_dtype_is_float(x->dtype))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "dequantization of %s (expected an integer type)",
                       fsl_dtype_name(x->dtype));
  if (zp && zp->dtype != x->dtype)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "x_zero_point is %s, x is %s (expected the same type)",
                       fsl_dtype_name(zp->dtype), fsl_dtype_name(x->dtype));
  if (!scales_ok(fx, &scale, (const char *[]){"x_scale"}, 1)) return fsl_fx_done(fx);
  int64_t axis = fsl_attr_int(fx->node, "axis", 1), block = fsl_attr_int(fx->node, "block_size", 0);
  fsl_dtype out = (fsl_dtype)fsl_attr_int(fx->node, "output_dtype", 0);
  if (!out) out = scale->dtype;
  if (!fsl_dtype_is_float(out))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "output dtype %s (expected a float type)", fsl_dtype_name(out));
  if (block < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "block_size must be >= 0");
  fsl_dtype cd = wide_float(scale->dtype);
  fsl_value *dx = to_dtype(b, x, cd);
  if (zp) dx = fsl_b_binary(b, FSL_OP_sub, dx, qparam(fx, to_dtype(b, zp, cd), x, axis, block));
  fsl_value *y = fsl_b_binary(b, FSL_OP_mul, dx, qparam(fx, to_dtype(b, scale, cd), x, axis, block));
  fx->out[0] = to_dtype(b, y, out);
  return fsl_fx_done(fx);
}

/** ONNX DynamicQuantizeLinear: uint8 quantization with scale and zero point
 *  computed from the range of x (extended to include 0). */
fsl_status fsl_fission_DynamicQuantizeLinear(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  if (!fsl_dtype_is_float(x->dtype))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "input of %s (expected float)", fsl_dtype_name(x->dtype));
  fsl_value *xf = to_dtype(b, x, FSL_DT_F32);
  fsl_value *mx = fsl_b_binary_scalar(b, FSL_OP_max, fsl_b_reduce(b, FSL_OP_reduce_max, xf, NULL, 0, false), 0.0);
  fsl_value *mn = fsl_b_binary_scalar(b, FSL_OP_min, fsl_b_reduce(b, FSL_OP_reduce_min, xf, NULL, 0, false), 0.0);
  fsl_value *range = fsl_b_binary(b, FSL_OP_sub, mx, mn);
  fsl_value *zero = fsl_b_binary_scalar(b, FSL_OP_eq, range, 0.0);
  range = fsl_b_where(b, zero, fsl_b_scalar(b, FSL_DT_F32, 1.0), range);
  fsl_value *scale = fsl_b_binary_scalar(b, FSL_OP_div, range, 255.0);
  /* zero point = round(clip(0 - min / scale, 0, 255)) */
  fsl_value *zpf = fsl_b_unary(b, FSL_OP_neg, fsl_b_binary(b, FSL_OP_div, mn, scale));
  zpf = fsl_b_binary_scalar(b, FSL_OP_min, fsl_b_binary_scalar(b, FSL_OP_max, zpf, 0.0), 255.0);
  zpf = fsl_b_unary(b, FSL_OP_round, zpf);
  fx->out[0] = round_saturate(b, fsl_b_binary(b, FSL_OP_div, xf, scale), zpf, FSL_DT_U8);
  if (fx->n_out > 1) fx->out[1] = to_dtype(b, scale, x->dtype);
  if (fx->n_out > 2) fx->out[2] = fsl_b_cast(b, zpf, FSL_DT_U8);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* QLinearMatMul, QLinearConv: integer matmul / conv, then requantized */
/* ------------------------------------------------------------------ */

/* y = saturate(round_half_even(acc * mult + zp)) as zp's dtype; computed
 * in float64 (acc int32, mult float, exact like the reference). */
static fsl_value *requantize(fsl_fctx *fx, fsl_value *acc, fsl_value *mult, fsl_value *zp) {
  fsl_builder *b = fx->b;
  double lo, hi;
  if (!acc || !mult || !zp) return NULL;
  if (zp->dtype == FSL_DT_I32 || !qrange(zp->dtype, &lo, &hi)) {
    fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "output type %s (expected uint8, int8, uint16 or int16)",
                fsl_dtype_name(zp->dtype));
    return NULL;
  }
  fsl_value *d = fsl_b_binary(b, FSL_OP_mul, to_dtype(b, acc, FSL_DT_F64), to_dtype(b, mult, FSL_DT_F64));
  d = fsl_b_binary(b, FSL_OP_add, d, to_dtype(b, zp, FSL_DT_F64));
  d = fsl_b_unary(b, FSL_OP_round, d);
  d = fsl_b_binary_scalar(b, FSL_OP_min, fsl_b_binary_scalar(b, FSL_OP_max, d, lo), hi);
  return fsl_b_cast(b, d, zp->dtype);
}

/* Runs another op's decomposition (MatMulInteger, ConvInteger) on the same
 * node with the given inputs; returns its output 0. */
static fsl_value *sub_fission(fsl_fctx *fx, fsl_fission_fn fn, fsl_value **in, int n_in) {
  fsl_value *out[1] = {NULL};
  fsl_fctx sub = *fx;
  sub.in = in;
  sub.n_in = n_in;
  sub.out = out;
  sub.n_out = 1;
  if (fn(&sub) != FSL_OK) return NULL;
  return out[0];
}

/** ONNX QLinearMatMul (opset 10, 21): integer matmul of (a - a_zp) and
 *  (b - b_zp), rescaled by a_scale * b_scale / y_scale and requantized. */
fsl_status fsl_fission_QLinearMatMul(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  for (int i = 0; i < 8; i++)
    if (!fsl_fx_req(fx, i)) return fsl_fx_done(fx);
  fsl_value **in = fx->in;
  if (in[0]->rank < 2 || in[3]->rank < 1)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected A of rank >= 2 and B of rank >= 1");
  if (!scales_ok(fx, (fsl_value *[]){in[1], in[4], in[6]}, (const char *[]){"a_scale", "b_scale", "y_scale"}, 3))
    return fsl_fx_done(fx);
  fsl_value *mm_in[4] = {in[0], in[3], in[2], in[5]};
  fsl_value *acc = sub_fission(fx, fsl_fission_MatMulInteger, mm_in, 4);
  /* a_scale per row of A: [M, 1]; b_scale per column of B: [N] */
  fsl_value *mult = fsl_b_binary(b, FSL_OP_mul, fsl_b_on_axis(b, in[1], 2, 0), in[4]);
  mult = fsl_b_binary(b, FSL_OP_div, mult, in[6]);
  fx->out[0] = requantize(fx, acc, mult, in[7]);
  return fsl_fx_done(fx);
}

/** ONNX QLinearConv (opset 10): integer convolution of (x - x_zp) and
 *  (w - w_zp) plus int32 bias, rescaled by x_scale * w_scale / y_scale and
 *  requantized. */
fsl_status fsl_fission_QLinearConv(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  for (int i = 0; i < 8; i++)
    if (!fsl_fx_req(fx, i)) return fsl_fx_done(fx);
  fsl_value **in = fx->in;
  fsl_value *bias = fx->n_in > 8 ? in[8] : NULL;
  if (!scales_ok(fx, (fsl_value *[]){in[1], in[4], in[6]}, (const char *[]){"x_scale", "w_scale", "y_scale"}, 3))
    return fsl_fx_done(fx);
  fsl_value *conv_in[4] = {in[0], in[3], in[2], in[5]};
  fsl_value *acc = sub_fission(fx, fsl_fission_ConvInteger, conv_in, 4);
  if (!acc) return fsl_fx_done(fx);
  if (bias) acc = fsl_b_binary(b, FSL_OP_add, acc, fsl_b_on_axis(b, to_dtype(b, bias, FSL_DT_I32), acc->rank, 1));
  fsl_value *mult = fsl_b_binary(b, FSL_OP_mul, in[1], fsl_b_on_axis(b, in[4], acc->rank, 1));
  mult = fsl_b_binary(b, FSL_OP_div, mult, in[6]);
  fx->out[0] = requantize(fx, acc, mult, in[7]);
  return fsl_fx_done(fx);
}
