/*
 * infer.c — shape and dtype rules of the primitives (docs/primitives.md).
 *
 * fsl_prim_infer() checks a primitive node's inputs and attributes and sets
 * the dtype and static shape of its output.  It is the last line of defence
 * before the reference interpreter and the backends index memory, so every
 * attribute is checked for presence, type, count and range, and every index
 * a movement op will touch is proved in bounds here.
 */
#include "ir/ir.h"

#define SHAPE_BUF 160

/* ---- diagnostics ---- */

/* FSL_ERR_SHAPE "op (node 'name'): <msg>". */
#define bad(n, ...) fsl_node_errorf(n, FSL_ERR_SHAPE, __VA_ARGS__)

static const char *shp(const fsl_value *v, char *buf) {
  return fsl_shape_str(v->rank, v->dims, buf, SHAPE_BUF);
}

/* ---- attribute access with checking ---- */

/* Fails if the node has an attribute not in `allowed` (NULL-terminated). */
static fsl_status check_attr_names(const fsl_node *n, const char *const *allowed) {
  for (int i = 0; i < n->n_attrs; i++) {
    const char *nm = n->attrs[i].name;
    bool ok = false;
    for (int k = 0; nm && allowed[k]; k++)
      if (!strcmp(nm, allowed[k])) ok = true;
    if (!ok) return bad(n, "unknown attribute '%s'", nm ? nm : "(null)");
  }
  return FSL_OK;
}

/* INT attribute (FSL_ATTR_INT); def when absent and not required. */
static fsl_status attr_int(const fsl_node *n, const char *name, bool required,
                           int64_t def, int64_t *v) {
  const fsl_attr *a = fsl_attr_find(n, name);
  *v = def;
  if (!a) return required ? bad(n, "missing attribute '%s'", name) : FSL_OK;
  if (a->type != FSL_ATTR_INT) return bad(n, "attribute '%s' must be an int", name);
  *v = a->i;
  return FSL_OK;
}

/* INTS attribute with exactly `count` entries (count < 0: any).  When absent
 * and not required, *v is NULL. */
static fsl_status attr_ints(const fsl_node *n, const char *name, bool required,
                            int count, const int64_t **v, int *got) {
  const fsl_attr *a = fsl_attr_find(n, name);
  *v = NULL;
  if (got) *got = 0;
  if (!a) return required ? bad(n, "missing attribute '%s'", name) : FSL_OK;
  if (a->type != FSL_ATTR_INTS) return bad(n, "attribute '%s' must be a list of ints", name);
  if (a->n < 0 || (a->n > 0 && !a->ints)) return bad(n, "attribute '%s' is malformed", name);
  if (count >= 0 && a->n != count)
    return bad(n, "attribute '%s' has %d entries, expected %d", name, a->n, count);
  *v = a->ints;
  if (got) *got = a->n;
  return FSL_OK;
}

/* ---- input checks ---- */

static bool dt_numeric(fsl_dtype dt) { return fsl_dtype_valid(dt) && dt != FSL_DT_BOOL; }

static fsl_status check_inputs(const fsl_node *n) {
  const fsl_op_info *info = fsl_op_get(n->op);
  if (n->n_in < info->min_in || (info->max_in >= 0 && n->n_in > info->max_in)) {
    if (info->max_in < 0) return bad(n, "expected at least %d inputs, got %d", info->min_in, n->n_in);
    return bad(n, "expected %d inputs, got %d", info->max_in, n->n_in);
  }
  if (n->n_out != 1 || !n->out || !n->out[0]) return bad(n, "expected exactly one output");
  for (int i = 0; i < n->n_in; i++) {
    const fsl_value *v = n->in[i];
    if (!v) return bad(n, "input %d is missing", i);
    if (!fsl_dtype_valid(v->dtype))
      return bad(n, "input %d ('%s') has unsupported dtype %s", i, v->name ? v->name : "?",
                 fsl_dtype_name(v->dtype));
    if (v->rank > FSL_MAX_RANK || !fsl_value_has_shape(v))
      return bad(n, "input %d ('%s') has no static shape", i, v->name ? v->name : "?");
    if (fsl_value_nbytes(v) < 0) return bad(n, "input %d ('%s') is too large", i, v->name ? v->name : "?");
  }
  return FSL_OK;
}

