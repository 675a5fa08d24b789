/*
 * linear.c — reference semantics of matmul (batched, equal batch dims) and
 * conv (N-d, groups, strides, dilations, pads, lhs_dilation).  Floats
 * accumulate in double; integer matmul accumulates in 64-bit (wrapping);
 * conv always accumulates in double.  Operands are converted to double (or
 * 64-bit) arrays once, so the inner loops are plain strided loops.
 */
#include "eval/eval_internal.h"

/* Whole buffer as doubles (malloc'd; NULL on OOM). */
static double *to_f64(fsl_dtype dt, const void *p, int64_t cnt) {
  double *d = malloc(sizeof(double) * (size_t)(cnt > 0 ? cnt : 1));
  if (!d) return NULL;
  if (dt == FSL_DT_F32) {
    const float *f = p;
    for (int64_t i = 0; i < cnt; i++) d[i] = f[i];
  } else {
    for (int64_t i = 0; i < cnt; i++) d[i] = fsl_load_f64(dt, p, i);
  }
  return d;
}

/* Whole integer buffer as uint64 bit patterns (sign-extended for signed). */
static uint64_t *to_u64(fsl_dtype dt, const void *p, int64_t cnt) {
  uint64_t *d = malloc(sizeof(uint64_t) * (size_t)(cnt > 0 ? cnt : 1));
  if (!d) return NULL;
  bool sgn = fsl_dtype_is_signed(dt);
  for (int64_t i = 0; i < cnt; i++) d[i] = sgn ? (uint64_t)fsl_load_i64(dt, p, i) : fsl_load_u64(dt, p, i);
  return d;
}

/* ---- matmul ---- */

typedef struct { int64_t batch, M, K, N; } mm_dims;

static mm_dims matmul_dims(const fsl_node *n) {
  const fsl_value *a = n->in[0], *b = n->in[1];
  int r = a->rank;
  mm_dims d = {fsl_numel(r - 2, a->dims), a->dims[r - 2], a->dims[r - 1], b->dims[r - 1]};
  return d;
}

/* float32 fast path: reads the operands directly (no double copies of the
 * weights), accumulating in double. */
static fsl_status matmul_f32(const fsl_node *n, const float *A, const float *B, float *y, mm_dims d) {
  double *acc = malloc(sizeof(double) * (size_t)(d.N > 0 ? d.N : 1));
  if (!acc) return fsl_node_errorf(n, FSL_ERR_NOMEM, "out of memory");
  for (int64_t p = 0; p < d.batch; p++) {
    const float *Ap = A + p * d.M * d.K, *Bp = B + p * d.K * d.N;
    for (int64_t i = 0; i < d.M; i++) {
      const float *arow = Ap + i * d.K;
      for (int64_t j = 0; j < d.N; j++) acc[j] = 0.0;
      for (int64_t k = 0; k < d.K; k++) {
        double av = arow[k];
        const float *brow = Bp + k * d.N;
        for (int64_t j = 0; j < d.N; j++) acc[j] += av * (double)brow[j];
      }
      float *yrow = y + (p * d.M + i) * d.N;
      for (int64_t j = 0; j < d.N; j++) yrow[j] = (float)acc[j];
    }
  }
  free(acc);
  return FSL_OK;
}

