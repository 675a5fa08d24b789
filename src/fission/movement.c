/*
 * movement.c — decompositions of the ONNX shape and movement ops into the
 * movement primitives (reshape, permute, expand, slice, pad, concat).
 * Shapes are static, so every index computation happens here at compile
 * time; the primitives only see normalized, in-range parameters.
 */
#include "fission/fission.h"

#define MAX_LIST 1024  /* longest int list read (split sizes, pads) */

/* ---- shared helpers ---- */

/* Reads an int list that is attribute `attr` before opset `since` and input
 * `idx` from then on.  Returns the count, -1 when absent (then *err is
 * false) or on error (then *err is true and b->st is set). */
static int attr_or_input_ints(fsl_fctx *fx, const char *attr, int idx, int64_t since,
                              int64_t *out, int max, bool *err) {
  *err = false;
  if (fx->opset < since) {
    const int64_t *v;
    int n = fsl_attr_ints(fx->node, attr, &v);
    if (n < 0) return -1;
    if (n > max) {
      *err = true;
      fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "attribute '%s' has %d entries (max %d)", attr, n, max);
      return -1;
    }
    memcpy(out, v, sizeof(int64_t) * (size_t)n);
    return n;
  }
  if (idx >= fx->n_in || !fx->in[idx]) return -1;
  char what[64];
  snprintf(what, sizeof what, "input '%s'", attr);
  int n = fsl_b_const_ints(fx->b, fx->in[idx], out, max, what);
  if (n < 0) *err = true;
  return n;
}

/* Normalizes every axis of a list (named `what`) against `rank`; fails on
 * out-of-range or (when `unique`) repeated axes. */
static bool norm_axes(fsl_fctx *fx, int64_t *axes, int n, int rank, bool unique, const char *what) {
  bool seen[FSL_MAX_RANK] = {0};
  for (int i = 0; i < n; i++) {
    if (!fsl_b_axis(fx->b, &axes[i], rank, what)) return false;
    if (unique && seen[axes[i]]) {
      fsl_b_fail(fx->b, FSL_ERR_INVALID, "axis %lld repeated in '%s'", (long long)axes[i], what);
      return false;
    }
    seen[axes[i]] = true;
  }
  return true;
}

/* Reshape with dims given as an array. */
static fsl_value *reshape_to(fsl_fctx *fx, fsl_value *x, int rank, const int64_t *dims) {
  if (rank > FSL_MAX_RANK)
    return fsl_b_fail(fx->b, FSL_ERR_UNSUPPORTED, "rank %d exceeds %d", rank, FSL_MAX_RANK);
  return fsl_b_reshape(fx->b, x, rank, dims);
}

/* ---- Reshape ---- */

/* Resolves an ONNX Reshape shape (0 = copy input dim unless allowzero, one
 * -1 = inferred) into out; false (with b->st) if it does not fit x. */
static bool resolve_shape(fsl_fctx *fx, const fsl_value *x, int64_t *shape, int n, bool allowzero) {
  int neg = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= x->rank) {
        fsl_b_fail(fx->b, FSL_ERR_SHAPE, "shape[%d] = 0 copies a dim the input lacks", i);
        return false;
      }
      shape[i] = x->dims[i];
    }
    if (shape[i] == -1) {
      if (neg >= 0) {
        fsl_b_fail(fx->b, FSL_ERR_SHAPE, "shape has more than one -1");
        return false;
      }
      neg = i;
    } else if (shape[i] < 0 || !fsl_mul_ok(known, shape[i], &known)) {
      fsl_b_fail(fx->b, FSL_ERR_SHAPE, "shape[%d] = %lld is invalid", i, (long long)shape[i]);
      return false;
    }
  }
  int64_t total = fsl_numel(x->rank, x->dims);
  if (neg >= 0) {
    if (known == 0 || total % known) {
      fsl_b_fail(fx->b, FSL_ERR_SHAPE, "cannot infer the -1 dim of the shape");
      return false;
    }
    shape[neg] = total / known;
    known = total;
  }
  if (known != total) {
    fsl_b_fail(fx->b, FSL_ERR_SHAPE, "shape has %lld elements, input has %lld",
               (long long)known, (long long)total);
    return false;
  }
  return true;
}

