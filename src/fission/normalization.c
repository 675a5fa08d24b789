/*
 * normalization.c — decompositions of Softmax, LogSoftmax, Hardmax and the
 * normalizations (LayerNormalization, BatchNormalization,
 * InstanceNormalization, GroupNormalization, LpNormalization,
 * RMSNormalization, MeanVarianceNormalization, LRN).
 *
 * Numerics: softmax subtracts the row max; variances are two-pass,
 * mean((x - mean)^2).  Where the op has a stash_type, the statistics are
 * computed in that type (or in the input type when it is wider); the other
 * ops compute float16 / bfloat16 inputs in float32.  Scale and bias are
 * applied in that computation type and the output is rounded to the input
 * type once (as ONNX Runtime does; the spec's function bodies round before
 * the affine step, which differs by about an ulp).
 */
#include "fission/fission.h"

#include <math.h>

/* ---- small shared helpers ---- */

/* axes[0..) = from, from+1, ..., rank-1; returns the count. */
static int tail_axes(int64_t from, int rank, int64_t *axes) {
  int n = 0;
  for (int64_t a = from; a < rank; a++) axes[n++] = a;
  return n;
}

/* Number of elements over the given axes of x. */
static double axes_count(const fsl_value *x, const int64_t *axes, int n) {
  double c = 1.0;
  for (int i = 0; i < n; i++) c *= (double)x->dims[axes[i]];
  return c;
}

/* norm * scale (+ bias) in norm's dtype (the parameters cast to it), the
 * result cast to dt: one rounding for float16 / bfloat16 outputs. */
static fsl_value *affine_out(fsl_builder *b, fsl_value *norm, fsl_value *scale, fsl_value *bias,
                             fsl_dtype dt) {
  if (!norm) return NULL;
  fsl_value *y = fsl_b_binary(b, FSL_OP_mul, norm, fsl_b_cast(b, scale, norm->dtype));
  if (bias) y = fsl_b_binary(b, FSL_OP_add, y, fsl_b_cast(b, bias, norm->dtype));
  return fsl_b_cast(b, y, dt);
}

/* Mean over axes, keepdims. */
static fsl_value *mean_over(fsl_builder *b, fsl_value *x, const int64_t *axes, int n) {
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, x, axes, n, true);
  return fsl_b_binary_scalar(b, FSL_OP_div, s, axes_count(x, axes, n));
}

/* Two-pass moments over axes (keepdims): *mean, *diff = x - mean and
 * *var = mean(diff^2). */
static void moments(fsl_builder *b, fsl_value *x, const int64_t *axes, int n, fsl_value **mean,
                    fsl_value **diff, fsl_value **var) {
  *mean = mean_over(b, x, axes, n);
  *diff = fsl_b_binary(b, FSL_OP_sub, x, *mean);
  *var = mean_over(b, fsl_b_binary(b, FSL_OP_mul, *diff, *diff), axes, n);
}

/* 1 / sqrt(var + eps). */
static fsl_value *inv_std(fsl_builder *b, fsl_value *var, double eps) {
  return fsl_b_unary(b, FSL_OP_rsqrt, fsl_b_binary_scalar(b, FSL_OP_add, var, eps));
}

/* A per-channel vector p ([C]) reshaped to [C, 1, ...] so that it
 * broadcasts against [N, C, D...] of rank `rank`; other shapes unchanged. */
static fsl_value *per_channel(fsl_builder *b, fsl_value *p, int rank) {
  if (!p || p->rank != 1 || rank <= 2) return p;
  int64_t dims[FSL_MAX_RANK];
  dims[0] = p->dims[0];
  for (int i = 1; i < rank - 1; i++) dims[i] = 1;
  return fsl_b_reshape(b, p, rank - 1, dims);
}

/* Fails unless input i (p) is a vector of c elements (per channel). */
static bool check_channels(fsl_fctx *fx, const fsl_value *p, int i, int64_t c) {
  if (p->rank == 1 && p->dims[0] == c) return true;
  char buf[64];
  fsl_fx_fail(fx, FSL_ERR_SHAPE, "input %d has shape [%s], expected [%lld] (one per channel)", i,
              fsl_shape_str(p->rank, p->dims, buf, sizeof buf), (long long)c);
  return false;
}

