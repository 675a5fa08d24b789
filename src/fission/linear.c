/*
 * linear.c — decompositions of the linear ONNX ops: MatMul, Gemm, Conv,
 * ConvTranspose, MatMulInteger, ConvInteger, Einsum.  Everything becomes
 * the matmul / conv primitives plus movement and elementwise primitives.
 */
#include "fission/fission.h"

#include <ctype.h>

/* ------------------------------------------------------------------ */
/* small shared helpers                                                 */
/* ------------------------------------------------------------------ */

/* Permute, skipping the identity permutation. */
static fsl_value *permute_opt(fsl_builder *b, fsl_value *x, const int64_t *perm) {
  if (!x) return NULL;
  for (int i = 0; i < x->rank; i++)
    if (perm[i] != i) return fsl_b_permute(b, x, perm);
  return x;
}

/* Reshape, skipping a reshape to the same shape. */
static fsl_value *reshape_opt(fsl_builder *b, fsl_value *x, int rank, const int64_t *dims) {
  if (!x) return NULL;
  if (x->rank == rank && (rank == 0 || memcmp(x->dims, dims, (size_t)rank * sizeof(int64_t)) == 0))
    return x;
  return fsl_b_reshape(b, x, rank, dims);
}

/* x * s, skipping s == 1. */
static fsl_value *scale_opt(fsl_builder *b, fsl_value *x, double s) {
  if (!x || s == 1.0) return x;
  return fsl_b_binary_scalar(b, FSL_OP_mul, x, s);
}

/* Reshapes a 1-D per-channel vector v [n] to [1, n, 1, ...] of `rank`
 * (channel axis `axis`), so it broadcasts over a conv output. */
static fsl_value *channel_vector(fsl_builder *b, fsl_value *v, int rank, int axis) {
  if (!v) return NULL;
  if (v->rank == 0) return v;
  int64_t dims[FSL_MAX_RANK];
  for (int i = 0; i < rank; i++) dims[i] = 1;
  dims[axis] = fsl_value_numel(v);
  return reshape_opt(b, v, rank, dims);
}

/* Casts x to int32 and subtracts the (optional) zero point zp, reshaped
 * by `zp_rank`/`zp_axis` when it is a 1-D vector of more than one
 * element (per-row / per-channel zero points). */
static fsl_value *int32_minus_zp(fsl_builder *b, fsl_value *x, fsl_value *zp, int zp_rank, int zp_axis) {
  fsl_value *xi = fsl_b_cast(b, x, FSL_DT_I32);
  if (!zp) return xi;
  fsl_value *zi = fsl_b_cast(b, zp, FSL_DT_I32);
  if (zp->rank == 1 && fsl_value_numel(zp) > 1) zi = channel_vector(b, zi, zp_rank, zp_axis);
  return fsl_b_binary(b, FSL_OP_sub, xi, zi);
}

/* ------------------------------------------------------------------ */
/* MatMul, MatMulInteger, Gemm                                          */
/* ------------------------------------------------------------------ */

/** ONNX MatMul (opset 1, 9, 13): numpy matmul. */
fsl_status fsl_fission_MatMul(fsl_fctx *fx) {
  fsl_value *a = fsl_fx_req(fx, 0), *b = fsl_fx_req(fx, 1);
  if (!a || !b) return fsl_fx_done(fx);
  fx->out[0] = fsl_b_matmul(fx->b, a, b);
  return fsl_fx_done(fx);
}

/** ONNX MatMulInteger (opset 10): (A - a_zero_point) x (B - b_zero_point) in int32. */
fsl_status fsl_fission_MatMulInteger(fsl_fctx *fx) {
  fsl_value *a = fsl_fx_req(fx, 0), *b = fsl_fx_req(fx, 1);
  if (!a || !b) return fsl_fx_done(fx);
  if (a->rank < 1 || b->rank < 1)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected A and B of rank >= 1");
  fsl_value *azp = fx->n_in > 2 ? fx->in[2] : NULL;
  fsl_value *bzp = fx->n_in > 3 ? fx->in[3] : NULL;
  /* a 1-D a_zero_point holds one value per row of A: shape [M, 1] */
  fsl_value *ai = int32_minus_zp(fx->b, a, azp, 2, 0);
  fsl_value *bi = int32_minus_zp(fx->b, b, bzp, 1, 0);
  fx->out[0] = fsl_b_matmul(fx->b, ai, bi);
  return fsl_fx_done(fx);
}

