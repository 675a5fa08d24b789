/*
 * misc.c — decompositions of signal, image and miscellaneous ONNX ops:
 * CumProd, CenterCropPad, the window generators, MelWeightMatrix,
 * ReverseSequence, MaxUnpool, Col2Im, AffineGrid, GridSample, DFT and
 * Det.
 *
 * Shapes are static, so index tables, masks and coefficient matrices are
 * computed here as constants; run-time data flows through elementwise,
 * gather/scatter and matmul primitives.
 */
#include "fission/fission.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ------------------------------------------------------------------ */
/* shared helpers                                                       */
/* ------------------------------------------------------------------ */

/* Constant of dtype dt from doubles (built as float64, cast and folded). */
static fsl_value *const_f64(fsl_builder *b, fsl_dtype dt, int rank, const int64_t *dims, const double *v) {
  fsl_value *c = fsl_b_const(b, FSL_DT_F64, rank, dims, v);
  return c && dt != FSL_DT_F64 ? fsl_b_cast(b, c, dt) : c;
}

/* Constant int64 tensor. */
static fsl_value *const_i64(fsl_builder *b, int rank, const int64_t *dims, const int64_t *v) {
  return fsl_b_const(b, FSL_DT_I64, rank, dims, v);
}

static fsl_value *cast_opt(fsl_builder *b, fsl_value *v, fsl_dtype dt) {
  return v && v->dtype != dt ? fsl_b_cast(b, v, dt) : v;
}

/* Reads a constant scalar input i as int64 (`what` names it). */
static bool const_int_input(fsl_fctx *fx, int i, int64_t *out, const char *what) {
  fsl_value *v = fsl_fx_req(fx, i);
  if (!v) return false;
  return fsl_b_const_ints(fx->b, v, out, 1, what) == 1;
}

/* Output dtype attribute (TensorProto code) checked to be a float type. */
static bool float_dtype_attr(fsl_fctx *fx, const char *name, fsl_dtype def, fsl_dtype *out) {
  *out = (fsl_dtype)fsl_attr_int(fx->node, name, def);
  if (!fsl_dtype_valid(*out) || *out == FSL_DT_BOOL) {
    fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "'%s' %d (expected a numeric type)", name, (int)*out);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------ */
/* CumProd                                                              */
/* ------------------------------------------------------------------ */

/* x viewed as [pre, n, post] around axis. */
static void split_dims(const fsl_value *x, int axis, int64_t *pre, int64_t *n, int64_t *post) {
  *pre = 1;
  *post = 1;
  for (int i = 0; i < axis; i++) *pre *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) *post *= x->dims[i];
  *n = x->dims[axis];
}

/** ONNX CumProd (opset 26): masked product over an expanded [.., out, in, ..]
 *  view; exclusive and reverse choose the constant mask. */
fsl_status fsl_fission_CumProd(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t axis;
  if (!x || !const_int_input(fx, 1, &axis, "input 'axis'")) return fsl_fx_done(fx);
  if (x->rank < 1) return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected an input of rank >= 1");
  if (!fsl_b_axis(b, &axis, x->rank, "input 'axis'")) return fsl_fx_done(fx);
  bool excl = fsl_attr_int(fx->node, "exclusive", 0) != 0, rev = fsl_attr_int(fx->node, "reverse", 0) != 0;
  int64_t pre, n, post;
  split_dims(x, (int)axis, &pre, &n, &post);
  uint8_t *mask = fsl_b_table(b, n, n, 1, "CumProd mask");
  if (!mask) return fsl_fx_done(fx);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      bool m = rev ? j >= i : j <= i;
      if (excl && i == j) m = false;
      mask[i * n + j] = m;
    }
  int64_t md[4] = {1, n, n, 1}, xd[4] = {pre, 1, n, post}, full[4] = {pre, n, n, post};
  fsl_value *mv = fsl_b_const(b, FSL_DT_BOOL, 4, md, mask);
  fsl_value *xe = fsl_b_expand(b, fsl_b_reshape(b, x, 4, xd), full);
  fsl_value *t = fsl_b_where(b, mv, xe, fsl_b_scalar(b, x->dtype, 1.0));
  int64_t red = 2;
  t = fsl_b_reduce(b, FSL_OP_reduce_prod, t, &red, 1, false);
  fx->out[0] = fsl_b_reshape(b, t, x->rank, x->dims);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* CenterCropPad                                                        */
/* ------------------------------------------------------------------ */

/** ONNX CenterCropPad (opset 18): per axis, a centered slice (crop) or a
 *  zero pad (extra element at the end when odd). */
fsl_status fsl_fission_CenterCropPad(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *shp = fsl_fx_req(fx, 1);
  if (!x || !shp) return fsl_fx_done(fx);
  int64_t target[FSL_MAX_RANK], axes[FSL_MAX_RANK];
  int n = fsl_b_const_ints(b, shp, target, FSL_MAX_RANK, "input 'shape'");
  if (n < 0) return fsl_fx_done(fx);
  const int64_t *av;
  int na = fsl_attr_ints(fx->node, "axes", &av);
  if (na < 0) {
    na = x->rank;
    for (int i = 0; i < na; i++) axes[i] = i;
  } else {
    for (int i = 0; i < na && i < FSL_MAX_RANK; i++) axes[i] = av[i];
  }
  if (na != n)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d values in input 'shape' (one per axis), got %d", na, n);
  int64_t starts[FSL_MAX_RANK], steps[FSL_MAX_RANK], sizes[FSL_MAX_RANK], pads[2 * FSL_MAX_RANK] = {0};
  bool need_pad = false;
  for (int i = 0; i < x->rank; i++) {
    starts[i] = 0;
    steps[i] = 1;
    sizes[i] = x->dims[i];
  }
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i];
    if (!fsl_b_axis(b, &a, x->rank, "attribute 'axes'")) return fsl_fx_done(fx);
    int64_t dim = x->dims[a], sh = target[i];
    if (sh < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected shape values >= 0, got %lld", (long long)sh);
    if (sh < dim) {
      starts[a] = (dim - sh) / 2;
      sizes[a] = sh;
    } else if (sh > dim) {
      pads[a] = (sh - dim) / 2;
      pads[x->rank + a] = sh - dim - pads[a];
      need_pad = true;
    }
  }
  fsl_value *y = fsl_b_slice(b, x, starts, steps, sizes);
  if (need_pad) y = fsl_b_pad(b, y, pads, 0, 0.0);
  fx->out[0] = y;
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* window functions                                                     */
/* ------------------------------------------------------------------ */