/** ONNX Reshape (shape attribute before opset 5, input after; allowzero 14). */
fsl_status fsl_fission_Reshape(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t shape[FSL_MAX_RANK];
  bool err;
  int n = attr_or_input_ints(fx, "shape", 1, 5, shape, FSL_MAX_RANK, &err);
  if (!x || err) return fsl_fx_done(fx);
  if (n < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected a 'shape'");
  bool allowzero = fx->opset >= 14 && fsl_attr_int(fx->node, "allowzero", 0) != 0;
  if (resolve_shape(fx, x, shape, n, allowzero)) fx->out[0] = reshape_to(fx, x, n, shape);
  return fsl_fx_done(fx);
}

/** ONNX Flatten: 2-D [prod(dims[:axis]), prod(dims[axis:])]. */
fsl_status fsl_fission_Flatten(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t axis = fsl_attr_int(fx->node, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "axis must be in [-%d, %d]", x->rank, x->rank);
  int64_t d[2] = {fsl_numel((int)axis, x->dims), fsl_numel(x->rank - (int)axis, x->dims + axis)};
  fx->out[0] = reshape_to(fx, x, 2, d);
  return fsl_fx_done(fx);
}

/** ONNX Squeeze (axes attribute before opset 13, input after; none = all 1s). */
fsl_status fsl_fission_Squeeze(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t axes[FSL_MAX_RANK], dims[FSL_MAX_RANK];
  bool err, drop[FSL_MAX_RANK] = {0};
  int n = attr_or_input_ints(fx, "axes", 1, 13, axes, FSL_MAX_RANK, &err);
  if (!x || err || (n > 0 && !norm_axes(fx, axes, n, x->rank, false, "axes"))) return fsl_fx_done(fx);
  for (int i = 0; i < n; i++) {
    if (x->dims[axes[i]] != 1)
      return fsl_fx_fail(fx, FSL_ERR_SHAPE, "cannot squeeze axis %lld of size %lld",
                         (long long)axes[i], (long long)x->dims[axes[i]]);
    drop[axes[i]] = true;
  }
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!(n <= 0 ? x->dims[i] == 1 : drop[i])) dims[r++] = x->dims[i];
  fx->out[0] = reshape_to(fx, x, r, dims);
  return fsl_fx_done(fx);
}

