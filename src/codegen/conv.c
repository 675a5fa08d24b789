/*
 * conv.c — a direct convolution (fsl_codegen_conv, codegen.h): one
 * PARALLEL iteration per output element, the input channels of its group
 * and the kernel window as serial loops, accumulated in double
 * (docs/primitives.md, "conv"); in a dialect with matmul tiles, an
 * implicit matmul through local tiles (tiled_conv).
 */
#include "codegen/cg.h"

/* attribute `name` (k values) or `def` everywhere */
static void conv_attr(const fsl_node *n, const char *name, int k, int64_t def, int64_t *out) {
  const int64_t *v = NULL;
  int len = fsl_attr_ints(n, name, &v);
  for (int i = 0; i < k; i++) out[i] = v && len > i ? v[i] : def;
}

/* A convolution's shape (fsl_codegen_conv): k spatial axes, the
 * attributes per axis, channels and group sizes. */
typedef struct conv_dims {
  const fsl_value *X, *W, *Y;
  const char *T;
  int k;
  int64_t st[FSL_MAX_RANK], dl[FSL_MAX_RANK], ld[FSL_MAX_RANK], pads[2 * FSL_MAX_RANK];
  int64_t C, M, Cg, Mg;
  int64_t KS, R, P;  /* window elements, Cg * KS (the implicit matmul's K), output positions per image */
} conv_dims;

/* The implicit matmul's tiles at k0 (tiles_kloop): A = the weights of the
 * group's output channels as a [Mg, R] matrix (row mm_), B = the input
 * under the window: row r_ = (input channel c_, window position kw<i>),
 * column p = this work-item's output position (coordinates y<2+i>); zero
 * in the padding, between lhs-dilated elements and past the edges. */
