/*
 * elementwise.c — decompositions of the ONNX elementwise math and logic
 * ops (arithmetic, comparisons, logic, bitwise, unary math, Cast, Clip,
 * Identity, Dropout) into elementwise primitives.
 *
 * Broadcasting is numpy-style (done by the builder).  Before opset 7 the
 * binary ops had a "broadcast" attribute with an optional "axis" that
 * aligns the second operand at that axis of the first; legacy_rhs() turns
 * that into a reshape so that numpy broadcasting gives the same result.
 */
#include "fission/fission.h"
#include <float.h>

/* ---- shared helpers ---- */

/* Opset < 7 broadcasting: with broadcast=1 and an "axis" attribute, B's
 * dims line up with A's starting at axis; pad B with trailing 1s. */
static fsl_value *legacy_rhs(fsl_fctx *fx, const fsl_value *a, fsl_value *y) {
  if (fx->opset >= 7 || !a || !y) return y;
  if (!fsl_attr_int(fx->node, "broadcast", 0) || !fsl_attr_find(fx->node, "axis"))
    return y;
  int64_t axis = fsl_attr_int(fx->node, "axis", 0);
  if (axis < 0) axis += a->rank;
  if (axis < 0 || axis + y->rank > a->rank) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "axis %lld does not fit B (rank %d) into A (rank %d)",
                (long long)fsl_attr_int(fx->node, "axis", 0), y->rank, a->rank);
    return NULL;
  }
  int64_t dims[FSL_MAX_RANK];
  int r = (int)(a->rank - axis);
  for (int i = 0; i < r; i++) dims[i] = i < y->rank ? y->dims[i] : 1;
  return fsl_b_reshape(fx->b, y, r, dims);
}

/* out0 = op(in0) */
static fsl_status unary(fsl_fctx *fx, fsl_op op) {
  fx->out[0] = fsl_b_unary(fx->b, op, fsl_fx_req(fx, 0));
  return fsl_fx_done(fx);
}

/* out0 = op(in0, in1) with numpy broadcasting (legacy broadcast < opset 7) */
static fsl_status binary(fsl_fctx *fx, fsl_op op) {
  fsl_value *x = fsl_fx_req(fx, 0), *y = fsl_fx_req(fx, 1);
  y = legacy_rhs(fx, x, y);
  fx->out[0] = fsl_b_binary(fx->b, op, x, y);
  return fsl_fx_done(fx);
}

/* Binary primitive with attributes: broadcasts both operands explicitly
 * (fsl_b_prim does not) and adds the primitive. */
static fsl_value *binary_attrs(fsl_builder *b, fsl_op op, fsl_value *x, fsl_value *y,
                               const fsl_attr *attrs, int n_attrs) {
  int rank;
  int64_t dims[FSL_MAX_RANK];
  if (!x || !y || !fsl_b_broadcast_shape(b, x, y, &rank, dims)) return NULL;
  fsl_value *in[2] = {fsl_b_broadcast_to(b, x, rank, dims), fsl_b_broadcast_to(b, y, rank, dims)};
  if (!in[0] || !in[1]) return NULL;
  return fsl_b_prim(b, op, in, 2, attrs, n_attrs);
}

/* Left fold of a binary primitive over all (present) inputs. */
static fsl_value *fold_inputs(fsl_fctx *fx, fsl_op op, int *count) {
  fsl_value *acc = NULL;
  *count = 0;
  for (int i = 0; i < fx->n_in; i++) {
    if (!fx->in[i]) continue;
    acc = acc ? fsl_b_binary(fx->b, op, acc, fx->in[i]) : fx->in[i];
    (*count)++;
  }
  if (!acc) fsl_fx_req(fx, 0);
  return acc;
}

static fsl_status variadic(fsl_fctx *fx, fsl_op op) {
  int n;
  fx->out[0] = fold_inputs(fx, op, &n);
  return fsl_fx_done(fx);
}

/* ---- arithmetic ---- */

