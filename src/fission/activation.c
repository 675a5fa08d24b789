/*
 * activation.c — decompositions of the ONNX activation functions into
 * elementwise primitives.  Scalars are made in the computing dtype.
 * Activations built from several primitives (exp, log, tanh, erf chains)
 * compute float16/bfloat16 inputs in float32 and round once at the end,
 * as ONNX Runtime and PyTorch do; per-primitive rounding to float16 loses
 * whole digits in exp(x)-1 and log(1+exp(-|x|)).
 */
#include "fission/fission.h"
#include <math.h>

/* ---- shared helpers (all propagate NULL through the sticky builder) ---- */

static fsl_value *bs(fsl_fctx *fx, fsl_op op, fsl_value *x, double s) {
  return fsl_b_binary_scalar(fx->b, op, x, s);
}
static fsl_value *bin(fsl_fctx *fx, fsl_op op, fsl_value *x, fsl_value *y) {
  return fsl_b_binary(fx->b, op, x, y);
}
static fsl_value *un(fsl_fctx *fx, fsl_op op, fsl_value *x) {
  return fsl_b_unary(fx->b, op, x);
}
/* Scalar constant in x's dtype. */
static fsl_value *scalar_like(fsl_fctx *fx, const fsl_value *x, double v) {
  return x ? fsl_b_scalar(fx->b, x->dtype, v) : NULL;
}
/* cmp(x, 0) ? a : b — the branch selection every piecewise activation uses. */
static fsl_value *select0(fsl_fctx *fx, fsl_op cmp, fsl_value *x, double thr,
                          fsl_value *a, fsl_value *b) {
  return fsl_b_where(fx->b, bs(fx, cmp, x, thr), a, b);
}
/* max(0, min(1, alpha*x + beta)) */
static fsl_value *hard_sigmoid(fsl_fctx *fx, fsl_value *x, double alpha, double beta) {
  fsl_value *t = bs(fx, FSL_OP_add, bs(fx, FSL_OP_mul, x, alpha), beta);
  return bs(fx, FSL_OP_max, bs(fx, FSL_OP_min, t, 1.0), 0.0);
}
/* Stable softplus: max(x, 0) + log(1 + exp(-|x|)). */
static fsl_value *softplus(fsl_fctx *fx, fsl_value *x) {
  fsl_value *e = un(fx, FSL_OP_exp, un(fx, FSL_OP_neg, un(fx, FSL_OP_abs, x)));
  return bin(fx, FSL_OP_add, bs(fx, FSL_OP_max, x, 0.0),
             un(fx, FSL_OP_log, bs(fx, FSL_OP_add, e, 1.0)));
}
/* Input 0, widened to float32 when it is float16/bfloat16. */
static fsl_value *wide_in(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (x && (x->dtype == FSL_DT_F16 || x->dtype == FSL_DT_BF16)) x = fsl_b_cast(fx->b, x, FSL_DT_F32);
  return x;
}
/* Sets output 0 to y in input 0's dtype. */
static fsl_status done(fsl_fctx *fx, fsl_value *y) {
  fsl_value *x = fx->in[0];
  fx->out[0] = x && y && y->dtype != x->dtype ? fsl_b_cast(fx->b, y, x->dtype) : y;
  return fsl_fx_done(fx);
}

/* ---- decompositions ---- */

/** ONNX Relu: max(x, 0). */
fsl_status fsl_fission_Relu(fsl_fctx *fx) {
  return done(fx, bs(fx, FSL_OP_max, fsl_fx_req(fx, 0), 0.0));
}

/** ONNX LeakyRelu: x < 0 ? alpha*x : x (alpha default 0.01). */
fsl_status fsl_fission_LeakyRelu(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  double alpha = fsl_attr_float(fx->node, "alpha", 0.01);
  return done(fx, select0(fx, FSL_OP_lt, x, 0.0, bs(fx, FSL_OP_mul, x, alpha), x));
}

/** ONNX PRelu: x < 0 ? slope*x : x, slope broadcast to x (per channel before opset 7). */
fsl_status fsl_fission_PRelu(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *slope = fsl_fx_req(fx, 1);
  if (fx->opset < 7 && x && slope && slope->rank == 1 && x->rank > 2 &&
      slope->dims[0] == x->dims[1] && slope->dims[0] != 1) {
    int64_t dims[FSL_MAX_RANK];
    for (int i = 0; i < x->rank - 1; i++) dims[i] = i == 0 ? slope->dims[0] : 1;
    slope = fsl_b_reshape(fx->b, slope, x->rank - 1, dims);
  }
  return done(fx, select0(fx, FSL_OP_lt, x, 0.0, bin(fx, FSL_OP_mul, x, slope), x));
}

/** ONNX Elu: x < 0 ? alpha*(exp(x)-1) : x (alpha default 1). */
fsl_status fsl_fission_Elu(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  double alpha = fsl_attr_float(fx->node, "alpha", 1.0);
  fsl_value *neg = bs(fx, FSL_OP_mul, bs(fx, FSL_OP_sub, un(fx, FSL_OP_exp, x), 1.0), alpha);
  return done(fx, select0(fx, FSL_OP_lt, x, 0.0, neg, x));
}

