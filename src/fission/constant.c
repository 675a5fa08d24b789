/*
 * constant.c — decompositions of the ONNX constant and shape ops.  Shapes
 * are static, so Shape, Size, ConstantOfShape, Range and EyeLike become
 * compile-time constants; OneHot compares indices against an iota.
 */
#include "fission/fission.h"
#include <math.h>

static const int64_t k_no_dims[FSL_MAX_RANK];

/* Constant from a buffer (NULL data: zeros). */
static fsl_value *make_const(fsl_builder *b, fsl_dtype dt, int rank, const int64_t *dims, const void *data) {
  return fsl_b_const(b, dt, rank, rank ? dims : k_no_dims, data);
}

/* An attribute tensor fissile can use: numeric dtype, data present. */
static bool tensor_ok(const fsl_ctensor *t) {
  int64_t n = fsl_numel(t->rank, t->dims);
  return fsl_dtype_valid(t->dtype) && n >= 0 && (t->data || n == 0);
}

/* A zero constant for the caller to fill, or NULL (error set on the
 * builder: too large for the model's constants' limit, builder.h). */
static fsl_value *zero_const(fsl_builder *b, fsl_dtype dt, int rank, const int64_t *dims) {
  fsl_value *v = make_const(b, dt, rank, dims, NULL);
  if (v) memset(v->data, 0, (size_t)fsl_value_nbytes(v));
  return v;
}

/* Constant from an attribute's float list (float32) or int list (int64). */
static fsl_value *list_const(fsl_fctx *fx, const fsl_attr *a, bool scalar) {
  int n = scalar ? 1 : a->n;
  int64_t dims[1] = {n};
  if (a->type == FSL_ATTR_INT || a->type == FSL_ATTR_INTS)
    return make_const(fx->b, FSL_DT_I64, scalar ? 0 : 1, dims, scalar ? &a->i : a->ints);
  fsl_value *v = zero_const(fx->b, FSL_DT_F32, scalar ? 0 : 1, dims);
  if (!v) return NULL;
  for (int i = 0; i < n; i++) ((float *)v->data)[i] = (float)(scalar ? a->f : a->floats[i]);
  return v;
}

/** ONNX Constant: value (tensor), value_float(s) or value_int(s). */
fsl_status fsl_fission_Constant(fsl_fctx *fx) {
  const fsl_node *n = fx->node;
  const fsl_attr *a;
  if ((a = fsl_attr_find(n, "value")) && a->type == FSL_ATTR_TENSOR && a->t) {
    const fsl_ctensor *t = a->t;
    if (!tensor_ok(t))
      return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "attribute value: a %s tensor without usable data", fsl_dtype_name(t->dtype));
    fx->out[0] = make_const(fx->b, t->dtype, t->rank, t->dims, t->data);
  } else if ((a = fsl_attr_find(n, "value_float")) && a->type == FSL_ATTR_FLOAT) {
    fx->out[0] = list_const(fx, a, true);
  } else if ((a = fsl_attr_find(n, "value_floats")) && a->type == FSL_ATTR_FLOATS) {
    fx->out[0] = list_const(fx, a, false);
  } else if ((a = fsl_attr_find(n, "value_int")) && a->type == FSL_ATTR_INT) {
    fx->out[0] = list_const(fx, a, true);
  } else if ((a = fsl_attr_find(n, "value_ints")) && a->type == FSL_ATTR_INTS) {
    fx->out[0] = list_const(fx, a, false);
  } else if (fsl_attr_find(n, "sparse_value") || fsl_attr_find(n, "value_string") ||
             fsl_attr_find(n, "value_strings")) {
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "sparse and string constants are not supported");
  } else {
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected one of the attributes value, value_float(s), value_int(s)");
  }
  return fsl_fx_done(fx);
}

/* Clamps a Shape start/end attribute into [0, rank]. */
static int64_t clamp_dim_index(int64_t v, int rank) {
  if (v < 0) v += rank;
  return v < 0 ? 0 : v > rank ? rank : v;
}