/** ONNX Add: numpy-broadcast addition. */
fsl_status fsl_fission_Add(fsl_fctx *fx) { return binary(fx, FSL_OP_add); }
/** ONNX Sub: numpy-broadcast subtraction. */
fsl_status fsl_fission_Sub(fsl_fctx *fx) { return binary(fx, FSL_OP_sub); }
/** ONNX Mul: numpy-broadcast multiplication. */
fsl_status fsl_fission_Mul(fsl_fctx *fx) { return binary(fx, FSL_OP_mul); }
/** ONNX Div: numpy-broadcast division (integers truncate toward zero). */
fsl_status fsl_fission_Div(fsl_fctx *fx) { return binary(fx, FSL_OP_div); }

/* Precision order of float dtypes (0 for non-floats). */
static int float_rank(fsl_dtype dt) {
  return dt == FSL_DT_F64 ? 3 : dt == FSL_DT_F32 ? 2 : fsl_dtype_is_float(dt) ? 1 : 0;
}

/** ONNX Pow: base^exponent in the base's dtype.  An integer exponent of
 *  another dtype is cast to the base's; a float exponent makes the power
 *  run in the wider float (double for an integer base), as numpy's
 *  np.power(a, b).astype(a.dtype) of the ONNX reference does. */
fsl_status fsl_fission_Pow(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *y = fsl_fx_req(fx, 1);
  y = legacy_rhs(fx, x, y);
  if (!x || !y || x->dtype == y->dtype || !fsl_dtype_is_float(y->dtype)) {
    if (x && y) y = fsl_b_cast(fx->b, y, x->dtype);
    fx->out[0] = fsl_b_binary(fx->b, FSL_OP_pow, x, y);
    return fsl_fx_done(fx);
  }
  fsl_dtype cd = float_rank(x->dtype) == 0 ? FSL_DT_F64
               : float_rank(x->dtype) >= float_rank(y->dtype) ? x->dtype : y->dtype;
  fsl_value *p = fsl_b_binary(fx->b, FSL_OP_pow, fsl_b_cast(fx->b, x, cd), fsl_b_cast(fx->b, y, cd));
  fx->out[0] = fsl_b_cast(fx->b, p, x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX Mod: integer modulo with the divisor's sign (fmod=0) or C fmod (fmod=1). */
fsl_status fsl_fission_Mod(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *y = fsl_fx_req(fx, 1);
  int64_t fmod = fsl_attr_int(fx->node, "fmod", 0);
  if (fmod != 0 && fmod != 1)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute fmod must be 0 or 1, got %lld", (long long)fmod);
  if (x && fsl_dtype_is_float(x->dtype) && fmod == 0)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "fmod=0 is not allowed for floating point inputs");
  fsl_attr a = fsl_attr_make_int("fmod", fmod);
  fx->out[0] = binary_attrs(fx->b, FSL_OP_mod, x, y, &a, 1);
  return fsl_fx_done(fx);
}

/** ONNX Max: elementwise maximum of all inputs (broadcast). */
fsl_status fsl_fission_Max(fsl_fctx *fx) { return variadic(fx, FSL_OP_max); }
/** ONNX Min: elementwise minimum of all inputs (broadcast). */
fsl_status fsl_fission_Min(fsl_fctx *fx) { return variadic(fx, FSL_OP_min); }
/** ONNX Sum: elementwise sum of all inputs (broadcast). */
fsl_status fsl_fission_Sum(fsl_fctx *fx) { return variadic(fx, FSL_OP_add); }

/** ONNX Mean: elementwise sum of all inputs divided by their count. */
fsl_status fsl_fission_Mean(fsl_fctx *fx) {
  int n;
  fsl_value *s = fold_inputs(fx, FSL_OP_add, &n);
  fx->out[0] = n > 1 ? fsl_b_binary_scalar(fx->b, FSL_OP_div, s, (double)n) : s;
  return fsl_fx_done(fx);
}

/* ---- logic and bitwise ---- */

/** ONNX And: logical and of bools. */
fsl_status fsl_fission_And(fsl_fctx *fx) { return binary(fx, FSL_OP_and); }
/** ONNX Or: logical or of bools. */
fsl_status fsl_fission_Or(fsl_fctx *fx) { return binary(fx, FSL_OP_or); }
/** ONNX Xor: logical xor of bools. */
fsl_status fsl_fission_Xor(fsl_fctx *fx) { return binary(fx, FSL_OP_xor); }
/** ONNX Not: logical negation of bools. */
fsl_status fsl_fission_Not(fsl_fctx *fx) { return unary(fx, FSL_OP_not); }
/** ONNX BitwiseAnd: bitwise and of integers. */
fsl_status fsl_fission_BitwiseAnd(fsl_fctx *fx) { return binary(fx, FSL_OP_and); }
/** ONNX BitwiseOr: bitwise or of integers. */
fsl_status fsl_fission_BitwiseOr(fsl_fctx *fx) { return binary(fx, FSL_OP_or); }
/** ONNX BitwiseXor: bitwise xor of integers. */
fsl_status fsl_fission_BitwiseXor(fsl_fctx *fx) { return binary(fx, FSL_OP_xor); }
/** ONNX BitwiseNot: bitwise complement of integers. */
fsl_status fsl_fission_BitwiseNot(fsl_fctx *fx) { return unary(fx, FSL_OP_not); }

/** ONNX BitShift: shift of unsigned integers, direction "LEFT" or "RIGHT". */
fsl_status fsl_fission_BitShift(fsl_fctx *fx) {
  const char *dir = fsl_attr_str(fx->node, "direction", "");
  if (!strcmp(dir, "LEFT")) return binary(fx, FSL_OP_shl);
  if (!strcmp(dir, "RIGHT")) return binary(fx, FSL_OP_shr);
  return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute direction must be \"LEFT\" or \"RIGHT\", got \"%s\"", dir);
}