static fsl_status set_out(const fsl_node *n, fsl_dtype dt, int rank, const int64_t *dims) {
  if (rank < 0 || rank > FSL_MAX_RANK) return bad(n, "output rank %d exceeds %d", rank, FSL_MAX_RANK);
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0) return bad(n, "output dim %d is negative (%lld)", i, (long long)dims[i]);
  if (fsl_nbytes(dt, rank, dims) < 0) return bad(n, "output size overflows");
  fsl_value *o = n->out[0];
  o->dtype = dt;
  fsl_value_set_shape(o, rank, dims);
  return FSL_OK;
}


/* ---- dtype classes (ops.def) ---- */

/* Checks the operands' dtype dt against the op's dtype class. */
static fsl_status check_dtype_class(const fsl_node *n, fsl_dtype dt) {
  const char *want = NULL;
  switch (fsl_op_get(n->op)->dtypes) {
  case FSL_DTC_FLOAT: case FSL_DTC_FLOAT_TO_BOOL:
    if (!fsl_dtype_is_float(dt)) want = "a floating point type";
    break;
  case FSL_DTC_NUMERIC: case FSL_DTC_NUMERIC_TO_BOOL:
    if (!dt_numeric(dt)) want = "numeric";
    break;
  case FSL_DTC_LOGICAL:
    if (dt != FSL_DT_BOOL && !fsl_dtype_is_int(dt)) want = "bool or an integer type";
    break;
  case FSL_DTC_INT:
    if (!fsl_dtype_is_int(dt)) want = "integers";
    break;
  case FSL_DTC_ANY_TO_BOOL: case FSL_DTC_OWN:
    break;
  }
  if (want) return bad(n, "operand%s must be %s, got %s", n->n_in > 1 ? "s" : "", want, fsl_dtype_name(dt));
  return FSL_OK;
}

static const char *const k_no_attrs[] = {NULL};

static fsl_status infer_unary(const fsl_node *n) {
  const fsl_value *x = n->in[0];
  fsl_dtype dt = x->dtype;
  if (n->op == FSL_OP_cast) {
    static const char *const names[] = {"to", NULL};
    int64_t to;
    FSL_TRY(check_attr_names(n, names));
    FSL_TRY(attr_int(n, "to", true, 0, &to));
    if (to < 0 || to >= FSL_DT_COUNT || !fsl_dtype_valid((fsl_dtype)to))
      return bad(n, "attribute 'to' is not a supported dtype (%lld)", (long long)to);
    return set_out(n, (fsl_dtype)to, x->rank, x->dims);
  }
  if (n->op == FSL_OP_isinf) {
    static const char *const names[] = {"detect_positive", "detect_negative", NULL};
    int64_t p, q;
    FSL_TRY(check_attr_names(n, names));
    FSL_TRY(attr_int(n, "detect_positive", false, 1, &p));
    FSL_TRY(attr_int(n, "detect_negative", false, 1, &q));
  } else {
    FSL_TRY(check_attr_names(n, k_no_attrs));
  }
  FSL_TRY(check_dtype_class(n, dt));
  return set_out(n, fsl_op_bool_out(n->op) ? FSL_DT_BOOL : dt, x->rank, x->dims);
}

static fsl_status infer_binary(const fsl_node *n) {
  const fsl_value *a = n->in[0], *b = n->in[1];
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  if (n->op == FSL_OP_mod) {
    static const char *const names[] = {"fmod", NULL};
    int64_t f;
    FSL_TRY(check_attr_names(n, names));
    FSL_TRY(attr_int(n, "fmod", false, 0, &f));
    if (f != 0 && f != 1) return bad(n, "attribute 'fmod' must be 0 or 1, got %lld", (long long)f);
  } else {
    FSL_TRY(check_attr_names(n, k_no_attrs));
  }
  if (!fsl_value_same_shape(a, b))
    return bad(n, "operand shapes %s and %s differ (broadcasting must be explicit via expand)",
               shp(a, s1), shp(b, s2));
  if (a->dtype != b->dtype)
    return bad(n, "operand dtypes %s and %s differ", fsl_dtype_name(a->dtype), fsl_dtype_name(b->dtype));
  FSL_TRY(check_dtype_class(n, a->dtype));
  return set_out(n, fsl_op_bool_out(n->op) ? FSL_DT_BOOL : a->dtype, a->rank, a->dims);
}