/** ONNX Shape: the input's dims as int64 (slice [start, end) from opset 15). */
fsl_status fsl_fission_Shape(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t start = 0, end = x->rank;
  if (fx->opset >= 15) {
    start = clamp_dim_index(fsl_attr_int(fx->node, "start", 0), x->rank);
    end = clamp_dim_index(fsl_attr_int(fx->node, "end", x->rank), x->rank);
  }
  int n = end > start ? (int)(end - start) : 0;
  fx->out[0] = fsl_b_ints(fx->b, n, n ? x->dims + start : k_no_dims);
  return fsl_fx_done(fx);
}

/** ONNX Size: the input's element count as an int64 scalar. */
fsl_status fsl_fission_Size(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t n = fsl_value_numel(x);
  fx->out[0] = make_const(fx->b, FSL_DT_I64, 0, NULL, &n);
  return fsl_fx_done(fx);
}

/** ONNX ConstantOfShape: a scalar (attribute value, default float 0)
 *  broadcast to the shape given by the constant input. */
fsl_status fsl_fission_ConstantOfShape(fsl_fctx *fx) {
  fsl_value *shape = fsl_fx_req(fx, 0);
  int64_t dims[FSL_MAX_RANK];
  int rank = shape ? fsl_b_const_ints(fx->b, shape, dims, FSL_MAX_RANK, "input 'input' (shape)") : -1;
  if (rank < 0) return fsl_fx_done(fx);
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "shape dim %d is negative (%lld)", i, (long long)dims[i]);
  const fsl_attr *a = fsl_attr_find(fx->node, "value");
  fsl_dtype dt = FSL_DT_F32;
  const void *val = NULL;
  static const float fzero = 0;
  if (a && a->type == FSL_ATTR_TENSOR && a->t) {
    if (!tensor_ok(a->t) || fsl_numel(a->t->rank, a->t->dims) != 1)
      return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "attribute value must be one element of a numeric type");
    dt = a->t->dtype;
    val = a->t->data;
  }
  if (fsl_numel(rank, dims) == 0) {
    fx->out[0] = make_const(fx->b, dt, rank, dims, NULL);
    return fsl_fx_done(fx);
  }
  fsl_value *s = make_const(fx->b, dt, 0, NULL, val ? val : &fzero);
  fx->out[0] = fsl_b_broadcast_to(fx->b, s, rank, dims);
  return fsl_fx_done(fx);
}

/* Element count of Range for integer operands (exact, no overflow). */
static int64_t range_count_int(int64_t start, int64_t limit, int64_t delta) {
  if (delta > 0 && limit > start)
    return (int64_t)(((uint64_t)limit - (uint64_t)start - 1) / (uint64_t)delta + 1);
  if (delta < 0 && limit < start)
    return (int64_t)(((uint64_t)start - (uint64_t)limit - 1) / (0 - (uint64_t)delta) + 1);
  return 0;
}

/** ONNX Range: start, start+delta, ... up to (excluding) limit; inputs must be constant. */
fsl_status fsl_fission_Range(fsl_fctx *fx) {
  fsl_value *in[3] = {fsl_fx_req(fx, 0), fsl_fx_req(fx, 1), fsl_fx_req(fx, 2)};
  static const char *names[3] = {"input 'start'", "input 'limit'", "input 'delta'"};
  if (!in[0] || !in[1] || !in[2]) return fsl_fx_done(fx);
  fsl_dtype dt = in[0]->dtype;
  bool is_int = fsl_dtype_is_int(dt);
  double f[3];
  int64_t i[3];
  for (int k = 0; k < 3; k++) {
    bool ok = is_int ? fsl_b_const_ints(fx->b, in[k], &i[k], 1, names[k]) == 1
                     : fsl_b_const_scalar(fx->b, in[k], &f[k], names[k]);
    if (!ok) return fsl_fx_done(fx);
  }
  if (is_int ? i[2] == 0 : f[2] == 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input 'delta' is zero");
  double cnt = is_int ? (double)range_count_int(i[0], i[1], i[2]) : ceil((f[1] - f[0]) / f[2]);
  if (!(cnt >= 0)) cnt = 0;
  if (cnt > (double)((int64_t)1 << 50)) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "Range of %.0f elements is too large", cnt);
  int64_t n = (int64_t)cnt;
  fsl_value *v = zero_const(fx->b, dt, 1, &n);
  if (!v) return fsl_fx_done(fx);
  for (int64_t k = 0; k < n; k++) {
    if (is_int) fsl_store_i64(dt, v->data, k, (int64_t)((uint64_t)i[0] + (uint64_t)k * (uint64_t)i[2]));
    else fsl_store_f64(dt, v->data, k, f[0] + (double)k * f[2]);
  }
  fx->out[0] = v;
  return fsl_fx_done(fx);
}