/* ---- comparisons ---- */

/** ONNX Equal: elementwise ==, bool result. */
fsl_status fsl_fission_Equal(fsl_fctx *fx) { return binary(fx, FSL_OP_eq); }
/** ONNX Less: elementwise <, bool result. */
fsl_status fsl_fission_Less(fsl_fctx *fx) { return binary(fx, FSL_OP_lt); }
/** ONNX LessOrEqual: elementwise <=, bool result. */
fsl_status fsl_fission_LessOrEqual(fsl_fctx *fx) { return binary(fx, FSL_OP_le); }
/** ONNX Greater: elementwise >, bool result. */
fsl_status fsl_fission_Greater(fsl_fctx *fx) { return binary(fx, FSL_OP_gt); }
/** ONNX GreaterOrEqual: elementwise >=, bool result. */
fsl_status fsl_fission_GreaterOrEqual(fsl_fctx *fx) { return binary(fx, FSL_OP_ge); }

/** ONNX Where: cond ? X : Y, all three broadcast. */
fsl_status fsl_fission_Where(fsl_fctx *fx) {
  fx->out[0] = fsl_b_where(fx->b, fsl_fx_req(fx, 0), fsl_fx_req(fx, 1), fsl_fx_req(fx, 2));
  return fsl_fx_done(fx);
}

/* ---- unary math ---- */

