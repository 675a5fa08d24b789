/*
 * resize.c — ONNX Resize (opsets 10-19) and Upsample (7-9).
 *
 * Resize is separable: each resized axis is done on its own.  Shapes are
 * static, so for every output position along an axis the source taps and
 * their weights are computed here, at compile time, exactly as the ONNX
 * spec's reference does.  An axis where every output copies one input
 * element (nearest, or exact linear positions) becomes one gather with a
 * constant index vector; otherwise each tap is a gather times a constant
 * weight vector broadcast along the axis, summed.
 */
#include "fission/fission.h"
#include <math.h>

#define MAX_TAPS 64

enum { M_NEAREST, M_LINEAR, M_CUBIC };

typedef struct resize_params {
  int mode;                 /* M_NEAREST, M_LINEAR, M_CUBIC */
  const char *ctm;          /* coordinate_transformation_mode */
  const char *nearest;      /* nearest_mode ("simple": opset 10 / Upsample) */
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
} resize_params;

/* One axis to resize: input and output sizes, scale, roi range. */
typedef struct axis_plan {
  int64_t in, out;
  double scale, roi0, roi1;
} axis_plan;

/* ---- per-position coefficients (ONNX reference semantics) ---- */

static int nearest_coeffs(const char *nm, double ratio, double scale, double *c) {
  bool hi;
  if (ratio == floor(ratio)) hi = true;
  else if (!strcmp(nm, "round_prefer_ceil")) hi = ratio >= 0.5;
  else if (!strcmp(nm, "floor")) hi = false;
  else if (!strcmp(nm, "ceil")) hi = true;
  else if (!strcmp(nm, "simple")) hi = scale < 1.0;  /* ceil when downsampling, else floor */
  else hi = ratio > 0.5;                              /* round_prefer_floor */
  c[0] = hi ? 0 : 1;
  c[1] = hi ? 1 : 0;
  return 2;
}

static double cubic_kernel(double x, double a) {
  x = fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/* Antialiased linear/cubic taps (downsampling widens the kernel by 1/scale). */
static int antialias_coeffs(const resize_params *p, double ratio, double scale, double *c) {
  double s = scale < 1.0 ? scale : 1.0, sum = 0;
  double support = p->mode == M_LINEAR ? 1.0 : 2.0;
  int64_t start = (int64_t)floor(-support / s) + 1;
  int64_t n = 2 - 2 * start;
  if (n > MAX_TAPS) return -1;
  for (int64_t i = 0; i < n; i++) {
    double x = ((double)(start + i) - ratio) * s;
    c[i] = p->mode == M_LINEAR ? fmax(0.0, fmin(1.0, 1 - fabs(x))) : cubic_kernel(x, p->cubic_a);
    sum += c[i];
  }
  for (int64_t i = 0; i < n; i++) c[i] /= sum;
  return (int)n;
}

/* Tap weights for a position with fractional part `ratio` (in (0, 1]);
 * returns the tap count, -1 if too many. */
static int coeffs(const resize_params *p, double ratio, double scale, double *c) {
  if (p->mode == M_NEAREST) return nearest_coeffs(p->nearest, ratio, scale, c);
  if (p->antialias) return antialias_coeffs(p, ratio, scale, c);
  if (p->mode == M_LINEAR) {
    c[0] = 1 - ratio;
    c[1] = ratio;
    return 2;
  }
  for (int i = 0; i < 4; i++) c[i] = cubic_kernel((double)(i - 1) - ratio, p->cubic_a);
  return 4;
}

/* Source coordinate of output position y; *extrap set when outside the
 * input (tf_crop_and_resize).  false for an unknown mode. */
static bool source_coord(const resize_params *p, const axis_plan *a, double y, double *x,
                         bool *extrap) {
  double in = (double)a->in, ow = a->scale * in, s = a->scale;
  const char *m = p->ctm;
  *extrap = false;
  if (!strcmp(m, "half_pixel")) *x = (y + 0.5) / s - 0.5;
  else if (!strcmp(m, "asymmetric")) *x = y / s;
  else if (!strcmp(m, "pytorch_half_pixel")) *x = ow == 1 ? -0.5 : (y + 0.5) / s - 0.5;
  else if (!strcmp(m, "tf_half_pixel_for_nn")) *x = (y + 0.5) / s;
  else if (!strcmp(m, "align_corners")) *x = ow == 1 ? 0.0 : y * (in - 1) / (ow - 1);
  else if (!strcmp(m, "half_pixel_symmetric")) {
    double adj = (double)a->out / ow, center = in / 2;
    *x = center * (1 - adj) + (y + 0.5) / s - 0.5;
  } else if (!strcmp(m, "tf_crop_and_resize")) {
    double span = (a->roi1 - a->roi0) * (in - 1);
    *x = (ow == 1 ? span / 2 : y * span / (ow - 1)) + a->roi0 * (in - 1);
    *extrap = *x < 0 || *x > in - 1;
  } else {
    return false;
  }
  return true;
}

/* Taps of one axis: idx[k*out + y] (clamped into the input) and w[k*out + y]
 * for k < *n_taps, and the extrapolation mask. */
typedef struct axis_taps {
  int n;
  int64_t *idx;
  double *w;
  uint8_t *extrap;
  bool any_extrap;
} axis_taps;

/* First tap of the window of n taps nearest to x (ties to the lower side). */
static int64_t window_start(double x, int n) {
  int64_t pad = (n + 1) / 2;
  double xp = x + (double)pad, p = floor(xp), frac = xp - p;
  int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                           : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
  return (int64_t)p + off - pad;
}

/* Fills the taps of one output position y. */
static bool position_taps(fsl_fctx *fx, const resize_params *p, const axis_plan *a, int64_t y,
                          axis_taps *t) {
  double x, c[MAX_TAPS];
  bool ex;
  if (!source_coord(p, a, (double)y, &x, &ex)) {
    fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", p->ctm);
    return false;
  }
  double fl = floor(x), ratio = x == fl ? 1.0 : x - fl;
  int n = coeffs(p, ratio, a->scale, c);
  if (n < 0 || (t->n && n != t->n)) {
    fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "antialias kernel wider than %d taps", MAX_TAPS);
    return false;
  }
  t->n = n;
  int64_t s = window_start(x, n);
  double sum = 0;
  for (int k = 0; k < n; k++) {
    int64_t i = s + k;
    if (p->exclude_outside && (i < 0 || i >= a->in)) c[k] = 0;
    sum += c[k];
  }
  for (int k = 0; k < n; k++) {
    int64_t i = s + k;
    t->idx[k * a->out + y] = i < 0 ? 0 : i >= a->in ? a->in - 1 : i;
    t->w[k * a->out + y] = p->exclude_outside && sum != 0 ? c[k] / sum : c[k];
  }
  t->extrap[y] = ex;
  t->any_extrap |= ex;
  return true;
}