static fsl_status infer_where(const fsl_node *n) {
  const fsl_value *c = n->in[0], *a = n->in[1], *b = n->in[2];
  char s1[SHAPE_BUF], s2[SHAPE_BUF], s3[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, k_no_attrs));
  if (c->dtype != FSL_DT_BOOL) return bad(n, "condition must be bool, got %s", fsl_dtype_name(c->dtype));
  if (!fsl_value_same_shape(c, a) || !fsl_value_same_shape(c, b))
    return bad(n, "operand shapes %s, %s and %s differ (broadcasting must be explicit via expand)",
               shp(c, s1), shp(a, s2), shp(b, s3));
  if (a->dtype != b->dtype)
    return bad(n, "operand dtypes %s and %s differ", fsl_dtype_name(a->dtype), fsl_dtype_name(b->dtype));
  return set_out(n, a->dtype, a->rank, a->dims);
}

static fsl_status infer_reduce(const fsl_node *n) {
  static const char *const names[] = {"axes", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *axes;
  int na;
  int64_t dims[FSL_MAX_RANK];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "axes", true, -1, &axes, &na));
  bool minmax = n->op == FSL_OP_reduce_max || n->op == FSL_OP_reduce_min;
  if (!dt_numeric(x->dtype) && !(minmax && x->dtype == FSL_DT_BOOL))
    return bad(n, "operand must be numeric, got %s", fsl_dtype_name(x->dtype));
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int i = 0; i < na; i++) {
    if (axes[i] < 0 || axes[i] >= x->rank)
      return bad(n, "axis %lld out of range for rank %d", (long long)axes[i], x->rank);
    if (i > 0 && axes[i] <= axes[i - 1]) return bad(n, "attribute 'axes' must be sorted and unique");
    dims[axes[i]] = 1;
  }
  return set_out(n, x->dtype, x->rank, dims);
}

static fsl_status infer_arg(const fsl_node *n) {
  static const char *const names[] = {"axis", "select_last_index", NULL};
  const fsl_value *x = n->in[0];
  int64_t axis, last, dims[FSL_MAX_RANK];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_int(n, "axis", true, 0, &axis));
  FSL_TRY(attr_int(n, "select_last_index", false, 0, &last));
  if (!dt_numeric(x->dtype)) return bad(n, "operand must be numeric, got %s", fsl_dtype_name(x->dtype));
  if (axis < 0 || axis >= x->rank) return bad(n, "axis %lld out of range for rank %d", (long long)axis, x->rank);
  if (last != 0 && last != 1) return bad(n, "attribute 'select_last_index' must be 0 or 1");
  if (x->dims[axis] == 0) return bad(n, "cannot take arg of an empty axis %lld", (long long)axis);
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  dims[axis] = 1;
  return set_out(n, FSL_DT_I64, x->rank, dims);
}

/* ---- movement ---- */

static fsl_status infer_reshape(const fsl_node *n) {
  static const char *const names[] = {"shape", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *shape;
  int r;
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "shape", true, -1, &shape, &r));
  if (r > FSL_MAX_RANK) return bad(n, "target rank %d exceeds %d", r, FSL_MAX_RANK);
  for (int i = 0; i < r; i++)
    if (shape[i] < 0) return bad(n, "target dim %d is negative (%lld)", i, (long long)shape[i]);
  if (fsl_numel(r, shape) != fsl_value_numel(x))
    return bad(n, "cannot reshape %s into %s (element counts differ)", shp(x, s1),
               fsl_shape_str(r, shape, s2, sizeof s2));
  return set_out(n, x->dtype, r, shape);
}