/* Width rank of a float dtype, for choosing the wider of two. */
static int float_width(fsl_dtype dt) {
  return dt == FSL_DT_F64 ? 3 : dt == FSL_DT_F32 ? 2 : 1;
}

/* Reads attribute stash_type (default float); fails unless it is a float
 * type.  *cdt: the computation dtype, the wider of stash and x's dtype. */
static bool stash_dtype(fsl_fctx *fx, const fsl_value *x, fsl_dtype *stash, fsl_dtype *cdt) {
  int64_t st = fsl_attr_int(fx->node, "stash_type", FSL_DT_F32);
  if (st != FSL_DT_F32 && st != FSL_DT_F64 && st != FSL_DT_F16 && st != FSL_DT_BF16) {
    fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "attribute 'stash_type' is %lld, expected a float type",
                (long long)st);
    return false;
  }
  *stash = (fsl_dtype)st;
  *cdt = float_width(x->dtype) > float_width(*stash) ? x->dtype : *stash;
  return true;
}

/* Input i, required, with a float dtype; NULL (error set) otherwise. */
static fsl_value *float_input(fsl_fctx *fx, int i) {
  fsl_value *x = fsl_fx_req(fx, i);
  if (x && !fsl_dtype_is_float(x->dtype)) {
    fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "input %d must have a float dtype", i);
    return NULL;
  }
  return x;
}

/* ---- softmax family ---- */

typedef enum smax_kind { SMAX_SOFT, SMAX_LOG, SMAX_HARD } smax_kind;

/* softmax / log-softmax of x over axes (keepdims statistics). */
static fsl_value *softmax_over(fsl_builder *b, fsl_value *x, const int64_t *axes, int n, bool log) {
  fsl_value *m = fsl_b_reduce(b, FSL_OP_reduce_max, x, axes, n, true);
  fsl_value *d = fsl_b_binary(b, FSL_OP_sub, x, m);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, d);
  fsl_value *s = fsl_b_reduce(b, FSL_OP_reduce_sum, e, axes, n, true);
  if (log) return fsl_b_binary(b, FSL_OP_sub, d, fsl_b_unary(b, FSL_OP_log, s));
  return fsl_b_binary(b, FSL_OP_div, e, s);
}

/* One-hot of the first maximum of x along axis, in x's dtype. */
static fsl_value *hardmax_axis(fsl_builder *b, fsl_value *x, int64_t axis) {
  int64_t len = x->dims[axis];
  int64_t dims[FSL_MAX_RANK];
  for (int i = 0; i < x->rank; i++) dims[i] = i == axis ? len : 1;
  fsl_value *idx = fsl_b_const(b, FSL_DT_I64, x->rank, dims, NULL);
  if (!idx) return NULL;
  for (int64_t i = 0; i < len; i++) ((int64_t *)idx->data)[i] = i;
  fsl_value *am = fsl_b_arg(b, FSL_OP_argmax, x, axis, true, false);
  return fsl_b_cast(b, fsl_b_binary(b, FSL_OP_eq, am, idx), x->dtype);
}

/* Opset < 13: coerce to 2-D [prod(d[:axis]), prod(d[axis:])] (default axis
 * 1); opset >= 13: one axis (default -1). */
static fsl_status softmax_family(fsl_fctx *fx, smax_kind k) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  if (x->rank == 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input must have rank >= 1");
  bool legacy = fx->opset < 13;
  int64_t axis = fsl_attr_int(fx->node, "axis", legacy ? 1 : -1);
  if (!fsl_b_axis(b, &axis, x->rank, "attribute 'axis'")) return fsl_fx_done(fx);
  int64_t axes[FSL_MAX_RANK];
  int n = legacy ? tail_axes(axis, x->rank, axes) : (axes[0] = axis, 1);
  if (k != SMAX_HARD) {
    fsl_value *y = softmax_over(b, fsl_b_cast(b, x, fsl_acc_dtype(x->dtype)), axes, n, k == SMAX_LOG);
    fx->out[0] = fsl_b_cast(b, y, x->dtype);
    return fsl_fx_done(fx);
  }
  if (!legacy || n == 1) {
    fx->out[0] = hardmax_axis(b, x, axes[0]);
    return fsl_fx_done(fx);
  }
  int64_t d2[2] = {1, 1};
  for (int i = 0; i < x->rank; i++) d2[i < axis ? 0 : 1] *= x->dims[i];
  fsl_value *h = hardmax_axis(b, fsl_b_reshape(b, x, 2, d2), 1);
  fx->out[0] = fsl_b_reshape(b, h, x->rank, x->dims);
  return fsl_fx_done(fx);
}

