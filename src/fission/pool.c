/*
 * pool.c — decompositions of the ONNX pooling ops: MaxPool, AveragePool,
 * LpPool and their Global* forms.
 *
 * Recipe: pad the spatial axes (-inf / lowest for max, 0 otherwise; the end
 * pad grows so that the last ceil_mode window exists) -> window over the
 * spatial axes -> reduce over the kernel axes (MaxPool: one axis at a time
 * when that reads far fewer taps, separable_max).  AveragePool divides by a
 * per-position count computed at compile time by the same pad / window /
 * reduce over a constant plane of ones (it folds to a constant): elements
 * of the input count, explicit pads count when count_include_pad=1, the
 * ceil_mode overhang never counts.
 */
#include "fission/fission.h"

#include <math.h>

/* Geometry of a pooling node with k spatial axes. */
typedef struct pool_geom {
  int k;
  int64_t kernel[FSL_MAX_RANK], strides[FSL_MAX_RANK], dil[FSL_MAX_RANK];
  int64_t pb[FSL_MAX_RANK], pe[FSL_MAX_RANK]; /* explicit (or auto) pads */
  int64_t pad_end[FSL_MAX_RANK];              /* end pad actually applied */
  int64_t out[FSL_MAX_RANK];
} pool_geom;

/* Reads an INTS attribute of exactly n entries into v (default `def` for
 * each when absent); entries must be >= lo. */
static bool read_ints(fsl_fctx *fx, const char *name, int n, int64_t def, int64_t lo, int64_t *v) {
  const int64_t *a = NULL;
  int c = fsl_attr_ints(fx->node, name, &a);
  if (c < 0) {
    for (int i = 0; i < n; i++) v[i] = def;
    return true;
  }
  if (c != n) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute '%s' has %d entries, expected %d", name, c, n);
    return false;
  }
  for (int i = 0; i < n; i++) {
    if (a[i] < lo) {
      fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute '%s'[%d] is %lld, expected >= %lld", name, i,
                  (long long)a[i], (long long)lo);
      return false;
    }
    v[i] = a[i];
  }
  return true;
}

/* Output length and pads of one spatial axis from auto_pad. */
static bool axis_geom(fsl_fctx *fx, pool_geom *g, int i, int64_t in, const char *auto_pad, bool ceil) {
  int64_t ek = (g->kernel[i] - 1) * g->dil[i] + 1, s = g->strides[i];
  bool same_upper = !strcmp(auto_pad, "SAME_UPPER"), same_lower = !strcmp(auto_pad, "SAME_LOWER");
  if (same_upper || same_lower) {
    g->out[i] = (in + s - 1) / s;
    int64_t total = (g->out[i] - 1) * s + ek - in;
    if (total < 0) total = 0;
    g->pb[i] = same_upper ? total / 2 : total - total / 2;
    g->pe[i] = total - g->pb[i];
  } else {
    if (!strcmp(auto_pad, "VALID")) g->pb[i] = g->pe[i] = 0;
    int64_t num = in + g->pb[i] + g->pe[i] - ek;
    if (num < 0) {
      fsl_fx_fail(fx, FSL_ERR_INVALID,
                  "spatial axis %d: padded input length %lld is shorter than the window %lld", i,
                  (long long)(in + g->pb[i] + g->pe[i]), (long long)ek);
      return false;
    }
    g->out[i] = (ceil ? (num + s - 1) / s : num / s) + 1;
    if (ceil && (g->out[i] - 1) * s >= in + g->pb[i]) g->out[i]--;
  }
  int64_t need = (g->out[i] - 1) * s + ek;
  g->pad_end[i] = need - in - g->pb[i] > 0 ? need - in - g->pb[i] : 0;
  return true;
}

/* Reads kernel_shape, strides, dilations, pads, auto_pad, ceil_mode of a
 * pooling node over x ([N, C, D...]) and computes the output geometry. */