/** ONNX Gemm (opset 1, 6, 7, 9, 11, 13): alpha * A' x B' + beta * C. */
fsl_status fsl_fission_Gemm(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *a = fsl_fx_req(fx, 0), *w = fsl_fx_req(fx, 1);
  if (!a || !w) return fsl_fx_done(fx);
  if (a->rank != 2 || w->rank != 2)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 2-D A and B, got ranks %d and %d", a->rank, w->rank);
  fsl_value *c = fx->n_in > 2 ? fx->in[2] : NULL;
  if (!c && fx->opset < 11)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "input 2 ('C') is required before opset 11");
  double alpha = fsl_attr_float(fx->node, "alpha", 1.0);
  double beta = fsl_attr_float(fx->node, "beta", 1.0);
  static const int64_t tr[2] = {1, 0};
  if (fsl_attr_int(fx->node, "transA", 0)) a = fsl_b_permute(b, a, tr);
  if (fsl_attr_int(fx->node, "transB", 0)) w = fsl_b_permute(b, w, tr);
  fsl_value *y = scale_opt(b, fsl_b_matmul(b, a, w), alpha);
  if (c && beta != 0.0) {
    if (c->rank > 2)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected C of rank <= 2, got rank %d", c->rank);
    y = fsl_b_binary(b, FSL_OP_add, y, scale_opt(b, c, beta));
  }
  fx->out[0] = y;
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* convolution geometry                                                 */
/* ------------------------------------------------------------------ */

typedef struct conv_geom {
  int k;                                 /* number of spatial axes */
  int64_t kernel[FSL_MAX_RANK];
  int64_t strides[FSL_MAX_RANK];
  int64_t dil[FSL_MAX_RANK];
  int64_t pads[2 * FSL_MAX_RANK];        /* begins then ends */
  int64_t group;
  const char *auto_pad;                  /* NOTSET SAME_UPPER SAME_LOWER VALID */
} conv_geom;

/* Reads an INTS attribute with k entries (all >= min) or fills def. */
static fsl_status read_spatial(fsl_fctx *fx, const char *name, int k, int64_t def,
                               int64_t min, int64_t *out) {
  const int64_t *v;
  int n = fsl_attr_ints(fx->node, name, &v);
  for (int i = 0; i < k; i++) out[i] = def;
  if (n < 0) return FSL_OK;
  if (n != k)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d values in '%s', got %d", k, name, n);
  for (int i = 0; i < k; i++) {
    if (v[i] < min)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected '%s' values >= %lld, got %lld", name,
                         (long long)min, (long long)v[i]);
    out[i] = v[i];
  }
  return FSL_OK;
}

/* Reads the attributes shared by Conv, ConvInteger and ConvTranspose:
 * kernel_shape (checked against the weights), strides, dilations, pads,
 * group, auto_pad.  Pads from auto_pad are resolved by the caller. */
static fsl_status read_conv_geom(fsl_fctx *fx, const fsl_value *x, const fsl_value *w, conv_geom *g) {
  if (x->rank < 3 || w->rank != x->rank)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected X [N, C, spatial...] and W of the same rank >= 3, got ranks %d and %d",
                       x->rank, w->rank);
  g->k = x->rank - 2;
  for (int i = 0; i < g->k; i++) g->kernel[i] = w->dims[2 + i];
  const int64_t *ks;
  int nks = fsl_attr_ints(fx->node, "kernel_shape", &ks);
  if (nks >= 0) {
    if (nks != g->k)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d values in 'kernel_shape', got %d", g->k, nks);
    for (int i = 0; i < g->k; i++)
      if (ks[i] != g->kernel[i])
        return fsl_fx_fail(fx, FSL_ERR_INVALID, "'kernel_shape'[%d] = %lld does not match the weights (%lld)", i,
                           (long long)ks[i], (long long)g->kernel[i]);
  }
  FSL_TRY(read_spatial(fx, "strides", g->k, 1, 1, g->strides));
  FSL_TRY(read_spatial(fx, "dilations", g->k, 1, 1, g->dil));
  FSL_TRY(read_spatial(fx, "pads", 2 * g->k, 0, INT64_MIN, g->pads));
  g->group = fsl_attr_int(fx->node, "group", 1);
  if (g->group < 1)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 'group' >= 1, got %lld", (long long)g->group);
  g->auto_pad = fsl_attr_str(fx->node, "auto_pad", "NOTSET");
  if (strcmp(g->auto_pad, "NOTSET") && strcmp(g->auto_pad, "SAME_UPPER") && strcmp(g->auto_pad, "SAME_LOWER") &&
      strcmp(g->auto_pad, "VALID"))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 'auto_pad' NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '%s'",
                       g->auto_pad);
  return FSL_OK;
}

static bool is_same_pad(const char *auto_pad) {
  return !strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER");
}

