/*
 * reduce.c — reference semantics of reduce_sum/max/min/prod (keepdims, over
 * a set of axes) and argmax/argmin.  Floats accumulate in double, signed
 * integers in int64 (sum/prod wrap), unsigned in uint64.  NaN propagates
 * through max/min; an empty reduced extent gives the identity (0, 1, -inf /
 * dtype min, +inf / dtype max).
 */
#include "eval/eval_internal.h"
#include <math.h>

typedef enum { ACC_F, ACC_S, ACC_U } acc_kind;

static acc_kind kind_of(fsl_dtype dt) {
  if (fsl_dtype_is_float(dt)) return ACC_F;
  return fsl_dtype_is_signed(dt) ? ACC_S : ACC_U;
}

/* Smallest / largest value of an integer dtype (bool: 0 / 1). */
static int64_t smin(fsl_dtype dt) {
  int bits = (int)fsl_dtype_size(dt) * 8;
  return bits >= 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
}
static int64_t smax(fsl_dtype dt) {
  int bits = (int)fsl_dtype_size(dt) * 8;
  return bits >= 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
}
static uint64_t umax(fsl_dtype dt) {
  if (dt == FSL_DT_BOOL) return 1;
  int bits = (int)fsl_dtype_size(dt) * 8;
  return bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
}

typedef union { double f; int64_t s; uint64_t u; } acc_t;

static acc_t identity(fsl_op op, fsl_dtype dt) {
  acc_kind k = kind_of(dt);
  acc_t a;
  a.u = 0;
  switch (op) {
  case FSL_OP_reduce_sum: if (k == ACC_F) a.f = 0.0; else a.u = 0; break;
  case FSL_OP_reduce_prod: if (k == ACC_F) a.f = 1.0; else a.u = 1; break;
  case FSL_OP_reduce_max:
    if (k == ACC_F) a.f = -INFINITY; else if (k == ACC_S) a.s = smin(dt); else a.u = 0;
    break;
  default: /* reduce_min */
    if (k == ACC_F) a.f = INFINITY; else if (k == ACC_S) a.s = smax(dt); else a.u = umax(dt);
  }
  return a;
}

static void accumulate(fsl_op op, acc_kind k, acc_t *a, fsl_dtype dt, const void *x, int64_t i) {
  if (k == ACC_F) {
    double v = fsl_load_f64(dt, x, i);
    switch (op) {
    case FSL_OP_reduce_sum: a->f += v; break;
    case FSL_OP_reduce_prod: a->f *= v; break;
    case FSL_OP_reduce_max: if (isnan(v) || v > a->f) a->f = v; break;
    default: if (isnan(v) || v < a->f) a->f = v;
    }
    return;
  }
  if (k == ACC_S) {
    int64_t v = fsl_load_i64(dt, x, i);
    switch (op) {
    case FSL_OP_reduce_sum: a->u += (uint64_t)v; break;
    case FSL_OP_reduce_prod: a->u *= (uint64_t)v; break;
    case FSL_OP_reduce_max: if (v > a->s) a->s = v; break;
    default: if (v < a->s) a->s = v;
    }
    return;
  }
  uint64_t v = fsl_load_u64(dt, x, i);
  switch (op) {
  case FSL_OP_reduce_sum: a->u += v; break;
  case FSL_OP_reduce_prod: a->u *= v; break;
  case FSL_OP_reduce_max: if (v > a->u) a->u = v; break;
  default: if (v < a->u) a->u = v;
  }
}

static fsl_status reduce(const fsl_node *n, const void *x, void *y) {
  const fsl_value *xv = n->in[0], *yv = n->out[0];
  fsl_dtype dt = xv->dtype;
  acc_kind k = kind_of(dt);
  int r = xv->rank;
  int64_t nout = fsl_value_numel(yv), nin = fsl_value_numel(xv);
  int64_t ostr[FSL_MAX_RANK], c[FSL_MAX_RANK] = {0};
  acc_t *acc = malloc(sizeof *acc * (size_t)(nout > 0 ? nout : 1));
  if (!acc) return fsl_node_errorf(n, FSL_ERR_NOMEM, "out of memory");
  acc_t id = identity(n->op, dt);
  for (int64_t i = 0; i < nout; i++) acc[i] = id;
  fsl_ref_strides(r, yv->dims, ostr);
  for (int i = 0; i < r; i++)
    if (yv->dims[i] == 1) ostr[i] = 0; /* reduced (or size-1) axis */
  int64_t oo = 0;
  for (int64_t i = 0; i < nin; i++) {
    accumulate(n->op, k, &acc[oo], dt, x, i);
    for (int d = r - 1; d >= 0; d--) {
      oo += ostr[d];
      if (++c[d] < xv->dims[d]) break;
      oo -= ostr[d] * xv->dims[d];
      c[d] = 0;
    }
  }
  for (int64_t i = 0; i < nout; i++) {
    if (k == ACC_F) fsl_store_f64(dt, y, i, acc[i].f);
    else if (k == ACC_S) fsl_store_i64(dt, y, i, acc[i].s);
    else fsl_store_u64(dt, y, i, acc[i].u);
  }
  free(acc);
  return FSL_OK;
}

/* Three-way compare treating NaN as the extreme value (greatest when
 * nan_big, smallest otherwise), so that argmax/argmin pick NaN like numpy. */
static int fcmp(double a, double b, bool nan_big) {
  bool na = isnan(a), nb = isnan(b);
  if (na || nb) {
    if (na && nb) return 0;
    return (na ? 1 : -1) * (nan_big ? 1 : -1);
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/* >0 if element j is strictly better than element best for argmax/argmin. */
static int arg_better(bool is_max, acc_kind k, fsl_dtype dt, const void *x, int64_t j, int64_t best) {
  int c;
  if (k == ACC_F) {
    double a = fsl_load_f64(dt, x, j), b = fsl_load_f64(dt, x, best);
    c = is_max ? fcmp(a, b, true) : fcmp(b, a, false);
    return c;
  }
  if (k == ACC_S) {
    int64_t a = fsl_load_i64(dt, x, j), b = fsl_load_i64(dt, x, best);
    c = a < b ? -1 : a > b ? 1 : 0;
  } else {
    uint64_t a = fsl_load_u64(dt, x, j), b = fsl_load_u64(dt, x, best);
    c = a < b ? -1 : a > b ? 1 : 0;
  }
  return is_max ? c : -c;
}

static fsl_status arg(const fsl_node *n, const void *x, void *y) {
  const fsl_value *xv = n->in[0];
  fsl_dtype dt = xv->dtype;
  acc_kind k = kind_of(dt);
  int64_t axis = fsl_attr_int(n, "axis", 0);
  bool last = fsl_attr_int(n, "select_last_index", 0) != 0, is_max = n->op == FSL_OP_argmax;
  int64_t outer = fsl_numel((int)axis, xv->dims), len = xv->dims[axis];
  int64_t inner = fsl_numel(xv->rank - (int)axis - 1, xv->dims + axis + 1);
  int64_t *o = y;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t b = 0; b < inner; b++) {
      int64_t base = a * len * inner + b, bi = 0;
      for (int64_t j = 1; j < len; j++) {
        int c = arg_better(is_max, k, dt, x, base + j * inner, base + bi * inner);
        if (c > 0 || (last && c == 0)) bi = j;
      }
      o[a * inner + b] = bi;
    }
  return FSL_OK;
}

fsl_status fsl_ref_reduce(const fsl_node *n, const void *const *in, void *out) {
  if (n->op == FSL_OP_argmax || n->op == FSL_OP_argmin) return arg(n, in[0], out);
  return reduce(n, in[0], out);
}