static bool pool_geom_read(fsl_fctx *fx, const fsl_value *x, pool_geom *g) {
  if (x->rank < 3) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "input must have rank >= 3 ([N, C, D...]), got %d", x->rank);
    return false;
  }
  g->k = x->rank - 2;
  int64_t pads[2 * FSL_MAX_RANK];
  if (fsl_attr_find(fx->node, "kernel_shape") == NULL) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'kernel_shape' is required");
    return false;
  }
  if (!read_ints(fx, "kernel_shape", g->k, 1, 1, g->kernel) ||
      !read_ints(fx, "strides", g->k, 1, 1, g->strides) ||
      !read_ints(fx, "dilations", g->k, 1, 1, g->dil) ||
      !read_ints(fx, "pads", 2 * g->k, 0, 0, pads))
    return false;
  const char *auto_pad = fsl_attr_str(fx->node, "auto_pad", "NOTSET");
  if (strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID") && strcmp(auto_pad, "SAME_UPPER") &&
      strcmp(auto_pad, "SAME_LOWER")) {
    fsl_fx_fail(fx, FSL_ERR_INVALID,
                "attribute 'auto_pad' is '%s', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER",
                auto_pad);
    return false;
  }
  bool ceil = fsl_attr_int(fx->node, "ceil_mode", 0) != 0;
  for (int i = 0; i < g->k; i++) {
    g->pb[i] = pads[i];
    g->pe[i] = pads[g->k + i];
    if (!axis_geom(fx, g, i, x->dims[2 + i], auto_pad, ceil)) return false;
  }
  return true;
}

/* Pads the spatial axes of x (rank 2 + g->k, or g->k when `plane`) by
 * (pb, pad_end) with value v; no-op without padding. */
static fsl_value *pad_spatial(fsl_builder *b, fsl_value *x, const pool_geom *g, const int64_t *pe,
                              double v) {
  if (!x) return NULL;
  int r = x->rank, lead = r - g->k;
  int64_t pads[2 * FSL_MAX_RANK] = {0};
  bool any = false;
  for (int i = 0; i < g->k; i++) {
    pads[lead + i] = g->pb[i];
    pads[r + lead + i] = pe[i];
    any = any || g->pb[i] || pe[i];
  }
  return any ? fsl_b_pad(b, x, pads, 0, v) : x;
}

/* window over the spatial axes, then `op` over the kernel axes. */
static fsl_value *window_reduce(fsl_builder *b, fsl_value *xp, const pool_geom *g, fsl_op op) {
  fsl_value *w = fsl_b_window(b, xp, g->k, g->kernel, g->strides, g->dil);
  if (!w) return NULL;
  int64_t axes[FSL_MAX_RANK];
  for (int i = 0; i < g->k; i++) axes[i] = w->rank - g->k + i;
  return fsl_b_reduce(b, op, w, axes, g->k, false);
}

/* Max over windows of x padded (pb, pad_end) with v, as one window per
 * spatial axis, the last axis first (max is exact in any order: the result
 * is the same as window_reduce's over the padded x), when that reads fewer
 * than half the taps: a k x k window reads k + k taps per output instead
 * of k * k (YOLO's 5x5 to 13x13 stride-1 SPP pools).  Each pass pads only
 * its own axis, so that the earlier passes do not run over rows that are
 * all padding (a 13x13 pool of a 10x10 map: 10 rows in the first pass, not
 * 22).  NULL with b->st unset when it would not pay. */
static fsl_value *separable_max(fsl_builder *b, fsl_value *x, const pool_geom *g, double v) {
  if (g->k < 2) return NULL;
  int lead = x->rank - g->k;
  double direct = 1, sep = 0;
  int64_t cur[FSL_MAX_RANK];
  for (int i = 0; i < g->k; i++) {
    direct *= (double)g->out[i] * (double)g->kernel[i];
    cur[i] = x->dims[lead + i];
  }
  for (int i = g->k - 1; i >= 0; i--) {
    cur[i] = g->out[i];
    double pass = (double)g->kernel[i];
    for (int j = 0; j < g->k; j++) pass *= (double)cur[j];
    sep += pass;
  }
  if (!(2 * sep < direct)) return NULL;
  fsl_value *y = x;
  for (int i = g->k - 1; i >= 0 && y; i--) {
    pool_geom one = *g;
    int64_t pe[FSL_MAX_RANK] = {0};
    for (int j = 0; j < g->k; j++)
      if (j != i) one.kernel[j] = one.strides[j] = one.dil[j] = 1, one.pb[j] = 0;
    pe[i] = g->pad_end[i];
    y = pad_spatial(b, y, &one, pe, v);
    if (g->kernel[i] == 1 && g->strides[i] == 1) continue;
    y = window_reduce(b, y, &one, FSL_OP_reduce_max);
  }
  return y;
}