static fsl_status matmul_f(const fsl_node *n, const void *a, const void *b, void *y, mm_dims d) {
  fsl_dtype dt = n->in[0]->dtype;
  if (dt == FSL_DT_F32) return matmul_f32(n, a, b, y, d);
  double *A = to_f64(dt, a, d.batch * d.M * d.K), *B = to_f64(dt, b, d.batch * d.K * d.N);
  double *acc = malloc(sizeof(double) * (size_t)(d.N > 0 ? d.N : 1));
  fsl_status st = FSL_OK;
  if (!A || !B || !acc) { st = fsl_node_errorf(n, FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int64_t p = 0; p < d.batch; p++) {
    const double *Ap = A + p * d.M * d.K, *Bp = B + p * d.K * d.N;
    for (int64_t i = 0; i < d.M; i++) {
      const double *arow = Ap + i * d.K;
      for (int64_t j = 0; j < d.N; j++) acc[j] = 0.0;
      for (int64_t k = 0; k < d.K; k++) {
        double av = arow[k];
        const double *brow = Bp + k * d.N;
        for (int64_t j = 0; j < d.N; j++) acc[j] += av * brow[j];
      }
      int64_t o = (p * d.M + i) * d.N;
      for (int64_t j = 0; j < d.N; j++) fsl_store_f64(dt, y, o + j, acc[j]);
    }
  }
done:
  free(A);
  free(B);
  free(acc);
  return st;
}

static fsl_status matmul_i(const fsl_node *n, const void *a, const void *b, void *y, mm_dims d) {
  fsl_dtype dt = n->in[0]->dtype;
  uint64_t *A = to_u64(dt, a, d.batch * d.M * d.K), *B = to_u64(dt, b, d.batch * d.K * d.N);
  uint64_t *acc = malloc(sizeof(uint64_t) * (size_t)(d.N > 0 ? d.N : 1));
  fsl_status st = FSL_OK;
  if (!A || !B || !acc) { st = fsl_node_errorf(n, FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int64_t p = 0; p < d.batch; p++)
    for (int64_t i = 0; i < d.M; i++) {
      const uint64_t *arow = A + (p * d.M + i) * d.K;
      for (int64_t j = 0; j < d.N; j++) acc[j] = 0;
      for (int64_t k = 0; k < d.K; k++) {
        const uint64_t *brow = B + (p * d.K + k) * d.N;
        for (int64_t j = 0; j < d.N; j++) acc[j] += arow[k] * brow[j];
      }
      for (int64_t j = 0; j < d.N; j++) fsl_store_u64(dt, y, (p * d.M + i) * d.N + j, acc[j]);
    }
done:
  free(A);
  free(B);
  free(acc);
  return st;
}

/* ---- conv ---- */

typedef struct {
  int k;                          /* spatial rank */
  int64_t N, C, M, group, Cg, Mg;
  int64_t in[FSL_MAX_RANK], ker[FSL_MAX_RANK], out[FSL_MAX_RANK];
  int64_t S, Kn, O;               /* spatial numels of input, kernel, output */
  int64_t *tab[FSL_MAX_RANK];     /* tab[i][o*ker[i] + kk]: input coord or -1 */
} conv_geom;

/* Builds the per-axis input coordinate tables; tabs is the backing store. */
static int64_t *conv_tables(const fsl_node *n, conv_geom *g) {
  const int64_t *st = fsl_ref_ints(n, "strides"), *dl = fsl_ref_ints(n, "dilations");
  const int64_t *pd = fsl_ref_ints(n, "pads"), *ld = fsl_ref_ints(n, "lhs_dilation");
  int64_t tot = 0;
  for (int i = 0; i < g->k; i++) tot += g->out[i] * g->ker[i];
  int64_t *tabs = malloc(sizeof(int64_t) * (size_t)(tot > 0 ? tot : 1)), o = 0;
  if (!tabs) return NULL;
  for (int i = 0; i < g->k; i++) {
    int64_t s = st ? st[i] : 1, d = dl ? dl[i] : 1, l = ld ? ld[i] : 1, pb = pd ? pd[i] : 0;
    int64_t ext = g->in[i] > 0 ? (g->in[i] - 1) * l + 1 : 0;
    g->tab[i] = tabs + o;
    for (int64_t oo = 0; oo < g->out[i]; oo++)
      for (int64_t kk = 0; kk < g->ker[i]; kk++) {
        int64_t p = oo * s + kk * d - pb; /* in dilated, unpadded coordinates */
        g->tab[i][oo * g->ker[i] + kk] = (p < 0 || p >= ext || p % l != 0) ? -1 : p / l;
      }
    o += g->out[i] * g->ker[i];
  }
  return tabs;
}

/* acc[O] += w * x-plane sampled at kernel offset kc, for every output position. */
static void conv_accumulate(const conv_geom *g, const int64_t *xs, const int64_t *kc, double w,
                            const double *xplane, double *acc) {
  int k = g->k, last = k - 1;
  int64_t oc[FSL_MAX_RANK] = {0}, olast = g->out[last], klast = g->ker[last];
  int64_t rows = g->O / (olast > 0 ? olast : 1);
  if (olast == 0) return;
  const int64_t *tl = g->tab[last] + kc[last];
  for (int64_t r = 0; r < rows; r++) {
    int64_t base = 0;
    bool valid = true;
    for (int i = 0; i < last; i++) {
      int64_t ix = g->tab[i][oc[i] * g->ker[i] + kc[i]];
      if (ix < 0) { valid = false; break; }
      base += ix * xs[i];
    }
    if (valid) {
      double *arow = acc + r * olast;
      const double *xrow = xplane + base;
      for (int64_t o = 0; o < olast; o++) {
        int64_t ix = tl[o * klast];
        if (ix >= 0) arow[o] += w * xrow[ix];
      }
    }
    for (int i = last - 1; i >= 0; i--) {
      if (++oc[i] < g->out[i]) break;
      oc[i] = 0;
    }
  }
}

static void conv_plane(const conv_geom *g, const double *X, const double *W, int64_t nb, int64_t m,
                       double *acc) {
  int64_t xs[FSL_MAX_RANK], kc[FSL_MAX_RANK];
  fsl_ref_strides(g->k, g->in, xs);
  int64_t gi = m / g->Mg;
  for (int64_t i = 0; i < g->O; i++) acc[i] = 0.0;
  for (int64_t c = 0; c < g->Cg; c++) {
    const double *xplane = X + (nb * g->C + gi * g->Cg + c) * g->S;
    const double *wk = W + (m * g->Cg + c) * g->Kn;
    for (int i = 0; i < g->k; i++) kc[i] = 0;
    for (int64_t kp = 0; kp < g->Kn; kp++) {
      conv_accumulate(g, xs, kc, wk[kp], xplane, acc);
      for (int i = g->k - 1; i >= 0; i--) {
        if (++kc[i] < g->ker[i]) break;
        kc[i] = 0;
      }
    }
  }
}

static fsl_status conv(const fsl_node *n, const void *x, const void *w, void *y) {
  const fsl_value *xv = n->in[0], *wv = n->in[1], *yv = n->out[0];
  fsl_dtype dt = xv->dtype;
  conv_geom g;
  memset(&g, 0, sizeof g);
  g.k = xv->rank - 2;
  g.N = xv->dims[0];
  g.C = xv->dims[1];
  g.M = wv->dims[0];
  g.group = fsl_attr_int(n, "group", 1);
  g.Cg = g.C / g.group;
  g.Mg = g.M / g.group;
  for (int i = 0; i < g.k; i++) {
    g.in[i] = xv->dims[2 + i];
    g.ker[i] = wv->dims[2 + i];
    g.out[i] = yv->dims[2 + i];
  }
  g.S = fsl_numel(g.k, g.in);
  g.Kn = fsl_numel(g.k, g.ker);
  g.O = fsl_numel(g.k, g.out);
  double *X = to_f64(dt, x, fsl_value_numel(xv)), *W = to_f64(dt, w, fsl_value_numel(wv));
  double *acc = malloc(sizeof(double) * (size_t)(g.O > 0 ? g.O : 1));
  int64_t *tabs = conv_tables(n, &g);
  fsl_status st = FSL_OK;
  if (!X || !W || !acc || !tabs) { st = fsl_node_errorf(n, FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int64_t nb = 0; nb < g.N; nb++)
    for (int64_t m = 0; m < g.M; m++) {
      conv_plane(&g, X, W, nb, m, acc);
      int64_t o = (nb * g.M + m) * g.O;
      if (dt == FSL_DT_F32)
        for (int64_t i = 0; i < g.O; i++) ((float *)y)[o + i] = (float)acc[i];
      else
        for (int64_t i = 0; i < g.O; i++) fsl_store_f64(dt, y, o + i, acc[i]);
    }
done:
  free(X);
  free(W);
  free(acc);
  free(tabs);
  return st;
}

fsl_status fsl_ref_linear(const fsl_node *n, const void *const *in, void *out) {
  if (n->op == FSL_OP_conv) return conv(n, in[0], in[1], out);
  if (n->op != FSL_OP_matmul) return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "not a linear primitive");
  mm_dims d = matmul_dims(n);
  if (fsl_dtype_is_float(n->in[0]->dtype)) return matmul_f(n, in[0], in[1], out, d);
  return matmul_i(n, in[0], in[1], out, d);
}