/* Generalized cosine window sum_k (-1)^k a[k] cos(2 pi k n / N_1). */
static fsl_status cosine_window(fsl_fctx *fx, const double *a, int na) {
  int64_t size;
  if (!const_int_input(fx, 0, &size, "input 'size'")) return fsl_fx_done(fx);
  if (size < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected size >= 0, got %lld", (long long)size);
  fsl_dtype dt;
  if (!float_dtype_attr(fx, "output_datatype", FSL_DT_F32, &dt)) return fsl_fx_done(fx);
  double n1 = fsl_attr_int(fx->node, "periodic", 1) ? (double)size : (double)(size - 1);
  double *w = fsl_b_table(fx->b, size, 1, sizeof(double), "window");
  if (!w) return fsl_fx_done(fx);
  for (int64_t i = 0; i < size; i++) {
    double s = 0, sign = 1;
    for (int k = 0; k < na; k++, sign = -sign) s += sign * a[k] * cos(2.0 * M_PI * k * (double)i / n1);
    w[i] = s;
  }
  fx->out[0] = const_f64(fx->b, dt, 1, &size, w);
  return fsl_fx_done(fx);
}

/** ONNX HannWindow (opset 17): 0.5 - 0.5 cos(2 pi n / N). */
fsl_status fsl_fission_HannWindow(fsl_fctx *fx) {
  static const double a[2] = {0.5, 0.5};
  return cosine_window(fx, a, 2);
}

/** ONNX HammingWindow (opset 17): 25/46 - 21/46 cos(2 pi n / N). */
fsl_status fsl_fission_HammingWindow(fsl_fctx *fx) {
  static const double a[2] = {25.0 / 46.0, 21.0 / 46.0};
  return cosine_window(fx, a, 2);
}

/** ONNX BlackmanWindow (opset 17): 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N). */
fsl_status fsl_fission_BlackmanWindow(fsl_fctx *fx) {
  static const double a[3] = {0.42, 0.5, 0.08};
  return cosine_window(fx, a, 3);
}

/* ------------------------------------------------------------------ */
/* MelWeightMatrix                                                      */
/* ------------------------------------------------------------------ */

/* hz -> mel: 2595 log10(1 + hz / 700), in hz's float dtype. */
static fsl_value *hz_to_mel(fsl_builder *b, fsl_value *hz) {
  fsl_value *t = fsl_b_binary_scalar(b, FSL_OP_add, fsl_b_binary_scalar(b, FSL_OP_div, hz, 700.0), 1.0);
  return fsl_b_binary_scalar(b, FSL_OP_mul, fsl_b_unary(b, FSL_OP_log, t), 2595.0 / log(10.0));
}

/* Spectrogram bins (float64, integral) of the count mel points spread
 * between lo and hi Hz, as the ONNX reference computes them. */
static fsl_value *mel_edges(fsl_fctx *fx, int64_t count, int64_t dft_len) {
  fsl_builder *b = fx->b;
  fsl_value **in = fx->in;
  fsl_dtype ft = fsl_dtype_is_float(in[3]->dtype) ? in[3]->dtype : FSL_DT_F32;
  fsl_value *lm = hz_to_mel(b, cast_opt(b, in[3], ft)), *hm = hz_to_mel(b, cast_opt(b, in[4], ft));
  fsl_value *step = fsl_b_binary_scalar(b, FSL_OP_div, fsl_b_binary(b, FSL_OP_sub, hm, lm), (double)count);
  double *k = fsl_b_table(b, count, 1, sizeof(double), "mel points");
  if (!k) return NULL;
  for (int64_t i = 0; i < count; i++) k[i] = (double)i;
  fsl_value *mel = fsl_b_binary(b, FSL_OP_mul, fsl_b_const(b, FSL_DT_F64, 1, &count, k), cast_opt(b, step, FSL_DT_F64));
  mel = fsl_b_binary(b, FSL_OP_add, mel, cast_opt(b, lm, FSL_DT_F64));
  fsl_value *p10 = fsl_b_binary(b, FSL_OP_pow, fsl_b_scalar(b, FSL_DT_F64, 10.0), fsl_b_binary_scalar(b, FSL_OP_div, mel, 2595.0));
  fsl_value *hz = fsl_b_binary_scalar(b, FSL_OP_mul, fsl_b_binary_scalar(b, FSL_OP_sub, p10, 1.0), 700.0);
  hz = fsl_b_binary_scalar(b, FSL_OP_mul, hz, (double)(dft_len + 1));
  return fsl_b_unary(b, FSL_OP_floor, fsl_b_binary(b, FSL_OP_div, hz, cast_opt(b, in[2], FSL_DT_F64)));
}

/* num / max(den, 1): a triangle slope (den is 0 only where unused). */
static fsl_value *slope(fsl_builder *b, fsl_value *num, fsl_value *den) {
  return fsl_b_binary(b, FSL_OP_div, num, fsl_b_binary_scalar(b, FSL_OP_max, den, 1.0));
}

/** ONNX MelWeightMatrix (opset 17): [dft_length/2+1, num_mel_bins] matrix of
 *  triangular filters; elementwise over bin edges computed from the inputs
 *  (folded to a constant when they are all constant). */
fsl_status fsl_fission_MelWeightMatrix(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  int64_t mels, dft_len;
  if (!const_int_input(fx, 0, &mels, "input 'num_mel_bins'") || !const_int_input(fx, 1, &dft_len, "input 'dft_length'"))
    return fsl_fx_done(fx);
  for (int i = 2; i < 5; i++)
    if (!fsl_fx_req(fx, i)) return fsl_fx_done(fx);
  if (mels < 1 || dft_len < 1)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected num_mel_bins and dft_length >= 1");
  fsl_dtype dt;
  if (!float_dtype_attr(fx, "output_datatype", FSL_DT_F32, &dt)) return fsl_fx_done(fx);
  int64_t bins = dft_len / 2 + 1, row[2] = {1, mels}, col[2] = {bins, 1};
  fsl_value *f = mel_edges(fx, mels + 2, dft_len);
  fsl_value *l = fsl_b_reshape(b, fsl_b_slice_axis(b, f, 0, 0, mels), 2, row);
  fsl_value *c = fsl_b_reshape(b, fsl_b_slice_axis(b, f, 0, 1, mels), 2, row);
  fsl_value *r = fsl_b_reshape(b, fsl_b_slice_axis(b, f, 0, 2, mels), 2, row);
  double *jv = fsl_b_table(b, bins, 1, sizeof(double), "spectrogram bins");
  if (!jv) return fsl_fx_done(fx);
  for (int64_t j = 0; j < bins; j++) jv[j] = (double)j;
  fsl_value *j = fsl_b_const(b, FSL_DT_F64, 2, col, jv);
  /* j == c: 1; l <= j < c: rising edge; c < j < r: falling edge; else 0 */
  fsl_value *up = slope(b, fsl_b_binary(b, FSL_OP_sub, j, l), fsl_b_binary(b, FSL_OP_sub, c, l));
  fsl_value *down = slope(b, fsl_b_binary(b, FSL_OP_sub, r, j), fsl_b_binary(b, FSL_OP_sub, r, c));
  fsl_value *in_up = fsl_b_binary(b, FSL_OP_and, fsl_b_binary(b, FSL_OP_le, l, j), fsl_b_binary(b, FSL_OP_lt, j, c));
  fsl_value *in_down = fsl_b_binary(b, FSL_OP_and, fsl_b_binary(b, FSL_OP_lt, c, j), fsl_b_binary(b, FSL_OP_lt, j, r));
  fsl_value *zero = fsl_b_scalar(b, FSL_DT_F64, 0.0);
  fsl_value *w = fsl_b_where(b, in_down, down, zero);
  w = fsl_b_where(b, in_up, up, w);
  w = fsl_b_where(b, fsl_b_binary(b, FSL_OP_eq, j, c), fsl_b_scalar(b, FSL_DT_F64, 1.0), w);
  fx->out[0] = cast_opt(b, w, dt);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* ReverseSequence                                                      */
/* ------------------------------------------------------------------ */

/* Constant 0..n-1 (int64) shaped to `rank` with its values on `axis`. */
static fsl_value *iota_on_axis(fsl_fctx *fx, int64_t n, int rank, int axis) {
  int64_t *v = fsl_b_table(fx->b, n, 1, sizeof(int64_t), "iota");
  if (!v) return NULL;
  for (int64_t i = 0; i < n; i++) v[i] = i;
  int64_t d[FSL_MAX_RANK];
  for (int i = 0; i < rank; i++) d[i] = 1;
  d[axis] = n;
  return const_i64(fx->b, rank, d, v);
}

/** ONNX ReverseSequence (opset 10): gather_elements along time_axis with
 *  index t < len[b] ? len[b] - 1 - t : t. */
fsl_status fsl_fission_ReverseSequence(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *lens = fsl_fx_req(fx, 1);
  if (!x || !lens) return fsl_fx_done(fx);
  int64_t ba = fsl_attr_int(fx->node, "batch_axis", 1), ta = fsl_attr_int(fx->node, "time_axis", 0);
  if (x->rank < 2 || !fsl_b_axis(b, &ba, x->rank, "attribute 'batch_axis'") ||
      !fsl_b_axis(b, &ta, x->rank, "attribute 'time_axis'") || ba == ta || lens->rank != 1 ||
      lens->dims[0] != x->dims[ba])
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected input of rank >= 2, distinct batch/time axes and 1-D "
                                            "sequence_lens of the batch size");
  fsl_value *t = iota_on_axis(fx, x->dims[ta], x->rank, (int)ta);
  fsl_value *len = fsl_b_on_axis(b, cast_opt(b, lens, FSL_DT_I64), x->rank, (int)ba);
  if (len && len->rank == 1) { /* batch of one */
    int64_t d[FSL_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = 1;
    len = fsl_b_reshape(b, len, x->rank, d);
  }
  fsl_value *rev = fsl_b_binary_scalar(b, FSL_OP_sub, fsl_b_binary(b, FSL_OP_sub, len, t), 1.0);
  fsl_value *idx = fsl_b_where(b, fsl_b_binary(b, FSL_OP_lt, t, len), rev, t);
  idx = fsl_b_broadcast_to(b, idx, x->rank, x->dims);
  fx->out[0] = fsl_b_gather_elements(b, x, idx, (int)ta);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* MaxUnpool                                                            */
/* ------------------------------------------------------------------ */

/** ONNX MaxUnpool (opset 9, 11, 22): scatter X into zeros at the flat
 *  indices I, over the inferred shape, then pad to output_shape. */
fsl_status fsl_fission_MaxUnpool(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *ind = fsl_fx_req(fx, 1);
  fsl_value *oshape = fx->n_in > 2 ? fx->in[2] : NULL;
  if (!x || !ind) return fsl_fx_done(fx);
  int k = x->rank - 2;
  const int64_t *ks, *st = NULL, *pd = NULL;
  if (k < 1 || fsl_attr_ints(fx->node, "kernel_shape", &ks) != k)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected X of rank >= 3 and %d values in 'kernel_shape'", k);
  int ns = fsl_attr_ints(fx->node, "strides", &st), np = fsl_attr_ints(fx->node, "pads", &pd);
  if ((ns >= 0 && ns != k) || (np >= 0 && np != 2 * k))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d strides and %d pads", k, 2 * k);
  int64_t inf[FSL_MAX_RANK], out[FSL_MAX_RANK], pads[2 * FSL_MAX_RANK] = {0};
  inf[0] = x->dims[0];
  inf[1] = x->dims[1];
  for (int i = 0; i < k; i++)
    inf[2 + i] = (x->dims[2 + i] - 1) * (ns >= 0 ? st[i] : 1) - (np >= 0 ? pd[i] + pd[k + i] : 0) + ks[i];
  memcpy(out, inf, sizeof out);
  if (oshape && fsl_b_const_ints(b, oshape, out, FSL_MAX_RANK, "input 'output_shape'") != x->rank)
    return b->st ? fsl_fx_done(fx) : fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d values in output_shape", x->rank);
  for (int i = 0; i < x->rank; i++) {
    if (out[i] < inf[i] || inf[i] < 1)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "output_shape dim %d (%lld) is smaller than the inferred %lld", i,
                         (long long)out[i], (long long)inf[i]);
    pads[x->rank + i] = out[i] - inf[i];
  }
  int64_t total = fsl_numel(x->rank, inf), nx = fsl_value_numel(x);
  fsl_value *z = fsl_b_expand(b, fsl_b_reshape(b, fsl_b_scalar(b, x->dtype, 0.0), 1, (int64_t[]){1}), &total);
  fsl_value *xi = fsl_b_reshape(b, x, 1, &nx), *ii = fsl_b_reshape(b, cast_opt(b, ind, FSL_DT_I64), 1, &nx);
  fsl_value *in3[3] = {z, ii, xi};
  fsl_attr at[2] = {fsl_attr_make_int("axis", 0), fsl_attr_make_int("reduction", 0)};
  fsl_value *y = fsl_b_prim(b, FSL_OP_scatter_elements, in3, 3, at, 2);
  y = fsl_b_reshape(b, y, x->rank, inf);
  if (memcmp(out, inf, (size_t)x->rank * sizeof(int64_t))) y = fsl_b_pad(b, y, pads, 0, 0.0);
  fx->out[0] = y;
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* Col2Im                                                               */
/* ------------------------------------------------------------------ */

/* Row-major multi-index of flat i over dims[0..k). */
static void unravel(int64_t i, int k, const int64_t *dims, int64_t *idx) {
  for (int a = k - 1; a >= 0; a--) {
    idx[a] = i % dims[a];
    i /= dims[a];
  }
}

/** ONNX Col2Im (opset 18): scatter-add of the column blocks into the padded
 *  image (constant index map), then the pads are cut off. */
fsl_status fsl_fission_Col2Im(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *im = fsl_fx_req(fx, 1), *bs = fsl_fx_req(fx, 2);
  if (!x || !im || !bs) return fsl_fx_done(fx);
  int64_t img[FSL_MAX_RANK], blk[FSL_MAX_RANK], dil[FSL_MAX_RANK], str[FSL_MAX_RANK], pads[2 * FSL_MAX_RANK];
  int k = fsl_b_const_ints(b, im, img, FSL_MAX_RANK - 2, "input 'image_shape'");
  if (k < 1 || fsl_b_const_ints(b, bs, blk, FSL_MAX_RANK, "input 'block_shape'") != k || x->rank != 3)
    return b->st ? fsl_fx_done(fx)
                 : fsl_fx_fail(fx, FSL_ERR_INVALID, "expected input [N, C*prod(block), L] and image/block shapes of equal length");
  const int64_t *v;
  int n;
  n = fsl_attr_ints(fx->node, "dilations", &v);
  for (int i = 0; i < k; i++) dil[i] = n == k ? v[i] : 1;
  n = fsl_attr_ints(fx->node, "strides", &v);
  for (int i = 0; i < k; i++) str[i] = n == k ? v[i] : 1;
  n = fsl_attr_ints(fx->node, "pads", &v);
  for (int i = 0; i < 2 * k; i++) pads[i] = n == 2 * k ? v[i] : 0;
  int64_t kprod = 1, lprod = 1, pprod = 1, grid[FSL_MAX_RANK], padded[FSL_MAX_RANK];
  for (int i = 0; i < k; i++) {
    padded[i] = img[i] + pads[i] + pads[k + i];
    grid[i] = (padded[i] - (dil[i] * (blk[i] - 1) + 1)) / str[i] + 1;
    if (grid[i] < 1 || blk[i] < 1 || str[i] < 1 || dil[i] < 1)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "image dim %d too small for the block", i);
    kprod *= blk[i];
    lprod *= grid[i];
    pprod *= padded[i];
  }
  if (x->dims[1] % kprod || x->dims[2] != lprod)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "input dims must be [N, C*%lld, %lld]", (long long)kprod, (long long)lprod);
  int64_t c = x->dims[1] / kprod, nn = x->dims[0];
  int64_t *map = fsl_b_table(fx->b, kprod, lprod, sizeof(int64_t), "Col2Im map");
  if (!map) return fsl_fx_done(fx);
  for (int64_t kb = 0; kb < kprod; kb++)
    for (int64_t l = 0; l < lprod; l++) {
      int64_t ki[FSL_MAX_RANK], li[FSL_MAX_RANK], p = 0;
      unravel(kb, k, blk, ki);
      unravel(l, k, grid, li);
      for (int a = 0; a < k; a++) p = p * padded[a] + li[a] * str[a] + ki[a] * dil[a];
      map[kb * lprod + l] = p;
    }
  int64_t d3[3] = {nn, c, kprod * lprod}, m3[3] = {1, 1, kprod * lprod}, z3[3] = {nn, c, pprod};
  fsl_value *src = fsl_b_reshape(b, x, 3, d3);
  fsl_value *idx = fsl_b_expand(b, const_i64(b, 3, m3, map), d3);
  fsl_value *z = fsl_b_expand(b, fsl_b_reshape(b, fsl_b_scalar(b, x->dtype, 0.0), 3, (int64_t[]){1, 1, 1}), z3);
  fsl_value *in3[3] = {z, idx, src};
  fsl_attr at[2] = {fsl_attr_make_int("axis", 2), fsl_attr_make_int("reduction", 1)};
  fsl_value *y = fsl_b_prim(b, FSL_OP_scatter_elements, in3, 3, at, 2);
  int64_t od[FSL_MAX_RANK], starts[FSL_MAX_RANK], steps[FSL_MAX_RANK], sizes[FSL_MAX_RANK];
  od[0] = nn;
  od[1] = c;
  for (int i = 0; i < 2 + k; i++) {
    steps[i] = 1;
    starts[i] = i < 2 ? 0 : pads[i - 2];
    sizes[i] = i < 2 ? od[i] : img[i - 2];
    if (i >= 2) od[i] = padded[i - 2];
  }
  y = fsl_b_reshape(b, y, 2 + k, od);
  fx->out[0] = fsl_b_slice(b, y, starts, steps, sizes);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* AffineGrid                                                           */
/* ------------------------------------------------------------------ */

/* Normalized coordinate of pixel i of n (align_corners or pixel centres). */
static double norm_coord(int64_t i, int64_t n, bool align) {
  if (align) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : 0.0;
  return (2.0 * (double)i + 1.0) / (double)n - 1.0;
}

/** ONNX AffineGrid (opset 20): constant base grid [(x, y[, z]), 1] per
 *  output pixel times theta^T. */
fsl_status fsl_fission_AffineGrid(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *theta = fsl_fx_req(fx, 0), *size = fsl_fx_req(fx, 1);
  if (!theta || !size) return fsl_fx_done(fx);
  int64_t sz[5];
  int n = fsl_b_const_ints(b, size, sz, 5, "input 'size'");
  if (n < 0) return fsl_fx_done(fx);
  int k = n - 2;
  if ((k != 2 && k != 3) || theta->rank != 3 || theta->dims[1] != k || theta->dims[2] != k + 1 ||
      theta->dims[0] != sz[0])
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected size [N, C, (D,) H, W] and theta [N, %d, %d]", k, k + 1);
  bool align = fsl_attr_int(fx->node, "align_corners", 0) != 0;
  int64_t pts = 1;
  for (int i = 0; i < k; i++) pts *= sz[2 + i];
  double *base = fsl_b_table(b, pts, k + 1, sizeof(double), "AffineGrid base");
  if (!base) return fsl_fx_done(fx);
  for (int64_t p = 0; p < pts; p++) {
    int64_t idx[3];
    unravel(p, k, sz + 2, idx);
    for (int c = 0; c < k; c++) /* column c is the coordinate of spatial axis k-1-c */
      base[p * (k + 1) + c] = norm_coord(idx[k - 1 - c], sz[2 + k - 1 - c], align);
    base[p * (k + 1) + k] = 1.0;
  }
  int64_t bd[2] = {pts, k + 1}, perm[3] = {0, 2, 1};
  fsl_value *g = fsl_b_matmul(b, const_f64(b, theta->dtype, 2, bd, base), fsl_b_permute(b, theta, perm));
  int64_t od[5];
  od[0] = sz[0];
  for (int i = 0; i < k; i++) od[1 + i] = sz[2 + i];
  od[1 + k] = k;
  fx->out[0] = fsl_b_reshape(b, g, k + 2, od);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* GridSample                                                           */
/* ------------------------------------------------------------------ */

enum { GS_ZEROS, GS_BORDER, GS_REFLECT };
enum { GS_LINEAR, GS_NEAREST, GS_CUBIC };

typedef struct gs_tap {
  fsl_value *idx;  /* clamped int64 index into the spatial axis */
  fsl_value *w;    /* weight (x dtype), NULL = 1 */
} gs_tap;

/* reflect(x) into [lo, hi] as the ONNX reference does (x outside only). */
static fsl_value *gs_reflect(fsl_builder *b, fsl_value *x, double lo, double hi) {
  double rng = hi - lo;
  fsl_value *below = fsl_b_binary_scalar(b, FSL_OP_lt, x, lo);
  fsl_value *above = fsl_b_binary_scalar(b, FSL_OP_gt, x, hi);
  fsl_value *dlo = fsl_b_unary(b, FSL_OP_neg, fsl_b_binary_scalar(b, FSL_OP_sub, x, lo));
  fsl_value *dx = fsl_b_where(b, below, dlo, fsl_b_binary_scalar(b, FSL_OP_sub, x, hi));
  fsl_value *nf = fsl_b_unary(b, FSL_OP_floor, fsl_b_binary_scalar(b, FSL_OP_div, dx, rng));
  fsl_value *r = fsl_b_binary(b, FSL_OP_sub, dx, fsl_b_binary_scalar(b, FSL_OP_mul, nf, rng));
  fsl_value *half = fsl_b_binary_scalar(b, FSL_OP_mul, nf, 0.5);
  fsl_value *even = fsl_b_binary(b, FSL_OP_eq, half, fsl_b_unary(b, FSL_OP_floor, half));
  /* near lo: below with even n, or above with odd n */
  fsl_value *near_lo = fsl_b_unary(b, FSL_OP_not, fsl_b_binary(b, FSL_OP_xor, below, even));
  fsl_value *from_lo = fsl_b_binary_scalar(b, FSL_OP_add, r, lo);
  fsl_value *from_hi = fsl_b_unary(b, FSL_OP_neg, fsl_b_binary_scalar(b, FSL_OP_sub, r, hi));
  fsl_value *refl = fsl_b_where(b, near_lo, from_lo, from_hi);
  return fsl_b_where(b, fsl_b_binary(b, FSL_OP_or, below, above), refl, x);
}

static fsl_value *clampf(fsl_builder *b, fsl_value *x, double lo, double hi) {
  return fsl_b_binary_scalar(b, FSL_OP_min, fsl_b_binary_scalar(b, FSL_OP_max, x, lo), hi);
}

/* trunc toward zero (as C casts), staying in x's dtype. */
static fsl_value *truncf_v(fsl_builder *b, fsl_value *x) {
  fsl_dtype dt = x ? x->dtype : FSL_DT_F32;
  return fsl_b_cast(b, fsl_b_cast(b, x, FSL_DT_I64), dt);
}

/* Tap at integer-valued position p (float) along an axis of size d: the
 * padding mode picks the pixel; zeros padding folds validity into w. */
static gs_tap gs_make_tap(fsl_builder *b, fsl_value *p, fsl_value *w, int64_t d, int pad, double lo, double hi) {
  gs_tap t = {NULL, w};
  if (pad == GS_REFLECT) p = truncf_v(b, gs_reflect(b, p, lo, hi));
  if (pad == GS_ZEROS) {
    fsl_value *ok = fsl_b_binary(b, FSL_OP_and, fsl_b_binary_scalar(b, FSL_OP_ge, p, 0.0),
                                 fsl_b_binary_scalar(b, FSL_OP_le, p, (double)(d - 1)));
    fsl_value *okf = fsl_b_cast(b, ok, p ? p->dtype : FSL_DT_F32);
    t.w = w ? fsl_b_binary(b, FSL_OP_mul, w, okf) : okf;
  }
  t.idx = fsl_b_cast(b, clampf(b, p, 0.0, (double)(d - 1)), FSL_DT_I64);
  return t;
}

/* Cubic convolution coefficients (alpha -0.75) for fraction t, tap j. */
static fsl_value *cubic_coeff(fsl_builder *b, fsl_value *t, int j) {
  const double a = -0.75;
  /* distance s of tap j (x0-1 .. x0+2) from the sample point */
  fsl_value *s = j == 0 ? fsl_b_binary_scalar(b, FSL_OP_add, t, 1.0)
               : j == 1 ? t
               : fsl_b_unary(b, FSL_OP_neg, fsl_b_binary_scalar(b, FSL_OP_sub, t, (double)(j - 1)));
  if (j == 1 || j == 2) { /* ((a+2)s - (a+3)) s^2 + 1 */
    fsl_value *q = fsl_b_binary_scalar(b, FSL_OP_sub, fsl_b_binary_scalar(b, FSL_OP_mul, s, a + 2), a + 3);
    return fsl_b_binary_scalar(b, FSL_OP_add, fsl_b_binary(b, FSL_OP_mul, q, fsl_b_binary(b, FSL_OP_mul, s, s)), 1.0);
  }
  /* ((a s - 5a) s + 8a) s - 4a */
  fsl_value *q = fsl_b_binary_scalar(b, FSL_OP_sub, fsl_b_binary_scalar(b, FSL_OP_mul, s, a), 5 * a);
  q = fsl_b_binary_scalar(b, FSL_OP_add, fsl_b_binary(b, FSL_OP_mul, q, s), 8 * a);
  return fsl_b_binary_scalar(b, FSL_OP_sub, fsl_b_binary(b, FSL_OP_mul, q, s), 4 * a);
}

/* The taps of one spatial axis for coordinate x (already denormalized). */
static int gs_axis_taps(fsl_builder *b, fsl_value *x, int64_t d, int mode, int pad, bool align, gs_tap *taps) {
  double lo = align ? 0.0 : -0.5, hi = align ? (double)(d - 1) : (double)d - 0.5;
  if (mode == GS_NEAREST) x = fsl_b_unary(b, FSL_OP_round, x);
  fsl_value *out = fsl_b_binary(b, FSL_OP_or, fsl_b_binary_scalar(b, FSL_OP_lt, x, lo),
                                fsl_b_binary_scalar(b, FSL_OP_gt, x, hi));
  if (pad == GS_BORDER) x = fsl_b_where(b, out, clampf(b, x, 0.0, (double)(d - 1)), x);
  if (pad == GS_REFLECT) x = gs_reflect(b, x, lo, hi);
  if (mode == GS_NEAREST) {
    taps[0] = gs_make_tap(b, truncf_v(b, x), NULL, d, pad, lo, hi);
    return 1;
  }
  fsl_value *x0 = fsl_b_unary(b, FSL_OP_floor, x), *t = fsl_b_binary(b, FSL_OP_sub, x, x0);
  if (mode == GS_LINEAR) {
    fsl_value *w0 = fsl_b_unary(b, FSL_OP_neg, fsl_b_binary_scalar(b, FSL_OP_sub, t, 1.0));
    taps[0] = gs_make_tap(b, x0, w0, d, pad, lo, hi);
    taps[1] = gs_make_tap(b, fsl_b_binary_scalar(b, FSL_OP_add, x0, 1.0), t, d, pad, lo, hi);
    return 2;
  }
  for (int j = 0; j < 4; j++)
    taps[j] = gs_make_tap(b, fsl_b_binary_scalar(b, FSL_OP_add, x0, (double)(j - 1)), cubic_coeff(b, t, j), d, pad,
                          lo, hi);
  return 4;
}

static bool gs_parse(fsl_fctx *fx, int *mode, int *pad) {
  const char *m = fsl_attr_str(fx->node, "mode", fx->opset >= 20 ? "linear" : "bilinear");
  const char *p = fsl_attr_str(fx->node, "padding_mode", "zeros");
  if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) *mode = GS_LINEAR;
  else if (!strcmp(m, "nearest")) *mode = GS_NEAREST;
  else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic")) *mode = GS_CUBIC;
  else {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "expected mode linear, nearest or cubic, got '%s'", m);
    return false;
  }
  if (!strcmp(p, "zeros")) *pad = GS_ZEROS;
  else if (!strcmp(p, "border")) *pad = GS_BORDER;
  else if (!strcmp(p, "reflection")) *pad = GS_REFLECT;
  else {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "expected padding_mode zeros, border or reflection, got '%s'", p);
    return false;
  }
  return true;
}