/** ONNX Neg. */
fsl_status fsl_fission_Neg(fsl_fctx *fx) { return unary(fx, FSL_OP_neg); }
/** ONNX Abs. */
fsl_status fsl_fission_Abs(fsl_fctx *fx) { return unary(fx, FSL_OP_abs); }
/** ONNX Exp. */
fsl_status fsl_fission_Exp(fsl_fctx *fx) { return unary(fx, FSL_OP_exp); }
/** ONNX Log (natural logarithm). */
fsl_status fsl_fission_Log(fsl_fctx *fx) { return unary(fx, FSL_OP_log); }
/** ONNX Sqrt. */
fsl_status fsl_fission_Sqrt(fsl_fctx *fx) { return unary(fx, FSL_OP_sqrt); }
/** ONNX Reciprocal: 1/x. */
fsl_status fsl_fission_Reciprocal(fsl_fctx *fx) { return unary(fx, FSL_OP_recip); }
/** ONNX Tanh. */
fsl_status fsl_fission_Tanh(fsl_fctx *fx) { return unary(fx, FSL_OP_tanh); }
/** ONNX Erf. */
fsl_status fsl_fission_Erf(fsl_fctx *fx) { return unary(fx, FSL_OP_erf); }
/** ONNX Sigmoid: 1/(1+exp(-x)). */
fsl_status fsl_fission_Sigmoid(fsl_fctx *fx) { return unary(fx, FSL_OP_sigmoid); }
/** ONNX Sin. */
fsl_status fsl_fission_Sin(fsl_fctx *fx) { return unary(fx, FSL_OP_sin); }
/** ONNX Cos. */
fsl_status fsl_fission_Cos(fsl_fctx *fx) { return unary(fx, FSL_OP_cos); }
/** ONNX Tan. */
fsl_status fsl_fission_Tan(fsl_fctx *fx) { return unary(fx, FSL_OP_tan); }
/** ONNX Asin. */
fsl_status fsl_fission_Asin(fsl_fctx *fx) { return unary(fx, FSL_OP_asin); }
/** ONNX Acos. */
fsl_status fsl_fission_Acos(fsl_fctx *fx) { return unary(fx, FSL_OP_acos); }
/** ONNX Atan. */
fsl_status fsl_fission_Atan(fsl_fctx *fx) { return unary(fx, FSL_OP_atan); }
/** ONNX Sinh. */
fsl_status fsl_fission_Sinh(fsl_fctx *fx) { return unary(fx, FSL_OP_sinh); }
/** ONNX Cosh. */
fsl_status fsl_fission_Cosh(fsl_fctx *fx) { return unary(fx, FSL_OP_cosh); }
/** ONNX Asinh. */
fsl_status fsl_fission_Asinh(fsl_fctx *fx) { return unary(fx, FSL_OP_asinh); }
/** ONNX Acosh. */
fsl_status fsl_fission_Acosh(fsl_fctx *fx) { return unary(fx, FSL_OP_acosh); }
/** ONNX Atanh. */
fsl_status fsl_fission_Atanh(fsl_fctx *fx) { return unary(fx, FSL_OP_atanh); }
/** ONNX Floor. */
fsl_status fsl_fission_Floor(fsl_fctx *fx) { return unary(fx, FSL_OP_floor); }
/** ONNX Ceil. */
fsl_status fsl_fission_Ceil(fsl_fctx *fx) { return unary(fx, FSL_OP_ceil); }
/** ONNX Round: half to even. */
fsl_status fsl_fission_Round(fsl_fctx *fx) { return unary(fx, FSL_OP_round); }
/** ONNX Sign: -1, 0 or 1. */
fsl_status fsl_fission_Sign(fsl_fctx *fx) { return unary(fx, FSL_OP_sign); }
/** ONNX IsNaN: bool result. */
fsl_status fsl_fission_IsNaN(fsl_fctx *fx) { return unary(fx, FSL_OP_isnan); }

/** ONNX IsInf: bool result; detect_positive / detect_negative select the signs. */
fsl_status fsl_fission_IsInf(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  fsl_attr a[2] = {
    fsl_attr_make_int("detect_positive", fsl_attr_int(fx->node, "detect_positive", 1)),
    fsl_attr_make_int("detect_negative", fsl_attr_int(fx->node, "detect_negative", 1)),
  };
  fx->out[0] = x ? fsl_b_prim(fx->b, FSL_OP_isinf, &x, 1, a, 2) : NULL;
  return fsl_fx_done(fx);
}

/* ---- casts ---- */

/* Cast-1 spelled the target type as a string. */
static fsl_dtype dtype_from_name(const char *s) {
  static const struct { const char *name; fsl_dtype dt; } k[] = {
    {"FLOAT", FSL_DT_F32}, {"UINT8", FSL_DT_U8}, {"INT8", FSL_DT_I8},
    {"UINT16", FSL_DT_U16}, {"INT16", FSL_DT_I16}, {"INT32", FSL_DT_I32},
    {"INT64", FSL_DT_I64}, {"BOOL", FSL_DT_BOOL}, {"FLOAT16", FSL_DT_F16},
    {"DOUBLE", FSL_DT_F64}, {"UINT32", FSL_DT_U32}, {"UINT64", FSL_DT_U64},
    {"BFLOAT16", FSL_DT_BF16}, {"STRING", FSL_DT_STRING},
  };
  for (size_t i = 0; i < FSL_ARRAY_LEN(k); i++)
    if (!strcmp(s, k[i].name)) return k[i].dt;
  return FSL_DT_UNDEFINED;
}