/** ONNX Unsqueeze (axes attribute before opset 13, input after). */
fsl_status fsl_fission_Unsqueeze(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t axes[FSL_MAX_RANK], dims[FSL_MAX_RANK];
  bool err, ins[FSL_MAX_RANK] = {0};
  int n = attr_or_input_ints(fx, "axes", 1, 13, axes, FSL_MAX_RANK, &err);
  if (!x || err) return fsl_fx_done(fx);
  if (n < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 'axes'");
  int r = x->rank + n;
  if (r > FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "rank %d exceeds %d", r, FSL_MAX_RANK);
  if (!norm_axes(fx, axes, n, r, true, "axes")) return fsl_fx_done(fx);
  for (int i = 0; i < n; i++) ins[axes[i]] = true;
  for (int i = 0, j = 0; i < r; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
  fx->out[0] = reshape_to(fx, x, r, dims);
  return fsl_fx_done(fx);
}

/** ONNX Transpose (perm defaults to the reversed axes). */
fsl_status fsl_fission_Transpose(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t perm[FSL_MAX_RANK];
  const int64_t *p;
  int n = fsl_attr_ints(fx->node, "perm", &p);
  if (n >= 0 && n != x->rank)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "perm has %d entries, expected %d", n, x->rank);
  for (int i = 0; i < x->rank; i++) perm[i] = n >= 0 ? p[i] : x->rank - 1 - i;
  if (!norm_axes(fx, perm, x->rank, x->rank, true, "perm")) return fsl_fx_done(fx);
  fx->out[0] = fsl_b_permute(fx->b, x, perm);
  return fsl_fx_done(fx);
}

/** ONNX Concat (axis; negative from opset 11; empty inputs dropped). */
fsl_status fsl_fission_Concat(fsl_fctx *fx) {
  fsl_value *first = fsl_fx_req(fx, 0);
  if (!first) return fsl_fx_done(fx);
  int64_t axis = fsl_attr_int(fx->node, "axis", 1);
  if (fx->opset >= 4 && !fsl_attr_find(fx->node, "axis"))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected attribute 'axis'");
  if (!fsl_b_axis(fx->b, &axis, first->rank, "axis")) return fsl_fx_done(fx);
  fsl_value **xs = fsl_arena_alloc(&fx->b->g->arena, sizeof(fsl_value *) * (size_t)fx->n_in);
  if (!xs) return fsl_fx_fail(fx, FSL_ERR_NOMEM, "out of memory");
  int n = 0;
  for (int i = 0; i < fx->n_in; i++) {
    fsl_value *v = fsl_fx_req(fx, i);
    if (!v) return fsl_fx_done(fx);
    if (v->rank != first->rank)
      return fsl_fx_fail(fx, FSL_ERR_SHAPE, "input %d has rank %d, expected %d", i, v->rank, first->rank);
    if (v->dims[axis] > 0) xs[n++] = v;
  }
  if (n == 0) xs[n++] = first;
  fx->out[0] = n == 1 ? xs[0] : fsl_b_concat(fx->b, xs, n, (int)axis);
  return fsl_fx_done(fx);
}

/* Sizes of Split's chunks: the split list, num_outputs (opset 18, last
 * chunk smaller), or an even split into the node's outputs. */
static int split_sizes(fsl_fctx *fx, int64_t dim, int64_t *sizes) {
  bool err;
  int n = attr_or_input_ints(fx, "split", 1, 13, sizes, MAX_LIST, &err);
  if (n < 0 && !err && fx->opset < 2 && fx->n_in > 1 && fx->in[1]) /* Split-1: optional input */
    err = (n = fsl_b_const_ints(fx->b, fx->in[1], sizes, MAX_LIST, "input 'split'")) < 0;
  if (err) return -1;
  if (n >= 0) {
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      if (sizes[i] < 0 || sizes[i] > dim)
        return fsl_b_fail(fx->b, FSL_ERR_INVALID, "split size %lld outside [0, %lld]",
                          (long long)sizes[i], (long long)dim), -1;
      sum += sizes[i];
    }
    if (sum != dim || n != fx->n_out)
      return fsl_b_fail(fx->b, FSL_ERR_SHAPE, "split sizes sum to %lld over %d outputs, "
                        "expected %lld over %d", (long long)sum, n, (long long)dim, fx->n_out), -1;
    return n;
  }
  int64_t k = fx->opset >= 18 ? fsl_attr_int(fx->node, "num_outputs", fx->n_out) : fx->n_out;
  if (k != fx->n_out || k <= 0)
    return fsl_b_fail(fx->b, FSL_ERR_INVALID, "num_outputs %lld != %d outputs", (long long)k,
                      fx->n_out), -1;
  int64_t chunk = (dim + k - 1) / k;
  if (fx->opset < 18 && dim % k)
    return fsl_b_fail(fx->b, FSL_ERR_SHAPE, "dim %lld does not split evenly into %lld",
                      (long long)dim, (long long)k), -1;
  for (int i = 0; i < k; i++) {
    int64_t rest = dim - (int64_t)i * chunk;
    sizes[i] = rest < 0 ? 0 : rest < chunk ? rest : chunk;
  }
  return (int)k;
}