static bool axis_taps_compute(fsl_fctx *fx, const resize_params *p, const axis_plan *a,
                              axis_taps *t) {
  t->n = 0;
  t->any_extrap = false;
  t->idx = fsl_b_table(fx->b, a->out, MAX_TAPS, sizeof(int64_t), "Resize tap indices");
  t->w = fsl_b_table(fx->b, a->out, MAX_TAPS, sizeof(double), "Resize tap weights");
  t->extrap = fsl_b_table(fx->b, a->out, 1, 1, "Resize extrapolation mask");
  if (!t->idx || !t->w || !t->extrap) return false;
  for (int64_t y = 0; y < a->out; y++)
    if (!position_taps(fx, p, a, y, t)) return false;
  return true;
}

/* If every output position takes exactly one input element with weight 1,
 * writes that element's index into sel and returns true. */
static bool taps_select(const axis_taps *t, int64_t out, int64_t *sel) {
  for (int64_t y = 0; y < out; y++) {
    int hit = -1;
    for (int k = 0; k < t->n; k++) {
      double w = t->w[k * out + y];
      if (w == 0) continue;
      if (w != 1 || hit >= 0) return false;
      hit = k;
    }
    if (hit < 0) return false;
    sel[y] = t->idx[hit * out + y];
  }
  return true;
}

/* ---- graph building ---- */

/* A constant of shape [1.., n at axis, ..1] (rank r) from doubles, in dt. */
static fsl_value *axis_const(fsl_fctx *fx, int r, int axis, int64_t n, const double *v, fsl_dtype dt) {
  int64_t dims[FSL_MAX_RANK];
  for (int i = 0; i < r; i++) dims[i] = i == axis ? n : 1;
  fsl_value *c = fsl_b_const(fx->b, FSL_DT_F64, r, dims, v);
  return dt == FSL_DT_F64 ? c : fsl_b_cast(fx->b, c, dt);
}