/** ONNX GridSample (opset 16, 20, 22): per output point, gather the
 *  neighbour pixels (nearest / linear / cubic) of the flattened spatial
 *  axes and sum them with run-time weights; 4-D and 5-D. */
fsl_status fsl_fission_GridSample(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0), *grid = fsl_fx_req(fx, 1);
  if (!x || !grid) return fsl_fx_done(fx);
  int k = x->rank - 2, mode, pad;
  if (k < 1 || k > 3 || grid->rank != x->rank || grid->dims[0] != x->dims[0] || grid->dims[x->rank - 1] != k)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected X [N, C, spatial...] and grid [N, out..., %d]", k);
  if (!fsl_dtype_is_float(x->dtype)) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "expected float X");
  if (!gs_parse(fx, &mode, &pad)) return fsl_fx_done(fx);
  bool align = fsl_attr_int(fx->node, "align_corners", 0) != 0;
  int64_t nb = x->dims[0], c = x->dims[1], q = 1, p = 1;
  for (int i = 0; i < k; i++) {
    q *= grid->dims[1 + i];
    p *= x->dims[2 + i];
  }
  int64_t qd[3] = {nb, 1, q};
  gs_tap taps[3][4];
  int nt[3];
  fsl_value *g = cast_opt(b, grid, x->dtype);
  for (int i = 0; i < k; i++) {
    /* grid component k-1-i holds the coordinate of spatial axis i */
    fsl_value *gi = fsl_b_reshape(b, fsl_b_slice_axis(b, g, x->rank - 1, k - 1 - i, 1), 3, qd);
    int64_t d = x->dims[2 + i];
    fsl_value *xi = align ? fsl_b_binary_scalar(b, FSL_OP_mul, fsl_b_binary_scalar(b, FSL_OP_add, gi, 1.0), (double)(d - 1) / 2.0)
                          : fsl_b_binary_scalar(b, FSL_OP_div,
                                                fsl_b_binary_scalar(b, FSL_OP_sub,
                                                                    fsl_b_binary_scalar(b, FSL_OP_mul, fsl_b_binary_scalar(b, FSL_OP_add, gi, 1.0), (double)d),
                                                                    1.0),
                                                2.0);
    nt[i] = gs_axis_taps(b, xi, d, mode, pad, align, taps[i]);
  }
  int64_t xd[3] = {nb, c, p}, ed[3] = {nb, c, q};
  fsl_value *xf = fsl_b_reshape(b, x, 3, xd), *y = NULL;
  int total = 1;
  for (int i = 0; i < k; i++) total *= nt[i];
  for (int comb = 0; comb < total && !b->st; comb++) {
    fsl_value *idx = NULL, *w = NULL;
    int rem = comb;
    for (int i = k - 1; i >= 0; i--) {
      gs_tap *t = &taps[i][rem % nt[i]];
      rem /= nt[i];
      int64_t stride = 1;
      for (int j = i + 1; j < k; j++) stride *= x->dims[2 + j];
      fsl_value *part = stride == 1 ? t->idx : fsl_b_binary_scalar(b, FSL_OP_mul, t->idx, (double)stride);
      idx = idx ? fsl_b_binary(b, FSL_OP_add, idx, part) : part;
      if (t->w) w = w ? fsl_b_binary(b, FSL_OP_mul, w, t->w) : t->w;
    }
    fsl_value *v = fsl_b_gather_elements(b, xf, fsl_b_expand(b, idx, ed), 2);
    if (w) v = fsl_b_binary(b, FSL_OP_mul, v, w);
    y = y ? fsl_b_binary(b, FSL_OP_add, y, v) : v;
  }
  int64_t od[FSL_MAX_RANK];
  od[0] = nb;
  od[1] = c;
  for (int i = 0; i < k; i++) od[2 + i] = grid->dims[1 + i];
  fx->out[0] = fsl_b_reshape(b, y, x->rank, od);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* DFT                                                                  */