/** ONNX Split (split attribute before opset 13, input after; num_outputs 18). */
fsl_status fsl_fission_Split(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t axis = fsl_attr_int(fx->node, "axis", 0);
  if (!x || !fsl_b_axis(fx->b, &axis, x->rank, "axis")) return fsl_fx_done(fx);
  if (fx->n_out > MAX_LIST) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "too many outputs");
  int64_t sizes[MAX_LIST];
  int n = split_sizes(fx, x->dims[axis], sizes);
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    fx->out[i] = fsl_b_slice_axis(fx->b, x, (int)axis, start, sizes[i]);
    start += sizes[i];
  }
  return fsl_fx_done(fx);
}

/* ---- Slice ---- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Normalizes one axis of an ONNX slice (start, end, step) over dim into the
 * primitive's (start, step, size), clamping exactly as the spec says. */
static void slice_axis_params(int64_t dim, int64_t start, int64_t end, int64_t step,
                              int64_t *o_start, int64_t *o_step, int64_t *o_size) {
  if (start < 0) start = start < -dim ? -1 - dim : start + dim;  /* avoid overflow near INT64_MIN */
  if (end < 0) end = end < -dim ? -1 - dim : end + dim;
  int64_t size;
  if (step > 0) {
    start = clamp64(start, 0, dim);
    end = clamp64(end, 0, dim);
    size = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    start = clamp64(start, 0, dim - 1);
    end = clamp64(end, -1, dim - 1);
    size = start > end ? (start - end - 1) / mag + 1 : 0;
  }
  *o_start = size > 0 ? start : 0;
  *o_step = size > 1 ? step : 1;  /* one element: the step does not matter */
  *o_size = size;
}

/** ONNX Slice (starts/ends/axes attributes in opset 1; inputs with steps from 10). */
fsl_status fsl_fission_Slice(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int64_t st[FSL_MAX_RANK], en[FSL_MAX_RANK], ax[FSL_MAX_RANK], sp[FSL_MAX_RANK];
  bool e1, e2, e3, e4 = false;
  int ns = attr_or_input_ints(fx, "starts", 1, 10, st, FSL_MAX_RANK, &e1);
  int ne = attr_or_input_ints(fx, "ends", 2, 10, en, FSL_MAX_RANK, &e2);
  int na = attr_or_input_ints(fx, "axes", 3, 10, ax, FSL_MAX_RANK, &e3);
  int np = fx->opset >= 10 ? attr_or_input_ints(fx, "steps", 4, 10, sp, FSL_MAX_RANK, &e4) : -1;
  if (e1 || e2 || e3 || e4) return fsl_fx_done(fx);
  if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "starts, ends, axes and steps must have equal lengths");
  for (int i = 0; na < 0 && i < ns; i++) ax[i] = i;
  if (!norm_axes(fx, ax, ns, x->rank, true, "axes")) return fsl_fx_done(fx);
  int64_t o_st[FSL_MAX_RANK], o_sp[FSL_MAX_RANK], o_sz[FSL_MAX_RANK];
  for (int i = 0; i < x->rank; i++) o_st[i] = 0, o_sp[i] = 1, o_sz[i] = x->dims[i];
  for (int i = 0; i < ns; i++) {
    int64_t step = np >= 0 ? sp[i] : 1;
    if (step == 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "steps must not be 0");
    int a = (int)ax[i];
    slice_axis_params(x->dims[a], st[i], en[i], step, &o_st[a], &o_sp[a], &o_sz[a]);
  }
  fx->out[0] = fsl_b_slice(fx->b, x, o_st, o_sp, o_sz);
  return fsl_fx_done(fx);
}