/** ONNX Softmax: exp(x - max) / sum(exp(x - max)). */
fsl_status fsl_fission_Softmax(fsl_fctx *fx) { return softmax_family(fx, SMAX_SOFT); }
/** ONNX LogSoftmax: (x - max) - log(sum(exp(x - max))). */
fsl_status fsl_fission_LogSoftmax(fsl_fctx *fx) { return softmax_family(fx, SMAX_LOG); }
/** ONNX Hardmax: one-hot of the first maximum (argmax == iota). */
fsl_status fsl_fission_Hardmax(fsl_fctx *fx) { return softmax_family(fx, SMAX_HARD); }

/* ---- layer-style normalizations ---- */

/* What LayerNormalization and RMSNormalization share: the axes
 * [axis, rank) they normalize over, epsilon, and the stash and compute
 * dtypes (stash_type). */
typedef struct tail_norm {
  int64_t axes[FSL_MAX_RANK];
  int n;
  double eps;
  fsl_dtype stash, cdt;
} tail_norm;

static bool tail_norm_attrs(fsl_fctx *fx, const fsl_value *x, tail_norm *t) {
  int64_t axis = fsl_attr_int(fx->node, "axis", -1);
  t->eps = fsl_attr_float(fx->node, "epsilon", 1e-5);
  if (!fsl_b_axis(fx->b, &axis, x->rank, "attribute 'axis'") || !stash_dtype(fx, x, &t->stash, &t->cdt))
    return false;
  t->n = tail_axes(axis, x->rank, t->axes);
  return true;
}

/** ONNX LayerNormalization: (x - mean) / sqrt(var + eps) * Scale + B over
 *  axes [axis, rank); outputs Y, Mean, InvStdDev (stash_type). */
fsl_status fsl_fission_LayerNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0), *scale = fsl_fx_req(fx, 1);
  fsl_value *bias = fx->n_in > 2 ? fx->in[2] : NULL;
  if (!x || !scale) return fsl_fx_done(fx);
  tail_norm t;
  if (!tail_norm_attrs(fx, x, &t)) return fsl_fx_done(fx);
  fsl_value *mean, *diff, *var;
  moments(b, fsl_b_cast(b, x, t.cdt), t.axes, t.n, &mean, &diff, &var);
  fsl_value *istd = inv_std(b, var, t.eps);
  fsl_value *norm = fsl_b_binary(b, FSL_OP_mul, diff, istd);
  fx->out[0] = affine_out(b, norm, scale, bias, x->dtype);
  if (fx->n_out > 1) fx->out[1] = fsl_b_cast(b, mean, t.stash);
  if (fx->n_out > 2) fx->out[2] = fsl_b_cast(b, istd, t.stash);
  return fsl_fx_done(fx);
}

/* BatchNormalization in training mode: batch statistics over every axis
 * but 1, running statistics updated with momentum. */
