/*
 * reduce.c — decompositions of the ONNX reductions (ReduceSum, ReduceMean,
 * ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
 * ReduceLogSumExp, ReduceSumSquare) and ArgMax / ArgMin.
 *
 * Axes come from the `axes` attribute before opset 13 (ReduceSum) or 18
 * (the others) and from the optional second input after; empty axes mean
 * every axis unless noop_with_empty_axes is set, in which case nothing is
 * reduced (the elementwise parts of the op still apply, as in the ONNX
 * reference implementation).
 */
#include "fission/fission.h"

#include <math.h>

typedef enum red_kind {
  RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2,
  RED_LOGSUM, RED_LOGSUMEXP, RED_SUMSQ
} red_kind;

/* The reduction set of one node: normalized, sorted, unique axes.
 * noop: reduce nothing (empty axes with noop_with_empty_axes). */
typedef struct red_axes {
  int64_t axes[FSL_MAX_RANK];
  int n;
  bool noop;
} red_axes;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Reads the raw axes list from the attribute or the input. */
static int read_raw_axes(fsl_fctx *fx, int64_t input_since, int64_t *raw) {
  if (fx->opset < input_since) {
    const int64_t *a = NULL;
    int n = fsl_attr_ints(fx->node, "axes", &a);
    if (n < 0) return 0;
    if (n > FSL_MAX_RANK) {
      fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'axes' has %d entries, expected at most %d", n,
                  FSL_MAX_RANK);
      return -1;
    }
    memcpy(raw, a, (size_t)n * sizeof *raw);
    return n;
  }
  const fsl_value *v = fx->n_in > 1 ? fx->in[1] : NULL;
  if (!v || fsl_value_numel(v) == 0) return 0;
  if (!v->data) {
    fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "input 'axes' must be a constant");
    return -1;
  }
  return fsl_b_const_ints(fx->b, v, raw, FSL_MAX_RANK, "input 'axes'");
}

/* Fills *ra for input x; false (with the error set) on bad axes. */
static bool get_axes(fsl_fctx *fx, const fsl_value *x, int64_t input_since, red_axes *ra) {
  int64_t raw[FSL_MAX_RANK];
  int n = read_raw_axes(fx, input_since, raw);
  if (n < 0) return false;
  ra->n = 0;
  ra->noop = false;
  if (n == 0) {
    if (fsl_attr_int(fx->node, "noop_with_empty_axes", 0) != 0) {
      ra->noop = true;
      return true;
    }
    for (int i = 0; i < x->rank; i++) ra->axes[ra->n++] = i;
    return true;
  }
  for (int i = 0; i < n; i++) {
    if (!fsl_b_axis(fx->b, &raw[i], x->rank, "axes")) return false;
  }
  qsort(raw, (size_t)n, sizeof *raw, cmp_i64);
  for (int i = 0; i < n; i++) {
    if (ra->n == 0 || ra->axes[ra->n - 1] != raw[i]) ra->axes[ra->n++] = raw[i];
  }
  return true;
}

/* Reduces x over ra (identity when ra->noop or x has rank 0). */
static fsl_value *reduce(fsl_builder *b, fsl_op op, fsl_value *x, const red_axes *ra, bool keep) {
  if (ra->noop || ra->n == 0) return x;
  return fsl_b_reduce(b, op, x, ra->axes, ra->n, keep);
}

/* Output shape of reducing x over ra with keepdims = keep. */
static int out_shape(const fsl_value *x, const red_axes *ra, bool keep, int64_t *dims) {
  int r = 0;
  for (int i = 0; i < x->rank; i++) {
    bool red = false;
    for (int j = 0; j < ra->n && !ra->noop; j++) red = red || ra->axes[j] == i;
    if (!red) dims[r++] = x->dims[i];
    else if (keep) dims[r++] = 1;
  }
  return r;
}

/* log(sum(exp(x))) computed as m + log(sum(exp(x - m))), m the max (taken
 * as 0 where it is infinite so that all -inf rows give -inf, not NaN). */
static fsl_value *log_sum_exp(fsl_builder *b, fsl_value *x, const red_axes *ra, bool keep) {
  if (ra->noop || ra->n == 0) return fsl_b_unary(b, FSL_OP_log, fsl_b_unary(b, FSL_OP_exp, x));
  fsl_value *m = reduce(b, FSL_OP_reduce_max, x, ra, true);
  fsl_value *inf = fsl_b_binary_scalar(b, FSL_OP_eq, fsl_b_unary(b, FSL_OP_abs, m), INFINITY);
  fsl_value *ms = fsl_b_where(b, inf, fsl_b_scalar(b, x->dtype, 0.0), m);
  fsl_value *e = fsl_b_unary(b, FSL_OP_exp, fsl_b_binary(b, FSL_OP_sub, x, ms));
  fsl_value *l = fsl_b_unary(b, FSL_OP_log, reduce(b, FSL_OP_reduce_sum, e, ra, true));
  fsl_value *y = fsl_b_binary(b, FSL_OP_add, l, ms);
  if (keep || !y) return y;
  int64_t dims[FSL_MAX_RANK];
  int r = out_shape(x, ra, false, dims);
  return fsl_b_reshape(b, y, r, dims);
}