/* Splits a total padding between begin and end: SAME_UPPER puts the odd
 * element at the end, otherwise at the beginning (floor division, as the
 * ONNX reference implementation does, so negative totals work too). */
static void split_pad(int64_t total, bool upper, int64_t *begin, int64_t *end) {
  int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
  if (upper) {
    *begin = half;
    *end = total - half;
  } else {
    *begin = total - half;
    *end = half;
  }
}

/* Resolves auto_pad for a forward convolution over input x. */
static void conv_auto_pads(conv_geom *g, const fsl_value *x) {
  if (!strcmp(g->auto_pad, "VALID")) {
    for (int i = 0; i < 2 * g->k; i++) g->pads[i] = 0;
    return;
  }
  if (!is_same_pad(g->auto_pad)) return;
  bool upper = !strcmp(g->auto_pad, "SAME_UPPER");
  for (int i = 0; i < g->k; i++) {
    int64_t in = x->dims[2 + i], s = g->strides[i];
    int64_t out = (in + s - 1) / s;
    int64_t total = (out - 1) * s + (g->kernel[i] - 1) * g->dil[i] + 1 - in;
    if (total < 0) total = 0;
    split_pad(total, upper, &g->pads[i], &g->pads[g->k + i]);
  }
}

/* Checks that the channel counts of x, w agree with the group. */
static fsl_status check_conv_channels(fsl_fctx *fx, const fsl_value *x, const fsl_value *w, const conv_geom *g) {
  if (w->dims[1] * g->group != x->dims[1] || w->dims[0] % g->group != 0)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected W [M, C/group, k...] with C = %lld, group = %lld and M divisible by group, got W [%lld, %lld, ...]",
                       (long long)x->dims[1], (long long)g->group, (long long)w->dims[0], (long long)w->dims[1]);
  for (int i = 0; i < 2 * g->k; i++)
    if (g->pads[i] < 0)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 'pads' >= 0, got %lld", (long long)g->pads[i]);
  return FSL_OK;
}

/* Adds an optional bias [M] over the channel axis 1. */
static fsl_value *add_bias(fsl_fctx *fx, fsl_value *y, int bias_input) {
  fsl_value *bias = fx->n_in > bias_input ? fx->in[bias_input] : NULL;
  if (!bias || !y) return y;
  if (bias->rank != 1 || bias->dims[0] != y->dims[1]) {
    fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected bias B of shape [%lld]", (long long)y->dims[1]);
    return NULL;
  }
  return fsl_b_binary(fx->b, FSL_OP_add, y, channel_vector(fx->b, bias, y->rank, 1));
}

/* Shared by Conv and ConvInteger: the conv primitive over x, w. */
static fsl_status conv_common(fsl_fctx *fx, fsl_value *x, fsl_value *w, const fsl_value *x_orig,
                              const fsl_value *w_orig, int bias_input) {
  conv_geom g;
  FSL_TRY(read_conv_geom(fx, x_orig, w_orig, &g));
  conv_auto_pads(&g, x_orig);
  FSL_TRY(check_conv_channels(fx, x_orig, w_orig, &g));
  fsl_value *y = fsl_b_conv(fx->b, x, w, g.strides, g.dil, g.pads, g.group, NULL);
  if (bias_input >= 0) y = add_bias(fx, y, bias_input);
  fx->out[0] = y;
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* Conv, ConvInteger, ConvTranspose                                     */
/* ------------------------------------------------------------------ */

/** ONNX Conv (opset 1, 11): N-d grouped convolution plus optional bias. */
fsl_status fsl_fission_Conv(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *w = fsl_fx_req(fx, 1);
  if (!x || !w) return fsl_fx_done(fx);
  return conv_common(fx, x, w, x, w, 2);
}

/** ONNX ConvInteger (opset 10): conv of (x - x_zero_point), (w - w_zero_point) in int32. */
fsl_status fsl_fission_ConvInteger(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0), *w = fsl_fx_req(fx, 1);
  if (!x || !w) return fsl_fx_done(fx);
  fsl_value *xzp = fx->n_in > 2 ? fx->in[2] : NULL;
  fsl_value *wzp = fx->n_in > 3 ? fx->in[3] : NULL;
  if (xzp && fsl_value_numel(xzp) != 1)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected a scalar x_zero_point");
  /* a 1-D w_zero_point holds one value per output channel: [M, 1, ...] */
  fsl_value *xi = int32_minus_zp(fx->b, x, xzp, x->rank, 0);
  fsl_value *wi = int32_minus_zp(fx->b, w, wzp, w->rank, 0);
  return conv_common(fx, xi, wi, x, w, -1);
}