/* Weighted sum of gathered taps along axis (x already in a float dtype). */
static fsl_value *weighted_taps(fsl_fctx *fx, fsl_value *x, int axis, const axis_plan *a,
                                const axis_taps *t) {
  fsl_value *acc = NULL;
  for (int k = 0; k < t->n; k++) {
    const double *w = t->w + k * a->out;
    bool zero = true;
    for (int64_t y = 0; y < a->out && zero; y++) zero = w[y] == 0;
    if (zero) continue;
    fsl_value *g = fsl_b_gather(fx->b, x, fsl_b_ints(fx->b, (int)a->out, t->idx + k * a->out), axis);
    fsl_value *term = fsl_b_binary(fx->b, FSL_OP_mul, g, axis_const(fx, x->rank, axis, a->out, w, x->dtype));
    acc = acc ? fsl_b_binary(fx->b, FSL_OP_add, acc, term) : term;
  }
  if (!acc) { /* all weights zero: a zero tensor of the output shape */
    fsl_value *g = fsl_b_gather(fx->b, x, fsl_b_ints(fx->b, (int)a->out, t->idx), axis);
    acc = fsl_b_binary_scalar(fx->b, FSL_OP_mul, g, 0.0);
  }
  return acc;
}

/* A selection along axis as a view when it has a regular pattern: each
 * input element repeated f times (reshape + expand + reshape), or an
 * arithmetic progression (slice).  NULL (no error) when it has neither. */
static fsl_value *select_view(fsl_fctx *fx, fsl_value *x, int axis, const int64_t *sel, int64_t out) {
  int64_t in = x->dims[axis], r = x->rank;
  if (out < 1 || in < 1) return NULL;
  bool repeat = out % in == 0 && r < FSL_MAX_RANK, prog = true;
  int64_t f = repeat ? out / in : 0, step = out > 1 ? sel[1] - sel[0] : 1;
  for (int64_t y = 0; y < out; y++) {
    repeat = repeat && sel[y] == y / f;
    prog = prog && sel[y] == sel[0] + y * step;
  }
  if (prog && step != 0) {
    int64_t st[FSL_MAX_RANK], sp[FSL_MAX_RANK], sz[FSL_MAX_RANK];
    for (int i = 0; i < r; i++) st[i] = 0, sp[i] = 1, sz[i] = x->dims[i];
    st[axis] = sel[0], sp[axis] = step, sz[axis] = out;
    return fsl_b_slice(fx->b, x, st, sp, sz);
  }
  if (!repeat) return NULL;
  int64_t d1[FSL_MAX_RANK], d2[FSL_MAX_RANK], d3[FSL_MAX_RANK];
  for (int i = 0, j = 0; i < r; i++, j++) {
    d1[j] = d2[j] = d3[i] = x->dims[i];
    if (i == axis) d1[++j] = 1, d2[j] = f, d3[i] = out;
  }
  fsl_value *y = fsl_b_reshape(fx->b, x, (int)r + 1, d1);
  y = fsl_b_expand(fx->b, y, d2);
  return fsl_b_reshape(fx->b, y, (int)r, d3);
}

/* Float dtype the weighted sums are computed in. */
static fsl_dtype compute_dtype(fsl_dtype dt) {
  return dt == FSL_DT_F32 || dt == FSL_DT_F64 ? dt : FSL_DT_F32;
}

/* Resizes one axis of *x (cast to the compute dtype on first need). */
static void resize_axis(fsl_fctx *fx, const resize_params *p, fsl_value **x, int axis,
                        const axis_plan *a) {
  axis_taps t = {0};
  if (a->out > INT32_MAX) {
    fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "output size %lld too large", (long long)a->out);
    return;
  }
  if (!axis_taps_compute(fx, p, a, &t)) return;
  fsl_value *y;
  int64_t *sel = fsl_b_table(fx->b, a->out, 1, sizeof(int64_t), "Resize selection");
  if (!sel) return;
  if (taps_select(&t, a->out, sel)) {
    y = select_view(fx, *x, axis, sel, a->out);
    if (!y) y = fsl_b_gather(fx->b, *x, fsl_b_ints(fx->b, (int)a->out, sel), axis);
  } else {
    fsl_dtype cdt = compute_dtype((*x)->dtype);
    fsl_value *xc = (*x)->dtype == cdt ? *x : fsl_b_cast(fx->b, *x, cdt);
    y = weighted_taps(fx, xc, axis, a, &t);
  }
  if (y && t.any_extrap) {
    double *m = fsl_b_table(fx->b, a->out, 1, sizeof(double), "Resize extrapolation mask");
    if (m) {
      for (int64_t i = 0; i < a->out; i++) m[i] = t.extrap[i];
      fsl_value *mask = axis_const(fx, y->rank, axis, a->out, m, FSL_DT_BOOL);
      y = fsl_b_where(fx->b, mask, fsl_b_scalar(fx->b, y->dtype, p->extrapolation), y);
    }
  }
  *x = y;
}