/* The reduction proper, in x's dtype. */
static fsl_value *reduce_kind(fsl_builder *b, red_kind k, fsl_value *x, const red_axes *ra, bool keep) {
  switch (k) {
  case RED_SUM: return reduce(b, FSL_OP_reduce_sum, x, ra, keep);
  case RED_MAX: return reduce(b, FSL_OP_reduce_max, x, ra, keep);
  case RED_MIN: return reduce(b, FSL_OP_reduce_min, x, ra, keep);
  case RED_PROD: return reduce(b, FSL_OP_reduce_prod, x, ra, keep);
  case RED_L1: return reduce(b, FSL_OP_reduce_sum, fsl_b_unary(b, FSL_OP_abs, x), ra, keep);
  case RED_SUMSQ: return reduce(b, FSL_OP_reduce_sum, fsl_b_binary(b, FSL_OP_mul, x, x), ra, keep);
  case RED_L2:
    return fsl_b_unary(b, FSL_OP_sqrt, reduce_kind(b, RED_SUMSQ, x, ra, keep));
  case RED_LOGSUM:
    return fsl_b_unary(b, FSL_OP_log, reduce(b, FSL_OP_reduce_sum, x, ra, keep));
  case RED_LOGSUMEXP: return log_sum_exp(b, x, ra, keep);
  case RED_MEAN: {
    double count = 1.0;
    for (int j = 0; j < ra->n && !ra->noop; j++) count *= (double)x->dims[ra->axes[j]];
    fsl_value *s = reduce(b, FSL_OP_reduce_sum, x, ra, keep);
    if (ra->noop || ra->n == 0) return s;
    return fsl_b_binary_scalar(b, FSL_OP_div, s, count);
  }
  }
  return fsl_b_fail(b, FSL_ERR_INVALID, "unknown reduction kind %d", (int)k);
}

/* dtype a reduction is computed in: integers go through float64 for the
 * ops with sqrt / log; float16 / bfloat16 go through float32 for the ops
 * of several steps (intermediate squares, sums and exps would overflow or
 * round twice); the result is cast back to the input dtype once. */
static fsl_dtype compute_dtype(fsl_dtype dt, red_kind k) {
  bool transcendental = k == RED_L2 || k == RED_LOGSUM || k == RED_LOGSUMEXP;
  if (fsl_dtype_is_int(dt)) return transcendental ? FSL_DT_F64 : dt;
  bool half = dt == FSL_DT_F16 || dt == FSL_DT_BF16;
  return half && (transcendental || k == RED_MEAN || k == RED_SUMSQ) ? FSL_DT_F32 : dt;
}

/* Shared body of the Reduce* ops; input_since: first opset with axes as
 * an input. */
static fsl_status reduce_op(fsl_fctx *fx, red_kind k, int64_t input_since) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  red_axes ra;
  if (!get_axes(fx, x, input_since, &ra)) return fsl_fx_done(fx);
  bool keep = fsl_attr_int(fx->node, "keepdims", 1) != 0;
  fsl_dtype cdt = compute_dtype(x->dtype, k);
  fsl_value *y = reduce_kind(b, k, cdt == x->dtype ? x : fsl_b_cast(b, x, cdt), &ra, keep);
  fx->out[0] = y && y->dtype != x->dtype ? fsl_b_cast(b, y, x->dtype) : y;
  return fsl_fx_done(fx);
}

/** ONNX ReduceSum (axes an input from opset 13). */
fsl_status fsl_fission_ReduceSum(fsl_fctx *fx) { return reduce_op(fx, RED_SUM, 13); }
/** ONNX ReduceMean: sum / element count. */
fsl_status fsl_fission_ReduceMean(fsl_fctx *fx) { return reduce_op(fx, RED_MEAN, 18); }
/** ONNX ReduceMax. */
fsl_status fsl_fission_ReduceMax(fsl_fctx *fx) { return reduce_op(fx, RED_MAX, 18); }
/** ONNX ReduceMin. */
fsl_status fsl_fission_ReduceMin(fsl_fctx *fx) { return reduce_op(fx, RED_MIN, 18); }
/** ONNX ReduceProd. */
fsl_status fsl_fission_ReduceProd(fsl_fctx *fx) { return reduce_op(fx, RED_PROD, 18); }
/** ONNX ReduceL1: sum(|x|). */
fsl_status fsl_fission_ReduceL1(fsl_fctx *fx) { return reduce_op(fx, RED_L1, 18); }
/** ONNX ReduceL2: sqrt(sum(x^2)). */
fsl_status fsl_fission_ReduceL2(fsl_fctx *fx) { return reduce_op(fx, RED_L2, 18); }
/** ONNX ReduceLogSum: log(sum(x)). */
fsl_status fsl_fission_ReduceLogSum(fsl_fctx *fx) { return reduce_op(fx, RED_LOGSUM, 18); }
/** ONNX ReduceLogSumExp, stable: max + log(sum(exp(x - max))). */
fsl_status fsl_fission_ReduceLogSumExp(fsl_fctx *fx) { return reduce_op(fx, RED_LOGSUMEXP, 18); }
/** ONNX ReduceSumSquare: sum(x^2). */
fsl_status fsl_fission_ReduceSumSquare(fsl_fctx *fx) { return reduce_op(fx, RED_SUMSQ, 18); }

/* Shared body of ArgMax / ArgMin. */
static fsl_status arg_op(fsl_fctx *fx, fsl_op op) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t axis = fsl_attr_int(fx->node, "axis", 0);
  if (!fsl_b_axis(fx->b, &axis, x->rank, "attribute 'axis'")) return fsl_fx_done(fx);
  bool keep = fsl_attr_int(fx->node, "keepdims", 1) != 0;
  bool last = fsl_attr_int(fx->node, "select_last_index", 0) != 0;
  fx->out[0] = fsl_b_arg(fx->b, op, x, axis, keep, last);
  return fsl_fx_done(fx);
}

/** ONNX ArgMax (keepdims, select_last_index). */
fsl_status fsl_fission_ArgMax(fsl_fctx *fx) { return arg_op(fx, FSL_OP_argmax); }
/** ONNX ArgMin (keepdims, select_last_index). */
fsl_status fsl_fission_ArgMin(fsl_fctx *fx) { return arg_op(fx, FSL_OP_argmin); }