/* Rearranges ConvTranspose weights [C, M/g, k...] into conv weights
 * [M, C/g, k...] flipped along every spatial axis. */
static fsl_value *transpose_conv_weights(fsl_builder *b, fsl_value *w, int64_t group) {
  int r = w->rank, k = r - 2;
  int64_t c = w->dims[0], mg = w->dims[1];
  int64_t d5[FSL_MAX_RANK + 1], perm[FSL_MAX_RANK + 1];
  d5[0] = group;
  d5[1] = c / group;
  d5[2] = mg;
  for (int i = 0; i < k; i++) d5[3 + i] = w->dims[2 + i];
  fsl_value *t = reshape_opt(b, w, r + 1, d5);
  perm[0] = 0;
  perm[1] = 2;
  perm[2] = 1;
  for (int i = 0; i < k; i++) perm[3 + i] = 3 + i;
  t = permute_opt(b, t, perm);
  int64_t d[FSL_MAX_RANK];
  d[0] = group * mg;
  d[1] = c / group;
  for (int i = 0; i < k; i++) d[2 + i] = w->dims[2 + i];
  t = reshape_opt(b, t, r, d);
  int64_t starts[FSL_MAX_RANK], steps[FSL_MAX_RANK];
  for (int i = 0; i < r; i++) {
    bool flip = i >= 2 && d[i] > 1;
    starts[i] = flip ? d[i] - 1 : 0;
    steps[i] = flip ? -1 : 1;
  }
  for (int i = 2; i < r; i++)
    if (d[i] > 1) return fsl_b_slice(b, t, starts, steps, d);
  return t;
}

/* Resolves ConvTranspose pads from output_shape or auto_pad (spec:
 * total_padding = stride*(in-1) + output_padding + (k-1)*d + 1 - out). */
static fsl_status convtranspose_pads(fsl_fctx *fx, conv_geom *g, const fsl_value *x, const int64_t *opad) {
  const int64_t *os;
  int nos = fsl_attr_ints(fx->node, "output_shape", &os);
  bool same = is_same_pad(g->auto_pad);
  if (nos < 0 && !same) {
    if (!strcmp(g->auto_pad, "VALID"))
      for (int i = 0; i < 2 * g->k; i++) g->pads[i] = 0;
    return FSL_OK;
  }
  if (nos >= 0 && nos != g->k && nos != g->k + 2)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d values in 'output_shape', got %d", g->k, nos);
  bool upper = !strcmp(g->auto_pad, "SAME_UPPER");
  for (int i = 0; i < g->k; i++) {
    int64_t in = x->dims[2 + i];
    int64_t out = nos >= 0 ? os[nos - g->k + i] : in * g->strides[i];
    int64_t total = g->strides[i] * (in - 1) + opad[i] + (g->kernel[i] - 1) * g->dil[i] + 1 - out;
    split_pad(total, upper, &g->pads[i], &g->pads[g->k + i]);
  }
  return FSL_OK;
}

/* True when every window of the transposed convolution writes its own
 * output block: strides == kernel_shape, no dilation, no output_padding and
 * pads >= 0 (a crop).  Such a ConvTranspose is a 1x1 convolution followed
 * by a depth-to-space movement, with no overlapping sums. */
static bool convtranspose_is_blockwise(const conv_geom *g, const int64_t *opad) {
  for (int i = 0; i < g->k; i++)
    if (g->strides[i] != g->kernel[i] || (g->dil[i] != 1 && g->kernel[i] > 1) || opad[i] != 0 || g->pads[i] < 0 ||
        g->pads[g->k + i] < 0)
      return false;
  return 2 + 2 * g->k <= FSL_MAX_RANK;
}

/* Blockwise ConvTranspose (see convtranspose_is_blockwise): x [N, C, H...]
 * times W [C, M/g, k...] as a grouped 1x1 conv to M*prod(k) channels,
 * ordered (group, m, k...), then [N, M, k..., H...] permuted to
 * [N, M, H1, k1, H2, k2, ...] and merged to [N, M, H1*k1, ...] (the
 * pixel shuffle of a depth-to-space).  Each output element is one dot
 * product over C/g, as in the ONNX definition with stride == kernel. */