/** ONNX Expand: numpy broadcast of the input with the shape input. */
fsl_status fsl_fission_Expand(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  fsl_value *s = fsl_fx_req(fx, 1);
  if (!x || !s) return fsl_fx_done(fx);
  int64_t shape[FSL_MAX_RANK], dims[FSL_MAX_RANK];
  int n = fsl_b_const_ints(fx->b, s, shape, FSL_MAX_RANK, "input 'shape'");
  if (n < 0) return fsl_fx_done(fx);
  int r = n > x->rank ? n : x->rank;
  for (int i = 0; i < r; i++) {
    int64_t a = i - (r - x->rank) >= 0 ? x->dims[i - (r - x->rank)] : 1;
    int64_t c = i - (r - n) >= 0 ? shape[i - (r - n)] : 1;
    if (a != c && a != 1 && c != 1)
      return fsl_fx_fail(fx, FSL_ERR_SHAPE, "cannot broadcast dim %lld to %lld", (long long)a,
                         (long long)c);
    dims[i] = a == 1 ? c : a;
  }
  fx->out[0] = fsl_b_broadcast_to(fx->b, x, r, dims);
  return fsl_fx_done(fx);
}

/** ONNX Tile (opset 6+; its ops.def row rejects Tile-1): reshape to
 *  interleave a 1 before each repeated axis, expand it to the repeat count,
 *  and merge back. */
fsl_status fsl_fission_Tile(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  fsl_value *rv = fsl_fx_req(fx, 1);
  if (!x || !rv) return fsl_fx_done(fx);
  int64_t rep[FSL_MAX_RANK], mid[FSL_MAX_RANK], big[FSL_MAX_RANK], fin[FSL_MAX_RANK];
  int n = fsl_b_const_ints(fx->b, rv, rep, FSL_MAX_RANK, "input 'repeats'");
  if (n < 0) return fsl_fx_done(fx);
  if (n != x->rank)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "repeats has %d entries, expected %d", n, x->rank);
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (rep[i] < 0) return fsl_fx_fail(fx, FSL_ERR_INVALID, "negative repeat");
    if (rep[i] != 1) {
      if (m + 2 > FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "too many tiled axes");
      mid[m] = 1, big[m++] = rep[i];
    }
    if (m + 1 > FSL_MAX_RANK) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "too many tiled axes");
    mid[m] = big[m] = x->dims[i], m++;
    if (!fsl_mul_ok(x->dims[i], rep[i], &fin[i]))
      return fsl_fx_fail(fx, FSL_ERR_SHAPE, "tiled size of axis %d overflows", i);
  }
  fsl_value *y = reshape_to(fx, x, m, mid);
  y = fsl_b_expand(fx->b, y, big);
  fx->out[0] = reshape_to(fx, y, n, fin);
  return fsl_fx_done(fx);
}

/* ---- Pad ---- */

/* Pad mode name -> primitive mode (0 constant, 1 reflect, 2 edge, 3 wrap). */
static int pad_mode(const char *s) {
  static const char *const k[] = {"constant", "reflect", "edge", "wrap"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, k[i])) return i;
  return -1;
}

/* Pad amounts for every axis (begins then ends) from attributes (opset < 11,
 * 'paddings' in opset 1) or the pads/axes inputs. */
static bool pad_amounts(fsl_fctx *fx, int rank, int64_t *pads) {
  int64_t raw[2 * FSL_MAX_RANK], axes[FSL_MAX_RANK];
  bool err;
  const char *name = fx->opset < 2 ? "paddings" : "pads";
  int n = attr_or_input_ints(fx, name, 1, 11, raw, 2 * FSL_MAX_RANK, &err);
  if (err) return false;
  int na = fx->opset >= 18 ? attr_or_input_ints(fx, "axes", 3, 18, axes, FSL_MAX_RANK, &err) : -1;
  if (err) return false;
  if (na < 0) {
    na = rank;
    for (int i = 0; i < rank; i++) axes[i] = i;
  } else if (!norm_axes(fx, axes, na, rank, true, "axes")) {
    return false;
  }
  if (n != 2 * na) {
    fsl_b_fail(fx->b, FSL_ERR_INVALID, "expected %d pads, got %d", 2 * na, n);
    return false;
  }
  memset(pads, 0, sizeof(int64_t) * 2 * (size_t)rank);
  for (int i = 0; i < na; i++) pads[axes[i]] = raw[i], pads[rank + axes[i]] = raw[na + i];
  return true;
}