/* Casts x to `to`, rejecting dtypes fissile does not execute. */
static fsl_status cast_to(fsl_fctx *fx, fsl_value *x, fsl_dtype to) {
  if (!x) return fsl_fx_done(fx);
  if (!fsl_dtype_valid(to))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "cast to %s is not supported", fsl_dtype_name(to));
  if (!fsl_dtype_valid(x->dtype))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "cast from %s is not supported", fsl_dtype_name(x->dtype));
  fx->out[0] = x->dtype == to ? x : fsl_b_cast(fx->b, x, to);
  return fsl_fx_done(fx);
}

/** ONNX Cast: converts to the dtype of attribute "to" (a string before opset 6). */
fsl_status fsl_fission_Cast(fsl_fctx *fx) {
  const fsl_attr *a = fsl_attr_find(fx->node, "to");
  if (!a) return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'to' is required");
  fsl_dtype to = a->type == FSL_ATTR_STRING ? dtype_from_name(a->s) : (fsl_dtype)a->i;
  if (a->type != FSL_ATTR_STRING && (a->i <= 0 || a->i >= FSL_DT_COUNT))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "attribute 'to' = %lld is not a known dtype", (long long)a->i);
  return cast_to(fx, fsl_fx_req(fx, 0), to);
}

/** ONNX CastLike: converts input to the dtype of target_type. */
fsl_status fsl_fission_CastLike(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *like = fsl_fx_req(fx, 1);
  return cast_to(fx, x, like ? like->dtype : FSL_DT_UNDEFINED);
}

/* ---- Clip, Identity, Dropout ---- */

/** ONNX Clip: min(max(x, min), max); bounds are attributes before opset 11,
 *  optional inputs after (omitted = unbounded). */
fsl_status fsl_fission_Clip(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (fx->opset < 11) {
    if (fsl_attr_find(fx->node, "min"))
      x = fsl_b_binary_scalar(fx->b, FSL_OP_max, x, fsl_attr_float(fx->node, "min", -FLT_MAX));
    if (fsl_attr_find(fx->node, "max"))
      x = fsl_b_binary_scalar(fx->b, FSL_OP_min, x, fsl_attr_float(fx->node, "max", FLT_MAX));
  } else {
    fsl_value *lo = fx->n_in > 1 ? fx->in[1] : NULL, *hi = fx->n_in > 2 ? fx->in[2] : NULL;
    if (lo) x = fsl_b_binary(fx->b, FSL_OP_max, x, lo);
    if (hi) x = fsl_b_binary(fx->b, FSL_OP_min, x, hi);
  }
  fx->out[0] = x;
  return fsl_fx_done(fx);
}

/** ONNX Identity: the output aliases the input. */
fsl_status fsl_fission_Identity(fsl_fctx *fx) {
  fx->out[0] = fsl_fx_req(fx, 0);
  return fsl_fx_done(fx);
}

/* true when Dropout runs in training mode with a nonzero ratio (random). */
static bool dropout_is_random(fsl_fctx *fx) {
  if (fx->opset < 7) return fsl_attr_int(fx->node, "is_test", 0) == 0 &&
                            fsl_attr_float(fx->node, "ratio", 0.5) != 0.0;
  if (fx->opset < 12) return false;
  double training = 0, ratio = 0.5;
  fsl_value *t = fx->n_in > 2 ? fx->in[2] : NULL, *r = fx->n_in > 1 ? fx->in[1] : NULL;
  if (t && !fsl_b_const_scalar(fx->b, t, &training, "input 'training_mode'")) return false;
  if (r && training != 0 && !fsl_b_const_scalar(fx->b, r, &ratio, "input 'ratio'")) return false;
  return training != 0 && ratio != 0;
}

/** ONNX Dropout (inference): output = input, mask all true (ones before opset 10). */
fsl_status fsl_fission_Dropout(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  if (dropout_is_random(fx))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "training mode with a nonzero ratio (random dropout)");
  fx->out[0] = x;
  if (fx->n_out > 1) {
    fsl_dtype mdt = fx->opset < 10 ? x->dtype : FSL_DT_BOOL;
    fsl_value *one = fsl_b_scalar(fx->b, mdt, 1.0);
    fx->out[1] = fsl_b_broadcast_to(fx->b, one, x->rank, x->dims);
  }
  return fsl_fx_done(fx);
}
