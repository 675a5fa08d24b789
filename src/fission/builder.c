/* builder.c — primitive construction with shape inference and folding. */
#include "fission/builder.h"
#include "eval/eval.h"

/* A folded result may grow its inputs only up to this size (unless the
 * builder's fold_limit says otherwise); larger broadcasts (expand, window,
 * pad of constants) stay views in the graph. */
#define FOLD_GROW_LIMIT (64 * 1024)

void *fsl_b_fail(fsl_builder *b, fsl_status s, const char *fmt, ...) {
  if (b->st != FSL_OK) return NULL;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (b->origin_name)
    b->st = fsl_errorf(s, "node '%s' (%s): %s", b->origin_name, b->origin_op ? b->origin_op : "?", msg);
  else
    b->st = fsl_errorf(s, "%s", msg);
  return NULL;
}

static fsl_value *new_value(fsl_builder *b, fsl_dtype dt, int rank, const int64_t *dims) {
  fsl_value *v = fsl_graph_add_value(b->g, NULL);
  if (!v) return fsl_b_fail(b, FSL_ERR_NOMEM, "out of memory");
  v->dtype = dt;
  if (!fsl_value_set_shape(v, rank, dims))
    return fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "rank %d exceeds the maximum %d", rank, FSL_MAX_RANK);
  return v;
}

/* Whether nb more bytes of constants stay within the builder's limit;
 * take_const charges them. */
static bool const_fits(const fsl_builder *b, int64_t nb) { return !b->const_left || nb <= *b->const_left; }
static void take_const(fsl_builder *b, int64_t nb) {
  if (b->const_left) *b->const_left -= nb;
}

fsl_value *fsl_b_const(fsl_builder *b, fsl_dtype dt, int rank, const int64_t *dims, const void *data) {
  if (b->st) return NULL;
  int64_t nb = fsl_nbytes(dt, rank, dims);
  if (nb < 0 || !fsl_dtype_valid(dt)) return fsl_b_fail(b, FSL_ERR_NOMEM, "constant too large or of bad dtype");
  if (!const_fits(b, nb))
    return fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "a %lld-byte constant would take the model's constants past their "
                      "limit (%s)", (long long)nb, FSL_CONST_LIMIT_TEXT);
  fsl_value *v = new_value(b, dt, rank, dims);
  if (!v) return NULL;
  take_const(b, nb);
  v->data = fsl_arena_alloc(&b->g->arena, (size_t)nb);
  if (!v->data) return fsl_b_fail(b, FSL_ERR_NOMEM, "out of memory for a %lld-byte constant", (long long)nb);
  if (nb && data) memcpy(v->data, data, (size_t)nb);
  return v;
}

void *fsl_b_table(fsl_builder *b, int64_t n, int64_t m, size_t sz, const char *what) {
  if (b->st) return NULL;
  int64_t nm, nb;
  if (n < 0 || m < 0 || !fsl_mul_ok(n, m, &nm) || !fsl_mul_ok(nm, (int64_t)sz, &nb) ||
      nb > (b->const_left ? *b->const_left : FSL_CONST_LIMIT_MIN))
    return fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "%s: a table of %lld x %lld elements is past the limit on the "
                      "model's constants (%s)", what, (long long)n, (long long)m, FSL_CONST_LIMIT_TEXT);
  void *p = fsl_arena_alloc(&b->g->arena, nb ? (size_t)nb : 1);
  if (!p) return fsl_b_fail(b, FSL_ERR_NOMEM, "%s: out of memory for a %lld-byte table", what, (long long)nb);
  take_const(b, nb); /* held by the arena as long as the graph */
  return p;
}

fsl_value *fsl_b_scalar(fsl_builder *b, fsl_dtype dt, double v) {
  fsl_value *c = fsl_b_const(b, dt, 0, NULL, NULL);
  if (c) fsl_store_f64(dt, c->data, 0, v);
  return c;
}

fsl_value *fsl_b_ints(fsl_builder *b, int n, const int64_t *v) {
  int64_t d = n;
  return fsl_b_const(b, FSL_DT_I64, 1, &d, v);
}

