/*
 * movement.c — reference semantics of the view primitives: reshape,
 * permute, expand, slice, pad, concat, window.  All but pad and concat are
 * affine index maps, executed by one strided copy.
 */
#include "eval/eval_internal.h"

void fsl_ref_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

/* Copies `cnt` elements src[0], src[step], ... to dst[0..cnt). */
static void copy_row(size_t esz, int64_t cnt, const char *src, int64_t step, char *dst) {
  switch (esz) {
  case 1: for (int64_t j = 0; j < cnt; j++) ((uint8_t *)dst)[j] = ((const uint8_t *)src)[j * step]; break;
  case 2: for (int64_t j = 0; j < cnt; j++) ((uint16_t *)(void *)dst)[j] = ((const uint16_t *)(const void *)src)[j * step]; break;
  case 4: for (int64_t j = 0; j < cnt; j++) ((uint32_t *)(void *)dst)[j] = ((const uint32_t *)(const void *)src)[j * step]; break;
  case 8: for (int64_t j = 0; j < cnt; j++) ((uint64_t *)(void *)dst)[j] = ((const uint64_t *)(const void *)src)[j * step]; break;
  default:
    for (int64_t j = 0; j < cnt; j++) memcpy(dst + (size_t)j * esz, src + (size_t)(j * step) * esz, esz);
  }
}

void fsl_ref_strided_copy(size_t esz, int rank, const int64_t *odims, const int64_t *istr,
                          int64_t base, const void *src, void *dst) {
  const char *s = src;
  char *d = dst;
  if (fsl_numel(rank, odims) == 0) return;
  if (rank == 0) {
    memcpy(d, s + (size_t)base * esz, esz);
    return;
  }
  int64_t c[FSL_MAX_RANK] = {0}, off = base, last = odims[rank - 1];
  int64_t rows = fsl_numel(rank - 1, odims);
  for (int64_t r = 0; r < rows; r++) {
    copy_row(esz, last, s + (size_t)off * esz, istr[rank - 1], d + (size_t)(r * last) * esz);
    for (int k = rank - 2; k >= 0; k--) {
      off += istr[k];
      if (++c[k] < odims[k]) break;
      off -= istr[k] * odims[k];
      c[k] = 0;
    }
  }
}

static fsl_status permute(const fsl_node *n, const void *x, void *y, size_t esz) {
  const fsl_value *xv = n->in[0], *yv = n->out[0];
  const int64_t *perm = fsl_ref_ints(n, "perm");
  int64_t s[FSL_MAX_RANK], is[FSL_MAX_RANK];
  fsl_ref_strides(xv->rank, xv->dims, s);
  for (int i = 0; i < xv->rank; i++) is[i] = s[perm[i]];
  fsl_ref_strided_copy(esz, yv->rank, yv->dims, is, 0, x, y);
  return FSL_OK;
}

static fsl_status expand(const fsl_node *n, const void *x, void *y, size_t esz) {
  const fsl_value *xv = n->in[0], *yv = n->out[0];
  int64_t s[FSL_MAX_RANK];
  fsl_ref_strides(xv->rank, xv->dims, s);
  for (int i = 0; i < xv->rank; i++)
    if (xv->dims[i] == 1) s[i] = 0;
  fsl_ref_strided_copy(esz, yv->rank, yv->dims, s, 0, x, y);
  return FSL_OK;
}

static fsl_status slice(const fsl_node *n, const void *x, void *y, size_t esz) {
  const fsl_value *xv = n->in[0], *yv = n->out[0];
  const int64_t *starts = fsl_ref_ints(n, "starts"), *steps = fsl_ref_ints(n, "steps");
  int64_t s[FSL_MAX_RANK], is[FSL_MAX_RANK], base = 0;
  fsl_ref_strides(xv->rank, xv->dims, s);
  for (int i = 0; i < xv->rank; i++) {
    if (yv->dims[i] > 0) base += starts[i] * s[i];
    is[i] = steps[i] * s[i];
  }
  fsl_ref_strided_copy(esz, yv->rank, yv->dims, is, base, x, y);
  return FSL_OK;
}

static fsl_status window(const fsl_node *n, const void *x, void *y, size_t esz) {
  const fsl_value *xv = n->in[0], *yv = n->out[0];
  const int64_t *st = fsl_ref_ints(n, "strides"), *dl = fsl_ref_ints(n, "dilations");
  int k = yv->rank - xv->rank, lead = xv->rank - k;
  int64_t s[FSL_MAX_RANK], is[FSL_MAX_RANK];
  fsl_ref_strides(xv->rank, xv->dims, s);
  for (int i = 0; i < lead; i++) is[i] = s[i];
  for (int i = 0; i < k; i++) {
    is[lead + i] = (st ? st[i] : 1) * s[lead + i];
    is[xv->rank + i] = (dl ? dl[i] : 1) * s[lead + i];
  }
  fsl_ref_strided_copy(esz, yv->rank, yv->dims, is, 0, x, y);
  return FSL_OK;
}