static fsl_status infer_permute(const fsl_node *n) {
  static const char *const names[] = {"perm", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *perm;
  int64_t dims[FSL_MAX_RANK];
  bool seen[FSL_MAX_RANK] = {false};
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "perm", true, x->rank, &perm, NULL));
  for (int i = 0; i < x->rank; i++) {
    if (perm[i] < 0 || perm[i] >= x->rank || seen[perm[i]])
      return bad(n, "attribute 'perm' is not a permutation of 0..%d (entry %d is %lld)", x->rank - 1,
                 i, (long long)perm[i]);
    seen[perm[i]] = true;
    dims[i] = x->dims[perm[i]];
  }
  return set_out(n, x->dtype, x->rank, dims);
}

static fsl_status infer_expand(const fsl_node *n) {
  static const char *const names[] = {"shape", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *shape;
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "shape", true, x->rank, &shape, NULL));
  for (int i = 0; i < x->rank; i++)
    if (shape[i] < 0 || (x->dims[i] != 1 && x->dims[i] != shape[i]))
      return bad(n, "cannot expand %s to %s (dim %d)", shp(x, s1),
                 fsl_shape_str(x->rank, shape, s2, sizeof s2), i);
  return set_out(n, x->dtype, x->rank, shape);
}

static fsl_status infer_slice(const fsl_node *n) {
  static const char *const names[] = {"starts", "steps", "sizes", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *st, *sp, *sz;
  char s1[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "starts", true, x->rank, &st, NULL));
  FSL_TRY(attr_ints(n, "steps", true, x->rank, &sp, NULL));
  FSL_TRY(attr_ints(n, "sizes", true, x->rank, &sz, NULL));
  for (int i = 0; i < x->rank; i++) {
    if (sp[i] == 0) return bad(n, "step of axis %d is 0", i);
    if (sz[i] < 0) return bad(n, "size of axis %d is negative (%lld)", i, (long long)sz[i]);
    if (sz[i] == 0) continue;
    /* first and last accessed index: start and start + (size-1)*step */
    int64_t span, last;
    if (__builtin_mul_overflow(sz[i] - 1, sp[i], &span) || __builtin_add_overflow(st[i], span, &last) ||
        st[i] < 0 || st[i] >= x->dims[i] || last < 0 || last >= x->dims[i])
      return bad(n, "axis %d: start %lld, step %lld, size %lld reads outside input %s", i,
                 (long long)st[i], (long long)sp[i], (long long)sz[i], shp(x, s1));
  }
  return set_out(n, x->dtype, x->rank, sz);
}

static fsl_status infer_pad(const fsl_node *n) {
  static const char *const names[] = {"pads", "mode", "value", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *pads;
  int64_t mode, dims[FSL_MAX_RANK];
  const fsl_attr *va = fsl_attr_find(n, "value");
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "pads", true, 2 * x->rank, &pads, NULL));
  FSL_TRY(attr_int(n, "mode", false, 0, &mode));
  if (va && va->type != FSL_ATTR_FLOAT && va->type != FSL_ATTR_INT)
    return bad(n, "attribute 'value' must be a float");
  if (mode < 0 || mode > 3) return bad(n, "attribute 'mode' must be 0..3 (constant, reflect, edge, wrap), got %lld", (long long)mode);
  for (int i = 0; i < x->rank; i++) {
    int64_t b = pads[i], e = pads[x->rank + i];
    if (b < 0 || e < 0) return bad(n, "pads of axis %d are negative (%lld, %lld)", i, (long long)b, (long long)e);
    if (mode != 0 && x->dims[i] == 0 && (b > 0 || e > 0))
      return bad(n, "cannot pad empty axis %d in %s mode", i, mode == 1 ? "reflect" : mode == 2 ? "edge" : "wrap");
    if (__builtin_add_overflow(x->dims[i], b, &dims[i]) || __builtin_add_overflow(dims[i], e, &dims[i]))
      return bad(n, "padded size of axis %d overflows", i);
  }
  return set_out(n, x->dtype, x->rank, dims);
}