int fsl_b_const_ints(fsl_builder *b, const fsl_value *v, int64_t *out, int max, const char *what) {
  if (b->st) return -1;
  if (!v || !v->data) {
    fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "%s must be a constant known at compile time, but it is computed at run time", what);
    return -1;
  }
  int64_t n = fsl_value_numel(v);
  if (n < 0 || n > max) {
    fsl_b_fail(b, FSL_ERR_INVALID, "%s has %lld elements, at most %d expected", what, (long long)n, max);
    return -1;
  }
  if (!fsl_dtype_is_int(v->dtype) && v->dtype != FSL_DT_BOOL && !fsl_dtype_is_float(v->dtype)) {
    fsl_b_fail(b, FSL_ERR_INVALID, "%s has dtype %s, integers expected", what, fsl_dtype_name(v->dtype));
    return -1;
  }
  for (int64_t i = 0; i < n; i++) out[i] = fsl_load_i64(v->dtype, v->data, i);
  return (int)n;
}

bool fsl_b_const_scalar(fsl_builder *b, const fsl_value *v, double *out, const char *what) {
  if (b->st) return false;
  if (!v || !v->data) {
    fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "%s must be a constant known at compile time, but it is computed at run time", what);
    return false;
  }
  if (fsl_value_numel(v) < 1) {
    fsl_b_fail(b, FSL_ERR_INVALID, "%s is empty, a scalar expected", what);
    return false;
  }
  *out = fsl_load_f64(v->dtype, v->data, 0);
  return true;
}

/* ---- the generic constructor ---- */

static bool all_const(fsl_value *const *in, int n) {
  for (int i = 0; i < n; i++)
    if (!in[i]->data) return false;
  return true;
}

fsl_value *fsl_b_prim(fsl_builder *b, fsl_op op, fsl_value *const *in, int n_in,
                      const fsl_attr *attrs, int n_attrs) {
  if (b->st) return NULL;
  FSL_ASSERT(fsl_op_is_primitive(op));
  for (int i = 0; i < n_in; i++)
    if (!in[i]) return fsl_b_fail(b, FSL_ERR_INVALID, "%s: operand %d is missing", fsl_op_name(op), i);
  fsl_attr *ac = NULL;
  if (n_attrs) {
    ac = fsl_arena_memdup(&b->g->arena, attrs, sizeof *attrs * (size_t)n_attrs);
    if (!ac) return fsl_b_fail(b, FSL_ERR_NOMEM, "out of memory");
  }
  /* infer on a scratch node first: a folded primitive leaves no node */
  fsl_value tmp_out = {0};
  fsl_value *outp = &tmp_out;
  fsl_node tmp = {0};
  tmp.op = op;
  tmp.op_type = fsl_op_name(op);
  tmp.name = "";
  tmp.n_in = n_in;
  tmp.in = (fsl_value **)in;
  tmp.n_out = 1;
  tmp.out = &outp;
  tmp.n_attrs = n_attrs;
  tmp.attrs = ac;
  fsl_status st = fsl_prim_infer(&tmp);
  if (st != FSL_OK) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", fsl_last_error());
    return fsl_b_fail(b, st, "%s", msg);
  }
  int64_t out_nb = fsl_value_nbytes(&tmp_out);
  if (out_nb < 0) return fsl_b_fail(b, FSL_ERR_NOMEM, "%s: output size overflows", fsl_op_name(op));
  /* past the constants' limit a constant primitive stays a node: it is
   * computed at run time, where its size is checked against memory */
  if (b->fold && all_const(in, n_in) && const_fits(b, out_nb)) {
    int64_t in_nb = 0;
    for (int i = 0; i < n_in; i++) in_nb += fsl_value_nbytes(in[i]);
    if (out_nb <= in_nb || out_nb <= (b->fold_limit > 0 ? b->fold_limit : FOLD_GROW_LIMIT)) {
      fsl_value *v = fsl_b_const(b, tmp_out.dtype, tmp_out.rank, tmp_out.dims, NULL);
      if (!v) return NULL;
      const void *ind[FSL_MAX_RANK * 4];
      const void **indp = n_in <= (int)FSL_ARRAY_LEN(ind) ? ind : malloc(sizeof(void *) * (size_t)n_in);
      if (!indp) return fsl_b_fail(b, FSL_ERR_NOMEM, "out of memory");
      for (int i = 0; i < n_in; i++) indp[i] = in[i]->data;
      void *outd = v->data;
      tmp.out[0] = v;
      st = fsl_ref_eval(&tmp, (const void *const *)indp, &outd);
      if (indp != ind) free(indp);
      if (st != FSL_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", fsl_last_error());
        return fsl_b_fail(b, st, "folding %s: %s", fsl_op_name(op), msg);
      }
      return v;
    }
  }
  fsl_value *v = new_value(b, tmp_out.dtype, tmp_out.rank, tmp_out.dims);
  if (!v) return NULL;
  fsl_node *n = fsl_graph_add_node(b->g, op, NULL, in, n_in, &v, 1, ac, n_attrs);
  if (!n) return fsl_b_fail(b, FSL_ERR_NOMEM, "out of memory");
  n->origin = b->origin;
  n->origin_name = b->origin_name;
  n->origin_op = b->origin_op;
  return v;
}

