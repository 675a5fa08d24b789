/*
 * opaque.c — reference implementations of the ONNX ops that fission keeps
 * whole (TopK, CumSum).  The node is the ONNX node as imported: its inputs
 * (including constant ones such as K and axis) and attributes follow the
 * ONNX spec; in_data[i] holds each input's data.
 */
#include "eval/eval.h"

/* Splits a shape around `axis` into outer * len * inner. */
static void split_axis(const fsl_value *v, int axis, int64_t *outer, int64_t *len,
                       int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= v->dims[i];
  for (int i = axis + 1; i < v->rank; i++) *inner *= v->dims[i];
  *len = v->rank > 0 ? v->dims[axis] : 1;
}

/* Normalizes an axis into [0, rank); false if out of range. */
static bool norm_axis(int64_t *axis, int rank) {
  int64_t r = rank > 0 ? rank : 1;
  if (*axis < -r || *axis >= r) return false;
  if (*axis < 0) *axis += r;
  return true;
}

/* ---- TopK ---- */

/* One candidate element: its key in the comparison domain and its index. */
typedef struct topk_item {
  union { double f; int64_t i; uint64_t u; } key;
  int64_t idx;
} topk_item;

typedef enum { KEY_F, KEY_I, KEY_U } key_kind;

typedef struct topk_cmp_ctx { key_kind kind; bool largest; } topk_cmp_ctx;

/* qsort has no user pointer; the comparison mode lives here for one call. */
static _Thread_local topk_cmp_ctx g_topk;

/* -1/0/1 comparing keys; NaN counts as larger than every number. */
static int key_cmp(const topk_item *a, const topk_item *b) {
  switch (g_topk.kind) {
  case KEY_I: return (a->key.i > b->key.i) - (a->key.i < b->key.i);
  case KEY_U: return (a->key.u > b->key.u) - (a->key.u < b->key.u);
  default: {
    bool na = a->key.f != a->key.f, nb = b->key.f != b->key.f;
    if (na || nb) return (int)na - (int)nb;
    return (a->key.f > b->key.f) - (a->key.f < b->key.f);
  }
  }
}

/* Orders by the requested direction, then by lower index first (ties). */
static int topk_cmp(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  int c = key_cmp(a, b);
  if (c) return g_topk.largest ? -c : c;
  return (a->idx > b->idx) - (a->idx < b->idx);
}

static key_kind key_kind_of(fsl_dtype dt) {
  if (fsl_dtype_is_float(dt)) return KEY_F;
  if (dt == FSL_DT_U8 || dt == FSL_DT_U16 || dt == FSL_DT_U32 || dt == FSL_DT_U64 ||
      dt == FSL_DT_BOOL)
    return KEY_U;
  return KEY_I;
}

static void load_key(topk_item *it, fsl_dtype dt, key_kind kind, const void *p, int64_t i) {
  if (kind == KEY_F) it->key.f = fsl_load_f64(dt, p, i);
  else if (kind == KEY_U) it->key.u = fsl_load_u64(dt, p, i);
  else it->key.i = fsl_load_i64(dt, p, i);
}

/* K from input 1 (opset >= 10) or attribute k (opset 1). */
static fsl_status topk_k(const fsl_node *n, const void *const *in_data, int64_t *k) {
  if (n->n_in >= 2 && n->in[1] && in_data[1]) {
    if (fsl_value_numel(n->in[1]) != 1)
      return fsl_errorf(FSL_ERR_RUNTIME, "TopK: input 'K' must hold one element");
    *k = fsl_load_i64(n->in[1]->dtype, in_data[1], 0);
  } else {
    *k = fsl_attr_int(n, "k", -1);
  }
  return FSL_OK;
}