/* Casts a float result back to the input dtype (ints: round, saturate). */
static fsl_value *cast_back(fsl_fctx *fx, fsl_value *y, fsl_dtype dt) {
  if (!y || y->dtype == dt) return y;
  if (fsl_dtype_is_int(dt)) {
    int bits = (int)fsl_dtype_size(dt) * 8;
    double lo = fsl_dtype_is_signed(dt) ? -ldexp(1.0, bits - 1) : 0;
    double hi = fsl_dtype_is_signed(dt) ? ldexp(1.0, bits - 1) - 1 : ldexp(1.0, bits) - 1;
    y = fsl_b_unary(fx->b, FSL_OP_round, y);
    y = fsl_b_binary_scalar(fx->b, FSL_OP_max, y, lo);
    y = fsl_b_binary_scalar(fx->b, FSL_OP_min, y, hi);
  }
  return fsl_b_cast(fx->b, y, dt);
}

/* Whether the last axis is resized first: when the other axes do not
 * shrink.  A gather along the last (contiguous) axis reads an element per
 * index, scalar code; a gather along an outer axis picks whole rows (its
 * index is invariant in the inner loop, the row is read contiguously, and
 * vectorizes).  Resizing the last axis first keeps its gathers on the
 * smaller tensor, the one not yet enlarged along the outer axes, and
 * leaves row gathers for the output's size (bilinear 8x upsampling of
 * 7x7: 7x56 element gathers, 56x56 row gathers, not 56x56 of both). */
static bool last_axis_first(const fsl_value *x, const axis_plan *plans) {
  int r = x->rank;
  if (r < 2 || plans[r - 1].out == plans[r - 1].in) return false;
  double grow = 1;
  for (int i = 0; i < r - 1; i++) grow *= plans[i].in ? (double)plans[i].out / (double)plans[i].in : 1.0;
  return grow >= 1.0;
}

/* Resizes every axis whose plan is not the identity. */
static fsl_status resize_apply(fsl_fctx *fx, const resize_params *p, fsl_value *x,
                               const axis_plan *plans) {
  fsl_value *y = x;
  bool rotate = last_axis_first(x, plans);
  for (int k = 0; k < x->rank && y; k++) {
    int i = rotate ? (k + x->rank - 1) % x->rank : k;
    const axis_plan *a = &plans[i];
    bool trivial_roi = strcmp(p->ctm, "tf_crop_and_resize") || (a->roi0 == 0 && a->roi1 == 1);
    if (fabs(a->scale - 1.0) < 1e-9 && a->out == a->in && trivial_roi) continue;
    if (a->in == 0 && a->out > 0)
      return fsl_fx_fail(fx, FSL_ERR_SHAPE, "cannot resize empty axis %d", i);
    resize_axis(fx, p, &y, i, a);
  }
  fx->out[0] = cast_back(fx, y, x->dtype);
  return fsl_fx_done(fx);
}

/* ---- reading the parameters ---- */

/* Reads a constant float list into out (at most max); -1 with b->st set if
 * not constant or too long. */
static int const_floats(fsl_fctx *fx, const fsl_value *v, double *out, int max, const char *what) {
  if (!v->data) {
    fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED,
               "%s must be a constant known at compile time, but it is computed at run time", what);
    return -1;
  }
  int64_t n = fsl_value_numel(v);
  if (n > max) {
    fsl_b_fail(fx->b, FSL_ERR_INVALID, "%s has %lld entries, expected at most %d", what, (long long)n, max);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) out[i] = fsl_load_f64(v->dtype, v->data, i);
  return (int)n;
}

static int mode_of(const char *s) {
  if (!strcmp(s, "nearest")) return M_NEAREST;
  if (!strcmp(s, "linear") || !strcmp(s, "bilinear")) return M_LINEAR;
  if (!strcmp(s, "cubic")) return M_CUBIC;
  return -1;
}