/* The smallest value of dtype dt (-inf for floats): max-pool padding. */
static double lowest(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_I8: return -128.0;
  case FSL_DT_I16: return -32768.0;
  case FSL_DT_I32: return -2147483648.0;
  case FSL_DT_I64: return -9223372036854775808.0;
  case FSL_DT_U8: case FSL_DT_U16: case FSL_DT_U32: case FSL_DT_U64: case FSL_DT_BOOL: return 0.0;
  default: return -INFINITY;
  }
}

/* Input 0 and its geometry; NULL (error set) on failure. */
static fsl_value *pool_input(fsl_fctx *fx, pool_geom *g) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x || !pool_geom_read(fx, x, g)) return NULL;
  return x;
}

/* int64 constant of x's rank, 1 everywhere but axis `axis` (len n),
 * holding v0 + i * step. */
static fsl_value *ramp(fsl_builder *b, int rank, int axis, int64_t n, int64_t v0, int64_t step) {
  int64_t dims[FSL_MAX_RANK];
  for (int i = 0; i < rank; i++) dims[i] = i == axis ? n : 1;
  fsl_value *c = fsl_b_const(b, FSL_DT_I64, rank, dims, NULL);
  if (!c) return NULL;
  for (int64_t i = 0; i < n; i++) ((int64_t *)c->data)[i] = v0 + i * step;
  return c;
}

/* MaxPool Indices from j, the flat (row-major) kernel offset of each
 * window's first maximum ([N, C, out...] int64): the input position
 * o * stride - pad_begin + k * dilation per axis, flattened over the whole
 * input (spatial part column-major when storage_order=1). */
static fsl_value *maxpool_indices(fsl_builder *b, const fsl_value *x, const pool_geom *g,
                                  fsl_value *j, bool col_major) {
  int r = x->rank;
  int64_t inner = 1, plane = 1;
  for (int i = 0; i < g->k; i++) plane *= x->dims[2 + i];
  fsl_value *idx = NULL;
  for (int i = g->k - 1; i >= 0; i--) {
    fsl_value *q = inner == 1 ? j : fsl_b_binary_scalar(b, FSL_OP_div, j, (double)inner);
    fsl_value *ki = q;
    if (i > 0) {
      fsl_value *t = fsl_b_binary_scalar(b, FSL_OP_div, q, (double)g->kernel[i]);
      ki = fsl_b_binary(b, FSL_OP_sub, q, fsl_b_binary_scalar(b, FSL_OP_mul, t, (double)g->kernel[i]));
    }
    int64_t mult = 1;
    for (int l = 0; l < g->k; l++) {
      if (col_major ? l < i : l > i) mult *= x->dims[2 + l];
    }
    fsl_value *base = ramp(b, r, 2 + i, g->out[i], -g->pb[i] * mult, g->strides[i] * mult);
    fsl_value *term = fsl_b_binary(b, FSL_OP_add, fsl_b_binary_scalar(b, FSL_OP_mul, ki, (double)(g->dil[i] * mult)), base);
    idx = idx ? fsl_b_binary(b, FSL_OP_add, idx, term) : term;
    inner *= g->kernel[i];
  }
  int64_t nc = x->dims[0] * x->dims[1], d2[2] = {x->dims[0], x->dims[1]};
  fsl_value *off = fsl_b_reshape(b, ramp(b, 1, 0, nc, 0, plane), 2, d2);
  int64_t od[FSL_MAX_RANK];
  for (int i = 0; i < r; i++) od[i] = i < 2 ? x->dims[i] : 1;
  return fsl_b_binary(b, FSL_OP_add, idx, fsl_b_reshape(b, off, r, od));
}

/* Whether the node names output i. */
static bool has_output(const fsl_fctx *fx, int i) {
  const fsl_value *o = i < fx->node->n_out ? fx->node->out[i] : NULL;
  return o && o->name && o->name[0];
}

/** ONNX MaxPool: max over windows of the input padded with -inf (or the
 *  dtype's lowest); Indices = flat input position of the first maximum. */