/* ------------------------------------------------------------------ */

typedef struct dft_plan {
  int64_t n;          /* transform length */
  int64_t len_in;     /* input length along the axis (after pad / cut) */
  int64_t len_out;
  int c_in, c_out;    /* 1 real, 2 complex */
  bool inverse, onesided;
} dft_plan;

/* Fills W [len_in*c_in, len_out*c_out]: y = x W on interleaved (re, im). */
static void dft_matrix(const dft_plan *p, double *w) {
  int64_t cols = p->len_out * p->c_out;
  double sg = p->inverse ? 1.0 : -1.0, sc = p->inverse ? 1.0 / (double)p->n : 1.0;
  for (int64_t k = 0; k < p->len_in; k++)
    for (int64_t j = 0; j < p->len_out; j++) {
      double th = 2.0 * M_PI * (double)((k * j) % p->n) / (double)p->n;
      double co = cos(th), si = sg * sin(th), m = sc;
      if (p->inverse && p->onesided) /* Hermitian half spectrum -> real signal */
        m *= (k == 0 || 2 * k == p->n) ? 1.0 : 2.0;
      /* (xr + i xi)(co + i si) = xr co - xi si + i (xr si + xi co) */
      double *r0 = w + (k * p->c_in) * cols + j * p->c_out;
      r0[0] = m * co;
      if (p->c_out == 2) r0[1] = m * si;
      if (p->c_in == 2) {
        double *r1 = r0 + cols;
        r1[0] = -m * si;
        if (p->c_out == 2) r1[1] = m * co;
      }
    }
}