/* Output sizes from scales: floor(in * scale). */
static bool plans_from_scales(fsl_fctx *fx, const fsl_value *x, const double *sc, axis_plan *pl) {
  for (int i = 0; i < x->rank; i++) {
    if (!(sc[i] > 0))
      return fsl_b_fail(fx->b, FSL_ERR_INVALID, "scale of axis %d must be > 0", i), false;
    pl[i].in = x->dims[i];
    pl[i].scale = sc[i];
    pl[i].out = (int64_t)floor((double)x->dims[i] * sc[i]);
  }
  return true;
}

/* Scales from output sizes, with keep_aspect_ratio_policy over the axes. */
static bool plans_from_sizes(fsl_fctx *fx, const fsl_value *x, const int64_t *sz, const bool *on,
                             axis_plan *pl) {
  const char *pol = "stretch";
  if (fx->opset >= 18) pol = fsl_attr_str(fx->node, "keep_aspect_ratio_policy", pol);
  bool larger = !strcmp(pol, "not_larger"), smaller = !strcmp(pol, "not_smaller");
  if (!larger && !smaller && strcmp(pol, "stretch"))
    return fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "keep_aspect_ratio_policy '%s'", pol), false;
  double pick = larger ? INFINITY : -INFINITY;
  for (int i = 0; i < x->rank; i++) {
    if (sz[i] < 0) return fsl_b_fail(fx->b, FSL_ERR_INVALID, "negative size for axis %d", i), false;
    pl[i].in = x->dims[i];
    pl[i].out = sz[i];
    pl[i].scale = x->dims[i] ? (double)sz[i] / (double)x->dims[i] : 1.0;
    if (on[i]) pick = larger ? fmin(pick, pl[i].scale) : fmax(pick, pl[i].scale);
  }
  for (int i = 0; (larger || smaller) && i < x->rank; i++) {
    if (!on[i]) continue;
    pl[i].scale = pick;
    pl[i].out = (int64_t)(pick * (double)x->dims[i] + 0.5);
  }
  return true;
}

/* Resize inputs (opset >= 11): roi, scales or sizes, over `axes` (opset 18). */
static bool resize_plans(fsl_fctx *fx, const fsl_value *x, const resize_params *p, axis_plan *pl) {
  int r = x->rank, na = r;
  int64_t axes[FSL_MAX_RANK];
  const int64_t *av;
  int n = fx->opset >= 18 ? fsl_attr_ints(fx->node, "axes", &av) : -1;
  for (int i = 0; i < r; i++) axes[i] = i;
  if (n >= 0) {
    if (n > r) return fsl_b_fail(fx->b, FSL_ERR_INVALID, "too many axes"), false;
    na = n;
    for (int i = 0; i < n; i++) {
      axes[i] = av[i];
      if (!fsl_b_axis(fx->b, &axes[i], r, "axes")) return false;
    }
  }
  double sc[FSL_MAX_RANK], roi[2 * FSL_MAX_RANK], rv[2 * FSL_MAX_RANK];
  int64_t sz[FSL_MAX_RANK], sv[FSL_MAX_RANK];
  bool on[FSL_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) sc[i] = 1.0, sz[i] = x->dims[i], roi[i] = 0, roi[r + i] = 1;
  for (int i = 0; i < na; i++) on[axes[i]] = true;
  const fsl_value *vroi = fx->n_in > 1 ? fx->in[1] : NULL;
  const fsl_value *vsc = fx->n_in > 2 ? fx->in[2] : NULL;
  const fsl_value *vsz = fx->n_in > 3 ? fx->in[3] : NULL;
  if (vroi && fsl_value_numel(vroi) > 0 && !strcmp(p->ctm, "tf_crop_and_resize")) {
    if (const_floats(fx, vroi, rv, 2 * FSL_MAX_RANK, "input 'roi'") != 2 * na)
      return fsl_b_fail(fx->b, FSL_ERR_INVALID, "roi must have %d entries", 2 * na), false;
    for (int i = 0; i < na; i++) roi[axes[i]] = rv[i], roi[r + axes[i]] = rv[na + i];
  }
  bool ok;
  if (vsc && fsl_value_numel(vsc) > 0) {
    if (const_floats(fx, vsc, rv, FSL_MAX_RANK, "input 'scales'") != na)
      return fsl_b_fail(fx->b, FSL_ERR_INVALID, "scales must have %d entries", na), false;
    for (int i = 0; i < na; i++) sc[axes[i]] = rv[i];
    ok = plans_from_scales(fx, x, sc, pl);
  } else if (vsz && fsl_value_numel(vsz) > 0) {
    if (fsl_b_const_ints(fx->b, vsz, sv, FSL_MAX_RANK, "input 'sizes'") != na)
      return fsl_b_fail(fx->b, FSL_ERR_INVALID, "sizes must have %d entries", na), false;
    for (int i = 0; i < na; i++) sz[axes[i]] = sv[i];
    ok = plans_from_sizes(fx, x, sz, on, pl);
  } else {
    return fsl_b_fail(fx->b, FSL_ERR_INVALID, "expected input 'scales' or 'sizes'"), false;
  }
  for (int i = 0; i < r; i++) pl[i].roi0 = roi[i], pl[i].roi1 = roi[r + i];
  return ok;
}