fsl_status fsl_fission_MaxPool(fsl_fctx *fx) {
  fsl_builder *b = fx->b;
  pool_geom g;
  fsl_value *x = pool_input(fx, &g);
  if (!x) return fsl_fx_done(fx);
  if (fx->n_out < 2 || !has_output(fx, 1)) {
    fsl_value *y = separable_max(b, x, &g, lowest(x->dtype));
    fx->out[0] = y || b->st ? y : window_reduce(b, pad_spatial(b, x, &g, g.pad_end, lowest(x->dtype)), &g,
                                                 FSL_OP_reduce_max);
    return fsl_fx_done(fx);
  }
  fsl_value *xp = pad_spatial(b, x, &g, g.pad_end, lowest(x->dtype));
  fsl_value *w = fsl_b_window(b, xp, g.k, g.kernel, g.strides, g.dil);
  if (!w) return fsl_fx_done(fx);
  int64_t dims[FSL_MAX_RANK], kn = 1;
  for (int i = 0; i < x->rank; i++) dims[i] = w->dims[i];
  for (int i = 0; i < g.k; i++) kn *= g.kernel[i];
  dims[x->rank] = kn;
  fsl_value *wf = fsl_b_reshape(b, w, x->rank + 1, dims);
  int64_t last = x->rank;
  fx->out[0] = fsl_b_reduce(b, FSL_OP_reduce_max, wf, &last, 1, false);
  fsl_value *j = fsl_b_arg(b, FSL_OP_argmax, wf, last, false, false);
  bool col = fsl_attr_int(fx->node, "storage_order", 0) != 0;
  if (j) fx->out[1] = maxpool_indices(b, x, &g, j, col);
  return fsl_fx_done(fx);
}

/* A constant whose elements are all equal becomes a scalar constant
 * (simpler kernels); anything else is returned unchanged. */
static fsl_value *uniform_to_scalar(fsl_builder *b, fsl_value *c) {
  if (!c || !c->data) return c;
  int64_t n = fsl_value_numel(c);
  if (n <= 0) return c;
  double v0 = fsl_load_f64(c->dtype, c->data, 0);
  for (int64_t i = 1; i < n; i++) {
    if (fsl_load_f64(c->dtype, c->data, i) != v0) return c;
  }
  return fsl_b_scalar(b, c->dtype, v0);
}

/* Per-output-position divisor of AveragePool, shape [out...]: the count of
 * window taps on the input (and on the explicit pads if include_pad). */
static fsl_value *avg_divisor(fsl_builder *b, const fsl_value *x, const pool_geom *g, bool include_pad) {
  int64_t dims[FSL_MAX_RANK];
  for (int i = 0; i < g->k; i++) dims[i] = x->dims[2 + i];
  fsl_value *plane = fsl_b_const(b, FSL_DT_F64, g->k, dims, NULL);
  if (!plane) return NULL;
  for (int64_t i = 0, n = fsl_value_numel(plane); i < n; i++) ((double *)plane->data)[i] = 1.0;
  int64_t pe_in[FSL_MAX_RANK], pe_over[FSL_MAX_RANK];
  for (int i = 0; i < g->k; i++) {
    pe_in[i] = g->pad_end[i] < g->pe[i] ? g->pad_end[i] : g->pe[i];
    pe_over[i] = g->pad_end[i] - pe_in[i];
  }
  /* explicit pads first (value 1 when counted), then the overhang (0) */
  plane = pad_spatial(b, plane, g, pe_in, include_pad ? 1.0 : 0.0);
  pool_geom g2 = *g;
  for (int i = 0; i < g->k; i++) g2.pb[i] = 0;
  plane = pad_spatial(b, plane, &g2, pe_over, 0.0);
  return uniform_to_scalar(b, fsl_b_cast(b, window_reduce(b, plane, g, FSL_OP_reduce_sum), x->dtype));
}

/** ONNX AveragePool: window sums divided by the count of counted taps
 *  (count_include_pad, ceil_mode, auto_pad, dilations). */
fsl_status fsl_fission_AveragePool(fsl_fctx *fx) {
  pool_geom g;
  fsl_value *x = pool_input(fx, &g);
  if (!x) return fsl_fx_done(fx);
  bool include_pad = fsl_attr_int(fx->node, "count_include_pad", 0) != 0;
  fsl_value *sum = window_reduce(fx->b, pad_spatial(fx->b, x, &g, g.pad_end, 0.0), &g, FSL_OP_reduce_sum);
  fx->out[0] = fsl_b_binary(fx->b, FSL_OP_div, sum, avg_divisor(fx->b, x, &g, include_pad));
  return fsl_fx_done(fx);
}