static void conv_load(em *e, const void *ctx) {
  const conv_dims *c = ctx;
  fsl_cg_line(e, "ta_[ly_][lx_] = mm_ < %lld && k0 + lx_ < %lld ? w[(g_ * %lld + mm_) * %lld + k0 + lx_] : (%s)0;",
              (long long)c->Mg, (long long)c->R, (long long)c->Mg, (long long)c->R, c->T);
  fsl_cg_line(e, "{");
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t r_ = k0 + ly_;");
  fsl_cg_line(e, "%s v_ = (%s)0;", c->T, c->T);
  fsl_cg_line(e, "if (r_ < %lld && p < %lld) {", (long long)c->R, (long long)c->P);
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t c_ = r_ / %lld;", (long long)c->KS);
  char ok[1024] = "", xi[512];
  snprintf(xi, sizeof xi, "(n_ * %lld + g_ * %lld + c_) * %lld", (long long)c->C, (long long)c->Cg,
           (long long)fsl_numel(c->k, c->X->dims + 2));
  for (int i = 0; i < c->k; i++) {
    fsl_cg_line(e, "const int64_t kw%d = (r_ / %lld) %% %lld;", i, (long long)fsl_numel(c->k - i - 1, c->W->dims + 3 + i),
                (long long)c->W->dims[2 + i]);
    /* position in the lhs-dilated, unpadded input */
    fsl_cg_line(e, "const int64_t p%d = y%d * %lld + kw%d * %lld - %lld;", i, i + 2, (long long)c->st[i], i,
                (long long)c->dl[i], (long long)c->pads[i]);
    size_t lo = strlen(ok), lx = strlen(xi);
    const char *and = i ? " && " : "";
    if (c->ld[i] > 1)
      snprintf(ok + lo, sizeof ok - lo, "%sp%d >= 0 && p%d %% %lld == 0 && p%d / %lld < %lld", and, i, i, (long long)c->ld[i],
               i, (long long)c->ld[i], (long long)c->X->dims[2 + i]);
    else snprintf(ok + lo, sizeof ok - lo, "%sp%d >= 0 && p%d < %lld", and, i, i, (long long)c->X->dims[2 + i]);
    snprintf(xi + lx, sizeof xi - lx, " + p%d / %lld * %lld", i, (long long)c->ld[i],
             (long long)fsl_numel(c->k - i - 1, c->X->dims + 3 + i));
  }
  fsl_cg_line(e, "if (%s) v_ = x[%s];", ok, xi);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_line(e, "tb_[ly_][lx_] = v_;");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* y[idx] = s (or the epilogue's value there) at output coordinates y<axis>. */
static void conv_store(em *e, const fsl_value *Y, const char *T, const char *idx) {
  coords c = {.rank = Y->rank};
  for (int i = 0; i < Y->rank; i++) {
    if (Y->dims[i] == 1) snprintf(c.c[i], CLEN, "0");
    else snprintf(c.c[i], CLEN, "y%d", i);
  }
  fsl_cg_epi_store(e, T, "s", &c, "y", idx);
}

/* The convolution as an implicit matmul per image and group (a dialect
 * with matmul tiles): Y[n, g*Mg + mm_, p] = sum over r of W[g*Mg + mm_, r]
 * * X_window[r, p], a tile of output channels (rows) x output positions
 * (columns) per work-group, r in the order of the direct convolution
 * (input channel, then the window). */
static void tiled_conv(em *e, const conv_dims *c) {
  int TL = e->d->group->tile;
  int64_t N = c->X->dims[0], group = c->C / c->Cg, tm = (c->Mg + TL - 1) / TL, tp = (c->P + TL - 1) / TL;
  fsl_cg_tiles_open(e, c->T, N * group * tm * tp);
  fsl_cg_line(e, "const int64_t n_ = t_ / %lld, g_ = (t_ / %lld) %% %lld, mm_ = (t_ / %lld) %% %lld * %d + ly_, p = t_ %% %lld * %d + lx_;",
              (long long)(group * tm * tp), (long long)(tm * tp), (long long)group, (long long)tp, (long long)tm, TL,
              (long long)tp, TL);
  for (int i = 0; i < c->k; i++)
    fsl_cg_line(e, "const int64_t y%d = (p / %lld) %% %lld;", i + 2, (long long)fsl_numel(c->k - i - 1, c->Y->dims + 3 + i),
                (long long)c->Y->dims[2 + i]);
  fsl_cg_tiles_kloop(e, "double", c->R, conv_load, c);
  fsl_cg_line(e, "if (mm_ < %lld && p < %lld) {", (long long)c->Mg, (long long)c->P);
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t y0 = n_, y1 = g_ * %lld + mm_;", (long long)c->Mg);
  char idx[96];
  snprintf(idx, sizeof idx, "(y0 * %lld + y1) * %lld + p", (long long)c->M, (long long)c->P);
  conv_store(e, c->Y, c->T, idx);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

fsl_status fsl_codegen_conv(const fsl_dialect *d, int id, const fsl_node *cv, const fsl_cg_epilogue *epi, fsl_sbuf *b,
                            fsl_cg_launch *launch) {
  if (!d || !cv || !b) return fsl_errorf(FSL_ERR_ARG, "fsl_codegen_conv: NULL argument");
  const fsl_value *X = cv->in[0], *W = cv->in[1], *Y = cv->out[0];
  fsl_dtype dt = X->dtype;
  if (!is_f(dt) || !fsl_cg_ctype(d, dt) || W->dtype != dt || Y->dtype != dt)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s codegen: conv on %s", d->name, fsl_dtype_name(dt));
  int k = X->rank - 2;
  if (k < 1 || W->rank != X->rank || Y->rank != X->rank)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s codegen: conv of rank %d", d->name, X->rank);
  int64_t st[FSL_MAX_RANK], dl[FSL_MAX_RANK], ld[FSL_MAX_RANK], pads[2 * FSL_MAX_RANK];
  conv_attr(cv, "strides", k, 1, st);
  conv_attr(cv, "dilations", k, 1, dl);
  conv_attr(cv, "lhs_dilation", k, 1, ld);
  conv_attr(cv, "pads", 2 * k, 0, pads);
  int64_t C = X->dims[1], M = W->dims[0], group = fsl_attr_int(cv, "group", 1);
  if (group < 1 || C % group || M % group)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s codegen: conv group %lld", d->name, (long long)group);
  int64_t Cg = C / group, Mg = M / group, total = fsl_value_numel(Y);
  const char *T = fsl_cg_ctype(d, dt), *S = d->buf_space;
  em e;
  fsl_sbuf body;
  fsl_cg_kernel_open(&e, &body, d, id, 2 + (epi ? epi->n_in : 0), 1);
  fsl_cg_line(&e, "const %s%s *x = (const %s%s *)in[0], *w = (const %s%s *)in[1];", S, T, S, T, S, T);
  if (!fsl_cg_epi_open(&e, epi, cv)) return fsl_cg_kernel_close(&e, &body, b);
  const char *TO = fsl_cg_ctype(d, epi ? epi->out->dtype : dt);
  fsl_cg_line(&e, "%s%s *y = (%s%s *)out[0];", S, TO, S, TO);
  if (fsl_cg_tiles_fit(d, dt)) {
    conv_dims c = {.X = X, .W = W, .Y = Y, .T = T, .k = k, .C = C, .M = M, .Cg = Cg, .Mg = Mg,
                   .KS = fsl_numel(k, W->dims + 2), .P = fsl_numel(k, Y->dims + 2)};
    c.R = Cg * c.KS;
    memcpy(c.st, st, sizeof st);
    memcpy(c.dl, dl, sizeof dl);
    memcpy(c.ld, ld, sizeof ld);
    memcpy(c.pads, pads, sizeof pads);
    tiled_conv(&e, &c);
    fsl_cg_launch L = e.launch;
    fsl_status s2 = fsl_cg_kernel_close(&e, &body, b);
    if (s2 == FSL_OK && launch) *launch = L;
    return s2;
  }
  char nt[32];
  snprintf(nt, sizeof nt, "%lld", (long long)total);
  fsl_cg_loop_open(&e, &(fsl_cg_loop){.kind = total * Cg > d->par_min ? FSL_CG_PARALLEL : FSL_CG_SERIAL, .var = "i_",
                                      .lo = "0", .hi = nt});
  fsl_cg_open_scope(&e);
  /* i_ = ((n * M + m) * o_1 + p_1) ... */
  int64_t inner = 1;
  for (int a = X->rank - 1; a >= 0; a--) {
    fsl_cg_line(&e, "const int64_t y%d = (i_ / %lld) %% %lld;", a, (long long)inner, (long long)Y->dims[a]);
    inner *= Y->dims[a];
  }
  fsl_cg_line(&e, "const int64_t g_ = y1 / %lld;", (long long)Mg);
  fsl_cg_line(&e, "double s = 0;");
  char ncg[32];
  snprintf(ncg, sizeof ncg, "%lld", (long long)Cg);
  fsl_cg_loop_open(&e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "c_", .lo = "0", .hi = ncg});
  fsl_cg_open_scope(&e);
  fsl_cg_line(&e, "const int64_t xc_ = (y0 * %lld + g_ * %lld + c_) * %lld, wc_ = (y1 * %lld + c_) * %lld;",
              (long long)C, (long long)Cg, (long long)fsl_numel(k, X->dims + 2), (long long)Cg,
              (long long)fsl_numel(k, W->dims + 2));
  for (int i = 0; i < k; i++) {
    char var[16], hi[32];
    snprintf(var, sizeof var, "k%d", i);
    snprintf(hi, sizeof hi, "%lld", (long long)W->dims[2 + i]);
    fsl_cg_loop_open(&e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = var, .lo = "0", .hi = hi});
    fsl_cg_open_scope(&e);
    /* position in the lhs-dilated, unpadded input; skipped in the padding and between dilated elements */
    fsl_cg_line(&e, "const int64_t p%d = y%d * %lld + k%d * %lld - %lld;", i, i + 2, (long long)st[i], i, (long long)dl[i],
                (long long)pads[i]);
    if (ld[i] > 1) fsl_cg_line(&e, "if (p%d < 0 || p%d %% %lld != 0) continue;", i, i, (long long)ld[i]);
    else fsl_cg_line(&e, "if (p%d < 0) continue;", i);
    fsl_cg_line(&e, "const int64_t q%d = p%d / %lld;", i, i, (long long)ld[i]);
    fsl_cg_line(&e, "if (q%d >= %lld) continue;", i, (long long)X->dims[2 + i]);
  }
  char xi[512] = "xc_", wi[512] = "wc_";
  for (int i = 0; i < k; i++) {
    int64_t xs = fsl_numel(k - i - 1, X->dims + 3 + i), ws = fsl_numel(k - i - 1, W->dims + 3 + i);
    size_t lx = strlen(xi), lw = strlen(wi);
    snprintf(xi + lx, sizeof xi - lx, " + q%d * %lld", i, (long long)xs);
    snprintf(wi + lw, sizeof wi - lw, " + k%d * %lld", i, (long long)ws);
  }
  fsl_cg_line(&e, "s += (double)w[%s] * (double)x[%s];", wi, xi);
  for (int i = 0; i <= k; i++) {
    fsl_cg_close_scope(&e);
    fsl_cg_line(&e, "}");
  }
  conv_store(&e, Y, T, "i_");
  fsl_cg_close_scope(&e);
  fsl_cg_line(&e, "}");
  if (launch) *launch = (fsl_cg_launch){0};
  return fsl_cg_kernel_close(&e, &body, b);
}