/* ---- elementwise ---- */

static bool same_shape(const fsl_value *x, int rank, const int64_t *dims) {
  if (x->rank != rank) return false;
  for (int i = 0; i < rank; i++)
    if (x->dims[i] != dims[i]) return false;
  return true;
}

bool fsl_b_broadcast_shape(fsl_builder *b, const fsl_value *x, const fsl_value *y, int *rank, int64_t *dims) {
  if (b->st) return false;
  int r = x->rank > y->rank ? x->rank : y->rank;
  for (int i = 0; i < r; i++) {
    int ix = i - (r - x->rank), iy = i - (r - y->rank);
    int64_t dx = ix >= 0 ? x->dims[ix] : 1, dy = iy >= 0 ? y->dims[iy] : 1;
    if (dx != dy && dx != 1 && dy != 1) {
      char a[256], c[256];
      fsl_b_fail(b, FSL_ERR_SHAPE, "shapes %s and %s cannot be broadcast (axis %d: %lld vs %lld)",
                 fsl_shape_str(x->rank, x->dims, a, sizeof a), fsl_shape_str(y->rank, y->dims, c, sizeof c),
                 i, (long long)dx, (long long)dy);
      return false;
    }
    dims[i] = dx == 1 ? dy : dx;
  }
  *rank = r;
  return true;
}

fsl_value *fsl_b_broadcast_to(fsl_builder *b, fsl_value *x, int rank, const int64_t *dims) {
  if (b->st || !x) return NULL;
  if (same_shape(x, rank, dims)) return x;
  if (x->rank > rank) return fsl_b_fail(b, FSL_ERR_SHAPE, "cannot broadcast rank %d to rank %d", x->rank, rank);
  int64_t rd[FSL_MAX_RANK];
  int lead = rank - x->rank;
  for (int i = 0; i < rank; i++) rd[i] = i < lead ? 1 : x->dims[i - lead];
  for (int i = 0; i < rank; i++)
    if (rd[i] != dims[i] && rd[i] != 1) {
      char a[256], c[256];
      return fsl_b_fail(b, FSL_ERR_SHAPE, "cannot broadcast shape %s to %s",
                        fsl_shape_str(x->rank, x->dims, a, sizeof a), fsl_shape_str(rank, dims, c, sizeof c));
    }
  x = fsl_b_reshape(b, x, rank, rd);
  return fsl_b_expand(b, x, dims);
}

fsl_value *fsl_b_unary(fsl_builder *b, fsl_op op, fsl_value *x) {
  return fsl_b_prim(b, op, &x, 1, NULL, 0);
}

fsl_value *fsl_b_binary(fsl_builder *b, fsl_op op, fsl_value *x, fsl_value *y) {
  if (b->st) return NULL;
  if (!x || !y) return fsl_b_fail(b, FSL_ERR_INVALID, "%s: operand missing", fsl_op_name(op));
  int r;
  int64_t d[FSL_MAX_RANK];
  if (!fsl_b_broadcast_shape(b, x, y, &r, d)) return NULL;
  fsl_value *in[2] = {fsl_b_broadcast_to(b, x, r, d), fsl_b_broadcast_to(b, y, r, d)};
  if (b->st) return NULL;
  return fsl_b_prim(b, op, in, 2, NULL, 0);
}

