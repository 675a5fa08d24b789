/*
 * opaque.c — ONNX ops kept whole (opaque): TopK and CumSum are fusion
 * barriers run by their own kernel (src/eval/opaque.c in the
 * reference interpreter).  Here we only check their constant parameters and
 * give their outputs static types.
 */
#include "fission/fission.h"

/* Reads a constant input holding exactly one integer. */
static bool one_int(fsl_fctx *fx, const fsl_value *v, int64_t *out, const char *what) {
  int n = fsl_b_const_ints(fx->b, v, out, 1, what);
  if (n == 1) return true;
  if (n == 0) fsl_b_fail(fx->b, FSL_ERR_INVALID, "%s is empty, one integer expected", what);
  return false;
}

/** ONNX TopK (k attribute in opset 1, constant input K from 10): opaque;
 *  outputs Values (input dtype) and Indices (int64). */
fsl_status fsl_fission_TopK(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t k = fsl_attr_int(fx->node, "k", -1), axis = fsl_attr_int(fx->node, "axis", -1);
  if (fx->opset >= 10) {
    fsl_value *kv = fsl_fx_req(fx, 1);
    if (!kv || !one_int(fx, kv, &k, "input 'K'")) return fsl_fx_done(fx);
  }
  if (!fsl_b_axis(fx->b, &axis, x->rank, "axis")) return fsl_fx_done(fx);
  if (k < 0 || k > x->dims[axis])
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "K = %lld must be in [0, %lld]", (long long)k,
                       (long long)x->dims[axis]);
  if (!fsl_dtype_valid(x->dtype) || x->dtype == FSL_DT_BOOL)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "dtype %s", fsl_dtype_name(x->dtype));
  fsl_dtype dts[2] = {x->dtype, FSL_DT_I64};
  int ranks[2] = {x->rank, x->rank};
  int64_t dims[2][FSL_MAX_RANK];
  memcpy(dims[0], x->dims, sizeof(int64_t) * (size_t)x->rank);
  dims[0][axis] = k;
  memcpy(dims[1], dims[0], sizeof dims[0]);
  return fsl_fx_opaque(fx, dts, ranks, (const int64_t(*)[FSL_MAX_RANK])dims);
}

/** ONNX CumSum (constant axis input; exclusive, reverse): opaque, output
 *  like the input. */
fsl_status fsl_fission_CumSum(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *av = fsl_fx_req(fx, 1);
  int64_t axis;
  if (!x || !av || !one_int(fx, av, &axis, "input 'axis'"))
    return fsl_fx_done(fx);
  if (!fsl_b_axis(fx->b, &axis, x->rank, "axis")) return fsl_fx_done(fx);
  if (!fsl_dtype_valid(x->dtype) || x->dtype == FSL_DT_BOOL)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "dtype %s", fsl_dtype_name(x->dtype));
  fsl_dtype dt = x->dtype;
  int rank = x->rank;
  int64_t dims[1][FSL_MAX_RANK];
  memcpy(dims[0], x->dims, sizeof(int64_t) * (size_t)rank);
  return fsl_fx_opaque(fx, &dt, &rank, (const int64_t(*)[FSL_MAX_RANK])dims);
}
