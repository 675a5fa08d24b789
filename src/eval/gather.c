/*
 * gather.c — reference semantics of the data-dependent index primitives:
 * gather, gather_elements, gather_nd, scatter_elements, scatter_nd (ONNX
 * Gather, GatherElements, GatherND, ScatterElements, ScatterND).  Negative
 * indices wrap once; an index out of range is FSL_ERR_RUNTIME.
 */
#include "eval/eval_internal.h"
#include <math.h>

/* Normalizes index v against an axis of size len; false if out of range. */
static bool wrap(int64_t *v, int64_t len) {
  if (*v < 0) *v += len;
  return *v >= 0 && *v < len;
}

static fsl_status oob(const fsl_node *n, int64_t v, int64_t len, int64_t axis) {
  return fsl_node_errorf(n, FSL_ERR_RUNTIME, "index %lld out of range [-%lld, %lld) on axis %lld", (long long)v,
                      (long long)len, (long long)len, (long long)axis);
}

static fsl_status gather(const fsl_node *n, const void *data, const void *idx, void *y) {
  const fsl_value *dv = n->in[0], *iv = n->in[1];
  int axis = (int)fsl_attr_int(n, "axis", 0);
  size_t esz = fsl_dtype_size(dv->dtype);
  int64_t outer = fsl_numel(axis, dv->dims), len = dv->dims[axis];
  int64_t inner = fsl_numel(dv->rank - axis - 1, dv->dims + axis + 1), ni = fsl_value_numel(iv);
  const char *src = data;
  char *dst = y;
  for (int64_t j = 0; j < ni; j++) {
    int64_t v = fsl_load_i64(iv->dtype, idx, j), w = v;
    if (!wrap(&w, len)) return oob(n, v, len, axis);
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (size_t)((o * ni + j) * inner) * esz, src + (size_t)((o * len + w) * inner) * esz,
             (size_t)inner * esz);
  }
  return FSL_OK;
}

/* Data offset of element c (coordinates in the indices' shape) with the
 * coordinate on `axis` replaced by the wrapped index; FSL_ERR_RUNTIME if out
 * of range. */
static fsl_status elem_offset(const fsl_node *n, const fsl_value *dv, const int64_t *ds, const int64_t *c,
                              int axis, int64_t v, int64_t *off) {
  *off = 0; /* on every path, errors included */
  int64_t w = v, o = 0;
  if (!wrap(&w, dv->dims[axis])) return oob(n, v, dv->dims[axis], axis);
  for (int i = 0; i < dv->rank; i++) o += (i == axis ? w : c[i]) * ds[i];
  *off = o;
  return FSL_OK;
}

static void next_coord(int rank, const int64_t *dims, int64_t *c) {
  for (int k = rank - 1; k >= 0; k--) {
    if (++c[k] < dims[k]) return;
    c[k] = 0;
  }
}

static fsl_status gather_elements(const fsl_node *n, const void *data, const void *idx, void *y) {
  const fsl_value *dv = n->in[0], *iv = n->in[1];
  int axis = (int)fsl_attr_int(n, "axis", 0);
  size_t esz = fsl_dtype_size(dv->dtype);
  int64_t ds[FSL_MAX_RANK], c[FSL_MAX_RANK] = {0}, ni = fsl_value_numel(iv), off;
  fsl_ref_strides(dv->rank, dv->dims, ds);
  for (int64_t j = 0; j < ni; j++) {
    FSL_TRY(elem_offset(n, dv, ds, c, axis, fsl_load_i64(iv->dtype, idx, j), &off));
    memcpy((char *)y + (size_t)j * esz, (const char *)data + (size_t)off * esz, esz);
    next_coord(iv->rank, iv->dims, c);
  }
  return FSL_OK;
}

/* Offset (elements) of index tuple t (k entries starting at axis b) within
 * one batch of data. */
static fsl_status nd_offset(const fsl_node *n, const fsl_value *dv, const int64_t *ds, const void *idx,
                            fsl_dtype idt, int64_t t, int64_t k, int64_t b, int64_t *off) {
  *off = 0; /* on every path, errors included */
  int64_t o = 0;
  for (int64_t q = 0; q < k; q++) {
    int64_t v = fsl_load_i64(idt, idx, t * k + q), w = v;
    if (!wrap(&w, dv->dims[b + q])) return oob(n, v, dv->dims[b + q], b + q);
    o += w * ds[b + q];
  }
  *off = o;
  return FSL_OK;
}