fsl_value *fsl_b_where(fsl_builder *b, fsl_value *c, fsl_value *x, fsl_value *y) {
  if (b->st) return NULL;
  if (!c || !x || !y) return fsl_b_fail(b, FSL_ERR_INVALID, "where: operand missing");
  int r1, r;
  int64_t d1[FSL_MAX_RANK], d[FSL_MAX_RANK];
  if (!fsl_b_broadcast_shape(b, x, y, &r1, d1)) return NULL;
  fsl_value tmp = {0};
  fsl_value_set_shape(&tmp, r1, d1);
  if (!fsl_b_broadcast_shape(b, c, &tmp, &r, d)) return NULL;
  fsl_value *in[3] = {fsl_b_broadcast_to(b, c, r, d), fsl_b_broadcast_to(b, x, r, d), fsl_b_broadcast_to(b, y, r, d)};
  if (b->st) return NULL;
  return fsl_b_prim(b, FSL_OP_where, in, 3, NULL, 0);
}

fsl_value *fsl_b_cast(fsl_builder *b, fsl_value *x, fsl_dtype to) {
  if (b->st || !x) return NULL;
  if (x->dtype == to) return x;
  if (!fsl_dtype_valid(to)) return fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "cast to dtype %s is not supported", fsl_dtype_name(to));
  fsl_attr a = fsl_attr_make_int("to", to);
  return fsl_b_prim(b, FSL_OP_cast, &x, 1, &a, 1);
}

fsl_value *fsl_b_binary_scalar(fsl_builder *b, fsl_op op, fsl_value *x, double s) {
  if (b->st || !x) return NULL;
  return fsl_b_binary(b, op, x, fsl_b_scalar(b, x->dtype, s));
}

/* ---- reduce ---- */

bool fsl_b_axis(fsl_builder *b, int64_t *axis, int rank, const char *what) {
  if (b->st) return false;
  int64_t a = *axis;
  if (a < -(int64_t)rank || a >= rank || (rank == 0 && a != 0 && a != -1)) {
    fsl_b_fail(b, FSL_ERR_INVALID, "%s %lld is out of range for rank %d", what, (long long)a, rank);
    return false;
  }
  *axis = a < 0 ? a + rank : a;
  return true;
}

/* Drops axes marked in `drop` from x's shape (a reshape). */
static fsl_value *drop_axes(fsl_builder *b, fsl_value *x, const bool *drop) {
  int64_t d[FSL_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!drop[i]) d[r++] = x->dims[i];
  return fsl_b_reshape(b, x, r, d);
}

fsl_value *fsl_b_reduce(fsl_builder *b, fsl_op op, fsl_value *x, const int64_t *axes, int n_axes, bool keepdims) {
  if (b->st || !x) return NULL;
  bool mark[FSL_MAX_RANK] = {0};
  if (n_axes == 0)
    for (int i = 0; i < x->rank; i++) mark[i] = true;
  for (int i = 0; i < n_axes; i++) {
    int64_t a = axes[i];
    if (!fsl_b_axis(b, &a, x->rank, "reduction axis")) return NULL;
    mark[a] = true;
  }
  int64_t ax[FSL_MAX_RANK];
  int n = 0;
  for (int i = 0; i < x->rank; i++)
    if (mark[i]) ax[n++] = i;
  if (n == 0) return x;
  fsl_attr a = fsl_attr_make_ints(b->g, "axes", ax, n);
  fsl_value *y = fsl_b_prim(b, op, &x, 1, &a, 1);
  if (!y || keepdims) return y;
  return drop_axes(b, y, mark);
}

fsl_value *fsl_b_arg(fsl_builder *b, fsl_op op, fsl_value *x, int64_t axis, bool keepdims, bool select_last) {
  if (b->st || !x) return NULL;
  if (!fsl_b_axis(b, &axis, x->rank, "axis")) return NULL;
  fsl_attr a[2] = {fsl_attr_make_int("axis", axis), fsl_attr_make_int("select_last_index", select_last)};
  fsl_value *y = fsl_b_prim(b, op, &x, 1, a, 2);
  if (!y || keepdims) return y;
  bool mark[FSL_MAX_RANK] = {0};
  mark[axis] = true;
  return drop_axes(b, y, mark);
}