static fsl_status infer_concat(const fsl_node *n) {
  static const char *const names[] = {"axis", NULL};
  const fsl_value *x = n->in[0];
  int64_t axis, dims[FSL_MAX_RANK];
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_int(n, "axis", true, 0, &axis));
  if (axis < 0 || axis >= x->rank) return bad(n, "axis %lld out of range for rank %d", (long long)axis, x->rank);
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int k = 1; k < n->n_in; k++) {
    const fsl_value *y = n->in[k];
    if (y->dtype != x->dtype)
      return bad(n, "input %d has dtype %s, input 0 has %s", k, fsl_dtype_name(y->dtype), fsl_dtype_name(x->dtype));
    if (y->rank != x->rank) return bad(n, "input %d has shape %s, input 0 has %s", k, shp(y, s1), shp(x, s2));
    for (int i = 0; i < x->rank; i++)
      if (i != axis && y->dims[i] != x->dims[i])
        return bad(n, "input %d has shape %s, input 0 has %s (dims other than axis %lld must agree)", k,
                   shp(y, s1), shp(x, s2), (long long)axis);
    if (__builtin_add_overflow(dims[axis], y->dims[axis], &dims[axis])) return bad(n, "output size overflows");
  }
  return set_out(n, x->dtype, x->rank, dims);
}

static fsl_status infer_window(const fsl_node *n) {
  static const char *const names[] = {"kernel_shape", "strides", "dilations", NULL};
  const fsl_value *x = n->in[0];
  const int64_t *ks, *st, *dl;
  int k;
  int64_t dims[FSL_MAX_RANK];
  char s1[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_ints(n, "kernel_shape", true, -1, &ks, &k));
  if (k < 1 || k > x->rank) return bad(n, "window over %d axes of a rank-%d input", k, x->rank);
  if (x->rank + k > FSL_MAX_RANK) return bad(n, "output rank %d exceeds %d", x->rank + k, FSL_MAX_RANK);
  FSL_TRY(attr_ints(n, "strides", false, k, &st, NULL));
  FSL_TRY(attr_ints(n, "dilations", false, k, &dl, NULL));
  int lead = x->rank - k;
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)lead);
  for (int i = 0; i < k; i++) {
    int64_t kk = ks[i], s = st ? st[i] : 1, d = dl ? dl[i] : 1, ext;
    if (kk < 1 || s < 1 || d < 1)
      return bad(n, "window axis %d: kernel %lld, stride %lld, dilation %lld must be >= 1", i,
                 (long long)kk, (long long)s, (long long)d);
    if (!fsl_mul_ok(d, kk - 1, &ext) || ext >= x->dims[lead + i])
      return bad(n, "window axis %d: dilated kernel %lld does not fit input %s", i,
                 (long long)(ext < INT64_MAX ? ext + 1 : ext), shp(x, s1));
    dims[lead + i] = (x->dims[lead + i] - (ext + 1)) / s + 1;
    dims[x->rank + i] = kk;
  }
  return set_out(n, x->dtype, x->rank + k, dims);
}

/* ---- gather / scatter ---- */

static fsl_status check_index_dtype(const fsl_node *n, const fsl_value *idx) {
  if (idx->dtype != FSL_DT_I32 && idx->dtype != FSL_DT_I64)
    return bad(n, "indices must be int32 or int64, got %s", fsl_dtype_name(idx->dtype));
  return FSL_OK;
}

static fsl_status infer_gather(const fsl_node *n) {
  static const char *const names[] = {"axis", NULL};
  const fsl_value *d = n->in[0], *idx = n->in[1];
  int64_t axis, dims[FSL_MAX_RANK];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_int(n, "axis", false, 0, &axis));
  FSL_TRY(check_index_dtype(n, idx));
  if (axis < 0 || axis >= d->rank) return bad(n, "axis %lld out of range for rank %d", (long long)axis, d->rank);
  int r = d->rank - 1 + idx->rank, o = 0;
  if (r > FSL_MAX_RANK) return bad(n, "output rank %d exceeds %d", r, FSL_MAX_RANK);
  for (int i = 0; i < axis; i++) dims[o++] = d->dims[i];
  for (int i = 0; i < idx->rank; i++) dims[o++] = idx->dims[i];
  for (int i = (int)axis + 1; i < d->rank; i++) dims[o++] = d->dims[i];
  return set_out(n, d->dtype, r, dims);
}