/* Source coordinate of output coordinate j along an axis of size len padded
 * by b in front (numpy.pad semantics); -1 for the constant fill. */
static int64_t pad_src(int64_t j, int64_t len, int64_t b, int mode) {
  int64_t p = j - b;
  if (p >= 0 && p < len) return p;
  switch (mode) {
  case 1: { /* reflect (edge not repeated), period 2(len-1) */
    if (len == 1) return 0;
    int64_t per = 2 * (len - 1), q = p % per;
    if (q < 0) q += per;
    return q < len ? q : per - q;
  }
  case 2: return p < 0 ? 0 : len - 1; /* edge */
  case 3: { /* wrap */
    int64_t q = p % len;
    return q < 0 ? q + len : q;
  }
  default: return -1;
  }
}

static fsl_status pad(const fsl_node *n, const void *x, void *y, size_t esz) {
  const fsl_value *xv = n->in[0], *yv = n->out[0];
  const int64_t *pads = fsl_ref_ints(n, "pads");
  int mode = (int)fsl_attr_int(n, "mode", 0), r = yv->rank;
  int64_t s[FSL_MAX_RANK], c[FSL_MAX_RANK] = {0}, tot = 0, *map[FSL_MAX_RANK];
  unsigned char fill[16] = {0};
  fsl_store_f64(yv->dtype, fill, 0, fsl_attr_float(n, "value", 0.0));
  if (fsl_value_numel(yv) == 0) return FSL_OK;
  if (r == 0) {
    memcpy(y, x, esz);
    return FSL_OK;
  }
  for (int i = 0; i < r; i++) tot += yv->dims[i];
  int64_t *maps = malloc(sizeof(int64_t) * (size_t)tot);
  if (!maps) return fsl_node_errorf(n, FSL_ERR_NOMEM, "out of memory");
  fsl_ref_strides(r, xv->dims, s);
  int64_t o = 0;
  for (int i = 0; i < r; i++) {
    map[i] = maps + o;
    for (int64_t j = 0; j < yv->dims[i]; j++) map[i][j] = pad_src(j, xv->dims[i], pads[i], mode);
    o += yv->dims[i];
  }
  const char *src = x;
  char *dst = y;
  int64_t rows = fsl_numel(r - 1, yv->dims), last = yv->dims[r - 1], oi = 0;
  for (int64_t row = 0; row < rows; row++) {
    int64_t base = 0;
    bool valid = true;
    for (int k = 0; k < r - 1; k++) {
      int64_t m = map[k][c[k]];
      if (m < 0) valid = false;
      else base += m * s[k];
    }
    for (int64_t j = 0; j < last; j++, oi++) {
      int64_t m = valid ? map[r - 1][j] : -1;
      memcpy(dst + (size_t)oi * esz, m < 0 ? (const char *)fill : src + (size_t)(base + m) * esz, esz);
    }
    for (int k = r - 2; k >= 0; k--) {
      if (++c[k] < yv->dims[k]) break;
      c[k] = 0;
    }
  }
  free(maps);
  return FSL_OK;
}

static fsl_status concat(const fsl_node *n, const void *const *in, void *y, size_t esz) {
  const fsl_value *yv = n->out[0];
  int axis = (int)fsl_attr_int(n, "axis", 0);
  int64_t outer = fsl_numel(axis, yv->dims), inner = fsl_numel(yv->rank - axis - 1, yv->dims + axis + 1);
  int64_t orow = yv->dims[axis] * inner, off = 0;
  char *dst = y;
  for (int k = 0; k < n->n_in; k++) {
    int64_t chunk = n->in[k]->dims[axis] * inner;
    const char *src = in[k];
    for (int64_t o = 0; o < outer && chunk > 0; o++)
      memcpy(dst + (size_t)(o * orow + off) * esz, src + (size_t)(o * chunk) * esz, (size_t)chunk * esz);
    off += chunk;
  }
  return FSL_OK;
}

fsl_status fsl_ref_movement(const fsl_node *n, const void *const *in, void *out) {
  size_t esz = fsl_dtype_size(n->out[0]->dtype);
  switch (n->op) {
  case FSL_OP_reshape:
    if (fsl_value_nbytes(n->out[0]) > 0) memcpy(out, in[0], (size_t)fsl_value_nbytes(n->out[0]));
    return FSL_OK;
  case FSL_OP_permute: return permute(n, in[0], out, esz);
  case FSL_OP_expand: return expand(n, in[0], out, esz);
  case FSL_OP_slice: return slice(n, in[0], out, esz);
  case FSL_OP_pad: return pad(n, in[0], out, esz);
  case FSL_OP_concat: return concat(n, in, out, esz);
  case FSL_OP_window: return window(n, in[0], out, esz);
  default: return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "not a movement primitive");
  }
}