/* ---- movement ---- */

fsl_value *fsl_b_reshape(fsl_builder *b, fsl_value *x, int rank, const int64_t *dims) {
  if (b->st || !x) return NULL;
  if (same_shape(x, rank, dims)) return x;
  fsl_attr a = fsl_attr_make_ints(b->g, "shape", dims, rank);
  return fsl_b_prim(b, FSL_OP_reshape, &x, 1, &a, 1);
}

fsl_value *fsl_b_permute(fsl_builder *b, fsl_value *x, const int64_t *perm) {
  if (b->st || !x) return NULL;
  bool ident = true;
  for (int i = 0; i < x->rank; i++) ident &= perm[i] == i;
  if (ident) return x;
  fsl_attr a = fsl_attr_make_ints(b->g, "perm", perm, x->rank);
  return fsl_b_prim(b, FSL_OP_permute, &x, 1, &a, 1);
}

fsl_value *fsl_b_expand(fsl_builder *b, fsl_value *x, const int64_t *dims) {
  if (b->st || !x) return NULL;
  if (same_shape(x, x->rank, dims)) return x;
  fsl_attr a = fsl_attr_make_ints(b->g, "shape", dims, x->rank);
  return fsl_b_prim(b, FSL_OP_expand, &x, 1, &a, 1);
}

fsl_value *fsl_b_on_axis(fsl_builder *b, fsl_value *v, int rank, int axis) {
  if (!v || fsl_value_numel(v) == 1 || v->rank != 1) return v;
  int64_t d[FSL_MAX_RANK];
  for (int i = 0; i < rank; i++) d[i] = 1;
  d[axis] = v->dims[0];
  return fsl_b_reshape(b, v, rank, d);
}

fsl_value *fsl_b_slice(fsl_builder *b, fsl_value *x, const int64_t *starts, const int64_t *steps, const int64_t *sizes) {
  if (b->st || !x) return NULL;
  bool ident = true;
  for (int i = 0; i < x->rank; i++) ident &= starts[i] == 0 && steps[i] == 1 && sizes[i] == x->dims[i];
  if (ident) return x;
  fsl_attr a[3] = {fsl_attr_make_ints(b->g, "starts", starts, x->rank),
                   fsl_attr_make_ints(b->g, "steps", steps, x->rank),
                   fsl_attr_make_ints(b->g, "sizes", sizes, x->rank)};
  return fsl_b_prim(b, FSL_OP_slice, &x, 1, a, 3);
}

fsl_value *fsl_b_slice_axis(fsl_builder *b, fsl_value *x, int axis, int64_t start, int64_t size) {
  if (b->st || !x) return NULL;
  if (axis < 0 || axis >= x->rank)
    return fsl_b_fail(b, FSL_ERR_SHAPE, "slice axis %d is out of range for rank %d", axis, x->rank);
  int64_t st[FSL_MAX_RANK], sp[FSL_MAX_RANK], sz[FSL_MAX_RANK];
  for (int i = 0; i < x->rank; i++) { st[i] = 0; sp[i] = 1; sz[i] = x->dims[i]; }
  st[axis] = start;
  sz[axis] = size;
  return fsl_b_slice(b, x, st, sp, sz);
}

fsl_value *fsl_b_pad(fsl_builder *b, fsl_value *x, const int64_t *pads, int mode, double value) {
  if (b->st || !x) return NULL;
  bool zero = true;
  for (int i = 0; i < 2 * x->rank; i++) zero &= pads[i] == 0;
  if (zero) return x;
  fsl_attr a[3] = {fsl_attr_make_ints(b->g, "pads", pads, 2 * x->rank), fsl_attr_make_int("mode", mode),
                   fsl_attr_make_float("value", value)};
  return fsl_b_prim(b, FSL_OP_pad, &x, 1, a, 3);
}