static fsl_value *convtranspose_blockwise(fsl_builder *b, fsl_value *x, fsl_value *w, const conv_geom *g) {
  int k = g->k, r = x->rank;
  int64_t grp = g->group, c = x->dims[1], mg = w->dims[1], kk = 1;
  for (int i = 0; i < k; i++) kk *= g->kernel[i];
  int64_t d4[4] = {grp, c / grp, mg, kk}, p4[4] = {0, 2, 3, 1};
  fsl_value *wt = permute_opt(b, reshape_opt(b, w, 4, d4), p4);
  int64_t dw[FSL_MAX_RANK], ones[FSL_MAX_RANK], zeros[2 * FSL_MAX_RANK] = {0};
  dw[0] = grp * mg * kk;
  dw[1] = c / grp;
  for (int i = 0; i < k; i++) dw[2 + i] = ones[i] = 1;
  wt = reshape_opt(b, wt, r, dw);
  fsl_value *y = fsl_b_conv(b, x, wt, ones, ones, zeros, grp, NULL);
  if (!y) return NULL;
  int64_t d[FSL_MAX_RANK], perm[FSL_MAX_RANK], out[FSL_MAX_RANK];
  d[0] = out[0] = x->dims[0];
  d[1] = out[1] = grp * mg;
  perm[0] = 0;
  perm[1] = 1;
  for (int i = 0; i < k; i++) {
    d[2 + i] = g->kernel[i];
    d[2 + k + i] = x->dims[2 + i];
    perm[2 + 2 * i] = 2 + k + i;
    perm[3 + 2 * i] = 2 + i;
    out[2 + i] = x->dims[2 + i] * g->kernel[i];
  }
  y = permute_opt(b, reshape_opt(b, y, 2 + 2 * k, d), perm);
  return reshape_opt(b, y, r, out);
}

/* Crops pads_begin / pads_end off the spatial axes of a ConvTranspose
 * result y (negative ConvTranspose pads = output larger than the conv's). */
static fsl_value *crop_spatial(fsl_fctx *fx, fsl_value *y, const int64_t *crop_b, const int64_t *crop_e) {
  if (!y) return NULL;
  int64_t starts[FSL_MAX_RANK], steps[FSL_MAX_RANK], sizes[FSL_MAX_RANK];
  bool any = false;
  for (int i = 0; i < y->rank; i++) {
    steps[i] = 1;
    starts[i] = i >= 2 ? crop_b[i - 2] : 0;
    sizes[i] = y->dims[i] - (i >= 2 ? crop_b[i - 2] + crop_e[i - 2] : 0);
    if (sizes[i] < 0) {
      fsl_fx_fail(fx, FSL_ERR_INVALID, "'pads' larger than the output of spatial axis %d", i - 2);
      return NULL;
    }
    any |= sizes[i] != y->dims[i];
  }
  return any ? fsl_b_slice(fx->b, y, starts, steps, sizes) : y;
}

/** ONNX ConvTranspose (opset 1, 11): conv with lhs_dilation = strides over
 *  flipped, regrouped weights; pads = dilation*(k-1) - pad (+ output_padding
 *  at the end); negative pads become a crop of the result. */
fsl_status fsl_fission_ConvTranspose(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *w = fsl_fx_req(fx, 1);
  if (!x || !w) return fsl_fx_done(fx);
  conv_geom g;
  FSL_TRY(read_conv_geom(fx, x, w, &g));
  if (w->dims[0] != x->dims[1] || x->dims[1] % g.group != 0)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected W [C, M/group, k...] with C = %lld divisible by group = %lld, got W [%lld, ...]",
                       (long long)x->dims[1], (long long)g.group, (long long)w->dims[0]);
  int64_t opad[FSL_MAX_RANK];
  FSL_TRY(read_spatial(fx, "output_padding", g.k, 0, 0, opad));
  FSL_TRY(convtranspose_pads(fx, &g, x, opad));
  fsl_value *y;
  if (convtranspose_is_blockwise(&g, opad)) {
    y = crop_spatial(fx, convtranspose_blockwise(b, x, w, &g), g.pads, g.pads + g.k);
  } else {
    int64_t cp[2 * FSL_MAX_RANK], ones[FSL_MAX_RANK], crop_b[FSL_MAX_RANK] = {0}, crop_e[FSL_MAX_RANK] = {0};
    for (int i = 0; i < g.k; i++) {
      int64_t span = g.dil[i] * (g.kernel[i] - 1);
      int64_t pb = span - g.pads[i], pe = span - g.pads[g.k + i] + opad[i];
      if (pb < 0) crop_b[i] = -pb, pb = 0;
      if (pe < 0) crop_e[i] = -pe, pe = 0;
      cp[i] = pb;
      cp[g.k + i] = pe;
      ones[i] = 1;
    }
    fsl_value *wt = transpose_conv_weights(b, w, g.group);
    y = fsl_b_conv(b, x, wt, ones, g.dil, cp, g.group, g.strides);
    y = crop_spatial(fx, y, crop_b, crop_e);
  }
  fx->out[0] = add_bias(fx, y, 2);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* Einsum                                                               */