static fsl_status eval_topk(const fsl_node *n, const void *const *in_data,
                            void *const *out_data) {
  const fsl_value *x = n->in[0];
  int64_t axis = fsl_attr_int(n, "axis", -1), k = 0;
  if (!norm_axis(&axis, x->rank))
    return fsl_errorf(FSL_ERR_INVALID, "TopK: axis %lld out of range for rank %d",
                      (long long)axis, x->rank);
  FSL_TRY(topk_k(n, in_data, &k));
  int64_t outer, len, inner;
  split_axis(x, (int)axis, &outer, &len, &inner);
  if (k < 0 || k > len)
    return fsl_errorf(FSL_ERR_RUNTIME, "TopK: K=%lld must be in [0, %lld]", (long long)k,
                      (long long)len);
  size_t es = fsl_dtype_size(x->dtype);
  topk_item *items = malloc(sizeof(topk_item) * (size_t)(len > 0 ? len : 1));
  if (!items) return fsl_errorf(FSL_ERR_NOMEM, "TopK: out of memory");
  g_topk.kind = key_kind_of(x->dtype);
  g_topk.largest = fsl_attr_int(n, "largest", 1) != 0;
  char *vals = n->n_out > 0 && n->out[0] ? out_data[0] : NULL;
  void *idxs = n->n_out > 1 && n->out[1] ? out_data[1] : NULL;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t in = 0; in < inner; in++) {
      for (int64_t j = 0; j < len; j++) {
        items[j].idx = j;
        load_key(&items[j], x->dtype, g_topk.kind, in_data[0], (o * len + j) * inner + in);
      }
      qsort(items, (size_t)len, sizeof(topk_item), topk_cmp);
      for (int64_t j = 0; j < k; j++) {
        int64_t dst = (o * k + j) * inner + in;
        int64_t src = (o * len + items[j].idx) * inner + in;
        if (vals) memcpy(vals + dst * (int64_t)es, (const char *)in_data[0] + src * (int64_t)es, es);
        if (idxs) fsl_store_i64(n->out[1]->dtype, idxs, dst, items[j].idx);
      }
    }
  }
  free(items);
  return FSL_OK;
}

/* ---- CumSum ---- */

/* Running sum along one line of the axis, in double (floats) or with
 * wrap-around integer arithmetic (ints). */
static void cumsum_line(fsl_dtype dt, const void *x, void *y, int64_t base, int64_t len,
                        int64_t stride, bool exclusive, bool reverse) {
  bool is_f = fsl_dtype_is_float(dt);
  double fs = 0;
  uint64_t is = 0;
  for (int64_t t = 0; t < len; t++) {
    int64_t j = reverse ? len - 1 - t : t;
    int64_t off = base + j * stride;
    if (exclusive) {
      if (is_f) fsl_store_f64(dt, y, off, fs);
      else fsl_store_u64(dt, y, off, is);
    }
    if (is_f) fs += fsl_load_f64(dt, x, off);
    else is += fsl_load_u64(dt, x, off);
    if (!exclusive) {
      if (is_f) fsl_store_f64(dt, y, off, fs);
      else fsl_store_u64(dt, y, off, is);
    }
  }
}

static fsl_status eval_cumsum(const fsl_node *n, const void *const *in_data,
                              void *const *out_data) {
  const fsl_value *x = n->in[0], *ax = n->in[1];
  if (!ax || !in_data[1] || fsl_value_numel(ax) != 1)
    return fsl_errorf(FSL_ERR_RUNTIME, "CumSum: input 'axis' must hold one element");
  int64_t axis = fsl_load_i64(ax->dtype, in_data[1], 0);
  if (!norm_axis(&axis, x->rank))
    return fsl_errorf(FSL_ERR_RUNTIME, "CumSum: axis %lld out of range for rank %d",
                      (long long)axis, x->rank);
  if (x->dtype == FSL_DT_BOOL || !fsl_dtype_valid(x->dtype))
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "CumSum: dtype %s", fsl_dtype_name(x->dtype));
  bool exclusive = fsl_attr_int(n, "exclusive", 0) != 0;
  bool reverse = fsl_attr_int(n, "reverse", 0) != 0;
  int64_t outer, len, inner;
  split_axis(x, (int)axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++)
      cumsum_line(x->dtype, in_data[0], out_data[0], o * len * inner + in, len, inner,
                  exclusive, reverse);
  return FSL_OK;
}

/** Evaluates an opaque ONNX op (TopK, CumSum) kept whole by fission. */
fsl_status fsl_ref_eval_opaque(const fsl_node *n, const void *const *in_data,
                               void *const *out_data) {
  switch (n->op) {
  case FSL_OP_TopK: return eval_topk(n, in_data, out_data);
  case FSL_OP_CumSum: return eval_cumsum(n, in_data, out_data);
  default:
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "reference interpreter: no kernel for opaque op %s",
                      fsl_op_name(n->op));
  }
}