fsl_value *fsl_b_concat(fsl_builder *b, fsl_value *const *xs, int n, int axis) {
  if (b->st) return NULL;
  if (n < 1) return fsl_b_fail(b, FSL_ERR_INVALID, "concat of no operands");
  if (n == 1) return xs[0];
  fsl_attr a = fsl_attr_make_int("axis", axis);
  return fsl_b_prim(b, FSL_OP_concat, xs, n, &a, 1);
}

fsl_value *fsl_b_window(fsl_builder *b, fsl_value *x, int k, const int64_t *kernel,
                        const int64_t *strides, const int64_t *dilations) {
  if (b->st || !x) return NULL;
  fsl_attr a[3] = {fsl_attr_make_ints(b->g, "kernel_shape", kernel, k),
                   fsl_attr_make_ints(b->g, "strides", strides, k),
                   fsl_attr_make_ints(b->g, "dilations", dilations, k)};
  return fsl_b_prim(b, FSL_OP_window, &x, 1, a, 3);
}

/* ---- gather ---- */

static fsl_value *gather_like(fsl_builder *b, fsl_op op, fsl_value *data, fsl_value *idx, int axis) {
  if (b->st || !data) return NULL;
  int64_t ax = axis;
  if (!fsl_b_axis(b, &ax, data->rank, "axis")) return NULL;
  fsl_value *in[2] = {data, idx};
  fsl_attr a = fsl_attr_make_int("axis", ax);
  return fsl_b_prim(b, op, in, 2, &a, 1);
}

fsl_value *fsl_b_gather(fsl_builder *b, fsl_value *data, fsl_value *idx, int axis) {
  return gather_like(b, FSL_OP_gather, data, idx, axis);
}

fsl_value *fsl_b_gather_elements(fsl_builder *b, fsl_value *data, fsl_value *idx, int axis) {
  return gather_like(b, FSL_OP_gather_elements, data, idx, axis);
}

/* ---- linear ---- */

/* A linear primitive (matmul, conv) over operands in[0..2): over f16 or
 * bf16 it computes in f32, as oneDNN's and cuBLAS's half-precision
 * primitives accumulate: the operands widened (a constant weight once,
 * here, by folding), the result rounded back to the operands' dtype by a
 * cast that fuses into the kernel's epilogue.  A backend with native half
 * linear kernels would take the pattern cast -> linear -> cast whole
 * (issue 61). */
static fsl_value *linear_prim(fsl_builder *b, fsl_op op, fsl_value *const *in, const fsl_attr *a, int na) {
  fsl_dtype dt = in[0]->dtype;
  if ((dt != FSL_DT_F16 && dt != FSL_DT_BF16) || in[1]->dtype != dt) return fsl_b_prim(b, op, in, 2, a, na);
  fsl_value *wide[2] = {fsl_b_cast(b, in[0], FSL_DT_F32), fsl_b_cast(b, in[1], FSL_DT_F32)};
  if (b->st) return NULL;
  return fsl_b_cast(b, fsl_b_prim(b, op, wide, 2, a, na), dt);
}