/* ------------------------------------------------------------------ */

/* Labels: letters are 0..51, ellipsis dims 52..52+FSL_MAX_RANK-1. */
enum { EIN_ELL = 52, EIN_NLAB = EIN_ELL + FSL_MAX_RANK };

typedef struct ein_term {
  fsl_value *v;
  int n;
  int lab[FSL_MAX_RANK];
} ein_term;

static int ein_letter(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;  /* sorted after upper case */
  if (c >= 'A' && c <= 'Z') return c - 'A';
  return -1;
}

/* Parses one term (letters and at most one "...") into labels; n_ell is
 * the number of dims "..." stands for, e_max the broadcast ellipsis rank
 * (ellipsis dims are right-aligned, numpy style). */
static fsl_status ein_parse_term(fsl_fctx *fx, const char *s, size_t len, int n_ell, int e_max, ein_term *t) {
  t->n = 0;
  bool seen_ell = false;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ' ') continue;
    if (s[i] == '.') {
      if (seen_ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
        return fsl_fx_fail(fx, FSL_ERR_INVALID, "malformed '...' in equation");
      seen_ell = true;
      i += 2;
      for (int j = 0; j < n_ell; j++) {
        if (t->n >= FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_INVALID, "equation term too long");
        t->lab[t->n++] = EIN_ELL + (e_max - n_ell) + j;
      }
      continue;
    }
    int l = ein_letter(s[i]);
    if (l < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "unexpected character '%c' in equation", s[i]);
    if (t->n >= FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_INVALID, "equation term too long");
    t->lab[t->n++] = l;
  }
  return FSL_OK;
}

/* Counts the letters of a term and whether it has "...". */
static void ein_count(const char *s, size_t len, int *letters, bool *ell) {
  *letters = 0;
  *ell = false;
  for (size_t i = 0; i < len; i++) {
    if (ein_letter(s[i]) >= 0) (*letters)++;
    if (s[i] == '.') *ell = true;
  }
}

static int ein_find(const ein_term *t, int lab) {
  for (int i = 0; i < t->n; i++)
    if (t->lab[i] == lab) return i;
  return -1;
}

/* Removes diagonal repeats (label at p and q): moves both axes last,
 * flattens them and takes every (n+1)-th element. */
static fsl_status ein_diagonal(fsl_fctx *fx, ein_term *t) {
  fsl_builder *b = fx->b;
  for (int p = 0; p < t->n; p++) {
    for (int q = p + 1; q < t->n; q++) {
      if (t->lab[p] != t->lab[q] || !t->v) continue;
      int64_t n = t->v->dims[p];
      if (t->v->dims[q] != n)
        return fsl_fx_fail(fx, FSL_ERR_SHAPE, "repeated einsum index with different sizes %lld and %lld",
                           (long long)n, (long long)t->v->dims[q]);
      int64_t perm[FSL_MAX_RANK], dims[FSL_MAX_RANK], starts[FSL_MAX_RANK], steps[FSL_MAX_RANK];
      int m = 0, lab[FSL_MAX_RANK];
      for (int i = 0; i < t->n; i++)
        if (i != p && i != q) lab[m] = t->lab[i], dims[m] = t->v->dims[i], perm[m++] = i;
      perm[m] = p;
      perm[m + 1] = q;
      fsl_value *x = permute_opt(b, t->v, perm);
      dims[m] = n * n;
      x = reshape_opt(b, x, m + 1, dims);
      for (int i = 0; i < m + 1; i++) starts[i] = 0, steps[i] = 1;
      steps[m] = n + 1;
      dims[m] = n;
      t->v = fsl_b_slice(b, x, starts, steps, dims);
      lab[m] = t->lab[p];
      memcpy(t->lab, lab, sizeof lab);
      t->n = m + 1;
      return ein_diagonal(fx, t);
    }
  }
  return FSL_OK;
}

/* Sums the axes of t whose label is not in keep[]. */
static void ein_sum_unneeded(fsl_builder *b, ein_term *t, const bool *keep) {
  int64_t axes[FSL_MAX_RANK];
  int na = 0, m = 0;
  for (int i = 0; i < t->n; i++) {
    if (keep[t->lab[i]]) t->lab[m++] = t->lab[i];
    else axes[na++] = i;
  }
  if (na == 0) return;
  t->v = fsl_b_reduce(b, FSL_OP_reduce_sum, t->v, axes, na, false);
  t->n = m;
}