/** ONNX Selu: gamma * (x <= 0 ? alpha*exp(x) - alpha : x). */
fsl_status fsl_fission_Selu(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  double alpha = fsl_attr_float(fx->node, "alpha", 1.67326319217681884765625);
  double gamma = fsl_attr_float(fx->node, "gamma", 1.05070102214813232421875);
  fsl_value *neg = bs(fx, FSL_OP_sub, bs(fx, FSL_OP_mul, un(fx, FSL_OP_exp, x), alpha), alpha);
  return done(fx, bs(fx, FSL_OP_mul, select0(fx, FSL_OP_le, x, 0.0, neg, x), gamma));
}

/** ONNX Celu: max(0, x) + min(0, alpha*(exp(x/alpha) - 1)). */
fsl_status fsl_fission_Celu(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  double alpha = fsl_attr_float(fx->node, "alpha", 1.0);
  if (alpha == 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute alpha must be nonzero");
  fsl_value *e = un(fx, FSL_OP_exp, bs(fx, FSL_OP_div, x, alpha));
  fsl_value *neg = bs(fx, FSL_OP_min, bs(fx, FSL_OP_mul, bs(fx, FSL_OP_sub, e, 1.0), alpha), 0.0);
  return done(fx, bin(fx, FSL_OP_add, bs(fx, FSL_OP_max, x, 0.0), neg));
}

/** ONNX ThresholdedRelu: x > alpha ? x : 0 (alpha default 1). */
fsl_status fsl_fission_ThresholdedRelu(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  double alpha = fsl_attr_float(fx->node, "alpha", 1.0);
  return done(fx, select0(fx, FSL_OP_gt, x, alpha, x, scalar_like(fx, x, 0.0)));
}

/** ONNX HardSigmoid: max(0, min(1, alpha*x + beta)) (alpha 0.2, beta 0.5). */
fsl_status fsl_fission_HardSigmoid(fsl_fctx *fx) {
  double alpha = fsl_attr_float(fx->node, "alpha", 0.2);
  double beta = fsl_attr_float(fx->node, "beta", 0.5);
  return done(fx, hard_sigmoid(fx, wide_in(fx), alpha, beta));
}

/** ONNX HardSwish: x * max(0, min(1, x/6 + 0.5)). */
fsl_status fsl_fission_HardSwish(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  return done(fx, bin(fx, FSL_OP_mul, x, hard_sigmoid(fx, x, 1.0 / 6.0, 0.5)));
}

/** ONNX Softplus: log(1 + exp(x)), computed stably. */
fsl_status fsl_fission_Softplus(fsl_fctx *fx) {
  return done(fx, softplus(fx, wide_in(fx)));
}

/** ONNX Softsign: x / (1 + |x|). */
fsl_status fsl_fission_Softsign(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  return done(fx, bin(fx, FSL_OP_div, x, bs(fx, FSL_OP_add, un(fx, FSL_OP_abs, x), 1.0)));
}

/** ONNX Mish: x * tanh(softplus(x)). */
fsl_status fsl_fission_Mish(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  return done(fx, bin(fx, FSL_OP_mul, x, un(fx, FSL_OP_tanh, softplus(fx, x))));
}

/** ONNX Gelu: approximate="none" 0.5x(1+erf(x/sqrt2)); "tanh"
 *  0.5x(1+tanh(u)), u = sqrt(2/pi)(x+0.044715x^3), computed as the equal
 *  x*sigmoid(2u), which avoids the cancellation in 1+tanh(u) for x << 0. */
fsl_status fsl_fission_Gelu(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  const char *approx = fsl_attr_str(fx->node, "approximate", "none");
  if (!strcmp(approx, "none")) {
    fsl_value *inner = un(fx, FSL_OP_erf, bs(fx, FSL_OP_mul, x, M_SQRT1_2));
    return done(fx, bin(fx, FSL_OP_mul, bs(fx, FSL_OP_mul, x, 0.5), bs(fx, FSL_OP_add, inner, 1.0)));
  }
  if (!strcmp(approx, "tanh")) {
    fsl_value *x3 = bin(fx, FSL_OP_mul, bin(fx, FSL_OP_mul, x, x), x);
    fsl_value *t = bin(fx, FSL_OP_add, x, bs(fx, FSL_OP_mul, x3, 0.044715));
    fsl_value *s = un(fx, FSL_OP_sigmoid, bs(fx, FSL_OP_mul, t, 2.0 * sqrt(2.0 / M_PI)));
    return done(fx, bin(fx, FSL_OP_mul, x, s));
  }
  return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute approximate must be \"none\" or \"tanh\", got \"%s\"", approx);
}

/** ONNX Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0. */
fsl_status fsl_fission_Shrink(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  double lambd = fsl_attr_float(fx->node, "lambd", 0.5);
  double bias = fsl_attr_float(fx->node, "bias", 0.0);
  fsl_value *hi = select0(fx, FSL_OP_gt, x, lambd, bs(fx, FSL_OP_sub, x, bias), scalar_like(fx, x, 0.0));
  return done(fx, select0(fx, FSL_OP_lt, x, -lambd, bs(fx, FSL_OP_add, x, bias), hi));
}

/** ONNX Swish: x * sigmoid(alpha * x) (alpha default 1). */
fsl_status fsl_fission_Swish(fsl_fctx *fx) {
  fsl_value *x = wide_in(fx);
  double alpha = fsl_attr_float(fx->node, "alpha", 1.0);
  fsl_value *ax = alpha == 1.0 ? x : bs(fx, FSL_OP_mul, x, alpha);
  return done(fx, bin(fx, FSL_OP_mul, x, un(fx, FSL_OP_sigmoid, ax)));
}