/* Plans from a scales list (attribute or input) for Resize-10 / Upsample. */
static bool legacy_plans(fsl_fctx *fx, const fsl_value *x, const double *sc, int n, axis_plan *pl) {
  if (n != x->rank)
    return fsl_b_fail(fx->b, FSL_ERR_INVALID, "scales has %d entries, expected %d", n, x->rank), false;
  if (!plans_from_scales(fx, x, sc, pl)) return false;
  for (int i = 0; i < x->rank; i++) pl[i].roi0 = 0, pl[i].roi1 = 1;
  return true;
}

/** ONNX Resize (opsets 10-19): nearest, linear and cubic over any axes. */
fsl_status fsl_fission_Resize(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  const fsl_node *n = fx->node;
  resize_params p = {
      .mode = mode_of(fsl_attr_str(n, "mode", "nearest")),
      .ctm = fx->opset >= 11 ? fsl_attr_str(n, "coordinate_transformation_mode", "half_pixel") : "asymmetric",
      .nearest = fx->opset >= 11 ? fsl_attr_str(n, "nearest_mode", "round_prefer_floor") : "simple",
      .cubic_a = fsl_attr_float(n, "cubic_coeff_a", -0.75),
      .extrapolation = fsl_attr_float(n, "extrapolation_value", 0.0),
      .exclude_outside = fsl_attr_int(n, "exclude_outside", 0) != 0,
      .antialias = fx->opset >= 18 && fsl_attr_int(n, "antialias", 0) != 0,
  };
  if (p.mode < 0 || (fx->opset < 11 && p.mode == M_CUBIC))
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "mode must be nearest, linear or cubic");
  if (p.antialias && p.mode == M_NEAREST)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "antialias needs mode linear or cubic");
  axis_plan pl[FSL_MAX_RANK];
  bool ok;
  if (fx->opset < 11) {
    double sc[FSL_MAX_RANK];
    fsl_value *vs = fsl_fx_req(fx, 1);
    int cnt = vs ? const_floats(fx, vs, sc, FSL_MAX_RANK, "input 'scales'") : -1;
    ok = cnt >= 0 && legacy_plans(fx, x, sc, cnt, pl);
  } else {
    ok = resize_plans(fx, x, &p, pl);
  }
  if (!ok) return fsl_fx_done(fx);
  return resize_apply(fx, &p, x, pl);
}

/** ONNX Upsample (opsets 7-9; scales attribute in 7, input in 9): Resize
 *  with asymmetric coordinates, nearest (floor) or linear. */
fsl_status fsl_fission_Upsample(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  resize_params p = {.mode = mode_of(fsl_attr_str(fx->node, "mode", "nearest")),
                     .ctm = "asymmetric", .nearest = "floor", .cubic_a = -0.75};
  if (p.mode < 0 || p.mode == M_CUBIC)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "mode must be nearest or linear");
  double sc[FSL_MAX_RANK];
  int cnt;
  if (fx->opset < 9) {
    const double *v;
    cnt = fsl_attr_floats(fx->node, "scales", &v);
    if (cnt < 0 || cnt > FSL_MAX_RANK)
      return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected attribute 'scales' with one entry per axis");
    memcpy(sc, v, sizeof(double) * (size_t)cnt);
  } else {
    fsl_value *vs = fsl_fx_req(fx, 1);
    cnt = vs ? const_floats(fx, vs, sc, FSL_MAX_RANK, "input 'scales'") : -1;
  }
  axis_plan pl[FSL_MAX_RANK];
  if (cnt < 0 || !legacy_plans(fx, x, sc, cnt, pl)) return fsl_fx_done(fx);
  return resize_apply(fx, &p, x, pl);
}