static fsl_status infer_gather_elements(const fsl_node *n) {
  static const char *const names[] = {"axis", NULL};
  const fsl_value *d = n->in[0], *idx = n->in[1];
  int64_t axis;
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_int(n, "axis", false, 0, &axis));
  FSL_TRY(check_index_dtype(n, idx));
  if (axis < 0 || axis >= d->rank) return bad(n, "axis %lld out of range for rank %d", (long long)axis, d->rank);
  if (idx->rank != d->rank) return bad(n, "indices %s and data %s differ in rank", shp(idx, s1), shp(d, s2));
  for (int i = 0; i < d->rank; i++)
    if (i != axis && idx->dims[i] > d->dims[i])
      return bad(n, "indices %s exceed data %s in dim %d", shp(idx, s1), shp(d, s2), i);
  if (fsl_value_numel(idx) > 0 && d->dims[axis] == 0) return bad(n, "gather from empty axis %lld", (long long)axis);
  return set_out(n, d->dtype, idx->rank, idx->dims);
}

/* Common checks of GatherND/ScatterND indices: rank q >= 1, last dim k with
 * b + k <= data rank, leading b dims equal data's. */
static fsl_status check_nd(const fsl_node *n, const fsl_value *d, const fsl_value *idx, int64_t b) {
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_index_dtype(n, idx));
  if (idx->rank < 1) return bad(n, "indices must have rank >= 1");
  if (b < 0 || b >= idx->rank || b >= d->rank) return bad(n, "batch_dims %lld out of range", (long long)b);
  int64_t k = idx->dims[idx->rank - 1];
  if (k < 1 || b + k > d->rank)
    return bad(n, "indices %s: last dim %lld must be in 1..%lld for data %s", shp(idx, s1), (long long)k,
               (long long)(d->rank - b), shp(d, s2));
  for (int i = 0; i < b; i++)
    if (idx->dims[i] != d->dims[i])
      return bad(n, "batch dims of indices %s and data %s differ", shp(idx, s1), shp(d, s2));
  return FSL_OK;
}

static fsl_status infer_gather_nd(const fsl_node *n) {
  static const char *const names[] = {"batch_dims", NULL};
  const fsl_value *d = n->in[0], *idx = n->in[1];
  int64_t b, dims[FSL_MAX_RANK];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_int(n, "batch_dims", false, 0, &b));
  FSL_TRY(check_nd(n, d, idx, b));
  int64_t k = idx->dims[idx->rank - 1];
  int r = idx->rank - 1 + d->rank - (int)(b + k), o = 0;
  if (r > FSL_MAX_RANK) return bad(n, "output rank %d exceeds %d", r, FSL_MAX_RANK);
  for (int i = 0; i < idx->rank - 1; i++) dims[o++] = idx->dims[i];
  for (int i = (int)(b + k); i < d->rank; i++) dims[o++] = d->dims[i];
  return set_out(n, d->dtype, r, dims);
}

static fsl_status check_reduction(const fsl_node *n, const fsl_value *d) {
  int64_t red;
  FSL_TRY(attr_int(n, "reduction", false, 0, &red));
  if (red < 0 || red > 4) return bad(n, "attribute 'reduction' must be 0..4 (none, add, mul, max, min), got %lld", (long long)red);
  if (red != 0 && d->dtype == FSL_DT_BOOL) return bad(n, "reduction on bool data is not supported");
  return FSL_OK;
}

static fsl_status infer_scatter_elements(const fsl_node *n) {
  static const char *const names[] = {"axis", "reduction", NULL};
  const fsl_value *d = n->in[0], *idx = n->in[1], *u = n->in[2];
  int64_t axis;
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(attr_int(n, "axis", false, 0, &axis));
  FSL_TRY(check_reduction(n, d));
  FSL_TRY(check_index_dtype(n, idx));
  if (axis < 0 || axis >= d->rank) return bad(n, "axis %lld out of range for rank %d", (long long)axis, d->rank);
  if (!fsl_value_same_shape(idx, u)) return bad(n, "indices %s and updates %s differ in shape", shp(idx, s1), shp(u, s2));
  if (u->dtype != d->dtype)
    return bad(n, "updates dtype %s differs from data dtype %s", fsl_dtype_name(u->dtype), fsl_dtype_name(d->dtype));
  if (idx->rank != d->rank) return bad(n, "indices %s and data %s differ in rank", shp(idx, s1), shp(d, s2));
  for (int i = 0; i < d->rank; i++)
    if (i != axis && idx->dims[i] > d->dims[i])
      return bad(n, "indices %s exceed data %s in dim %d", shp(idx, s1), shp(d, s2), i);
  if (fsl_value_numel(idx) > 0 && d->dims[axis] == 0) return bad(n, "scatter into empty axis %lld", (long long)axis);
  return set_out(n, d->dtype, d->rank, d->dims);
}