static fsl_status batchnorm_training(fsl_fctx *fx, fsl_value *x, fsl_value *const *p, double eps) {
  fsl_builder *b = fx->b;
  double mom = fsl_attr_float(fx->node, "momentum", 0.9);
  int64_t axes[FSL_MAX_RANK];
  int n = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i != 1) axes[n++] = i;
  }
  fsl_value *mean, *diff, *var;
  moments(b, x, axes, n, &mean, &diff, &var);
  fsl_value *norm = fsl_b_binary(b, FSL_OP_mul, diff, inv_std(b, var, eps));
  fsl_value *y = fsl_b_binary(b, FSL_OP_mul, norm, per_channel(b, p[0], x->rank));
  fx->out[0] = fsl_b_binary(b, FSL_OP_add, y, per_channel(b, p[1], x->rank));
  int64_t c = x->dims[1];
  fsl_value *bm = fsl_b_reshape(b, mean, 1, &c), *bv = fsl_b_reshape(b, var, 1, &c);
  fsl_value *stats[2] = {bm, bv}, *run[2];
  for (int i = 0; i < 2; i++) {
    fsl_value *old = fsl_b_binary_scalar(b, FSL_OP_mul, p[2 + i], mom);
    run[i] = fsl_b_binary(b, FSL_OP_add, old, fsl_b_binary_scalar(b, FSL_OP_mul, stats[i], 1.0 - mom));
  }
  if (fx->n_out > 1) fx->out[1] = run[0];
  if (fx->n_out > 2) fx->out[2] = run[1];
  if (fx->n_out > 3) fx->out[3] = bm;
  if (fx->n_out > 4) fx->out[4] = bv;
  return fsl_fx_done(fx);
}

/** ONNX BatchNormalization: inference as x * s + t with s = scale /
 *  sqrt(var + eps), t = B - mean * s (folded when constant); training mode
 *  (training_mode=1, or extra outputs before opset 14) uses batch stats. */