/* Contracts a and b into a: batch labels (in both, kept), contracted
 * labels (in both, not kept), then the free labels of each side; one
 * batched matmul [batch, M, K] x [batch, K, N]. */
static void ein_contract(fsl_builder *b, ein_term *a, ein_term *c, const bool *keep) {
  bool keep_a[EIN_NLAB], keep_c[EIN_NLAB];
  for (int l = 0; l < EIN_NLAB; l++) {
    keep_a[l] = keep[l] || ein_find(c, l) >= 0;
    keep_c[l] = keep[l] || ein_find(a, l) >= 0;
  }
  ein_sum_unneeded(b, a, keep_a);
  ein_sum_unneeded(b, c, keep_c);
  int batch[FSL_MAX_RANK], con[FSL_MAX_RANK], af[FSL_MAX_RANK], cf[FSL_MAX_RANK];
  int nb = 0, nk = 0, na = 0, nc = 0;
  for (int i = 0; i < a->n; i++) {
    int l = a->lab[i];
    if (ein_find(c, l) < 0) af[na++] = l;
    else if (keep[l]) batch[nb++] = l;
    else con[nk++] = l;
  }
  for (int i = 0; i < c->n; i++)
    if (ein_find(a, c->lab[i]) < 0) cf[nc++] = c->lab[i];
  if (!a->v || !c->v) return;
  if (nb + na + nc > FSL_MAX_RANK || nb + 2 > FSL_MAX_RANK) {
    fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "einsum intermediate of rank %d exceeds %d", nb + na + nc, FSL_MAX_RANK);
    a->v = NULL;
    return;
  }
  int64_t pa[FSL_MAX_RANK], pc[FSL_MAX_RANK], da[FSL_MAX_RANK], dc[FSL_MAX_RANK], dy[FSL_MAX_RANK];
  int64_t m = 1, k = 1, n = 1;
  int r = 0, ry = 0;
  for (int i = 0; i < nb; i++) {
    pa[i] = ein_find(a, batch[i]);
    pc[i] = ein_find(c, batch[i]);
    da[i] = dc[i] = dy[ry++] = a->v->dims[pa[i]];
  }
  r = nb;
  for (int i = 0; i < na; i++) pa[r + i] = ein_find(a, af[i]), m *= a->v->dims[pa[r + i]], dy[ry++] = a->v->dims[pa[r + i]];
  for (int i = 0; i < nk; i++) pa[r + na + i] = ein_find(a, con[i]), k *= a->v->dims[pa[r + na + i]];
  for (int i = 0; i < nk; i++) pc[r + i] = ein_find(c, con[i]);
  for (int i = 0; i < nc; i++) pc[r + nk + i] = ein_find(c, cf[i]), n *= c->v->dims[pc[r + nk + i]], dy[ry++] = c->v->dims[pc[r + nk + i]];
  da[r] = m, da[r + 1] = k;
  dc[r] = k, dc[r + 1] = n;
  fsl_value *xa = reshape_opt(b, permute_opt(b, a->v, pa), r + 2, da);
  fsl_value *xc = reshape_opt(b, permute_opt(b, c->v, pc), r + 2, dc);
  a->v = reshape_opt(b, fsl_b_matmul(b, xa, xc), ry, dy);
  a->n = 0;
  for (int i = 0; i < nb; i++) a->lab[a->n++] = batch[i];
  for (int i = 0; i < na; i++) a->lab[a->n++] = af[i];
  for (int i = 0; i < nc; i++) a->lab[a->n++] = cf[i];
}

/* Expands size-1 axes of every operand to the size its label has
 * elsewhere (numpy broadcasting of "..." dims). */
static fsl_status ein_broadcast(fsl_fctx *fx, ein_term *t, int n_ops) {
  int64_t size[EIN_NLAB];
  for (int l = 0; l < EIN_NLAB; l++) size[l] = 1;
  for (int o = 0; o < n_ops; o++)
    for (int i = 0; i < t[o].n; i++) {
      int64_t d = t[o].v->dims[i];
      int64_t *s = &size[t[o].lab[i]];
      if (d != 1 && *s != 1 && d != *s)
        return fsl_fx_fail(fx, FSL_ERR_SHAPE, "einsum index sizes %lld and %lld do not match", (long long)*s,
                           (long long)d);
      if (d != 1) *s = d;
    }
  for (int o = 0; o < n_ops; o++) {
    int64_t dims[FSL_MAX_RANK];
    bool change = false;
    for (int i = 0; i < t[o].n; i++) {
      dims[i] = size[t[o].lab[i]];
      change |= dims[i] != t[o].v->dims[i];
    }
    if (change) t[o].v = fsl_b_expand(fx->b, t[o].v, dims);
  }
  return FSL_OK;
}

