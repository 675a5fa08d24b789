/*
 * gather.c — decompositions of the ONNX gather and scatter ops into the
 * gather primitives (gather, gather_elements, gather_nd, scatter_elements,
 * scatter_nd).  Negative indices are wrapped here (at compile time for
 * constant indices), so the primitives see indices in [0, dim).
 */
#include "fission/fission.h"

/* Reads and normalizes the axis attribute against rank. */
static bool get_axis(fsl_fctx *fx, int rank, int64_t *axis) {
  *axis = fsl_attr_int(fx->node, "axis", 0);
  return fsl_b_axis(fx->b, axis, rank, "axis");
}

/* Indices must be int32 or int64. */
static bool check_indices(fsl_fctx *fx, const fsl_value *idx) {
  if (idx->dtype == FSL_DT_I32 || idx->dtype == FSL_DT_I64) return true;
  fsl_b_fail(fx->b, FSL_ERR_INVALID, "indices must be int32 or int64, got %s",
             fsl_dtype_name(idx->dtype));
  return false;
}

/* Returns idx with negative entries wrapped by +dim: folded for constant
 * indices (and range-checked), where(idx < 0, idx + dim, idx) otherwise. */
static fsl_value *wrap_indices(fsl_fctx *fx, fsl_value *idx, int64_t dim) {
  if (!check_indices(fx, idx)) return NULL;
  if (!idx->data) {
    fsl_value *neg = fsl_b_binary_scalar(fx->b, FSL_OP_lt, idx, 0);
    fsl_value *up = fsl_b_binary_scalar(fx->b, FSL_OP_add, idx, (double)dim);
    return fsl_b_where(fx->b, neg, up, idx);
  }
  int64_t n = fsl_value_numel(idx);
  bool any = false;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = fsl_load_i64(idx->dtype, idx->data, i);
    if (v < -dim || v >= dim)
      return fsl_b_fail(fx->b, FSL_ERR_INVALID, "index %lld out of range [-%lld, %lld)",
                        (long long)v, (long long)dim, (long long)dim);
    any |= v < 0;
  }
  if (!any) return idx;
  fsl_value *c = fsl_b_const(fx->b, FSL_DT_I64, idx->rank, idx->dims, NULL);
  if (!c) return NULL;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = fsl_load_i64(idx->dtype, idx->data, i);
    ((int64_t *)c->data)[i] = v < 0 ? v + dim : v;
  }
  return c;
}

/* Step of constant, already wrapped indices that form an arithmetic
 * progression (1 for a single index); 0 if they do not. */
static int64_t progression_step(const fsl_value *idx) {
  int64_t n = fsl_value_numel(idx);
  if (n < 1) return 0;
  if (n == 1) return 1;
  int64_t first = fsl_load_i64(idx->dtype, idx->data, 0);
  int64_t step = fsl_load_i64(idx->dtype, idx->data, 1) - first;
  if (step == 0) return 0;
  for (int64_t i = 2; i < n; i++)
    if (fsl_load_i64(idx->dtype, idx->data, i) - fsl_load_i64(idx->dtype, idx->data, i - 1) != step)
      return 0;
  return step;
}

/* Gather with constant indices in arithmetic progression as a view: a slice
 * of the axis reshaped to data[:axis] + indices.shape + data[axis+1:]. */
static fsl_value *gather_as_slice(fsl_fctx *fx, fsl_value *data, const fsl_value *idx, int axis,
                                  int64_t step) {
  int64_t st[FSL_MAX_RANK], sp[FSL_MAX_RANK], sz[FSL_MAX_RANK], od[FSL_MAX_RANK];
  int r = data->rank - 1 + idx->rank, o = 0;
  if (r > FSL_MAX_RANK) return fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "output rank %d too large", r);
  for (int i = 0; i < data->rank; i++) st[i] = 0, sp[i] = 1, sz[i] = data->dims[i];
  st[axis] = fsl_load_i64(idx->dtype, idx->data, 0);
  sp[axis] = step;
  sz[axis] = fsl_value_numel(idx);
  for (int i = 0; i < axis; i++) od[o++] = data->dims[i];
  for (int i = 0; i < idx->rank; i++) od[o++] = idx->dims[i];
  for (int i = axis + 1; i < data->rank; i++) od[o++] = data->dims[i];
  return fsl_b_reshape(fx->b, fsl_b_slice(fx->b, data, st, sp, sz), r, od);
}

/** ONNX Gather (axis; negative indices wrap; constant indices in arithmetic
 *  progression become a slice, a view). */
fsl_status fsl_fission_Gather(fsl_fctx *fx) {
  fsl_value *data = fsl_fx_req(fx, 0), *idx = fsl_fx_req(fx, 1);
  int64_t axis;
  if (!data || !idx || !get_axis(fx, data->rank, &axis)) return fsl_fx_done(fx);
  idx = wrap_indices(fx, idx, data->dims[axis]);
  int64_t step = idx && idx->data ? progression_step(idx) : 0;
  fx->out[0] = step ? gather_as_slice(fx, data, idx, (int)axis, step)
                    : fsl_b_gather(fx->b, data, idx, (int)axis);
  return fsl_fx_done(fx);
}

/** ONNX GatherElements (axis; negative indices wrap). */
fsl_status fsl_fission_GatherElements(fsl_fctx *fx) {
  fsl_value *data = fsl_fx_req(fx, 0), *idx = fsl_fx_req(fx, 1);
  int64_t axis;
  if (!data || !idx || !get_axis(fx, data->rank, &axis)) return fsl_fx_done(fx);
  if (idx->rank != data->rank)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "indices rank %d != data rank %d", idx->rank, data->rank);
  idx = wrap_indices(fx, idx, data->dims[axis]);
  fx->out[0] = fsl_b_gather_elements(fx->b, data, idx, (int)axis);
  return fsl_fx_done(fx);
}