/* |x|^p, and its inverse root s^(1/p), with the common p special-cased. */
static fsl_value *lp_pow(fsl_builder *b, fsl_value *x, double p) {
  if (p == 1.0) return fsl_b_unary(b, FSL_OP_abs, x);
  if (p == 2.0) return fsl_b_binary(b, FSL_OP_mul, x, x);
  return fsl_b_binary_scalar(b, FSL_OP_pow, fsl_b_unary(b, FSL_OP_abs, x), p);
}

static fsl_value *lp_root(fsl_builder *b, fsl_value *s, double p) {
  if (p == 1.0) return s;
  if (p == 2.0) return fsl_b_unary(b, FSL_OP_sqrt, s);
  return fsl_b_binary_scalar(b, FSL_OP_pow, s, 1.0 / p);
}

/* Attribute p of LpPool / GlobalLpPool (float in opset 1, int after). */
static bool lp_p(fsl_fctx *fx, double *p) {
  *p = fsl_attr_float(fx->node, "p", 2.0);
  if (!(*p > 0.0)) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "attribute 'p' is %g, expected > 0", *p);
    return false;
  }
  return true;
}

/** ONNX LpPool: (sum over the window of |x|^p)^(1/p), zero padding. */
fsl_status fsl_fission_LpPool(fsl_fctx *fx) {
  pool_geom g;
  double p;
  fsl_value *x = pool_input(fx, &g);
  if (!x || !lp_p(fx, &p)) return fsl_fx_done(fx);
  fsl_value *t = pad_spatial(fx->b, lp_pow(fx->b, x, p), &g, g.pad_end, 0.0);
  fx->out[0] = lp_root(fx->b, window_reduce(fx->b, t, &g, FSL_OP_reduce_sum), p);
  return fsl_fx_done(fx);
}

/* Reduction of x over its spatial axes 2..rank-1, keepdims. */
static fsl_value *global_reduce(fsl_fctx *fx, fsl_value *x, fsl_op op) {
  if (x->rank < 2) {
    fsl_fx_fail(fx, FSL_ERR_INVALID, "input must have rank >= 2 ([N, C, D...]), got %d", x->rank);
    return NULL;
  }
  if (x->rank == 2) return x;
  int64_t axes[FSL_MAX_RANK];
  for (int i = 2; i < x->rank; i++) axes[i - 2] = i;
  return fsl_b_reduce(fx->b, op, x, axes, x->rank - 2, true);
}

/** ONNX GlobalAveragePool: mean over the spatial axes. */
fsl_status fsl_fission_GlobalAveragePool(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  /* float16 / bfloat16 sums of a whole plane are taken in float32 */
  bool half = x->dtype == FSL_DT_F16 || x->dtype == FSL_DT_BF16;
  fsl_value *s = global_reduce(fx, half ? fsl_b_cast(fx->b, x, FSL_DT_F32) : x, FSL_OP_reduce_sum);
  if (!s) return fsl_fx_done(fx);
  double n = 1.0;
  for (int i = 2; i < x->rank; i++) n *= (double)x->dims[i];
  fsl_value *y = n == 1.0 ? s : fsl_b_binary_scalar(fx->b, FSL_OP_div, s, n);
  fx->out[0] = fsl_b_cast(fx->b, y, x->dtype);
  return fsl_fx_done(fx);
}

/** ONNX GlobalMaxPool: max over the spatial axes. */
fsl_status fsl_fission_GlobalMaxPool(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  fx->out[0] = global_reduce(fx, x, FSL_OP_reduce_max);
  return fsl_fx_done(fx);
}

/** ONNX GlobalLpPool: (sum over the spatial axes of |x|^p)^(1/p). */
fsl_status fsl_fission_GlobalLpPool(fsl_fctx *fx) {
  double p;
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x || !lp_p(fx, &p)) return fsl_fx_done(fx);
  fsl_value *s = global_reduce(fx, lp_pow(fx->b, x, p), FSL_OP_reduce_sum);
  if (!s) return fsl_fx_done(fx);
  fx->out[0] = lp_root(fx->b, s, p);
  return fsl_fx_done(fx);
}