/* Parses the equation into n_ops operand terms and the output term. */
static fsl_status ein_parse(fsl_fctx *fx, const char *eq, ein_term *t, int n_ops, ein_term *out) {
  const char *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
  const char *p = eq;
  int e_max = 0, n_ell[FSL_MAX_RANK + 64];
  const char *ts[FSL_MAX_RANK + 64];
  size_t tl[FSL_MAX_RANK + 64];
  for (int o = 0; o < n_ops; o++) {
    const char *comma = memchr(p, ',', lhs_len - (size_t)(p - eq));
    const char *end = comma ? comma : eq + lhs_len;
    if ((comma == NULL) != (o == n_ops - 1))
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "equation '%s' does not have %d operand terms", eq, n_ops);
    int letters;
    bool ell;
    ein_count(p, (size_t)(end - p), &letters, &ell);
    n_ell[o] = fx->in[o]->rank - letters;
    if (n_ell[o] < 0 || (!ell && n_ell[o] != 0))
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "equation term %d does not match input rank %d", o, fx->in[o]->rank);
    if (n_ell[o] > e_max) e_max = n_ell[o];
    ts[o] = p;
    tl[o] = (size_t)(end - p);
    p = end + 1;
  }
  for (int o = 0; o < n_ops; o++) {
    FSL_TRY(ein_parse_term(fx, ts[o], tl[o], n_ell[o], e_max, &t[o]));
    t[o].v = fx->in[o];
  }
  if (arrow) {
    out->v = NULL;
    FSL_TRY(ein_parse_term(fx, arrow + 2, strlen(arrow + 2), e_max, e_max, out));
    return FSL_OK;
  }
  /* implicit output: ellipsis dims, then the letters seen once, sorted */
  int count[EIN_NLAB] = {0};
  for (int o = 0; o < n_ops; o++)
    for (int i = 0; i < t[o].n; i++) count[t[o].lab[i]]++;
  out->n = 0;
  for (int j = 0; j < e_max; j++) out->lab[out->n++] = EIN_ELL + j;
  for (int l = 0; l < EIN_ELL; l++)
    if (count[l] == 1) {
      if (out->n >= FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_INVALID, "einsum output rank too large");
      out->lab[out->n++] = l;
    }
  return FSL_OK;
}

/** ONNX Einsum (opset 12): diagonals, sums of private indices, then
 *  pairwise contractions left to right as batched matmuls. */
fsl_status fsl_fission_Einsum(fsl_fctx *fx) {
  const char *eq = fsl_attr_str(fx->node, "equation", NULL);
  if (!eq) return fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'equation' is required");
  int n_ops = fx->n_in;
  if (n_ops < 1 || n_ops > FSL_MAX_RANK + 64)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "expected 1 to %d inputs, got %d", FSL_MAX_RANK + 64, n_ops);
  for (int o = 0; o < n_ops; o++)
    if (!fsl_fx_req(fx, o)) return fsl_fx_done(fx);
  ein_term t[FSL_MAX_RANK + 64], out;
  FSL_TRY(ein_parse(fx, eq, t, n_ops, &out));
  for (int i = 0; i < out.n; i++) {
    bool found = false;
    for (int o = 0; o < n_ops && !found; o++) found = ein_find(&t[o], out.lab[i]) >= 0;
    if (!found || ein_find(&out, out.lab[i]) != i)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "output index %d of '%s' is repeated or not in any input", i, eq);
  }
  for (int o = 0; o < n_ops; o++) FSL_TRY(ein_diagonal(fx, &t[o]));
  FSL_TRY(fx->b->st);
  FSL_TRY(ein_broadcast(fx, t, n_ops));
  bool keep[EIN_NLAB];
  for (int o = 1; o < n_ops; o++) {
    /* keep: labels of the output and of the operands still to come */
    for (int l = 0; l < EIN_NLAB; l++) keep[l] = ein_find(&out, l) >= 0;
    for (int r = o + 1; r < n_ops; r++)
      for (int i = 0; i < t[r].n; i++) keep[t[r].lab[i]] = true;
    ein_contract(fx->b, &t[0], &t[o], keep);
  }
  for (int l = 0; l < EIN_NLAB; l++) keep[l] = ein_find(&out, l) >= 0;
  ein_sum_unneeded(fx->b, &t[0], keep);
  int64_t perm[FSL_MAX_RANK];
  for (int i = 0; i < out.n; i++) perm[i] = ein_find(&t[0], out.lab[i]);
  fx->out[0] = permute_opt(fx->b, t[0].v, perm);
  return fsl_fx_done(fx);
}