static fsl_status gather_nd(const fsl_node *n, const void *data, const void *idx, void *y) {
  const fsl_value *dv = n->in[0], *iv = n->in[1];
  int64_t b = fsl_attr_int(n, "batch_dims", 0), k = iv->dims[iv->rank - 1];
  size_t esz = fsl_dtype_size(dv->dtype);
  int64_t ds[FSL_MAX_RANK], off;
  fsl_ref_strides(dv->rank, dv->dims, ds);
  int64_t nb = fsl_numel((int)b, dv->dims), bstride = fsl_numel(dv->rank - (int)b, dv->dims + b);
  int64_t ni = fsl_numel(iv->rank - 1 - (int)b, iv->dims + b);
  int64_t slice = fsl_numel(dv->rank - (int)(b + k), dv->dims + b + k);
  for (int64_t bi = 0; bi < nb; bi++)
    for (int64_t j = 0; j < ni; j++) {
      int64_t t = bi * ni + j;
      FSL_TRY(nd_offset(n, dv, ds, idx, iv->dtype, t, k, b, &off));
      memcpy((char *)y + (size_t)(t * slice) * esz, (const char *)data + (size_t)(bi * bstride + off) * esz,
             (size_t)slice * esz);
    }
  return FSL_OK;
}

/* out[oi] = reduction(out[oi], upd[ui]); 0 none, 1 add, 2 mul, 3 max, 4 min. */
static void combine(fsl_dtype dt, int red, void *out, int64_t oi, const void *upd, int64_t ui) {
  size_t esz = fsl_dtype_size(dt);
  if (red == 0) {
    memcpy((char *)out + (size_t)oi * esz, (const char *)upd + (size_t)ui * esz, esz);
    return;
  }
  if (fsl_dtype_is_float(dt)) {
    double a = fsl_load_f64(dt, out, oi), b = fsl_load_f64(dt, upd, ui);
    double r = red == 1 ? a + b : red == 2 ? a * b
             : (isnan(a) || isnan(b)) ? NAN : red == 3 ? (a > b ? a : b) : (a < b ? a : b);
    fsl_store_f64(dt, out, oi, r);
  } else if (fsl_dtype_is_signed(dt)) {
    int64_t a = fsl_load_i64(dt, out, oi), b = fsl_load_i64(dt, upd, ui);
    uint64_t r = red == 1 ? (uint64_t)a + (uint64_t)b
               : red == 2 ? (uint64_t)a * (uint64_t)b
               : (uint64_t)(red == 3 ? (a > b ? a : b) : (a < b ? a : b));
    fsl_store_i64(dt, out, oi, (int64_t)r);
  } else {
    uint64_t a = fsl_load_u64(dt, out, oi), b = fsl_load_u64(dt, upd, ui);
    uint64_t r = red == 1 ? a + b : red == 2 ? a * b : red == 3 ? (a > b ? a : b) : (a < b ? a : b);
    fsl_store_u64(dt, out, oi, r);
  }
}

static fsl_status scatter_elements(const fsl_node *n, const void *const *in, void *y) {
  const fsl_value *dv = n->in[0], *iv = n->in[1];
  int axis = (int)fsl_attr_int(n, "axis", 0), red = (int)fsl_attr_int(n, "reduction", 0);
  int64_t ds[FSL_MAX_RANK], c[FSL_MAX_RANK] = {0}, ni = fsl_value_numel(iv), off;
  int64_t nbytes = fsl_value_nbytes(dv);
  if (nbytes > 0) memcpy(y, in[0], (size_t)nbytes);
  fsl_ref_strides(dv->rank, dv->dims, ds);
  for (int64_t j = 0; j < ni; j++) {
    FSL_TRY(elem_offset(n, dv, ds, c, axis, fsl_load_i64(iv->dtype, in[1], j), &off));
    combine(dv->dtype, red, y, off, in[2], j);
    next_coord(iv->rank, iv->dims, c);
  }
  return FSL_OK;
}

static fsl_status scatter_nd(const fsl_node *n, const void *const *in, void *y) {
  const fsl_value *dv = n->in[0], *iv = n->in[1];
  int red = (int)fsl_attr_int(n, "reduction", 0);
  int64_t k = iv->dims[iv->rank - 1], ds[FSL_MAX_RANK], off;
  int64_t ni = fsl_numel(iv->rank - 1, iv->dims), slice = fsl_numel(dv->rank - (int)k, dv->dims + k);
  int64_t nbytes = fsl_value_nbytes(dv);
  if (nbytes > 0) memcpy(y, in[0], (size_t)nbytes);
  fsl_ref_strides(dv->rank, dv->dims, ds);
  for (int64_t t = 0; t < ni; t++) {
    FSL_TRY(nd_offset(n, dv, ds, in[1], iv->dtype, t, k, 0, &off));
    for (int64_t e = 0; e < slice; e++) combine(dv->dtype, red, y, off + e, in[2], t * slice + e);
  }
  return FSL_OK;
}

fsl_status fsl_ref_gather(const fsl_node *n, const void *const *in, void *out) {
  switch (n->op) {
  case FSL_OP_gather: return gather(n, in[0], in[1], out);
  case FSL_OP_gather_elements: return gather_elements(n, in[0], in[1], out);
  case FSL_OP_gather_nd: return gather_nd(n, in[0], in[1], out);
  case FSL_OP_scatter_elements: return scatter_elements(n, in, out);
  case FSL_OP_scatter_nd: return scatter_nd(n, in, out);
  default: return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "not a gather primitive");
  }
}