/* Constant-mode pad value: attribute 'value' (opset < 11) or input 2.
 * A value computed at run time is returned in *rt (then *v is 0). */
static bool pad_value(fsl_fctx *fx, double *v, fsl_value **rt) {
  *v = 0;
  *rt = NULL;
  if (fx->opset < 11) {
    *v = fsl_attr_float(fx->node, "value", 0.0);
    return true;
  }
  if (fx->n_in < 3 || !fx->in[2] || fsl_value_numel(fx->in[2]) == 0) return true;
  if (!fx->in[2]->data) {
    *rt = fx->in[2];
    return true;
  }
  return fsl_b_const_scalar(fx->b, fx->in[2], v, "input 'constant_value'");
}

/* where(pad region, value, y) for a constant-mode pad value known only at
 * run time: the region mask is a folded pad of a false constant. */
static fsl_value *fill_pad_region(fsl_fctx *fx, fsl_value *x, fsl_value *y, const int64_t *pads,
                                  fsl_value *value) {
  fsl_value *mask = fsl_b_const(fx->b, FSL_DT_BOOL, x->rank, x->dims, NULL);
  if (!mask) return NULL;
  memset(mask->data, 0, (size_t)fsl_value_nbytes(mask));
  mask = fsl_b_pad(fx->b, mask, pads, 0, 1.0);
  int64_t one = 1;
  fsl_value *v = fsl_b_reshape(fx->b, value, value->rank == 0 ? 0 : 1, &one);
  return fsl_b_where(fx->b, mask, v, y);
}

/** ONNX Pad (opset < 11 attributes, >= 11 inputs, axes 18, wrap 19);
 *  negative pads crop with a slice first. */
fsl_status fsl_fission_Pad(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  int r = x->rank;
  int64_t pads[2 * FSL_MAX_RANK];
  double value;
  fsl_value *rt_value;
  int mode = pad_mode(fsl_attr_str(fx->node, "mode", "constant"));
  if (mode < 0) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "mode must be constant, reflect, edge or wrap");
  if (!pad_amounts(fx, r, pads) || !pad_value(fx, &value, &rt_value)) return fsl_fx_done(fx);
  int64_t st[FSL_MAX_RANK], sp[FSL_MAX_RANK], sz[FSL_MAX_RANK];
  bool crop = false, grow = false;
  for (int i = 0; i < r; i++) {
    int64_t d = x->dims[i];
    if (pads[i] < -d || pads[r + i] < -d)
      return fsl_fx_fail(fx, FSL_ERR_SHAPE, "negative pads remove more than axis %d has", i);
    int64_t b = pads[i] < 0 ? -pads[i] : 0, e = pads[r + i] < 0 ? -pads[r + i] : 0;
    if (b + e > d) return fsl_fx_fail(fx, FSL_ERR_SHAPE, "negative pads remove more than axis %d has", i);
    st[i] = b, sp[i] = 1, sz[i] = d - b - e;
    crop |= b || e;
  }
  if (crop) x = fsl_b_slice(fx->b, x, st, sp, sz);
  for (int i = 0; i < 2 * r; i++) {
    if (pads[i] < 0) pads[i] = 0;
    grow |= pads[i] > 0;
  }
  fsl_value *y = grow ? fsl_b_pad(fx->b, x, pads, mode, value) : x;
  if (grow && mode == 0 && rt_value) y = fill_pad_region(fx, x, y, pads, rt_value);
  fx->out[0] = y;
  return fsl_fx_done(fx);
}

/* ---- DepthToSpace / SpaceToDepth: reshape + permute + reshape ---- */

static fsl_value *reshape_permute_reshape(fsl_fctx *fx, fsl_value *x, const int64_t *d6,
                                          const int64_t *perm, const int64_t *d4) {
  fsl_value *y = reshape_to(fx, x, 6, d6);
  y = fsl_b_permute(fx->b, y, perm);
  return reshape_to(fx, y, 4, d4);
}