/* Pads with zeros or cuts x along axis to length n. */
static fsl_value *resize_axis(fsl_builder *b, fsl_value *x, int axis, int64_t n) {
  if (!x || x->dims[axis] == n) return x;
  if (x->dims[axis] > n) return fsl_b_slice_axis(b, x, axis, 0, n);
  int64_t pads[2 * FSL_MAX_RANK] = {0};
  pads[x->rank + axis] = n - x->dims[axis];
  return fsl_b_pad(b, x, pads, 0, 0.0);
}

/* Reads axis (attribute before opset 20, input 2 after), dft_length. */
static bool dft_params(fsl_fctx *fx, const fsl_value *x, int64_t *axis, int64_t *n) {
  fsl_builder *b = fx->b;
  *axis = fsl_attr_int(fx->node, "axis", 1);
  if (fx->opset >= 20) {
    *axis = -2;
    if (fx->n_in > 2 && fx->in[2] && fsl_b_const_ints(b, fx->in[2], axis, 1, "input 'axis'") != 1) return false;
  }
  if (!fsl_b_axis(b, axis, x->rank, "axis")) return false;
  if (*axis == x->rank - 1) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "axis must not be the last (complex) axis");
    return false;
  }
  bool inv = fsl_attr_int(fx->node, "inverse", 0), one = fsl_attr_int(fx->node, "onesided", 0);
  *n = inv && one ? 2 * (x->dims[*axis] - 1) : x->dims[*axis];
  if (fx->n_in > 1 && fx->in[1] && fsl_b_const_ints(b, fx->in[1], n, 1, "input 'dft_length'") != 1) return false;
  if (*n < 1) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "expected dft_length >= 1, got %lld", (long long)*n);
    return false;
  }
  return true;
}