static fsl_status infer_scatter_nd(const fsl_node *n) {
  static const char *const names[] = {"reduction", NULL};
  const fsl_value *d = n->in[0], *idx = n->in[1], *u = n->in[2];
  char s1[SHAPE_BUF], s2[SHAPE_BUF], s3[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  FSL_TRY(check_reduction(n, d));
  FSL_TRY(check_nd(n, d, idx, 0));
  if (u->dtype != d->dtype)
    return bad(n, "updates dtype %s differs from data dtype %s", fsl_dtype_name(u->dtype), fsl_dtype_name(d->dtype));
  int64_t k = idx->dims[idx->rank - 1];
  int ur = idx->rank - 1 + d->rank - (int)k;
  bool ok = u->rank == ur;
  for (int i = 0; ok && i < idx->rank - 1; i++) ok = u->dims[i] == idx->dims[i];
  for (int i = 0; ok && i < d->rank - k; i++) ok = u->dims[idx->rank - 1 + i] == d->dims[k + i];
  if (!ok)
    return bad(n, "updates %s must have shape indices[:-1] + data[k:] (indices %s, data %s)", shp(u, s1),
               shp(idx, s2), shp(d, s3));
  return set_out(n, d->dtype, d->rank, d->dims);
}

/* ---- linear ---- */

static fsl_status infer_matmul(const fsl_node *n) {
  const fsl_value *a = n->in[0], *b = n->in[1];
  int64_t dims[FSL_MAX_RANK];
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, k_no_attrs));
  if (a->dtype != b->dtype)
    return bad(n, "operand dtypes %s and %s differ", fsl_dtype_name(a->dtype), fsl_dtype_name(b->dtype));
  if (!dt_numeric(a->dtype)) return bad(n, "operands must be numeric, got %s", fsl_dtype_name(a->dtype));
  int r = a->rank;
  if (r < 2 || b->rank != r)
    return bad(n, "operands %s and %s must have the same rank >= 2", shp(a, s1), shp(b, s2));
  for (int i = 0; i < r - 2; i++)
    if (a->dims[i] != b->dims[i])
      return bad(n, "batch dims of %s and %s differ (broadcasting must be explicit via expand)", shp(a, s1), shp(b, s2));
  if (a->dims[r - 1] != b->dims[r - 2])
    return bad(n, "inner dims of %s and %s differ", shp(a, s1), shp(b, s2));
  memcpy(dims, a->dims, sizeof(int64_t) * (size_t)r);
  dims[r - 1] = b->dims[r - 1];
  return set_out(n, a->dtype, r, dims);
}