/* Reads blocksize and checks a 4-D input. */
static bool block_args(fsl_fctx *fx, fsl_value *x, int64_t *bs) {
  *bs = fsl_attr_int(fx->node, "blocksize", 0);
  if (x->rank != 4 || *bs <= 0) {
    fsl_b_fail(fx->b, FSL_ERR_INVALID, "expected a 4-D input and blocksize > 0");
    return false;
  }
  return true;
}

/** ONNX DepthToSpace (mode DCR, or CRD from opset 11). */
fsl_status fsl_fission_DepthToSpace(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t bs;
  if (!x || !block_args(fx, x, &bs)) return fsl_fx_done(fx);
  const int64_t *d = x->dims;
  int64_t bb;
  if (!fsl_mul_ok(bs, bs, &bb) || d[1] % bb)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "channels %lld not divisible by blocksize^2", (long long)d[1]);
  int64_t c = d[1] / bb;
  int64_t d4[4] = {d[0], c, d[2] * bs, d[3] * bs};
  const char *mode = fsl_attr_str(fx->node, "mode", "DCR");
  if (!strcmp(mode, "DCR")) {
    int64_t d6[6] = {d[0], bs, bs, c, d[2], d[3]}, perm[6] = {0, 3, 4, 1, 5, 2};
    fx->out[0] = reshape_permute_reshape(fx, x, d6, perm, d4);
  } else if (!strcmp(mode, "CRD")) {
    int64_t d6[6] = {d[0], c, bs, bs, d[2], d[3]}, perm[6] = {0, 1, 4, 2, 5, 3};
    fx->out[0] = reshape_permute_reshape(fx, x, d6, perm, d4);
  } else {
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "mode must be DCR or CRD, got '%s'", mode);
  }
  return fsl_fx_done(fx);
}

/** ONNX SpaceToDepth. */
fsl_status fsl_fission_SpaceToDepth(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  int64_t bs;
  if (!x || !block_args(fx, x, &bs)) return fsl_fx_done(fx);
  const int64_t *d = x->dims;
  if (d[2] % bs || d[3] % bs)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "spatial dims not divisible by blocksize %lld", (long long)bs);
  int64_t d6[6] = {d[0], d[1], d[2] / bs, bs, d[3] / bs, bs}, perm[6] = {0, 3, 5, 1, 2, 4};
  int64_t d4[4] = {d[0], d[1] * bs * bs, d[2] / bs, d[3] / bs};
  fx->out[0] = reshape_permute_reshape(fx, x, d6, perm, d4);
  return fsl_fx_done(fx);
}

/** ONNX Trilu: where(constant triangle mask over the last two axes, x, 0). */
fsl_status fsl_fission_Trilu(fsl_fctx *fx) {
  fsl_value *x = fsl_fx_req(fx, 0);
  if (!x) return fsl_fx_done(fx);
  if (x->rank < 2) return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected rank >= 2, got %d", x->rank);
  int64_t k = 0;
  if (fx->n_in > 1 && fx->in[1] && fsl_b_const_ints(fx->b, fx->in[1], &k, 1, "input 'k'") != 1) {
    if (!fx->b->st) fsl_b_fail(fx->b, FSL_ERR_INVALID, "input 'k' must hold one integer");
    return fsl_fx_done(fx);
  }
  int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1], md[2] = {m, n};
  bool upper = fsl_attr_int(fx->node, "upper", 1) != 0;
  fsl_value *c = fsl_b_const(fx->b, FSL_DT_BOOL, 2, md, NULL);
  if (!c) return fsl_fx_done(fx);
  uint8_t *mask = c->data;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) mask[i * n + j] = upper ? j - i >= k : j - i <= k;
  fx->out[0] = fsl_b_where(fx->b, c, x, fsl_b_scalar(fx->b, x->dtype, 0));
  return fsl_fx_done(fx);
}