/** ONNX DFT (opset 17, 20): constant DFT matrix (forward, inverse, onesided,
 *  inverse onesided = irfft) applied with one matmul along the axis. */
fsl_status fsl_fission_DFT(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  if (x->rank < 2 || (x->dims[x->rank - 1] != 1 && x->dims[x->rank - 1] != 2) || !fsl_dtype_is_float(x->dtype))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected a float input [..., 1 or 2]");
  int64_t axis, n;
  if (!dft_params(fx, x, &axis, &n)) return fsl_fx_done(fx);
  dft_plan p = {.n = n, .c_in = (int)x->dims[x->rank - 1]};
  p.inverse = fsl_attr_int(fx->node, "inverse", 0) != 0;
  p.onesided = fsl_attr_int(fx->node, "onesided", 0) != 0;
  p.len_in = p.inverse && p.onesided ? n / 2 + 1 : n;
  p.len_out = !p.inverse && p.onesided ? n / 2 + 1 : n;
  p.c_out = p.inverse && p.onesided ? 1 : 2;
  int r = x->rank;
  int64_t perm[FSL_MAX_RANK], inv[FSL_MAX_RANK];
  for (int i = 0, j = 0; i < r - 1; i++)
    if (i != axis) perm[j++] = i;
  perm[r - 2] = axis;
  perm[r - 1] = r - 1;
  for (int i = 0; i < r; i++) inv[perm[i]] = i;
  fsl_value *t = fsl_b_permute(b, resize_axis(b, x, (int)axis, p.len_in), perm);
  if (!t) return fsl_fx_done(fx);
  int64_t d[FSL_MAX_RANK];
  memcpy(d, t->dims, sizeof d);
  d[r - 2] = p.len_in * p.c_in;
  t = fsl_b_reshape(b, t, r - 1, d);
  int64_t wd[2] = {p.len_in * p.c_in, p.len_out * p.c_out};
  double *w = fsl_b_table(b, wd[0], wd[1], sizeof(double), "DFT matrix");
  if (!w) return fsl_fx_done(fx);
  dft_matrix(&p, w);
  t = fsl_b_matmul(b, t, const_f64(b, x->dtype, 2, wd, w));
  d[r - 2] = p.len_out;
  d[r - 1] = p.c_out;
  t = fsl_b_reshape(b, t, r, d);
  fx->out[0] = fsl_b_permute(b, t, inv);
  return fsl_fx_done(fx);
}