static fsl_status infer_conv(const fsl_node *n) {
  static const char *const names[] = {"strides", "dilations", "pads", "group", "lhs_dilation", NULL};
  const fsl_value *x = n->in[0], *w = n->in[1];
  const int64_t *st, *dl, *pd, *ld;
  int64_t group, dims[FSL_MAX_RANK];
  char s1[SHAPE_BUF], s2[SHAPE_BUF];
  FSL_TRY(check_attr_names(n, names));
  if (x->dtype != w->dtype)
    return bad(n, "operand dtypes %s and %s differ", fsl_dtype_name(x->dtype), fsl_dtype_name(w->dtype));
  if (!dt_numeric(x->dtype)) return bad(n, "operands must be numeric, got %s", fsl_dtype_name(x->dtype));
  if (x->rank < 3 || w->rank != x->rank)
    return bad(n, "input %s and weight %s must have the same rank >= 3", shp(x, s1), shp(w, s2));
  int k = x->rank - 2;
  FSL_TRY(attr_ints(n, "strides", false, k, &st, NULL));
  FSL_TRY(attr_ints(n, "dilations", false, k, &dl, NULL));
  FSL_TRY(attr_ints(n, "pads", false, 2 * k, &pd, NULL));
  FSL_TRY(attr_ints(n, "lhs_dilation", false, k, &ld, NULL));
  FSL_TRY(attr_int(n, "group", false, 1, &group));
  int64_t C = x->dims[1], M = w->dims[0];
  if (group < 1 || C % group != 0 || M % group != 0)
    return bad(n, "group %lld must divide input channels %lld and output channels %lld", (long long)group,
               (long long)C, (long long)M);
  if (w->dims[1] * group != C)
    return bad(n, "weight %s has %lld input channels per group, expected %lld (input %s, group %lld)", shp(w, s1),
               (long long)w->dims[1], (long long)(C / group), shp(x, s2), (long long)group);
  dims[0] = x->dims[0];
  dims[1] = M;
  for (int i = 0; i < k; i++) {
    int64_t s = st ? st[i] : 1, d = dl ? dl[i] : 1, l = ld ? ld[i] : 1;
    int64_t pb = pd ? pd[i] : 0, pe = pd ? pd[k + i] : 0, kk = w->dims[2 + i], xi = x->dims[2 + i];
    if (s < 1 || d < 1 || l < 1) return bad(n, "axis %d: strides, dilations and lhs_dilation must be >= 1", i);
    if (pb < 0 || pe < 0) return bad(n, "axis %d: pads must be >= 0", i);
    int64_t in_ext, k_ext, tot;
    if (xi == 0) in_ext = 0;
    else if (!fsl_mul_ok(xi - 1, l, &in_ext) || __builtin_add_overflow(in_ext, 1, &in_ext))
      return bad(n, "axis %d: dilated input size overflows", i);
    if (!fsl_mul_ok(kk > 0 ? kk - 1 : 0, d, &k_ext) || __builtin_add_overflow(in_ext, pb, &tot) ||
        __builtin_add_overflow(tot, pe, &tot))
      return bad(n, "axis %d: size overflows", i);
    if (kk < 1 || tot < k_ext + 1)
      return bad(n, "axis %d: kernel %lld (dilation %lld) does not fit padded input of size %lld (input %s, weight %s)",
                 i, (long long)kk, (long long)d, (long long)tot, shp(x, s1), shp(w, s2));
    dims[2 + i] = (tot - (k_ext + 1)) / s + 1;
  }
  return set_out(n, x->dtype, x->rank, dims);
}

/* ---- dispatch ---- */

fsl_status fsl_prim_infer(fsl_node *n) {
  if (!n || (unsigned)n->op >= FSL_OP_COUNT) return fsl_errorf(FSL_ERR_INVALID, "fsl_prim_infer: invalid node");
  if (!fsl_op_is_primitive(n->op)) return FSL_OK;
  FSL_TRY(check_inputs(n));
  switch (n->op) {
  case FSL_OP_where: return infer_where(n);
  case FSL_OP_reduce_sum: case FSL_OP_reduce_max: case FSL_OP_reduce_min: case FSL_OP_reduce_prod:
    return infer_reduce(n);
  case FSL_OP_argmax: case FSL_OP_argmin: return infer_arg(n);
  case FSL_OP_reshape: return infer_reshape(n);
  case FSL_OP_permute: return infer_permute(n);
  case FSL_OP_expand: return infer_expand(n);
  case FSL_OP_slice: return infer_slice(n);
  case FSL_OP_pad: return infer_pad(n);
  case FSL_OP_concat: return infer_concat(n);
  case FSL_OP_window: return infer_window(n);
  case FSL_OP_gather: return infer_gather(n);
  case FSL_OP_gather_elements: return infer_gather_elements(n);
  case FSL_OP_gather_nd: return infer_gather_nd(n);
  case FSL_OP_scatter_elements: return infer_scatter_elements(n);
  case FSL_OP_scatter_nd: return infer_scatter_nd(n);
  case FSL_OP_matmul: return infer_matmul(n);
  case FSL_OP_conv: return infer_conv(n);
  default: break;
  }
  if (fsl_op_get(n->op)->kind == FSL_KIND_ELEMENTWISE)
    return n->n_in == 1 ? infer_unary(n) : infer_binary(n);
  return bad(n, "no shape rule for this primitive");
}