fsl_value *fsl_b_matmul(fsl_builder *b, fsl_value *x, fsl_value *y) {
  if (b->st) return NULL;
  if (!x || !y) return fsl_b_fail(b, FSL_ERR_INVALID, "matmul: operand missing");
  if (x->rank < 1 || y->rank < 1) return fsl_b_fail(b, FSL_ERR_SHAPE, "MatMul operands must have rank >= 1");
  bool xv = x->rank == 1, yv = y->rank == 1;
  if (xv) { int64_t d[2] = {1, x->dims[0]}; x = fsl_b_reshape(b, x, 2, d); }
  if (yv) { int64_t d[2] = {y->dims[0], 1}; y = fsl_b_reshape(b, y, 2, d); }
  if (b->st) return NULL;
  /* y without real batch dims (a weight): fold x's batch dims into M, so
   * that y is never broadcast (copied) along them. */
  bool y_flat = true;
  for (int i = 0; i < y->rank - 2; i++) y_flat &= y->dims[i] == 1;
  if (y_flat && x->rank > 2 && x->rank >= y->rank) {
    int64_t m = fsl_numel(x->rank - 1, x->dims), k = x->dims[x->rank - 1];
    int64_t d2x[2] = {m, k}, d2y[2] = {y->dims[y->rank - 2], y->dims[y->rank - 1]};
    if (d2x[1] != d2y[0]) {
      char a[256], c[256];
      return fsl_b_fail(b, FSL_ERR_SHAPE, "MatMul inner dimensions differ: %s x %s",
                        fsl_shape_str(x->rank, x->dims, a, sizeof a), fsl_shape_str(y->rank, y->dims, c, sizeof c));
    }
    fsl_value *in[2] = {fsl_b_reshape(b, x, 2, d2x), fsl_b_reshape(b, y, 2, d2y)};
    fsl_value *z = b->st ? NULL : linear_prim(b, FSL_OP_matmul, in, NULL, 0);
    int64_t od[FSL_MAX_RANK];
    memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->rank);
    if (yv) return fsl_b_reshape(b, z, x->rank - 1, od);
    od[x->rank - 1] = d2y[1];
    return fsl_b_reshape(b, z, x->rank, od);
  }
  /* broadcast the batch dims */
  fsl_value bx = {0}, by = {0};
  fsl_value_set_shape(&bx, x->rank - 2, x->dims);
  fsl_value_set_shape(&by, y->rank - 2, y->dims);
  int br;
  int64_t bd[FSL_MAX_RANK];
  if (!fsl_b_broadcast_shape(b, &bx, &by, &br, bd)) return NULL;
  if (br + 2 > FSL_MAX_RANK) return fsl_b_fail(b, FSL_ERR_UNSUPPORTED, "matmul rank too large");
  int64_t dx[FSL_MAX_RANK], dy[FSL_MAX_RANK];
  memcpy(dx, bd, sizeof(int64_t) * (size_t)br);
  memcpy(dy, bd, sizeof(int64_t) * (size_t)br);
  dx[br] = x->dims[x->rank - 2]; dx[br + 1] = x->dims[x->rank - 1];
  dy[br] = y->dims[y->rank - 2]; dy[br + 1] = y->dims[y->rank - 1];
  if (dx[br + 1] != dy[br]) {
    char a[256], c[256];
    return fsl_b_fail(b, FSL_ERR_SHAPE, "MatMul inner dimensions differ: %s x %s",
                      fsl_shape_str(x->rank, x->dims, a, sizeof a), fsl_shape_str(y->rank, y->dims, c, sizeof c));
  }
  fsl_value *in[2] = {fsl_b_broadcast_to(b, x, br + 2, dx), fsl_b_broadcast_to(b, y, br + 2, dy)};
  fsl_value *z = b->st ? NULL : linear_prim(b, FSL_OP_matmul, in, NULL, 0);
  if (!z || (!xv && !yv)) return z;
  int64_t od[FSL_MAX_RANK];
  int r = 0;
  for (int i = 0; i < br; i++) od[r++] = bd[i];
  if (!xv) od[r++] = dx[br];
  if (!yv) od[r++] = dy[br + 1];
  return fsl_b_reshape(b, z, r, od);
}

fsl_value *fsl_b_conv(fsl_builder *b, fsl_value *x, fsl_value *w, const int64_t *strides,
                      const int64_t *dilations, const int64_t *pads, int64_t group,
                      const int64_t *lhs_dilation) {
  if (b->st) return NULL;
  if (!x || !w) return fsl_b_fail(b, FSL_ERR_INVALID, "conv: operand missing");
  int k = x->rank - 2;
  if (k < 1) return fsl_b_fail(b, FSL_ERR_SHAPE, "conv input must have rank >= 3, got %d", x->rank);
  int64_t ones[FSL_MAX_RANK];
  for (int i = 0; i < k; i++) ones[i] = 1;
  fsl_value *in[2] = {x, w};
  fsl_attr a[5] = {fsl_attr_make_ints(b->g, "strides", strides, k),
                   fsl_attr_make_ints(b->g, "dilations", dilations, k),
                   fsl_attr_make_ints(b->g, "pads", pads, 2 * k),
                   fsl_attr_make_int("group", group),
                   fsl_attr_make_ints(b->g, "lhs_dilation", lhs_dilation ? lhs_dilation : ones, k)};
  return linear_prim(b, FSL_OP_conv, in, a, 5);
}