/* ------------------------------------------------------------------ */
/* Det                                                                  */
/* ------------------------------------------------------------------ */

/* Largest matrix order Det expands (7! = 5040 products of 7 factors). */
#define DET_MAX_N 7

/* Advances perm to the next lexicographic permutation; false after the last. */
static bool next_perm(int64_t *perm, int n) {
  int i = n - 2;
  while (i >= 0 && perm[i] >= perm[i + 1]) i--;
  if (i < 0) return false;
  int j = n - 1;
  while (perm[j] <= perm[i]) j--;
  int64_t t = perm[i];
  perm[i] = perm[j];
  perm[j] = t;
  for (int a = i + 1, z = n - 1; a < z; a++, z--) {
    t = perm[a];
    perm[a] = perm[z];
    perm[z] = t;
  }
  return true;
}

/* Sign of a permutation from its inversion count. */
static double perm_sign(const int64_t *perm, int n) {
  int inv = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) inv += perm[i] > perm[j];
  return inv % 2 ? -1.0 : 1.0;
}

/** ONNX Det (opset 11, 22): Leibniz expansion for small static n: gather the
 *  n! products' factors with a constant index table, reduce_prod, then a
 *  signed sum. */
fsl_status fsl_fission_Det(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int r = x->rank;
  if (r < 2 || x->dims[r - 1] != x->dims[r - 2] || !fsl_dtype_is_float(x->dtype))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected a float input [..., n, n]");
  int n = (int)x->dims[r - 1];
  if (n > DET_MAX_N)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "determinant of order %d (expected n <= %d)", n, DET_MAX_N);
  int64_t np = 1;
  for (int i = 2; i <= n; i++) np *= i;
  int64_t *idx = fsl_b_table(b, np, n, sizeof(int64_t), "Det permutations"), perm[DET_MAX_N];
  double *sign = fsl_b_table(b, np, 1, sizeof(double), "Det signs");
  if (!idx || !sign) return fsl_fx_done(fx);
  for (int i = 0; i < n; i++) perm[i] = i;
  int64_t p = 0;
  do {
    sign[p] = perm_sign(perm, n);
    for (int i = 0; i < n; i++) idx[p * n + i] = i * n + perm[i];
    p++;
  } while (next_perm(perm, n));
  int64_t d[FSL_MAX_RANK];
  memcpy(d, x->dims, sizeof d);
  d[r - 2] = (int64_t)n * n;
  fsl_value *flat = fsl_b_reshape(b, x, r - 1, d);
  int64_t id[2] = {np, n}, last = -1;
  fsl_value *f = fsl_b_gather(b, flat, const_i64(b, 2, id, idx), r - 2); /* [..., n!, n] */
  fsl_value *t = fsl_b_reduce(b, FSL_OP_reduce_prod, f, &last, 1, false);
  t = fsl_b_binary(b, FSL_OP_mul, t, const_f64(b, x->dtype, 1, &np, sign));
  fx->out[0] = fsl_b_reduce(b, FSL_OP_reduce_sum, t, &last, 1, false);
  return fsl_fx_done(fx);
}