/* Wraps negative entries of GatherND/ScatterND index tuples: the last axis
 * of idx indexes data axes batch_dims, batch_dims+1, ... */
static fsl_value *wrap_nd_indices(fsl_fctx *fx, fsl_value *data, fsl_value *idx, int64_t bd) {
  if (!check_indices(fx, idx)) return NULL;
  if (idx->rank < 1) return fsl_b_fail(fx->b, FSL_ERR_SHAPE, "indices must have rank >= 1");
  int64_t q = idx->dims[idx->rank - 1];
  if (q < 1 || bd + q > data->rank)
    return fsl_b_fail(fx->b, FSL_ERR_SHAPE, "index tuples of length %lld do not fit data rank %d",
                      (long long)q, data->rank);
  int64_t dims[FSL_MAX_RANK] = {0};
  for (int i = 0; i < idx->rank - 1; i++) dims[i] = 1;
  dims[idx->rank - 1] = q;
  int64_t lim[FSL_MAX_RANK];
  for (int64_t j = 0; j < q; j++) lim[j] = data->dims[bd + j];
  fsl_value *dim = fsl_b_const(fx->b, FSL_DT_I64, idx->rank, dims, lim);
  fsl_value *i64 = idx->dtype == FSL_DT_I64 ? idx : fsl_b_cast(fx->b, idx, FSL_DT_I64);
  fsl_value *neg = fsl_b_binary_scalar(fx->b, FSL_OP_lt, i64, 0);
  fsl_value *up = fsl_b_binary(fx->b, FSL_OP_add, i64, dim);
  return fsl_b_where(fx->b, neg, up, i64);
}

/** ONNX GatherND (batch_dims from opset 12). */
fsl_status fsl_fission_GatherND(fsl_fctx *fx) {
  fsl_value *data = fsl_fx_req(fx, 0), *idx = fsl_fx_req(fx, 1);
  if (!data || !idx) return fsl_fx_done(fx);
  int64_t bd = fsl_attr_int(fx->node, "batch_dims", 0);
  if (bd < 0 || bd >= data->rank || bd >= idx->rank)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "batch_dims %lld out of range", (long long)bd);
  idx = wrap_nd_indices(fx, data, idx, bd);
  fsl_value *in[2] = {data, idx};
  fsl_attr a = fsl_attr_make_int("batch_dims", bd);
  fx->out[0] = idx ? fsl_b_prim(fx->b, FSL_OP_gather_nd, in, 2, &a, 1) : NULL;
  return fsl_fx_done(fx);
}

/* Scatter reduction name -> primitive code (0 none, 1 add, 2 mul, 3 max,
 * 4 min); -1 if unknown. */
static int reduction_code(fsl_fctx *fx) {
  static const char *const k[] = {"none", "add", "mul", "max", "min"};
  const char *s = fsl_attr_str(fx->node, "reduction", "none");
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, k[i])) return i;
  fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "reduction must be none, add, mul, max or min, got '%s'", s);
  return -1;
}

/* Scatter of updates into data along axis (ScatterElements and Scatter). */
static fsl_status scatter_elements(fsl_fctx *fx) {
  fsl_value *data = fsl_fx_req(fx, 0), *idx = fsl_fx_req(fx, 1), *upd = fsl_fx_req(fx, 2);
  int64_t axis;
  if (!data || !idx || !upd || !get_axis(fx, data->rank, &axis)) return fsl_fx_done(fx);
  int red = reduction_code(fx);
  if (red < 0) return fsl_fx_done(fx);
  if (idx->rank != data->rank || upd->rank != idx->rank)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "data, indices and updates must have equal ranks");
  idx = wrap_indices(fx, idx, data->dims[axis]);
  fsl_value *in[3] = {data, idx, upd};
  fsl_attr a[2] = {fsl_attr_make_int("axis", axis), fsl_attr_make_int("reduction", red)};
  fx->out[0] = idx ? fsl_b_prim(fx->b, FSL_OP_scatter_elements, in, 3, a, 2) : NULL;
  return fsl_fx_done(fx);
}

/** ONNX ScatterElements (axis; reduction add/mul from 16, max/min from 18). */
fsl_status fsl_fission_ScatterElements(fsl_fctx *fx) { return scatter_elements(fx); }

/** ONNX Scatter (deprecated; same as ScatterElements without reduction). */
fsl_status fsl_fission_Scatter(fsl_fctx *fx) { return scatter_elements(fx); }

/** ONNX ScatterND (reduction add/mul from 16, max/min from 18). */
fsl_status fsl_fission_ScatterND(fsl_fctx *fx) {
  fsl_value *data = fsl_fx_req(fx, 0), *idx = fsl_fx_req(fx, 1), *upd = fsl_fx_req(fx, 2);
  if (!data || !idx || !upd) return fsl_fx_done(fx);
  int red = reduction_code(fx);
  if (red < 0) return fsl_fx_done(fx);
  idx = wrap_nd_indices(fx, data, idx, 0);
  fsl_value *in[3] = {data, idx, upd};
  fsl_attr a = fsl_attr_make_int("reduction", red);
  fx->out[0] = idx ? fsl_b_prim(fx->b, FSL_OP_scatter_nd, in, 3, &a, 1) : NULL;
  return fsl_fx_done(fx);
}