/** ONNX EyeLike: 2-D constant with ones on diagonal k (dtype attr or the input's). */
fsl_status fsl_fission_EyeLike(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  if (x->rank != 2) return fsl_fx_fail(fx, FSL_ERR_INVALID, "input must be 2-D, got rank %d", x->rank);
  fsl_dtype dt = (fsl_dtype)fsl_attr_int(fx->node, "dtype", x->dtype);
  if (!fsl_dtype_valid(dt))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "output dtype %s", fsl_dtype_name(dt));
  int64_t k = fsl_attr_int(fx->node, "k", 0);
  fsl_value *v = zero_const(fx->b, dt, 2, x->dims);
  if (!v) return fsl_fx_done(fx);
  for (int64_t r = 0; r < x->dims[0]; r++) {
    int64_t c = r + k;
    if (c >= 0 && c < x->dims[1]) fsl_store_f64(dt, v->data, r * x->dims[1] + c, 1.0);
  }
  fx->out[0] = v;
  return fsl_fx_done(fx);
}

/* values[i] of OneHot's 2-element values input, as a scalar. */
static fsl_value *onehot_value(fsl_builder *b, fsl_value *values, int i) {
  return fsl_b_reshape(b, fsl_b_slice_axis(b, values, 0, i, 1), 0, k_no_dims);
}

/** ONNX OneHot: out[..., j, ...] = j == indices[...] (negative indices wrap)
 *  ? values[1] : values[0], the depth axis inserted at attribute axis. */
fsl_status fsl_fission_OneHot(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *idx = fsl_fx_req(fx, 0), *depth_v = fsl_fx_req(fx, 1), *values = fsl_fx_req(fx, 2);
  double depth_f;
  if (!idx || !depth_v || !values || !fsl_b_const_scalar(b, depth_v, &depth_f, "input 'depth'"))
    return fsl_fx_done(fx);
  int64_t depth = (int64_t)depth_f;
  if (depth < 1) return fsl_fx_fail(fx, FSL_ERR_INVALID, "depth must be positive, got %lld", (long long)depth);
  if (values->rank != 1 || values->dims[0] != 2)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "input 'values' must have 2 elements [off, on]");
  int r = idx->rank + 1;
  int64_t axis = fsl_attr_int(fx->node, "axis", -1);
  if (r > FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "output rank %d", r);
  if (!fsl_b_axis(b, &axis, r, "attribute axis")) return fsl_fx_done(fx);
  int64_t di[FSL_MAX_RANK], dd[FSL_MAX_RANK];
  for (int i = 0, j = 0; i < r; i++) {
    di[i] = i == axis ? 1 : idx->dims[j++];
    dd[i] = i == axis ? depth : 1;
  }
  fsl_value *ix = idx->dtype == FSL_DT_I64 ? idx : fsl_b_cast(b, idx, FSL_DT_I64);
  fsl_value *neg = fsl_b_binary_scalar(b, FSL_OP_lt, ix, 0.0);
  ix = fsl_b_where(b, neg, fsl_b_binary_scalar(b, FSL_OP_add, ix, (double)depth), ix);
  ix = fsl_b_reshape(b, ix, r, di);
  fsl_value *io = zero_const(b, FSL_DT_I64, r, dd);
  if (!io) return fsl_fx_done(fx);
  for (int64_t k = 0; k < depth; k++) ((int64_t *)io->data)[k] = k;
  fsl_value *hit = fsl_b_binary(b, FSL_OP_eq, ix, io);
  fx->out[0] = fsl_b_where(b, hit, onehot_value(b, values, 1), onehot_value(b, values, 0));
  return fsl_fx_done(fx);
}