fsl_status fsl_fission_BatchNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0), *p[4];
  for (int i = 0; i < 4; i++) p[i] = fsl_fx_req(fx, i + 1);
  if (!x || !p[0] || !p[1] || !p[2] || !p[3]) return fsl_fx_done(fx);
  if (x->rank < 2) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input X must have rank >= 2");
  bool spatial = fx->opset >= 9 || fsl_attr_int(fx->node, "spatial", 1) != 0;
  for (int i = 0; i < 4 && spatial; i++) {
    if (!check_channels(fx, p[i], i + 1, x->dims[1])) return fsl_fx_done(fx);
  }
  double eps = fsl_attr_float(fx->node, "epsilon", 1e-5);
  bool training = fsl_attr_int(fx->node, "training_mode", 0) != 0;
  for (int i = 1; fx->opset < 14 && i < fx->node->n_out; i++) {
    const fsl_value *o = fx->node->out[i];
    training = training || (o && o->name && o->name[0]);
  }
  if (fx->opset < 7 && fsl_attr_int(fx->node, "is_test", 0) != 0) training = false;
  if (training) return batchnorm_training(fx, x, p, eps);
  fsl_dtype acc = fsl_acc_dtype(x->dtype);
  fsl_value *q[4];
  for (int i = 0; i < 4; i++) q[i] = fsl_b_cast(b, p[i], acc);
  fsl_value *s = fsl_b_binary(b, FSL_OP_mul, q[0], inv_std(b, q[3], eps));
  fsl_value *t = fsl_b_binary(b, FSL_OP_sub, q[1], fsl_b_binary(b, FSL_OP_mul, q[2], s));
  s = per_channel(b, s, x->rank);
  t = per_channel(b, t, x->rank);
  fsl_value *y = fsl_b_binary(b, FSL_OP_add, fsl_b_binary(b, FSL_OP_mul, fsl_b_cast(b, x, acc), s), t);
  fx->out[0] = fsl_b_cast(b, y, x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX InstanceNormalization: per (n, c) over the spatial axes,
 *  (x - mean) / sqrt(var + eps) * scale[c] + B[c]. */
fsl_status fsl_fission_InstanceNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0), *scale = fsl_fx_req(fx, 1), *bias = fsl_fx_req(fx, 2);
  if (!x || !scale || !bias) return fsl_fx_done(fx);
  if (x->rank < 3) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input must have rank >= 3");
  if (!check_channels(fx, scale, 1, x->dims[1]) || !check_channels(fx, bias, 2, x->dims[1]))
    return fsl_fx_done(fx);
  int64_t axes[FSL_MAX_RANK];
  int n = tail_axes(2, x->rank, axes);
  fsl_value *mean, *diff, *var;
  fsl_dtype acc = fsl_acc_dtype(x->dtype);
  moments(b, fsl_b_cast(b, x, acc), axes, n, &mean, &diff, &var);
  double eps = fsl_attr_float(fx->node, "epsilon", 1e-5);
  fsl_value *norm = fsl_b_binary(b, FSL_OP_mul, diff, inv_std(b, var, eps));
  fx->out[0] = affine_out(b, norm, per_channel(b, scale, x->rank), per_channel(b, bias, x->rank), x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX GroupNormalization: statistics per (n, group) over [C/G, D...];
 *  scale/bias per group (opset 18) or per channel (opset 21). */
fsl_status fsl_fission_GroupNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0), *scale = fsl_fx_req(fx, 1), *bias = fsl_fx_req(fx, 2);
  if (!x || !scale || !bias) return fsl_fx_done(fx);
  int64_t g = fsl_attr_int(fx->node, "num_groups", 0);
  if (x->rank < 2) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input must have rank >= 2");
  if (g <= 0 || x->dims[1] % g != 0)
    return fsl_fx_fail(fx, FSL_ERR_INVALID,
                       "attribute 'num_groups' (%lld) must be positive and divide the %lld channels",
                       (long long)g, (long long)x->dims[1]);
  int64_t npar = fx->opset < 21 ? g : x->dims[1];
  if (!check_channels(fx, scale, 1, npar) || !check_channels(fx, bias, 2, npar)) return fsl_fx_done(fx);
  fsl_dtype stash = x->dtype, cdt = fsl_acc_dtype(x->dtype);
  if (fx->opset >= 21 && !stash_dtype(fx, x, &stash, &cdt)) return fsl_fx_done(fx);
  double eps = fsl_attr_float(fx->node, "epsilon", 1e-5);
  int64_t gd[3] = {x->dims[0], g, x->dims[1] / g};
  for (int i = 2; i < x->rank; i++) gd[2] *= x->dims[i];
  int64_t axis2 = 2;
  fsl_value *mean, *diff, *var;
  moments(b, fsl_b_cast(b, fsl_b_reshape(b, x, 3, gd), cdt), &axis2, 1, &mean, &diff, &var);
  fsl_value *norm = fsl_b_binary(b, FSL_OP_mul, diff, inv_std(b, var, eps));
  if (fx->opset < 21) {
    int64_t pd[2] = {g, 1};
    norm = affine_out(b, norm, fsl_b_reshape(b, scale, 2, pd), fsl_b_reshape(b, bias, 2, pd), x->dtype);
    fx->out[0] = fsl_b_reshape(b, norm, x->rank, x->dims);
    return fsl_fx_done(fx);
  }
  fsl_value *y = fsl_b_reshape(b, norm, x->rank, x->dims);
  fx->out[0] = affine_out(b, y, per_channel(b, scale, x->rank), per_channel(b, bias, x->rank), x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX LpNormalization: x / ||x||_p along axis (p 1 or 2; 0 where the norm is 0). */
fsl_status fsl_fission_LpNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t axis = fsl_attr_int(fx->node, "axis", -1);
  int64_t p = fsl_attr_int(fx->node, "p", 2);
  if (p != 1 && p != 2)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'p' is %lld, expected 1 or 2", (long long)p);
  if (!fsl_b_axis(b, &axis, x->rank, "attribute 'axis'")) return fsl_fx_done(fx);
  fsl_value *xa = fsl_b_cast(b, x, fsl_acc_dtype(x->dtype));
  fsl_value *t = p == 1 ? fsl_b_unary(b, FSL_OP_abs, xa) : fsl_b_binary(b, FSL_OP_mul, xa, xa);
  fsl_value *norm = fsl_b_reduce(b, FSL_OP_reduce_sum, t, &axis, 1, true);
  if (p == 2) norm = fsl_b_unary(b, FSL_OP_sqrt, norm);
  fsl_value *zero = fsl_b_binary_scalar(b, FSL_OP_eq, norm, 0.0);
  fsl_value *y = fsl_b_where(b, zero, fsl_b_scalar(b, xa->dtype, 0.0), fsl_b_binary(b, FSL_OP_div, xa, norm));
  fx->out[0] = fsl_b_cast(b, y, x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX RMSNormalization: x / sqrt(mean(x^2) + eps) * scale over axes
 *  [axis, rank), computed in stash_type. */
fsl_status fsl_fission_RMSNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0), *scale = fsl_fx_req(fx, 1);
  if (!x || !scale) return fsl_fx_done(fx);
  tail_norm t;
  if (!tail_norm_attrs(fx, x, &t)) return fsl_fx_done(fx);
  fsl_value *xc = fsl_b_cast(b, x, t.cdt);
  fsl_value *ms = mean_over(b, fsl_b_binary(b, FSL_OP_mul, xc, xc), t.axes, t.n);
  fsl_value *norm = fsl_b_binary(b, FSL_OP_mul, xc, inv_std(b, ms, t.eps));
  fx->out[0] = affine_out(b, norm, scale, NULL, x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over
 *  `axes` (default [0, 2, 3]). */
fsl_status fsl_fission_MeanVarianceNormalization(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t axes[FSL_MAX_RANK] = {0, 2, 3};
  const int64_t *a = NULL;
  int n = fsl_attr_ints(fx->node, "axes", &a);
  if (n > x->rank)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'axes' has %d entries for rank %d", n, x->rank);
  if (n >= 0) memcpy(axes, a, (size_t)n * sizeof *axes);
  else n = 3;
  for (int i = 0; i < n; i++) {
    if (!fsl_b_axis(b, &axes[i], x->rank, "attribute 'axes'")) return fsl_fx_done(fx);
    for (int j = 0; j < i; j++) {
      if (axes[j] == axes[i])
        return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'axes' repeats axis %lld", (long long)axes[i]);
    }
  }
  fsl_value *mean, *diff, *var;
  moments(b, fsl_b_cast(b, x, fsl_acc_dtype(x->dtype)), axes, n, &mean, &diff, &var);
  fsl_value *std = fsl_b_binary_scalar(b, FSL_OP_add, fsl_b_unary(b, FSL_OP_sqrt, var), 1e-9);
  fx->out[0] = fsl_b_cast(b, fsl_b_binary(b, FSL_OP_div, diff, std), x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX LRN: x / (bias + alpha/size * sum of x^2 over the channel window
 *  [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta. */
fsl_status fsl_fission_LRN(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = float_input(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t size = fsl_attr_int(fx->node, "size", 0);
  if (size <= 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'size' must be positive");
  if (x->rank < 2) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input must have rank >= 2");
  double alpha = fsl_attr_float(fx->node, "alpha", 1e-4);
  double beta = fsl_attr_float(fx->node, "beta", 0.75);
  double bias = fsl_attr_float(fx->node, "bias", 1.0);
  int r = x->rank;
  int64_t perm[FSL_MAX_RANK], inv[FSL_MAX_RANK], pads[2 * FSL_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) perm[i] = i < 1 ? i : i == r - 1 ? 1 : i + 1;
  for (int i = 0; i < r; i++) inv[perm[i]] = i;
  pads[r - 1] = (size - 1) / 2;
  pads[2 * r - 1] = size / 2;
  int64_t one = 1;
  fsl_value *xa = fsl_b_cast(b, x, fsl_acc_dtype(x->dtype));
  fsl_value *sq = fsl_b_permute(b, fsl_b_binary(b, FSL_OP_mul, xa, xa), perm);
  fsl_value *w = fsl_b_window(b, fsl_b_pad(b, sq, pads, 0, 0.0), 1, &size, &one, &one);
  int64_t last = r;
  fsl_value *sum = fsl_b_permute(b, fsl_b_reduce(b, FSL_OP_reduce_sum, w, &last, 1, false), inv);
  fsl_value *den = fsl_b_binary_scalar(b, FSL_OP_add, fsl_b_binary_scalar(b, FSL_OP_mul, sum, alpha / (double)size), bias);
  fsl_value *y = fsl_b_binary(b, FSL_OP_div, xa, fsl_b_binary_scalar(b, FSL_OP_pow, den, beta));
  fx->out[0] = fsl_b_cast(b, y, x->dtype);
  return fsl_fx_done(fx);
}
