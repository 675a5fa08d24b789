/*
 * conv.c — a direct convolution (fsl_codegen_conv, codegen.h): one
 * PARALLEL iteration per output element, the input channels of its group
 * and the kernel window as serial loops, accumulated in double (integers:
 * in 64 bits)
 * (docs/primitives.md, "conv"); in a dialect with matmul tiles, an
 * implicit matmul through local tiles (tiled_conv); a depthwise one in C,
 * row by row (dw_rows, fsl_codegen_conv_rows).
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

/* y[idx] = acc (or the epilogue's value there) at output coordinates y<axis>. */
static void conv_store(em *e, const fsl_value *Y, const char *T, const char *acc, const char *idx) {
  coords c = {.rank = Y->rank};
  for (int i = 0; i < Y->rank; i++) {
    if (Y->dims[i] == 1) snprintf(c.c[i], CLEN, "0");
    else snprintf(c.c[i], CLEN, "y%d", i);
  }
  fsl_cg_epi_store(e, T, acc, &c, "y", idx);
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
  conv_store(e, c->Y, c->T, "s", idx);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* Opens the SIMD loop "for (int64_t y3 = lo; y3 < hi; y3++)" over one
 * output row of dw_rows (red: a reduction it carries, or NULL). */
static void row_loop(em *e, const char *lo, const char *hi, const char *red) {
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "y3", .lo = lo, .hi = hi, .n_red = red ? 1 : 0,
                                     .red = {red}});
  fsl_cg_open_scope(e);
}

static void loop_close(em *e) {
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* The geometry of a 2-D depthwise convolution (dw_rows). */
typedef struct dw_geom {
  long long H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
  long long yl, yh, xl, xh; /* output rows and columns whose whole window lies inside the input */
} dw_geom;

static dw_geom dw_geometry(const conv_dims *c) {
  dw_geom g = {.H = c->X->dims[2], .W = c->X->dims[3], .OH = c->Y->dims[2], .OW = c->Y->dims[3],
               .KH = c->W->dims[2], .KW = c->W->dims[3], .sh = c->st[0], .sw = c->st[1], .dh = c->dl[0],
               .dw = c->dl[1], .ph = c->pads[0], .pw = c->pads[1]};
  /* y * s - p >= 0 and y * s + (K - 1) * d - p <= len - 1 */
  long long last_h = g.H - 1 + g.ph - (g.KH - 1) * g.dh, last_w = g.W - 1 + g.pw - (g.KW - 1) * g.dw;
  g.yl = (g.ph + g.sh - 1) / g.sh;
  g.yh = last_h < 0 ? 0 : last_h / g.sh + 1;
  g.xl = (g.pw + g.sw - 1) / g.sw;
  g.xh = last_w < 0 ? 0 : last_w / g.sw + 1;
  if (g.yh > g.OH) g.yh = g.OH;
  if (g.xh > g.OW) g.xh = g.OW;
  if (g.yh < g.yl) g.yh = g.yl;
  if (g.xh < g.xl) g.xh = g.xl;
  return g;
}

/* Output row y2 through the local row a_: one SIMD pass per window tap
 * over the columns whose input lies inside the image (the padding adds
 * nothing), then the row stored. */
static void dw_row_passes(em *e, const conv_dims *c, const dw_geom *g, const char *idx) {
  char ow[32];
  snprintf(ow, sizeof ow, "%lld", g->OW);
  fsl_cg_line(e, "%s a_[%lld];", c->T, g->OW);
  row_loop(e, "0", ow, NULL);
  fsl_cg_line(e, "a_[y3] = (%s)0;", c->T);
  loop_close(e);
  fsl_cg_line(e, "for (int64_t k0 = 0; k0 < %lld; k0++) {", g->KH);
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t iy_ = y2 * %lld + k0 * %lld - %lld;", g->sh, g->dh, g->ph);
  fsl_cg_line(e, "if (iy_ < 0 || iy_ >= %lld) continue;", g->H);
  fsl_cg_line(e, "const %s *xr_ = xc_ + iy_ * %lld;", c->T, g->W);
  fsl_cg_line(e, "for (int64_t k1 = 0; k1 < %lld; k1++) {", g->KW);
  fsl_cg_open_scope(e);
  /* input column y3 * sw + o_ lies in [0, W) for y3 in [lo_, hi_) */
  fsl_cg_line(e, "const %s w_ = wc_[k0 * %lld + k1];", c->T, g->KW);
  fsl_cg_line(e, "const int64_t o_ = k1 * %lld - %lld;", g->dw, g->pw);
  fsl_cg_line(e, "const int64_t lo_ = o_ >= 0 ? 0 : (%lld - o_) / %lld;", g->sw - 1, g->sw);
  fsl_cg_line(e, "int64_t hi_ = %lld - o_ <= 0 ? 0 : (%lld - o_) / %lld;", g->W, g->W + g->sw - 1, g->sw);
  fsl_cg_line(e, "if (hi_ > %lld) hi_ = %lld;", g->OW, g->OW);
  row_loop(e, "lo_", "hi_", NULL);
  fsl_cg_line(e, "a_[y3] += w_ * xr_[y3 * %lld + o_];", g->sw);
  loop_close(e);
  loop_close(e);
  loop_close(e);
  row_loop(e, "0", ow, "|:e_");
  conv_store(e, c->Y, c->T, "a_[y3]", idx);
  loop_close(e);
}

/* Columns [lo, hi) of an output row whose window rows all lie inside the
 * image, one by one, each tap checked against the row's ends. */
static void dw_edge_cols(em *e, const conv_dims *c, const dw_geom *g, long long lo, long long hi, const char *idx) {
  if (lo >= hi) return;
  fsl_cg_line(e, "for (int64_t y3 = %lld; y3 < %lld; y3++) {", lo, hi);
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "%s s_ = (%s)0;", c->T, c->T);
  for (long long k0 = 0; k0 < g->KH; k0++)
    for (long long k1 = 0; k1 < g->KW; k1++) {
      fsl_cg_line(e, "{");
      fsl_cg_open_scope(e);
      fsl_cg_line(e, "const int64_t ix_ = y3 * %lld + %lld;", g->sw, k1 * g->dw - g->pw);
      fsl_cg_line(e, "if (ix_ >= 0 && ix_ < %lld) s_ += wc_[%lld] * x%lld_[ix_];", g->W, k0 * g->KW + k1, k0);
      loop_close(e);
    }
  conv_store(e, c->Y, c->T, "s_", idx);
  loop_close(e);
}

#define DW_FUSED_TAPS 49 /* windows up to 7x7 sum every tap in one pass */

/* Output row y2 (r_ = the row's index over all images and channels; x<k0>_
 * declared here) of a row whose window rows all lie inside the image: its
 * columns [xl, xh) summing every tap in one SIMD pass (one load per tap, no
 * branch per element) unless `interior` is false (done already), the few
 * columns at its ends one by one. */
static void dw_inner_row(em *e, const conv_dims *c, const dw_geom *g, const char *idx, bool interior) {
  for (long long k0 = 0; k0 < g->KH; k0++)
    fsl_cg_line(e, "const %s *x%lld_ = xc_ + (y2 * %lld + %lld) * %lld;", c->T, k0, g->sh, k0 * g->dh - g->ph, g->W);
  dw_edge_cols(e, c, g, 0, g->xl, idx);
  if (interior) {
    char lo[32], xh[32];
    snprintf(lo, sizeof lo, "%lld", g->xl);
    snprintf(xh, sizeof xh, "%lld", g->xh);
    row_loop(e, lo, xh, "|:e_");
    fsl_cg_line(e, "%s s_ = (%s)0;", c->T, c->T);
    for (long long k0 = 0; k0 < g->KH; k0++)
      for (long long k1 = 0; k1 < g->KW; k1++)
        fsl_cg_line(e, "s_ += wc_[%lld] * x%lld_[y3 * %lld + %lld];", k0 * g->KW + k1, k0, g->sw, k1 * g->dw - g->pw);
    conv_store(e, c->Y, c->T, "s_", idx);
    loop_close(e);
  }
  dw_edge_cols(e, c, g, g->xh, g->OW, idx);
}

/* Whether the epilogue may raise error bits (a gather node checks its indices). */
static bool epi_checks(const em *e) {
  for (int i = 0; e->epi && i < e->epi->n_nodes; i++)
    if (fsl_op_get(e->epi->nodes[i]->op)->kind == FSL_KIND_GATHER) return true;
  return false;
}

/* A 2-D depthwise convolution (one input channel per group) in a dialect
 * whose threads work alone (C), every tap of a window summed in one SIMD
 * pass where the window lies inside the image, the taps in the direct
 * convolution's order:
 * - stride 1 and as many output columns as input ones
 *   ("same" padding; not with an epilogue that checks gather indices): one
 *   PARALLEL iteration per image and channel, whose rows yl..yh-1 are one
 *   flat SIMD loop (input element = output element + a constant per tap;
 *   the end columns it computes from the neighbouring row are then
 *   written again one by one), the other rows through dw_row_passes;
 * - otherwise one PARALLEL iteration per output row (image y0, channel y1,
 *   row y2): dw_inner_row where its window rows lie inside the image,
 *   else (and for windows over 49 taps) dw_row_passes. */
static void dw_rows(em *e, const conv_dims *c) {
  dw_geom g = dw_geometry(c);
  long long N = c->X->dims[0], M = c->M;
  bool fused = g.yl < g.yh && g.xl < g.xh && g.KH * g.KW <= DW_FUSED_TAPS;
  bool flat = fused && g.sh == 1 && g.sw == 1 && g.OW == g.W && !epi_checks(e);
  char hi[32], idx[64];
  if (!e->epi) fsl_cg_line(e, "int err_ = 0; /* no epilogue: no error bits */"); /* else fsl_cg_epi_open's */
  snprintf(hi, sizeof hi, "%lld", flat ? N * M : N * M * g.OH);
  snprintf(idx, sizeof idx, "r_ * %lld + y3", g.OW);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = fsl_value_numel(c->Y) * c->KS > e->d->par_min ? FSL_CG_PARALLEL : FSL_CG_SERIAL,
                                     .var = flat ? "p_" : "r_", .lo = "0", .hi = hi, .n_red = 1, .red = {"|:err_"}});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "int e_ = 0;");
  if (flat) fsl_cg_line(e, "const int64_t y0 = p_ / %lld, y1 = p_ %% %lld;", M, M);
  else fsl_cg_line(e, "const int64_t y0 = r_ / %lld, y1 = r_ / %lld %% %lld, y2 = r_ %% %lld;", M * g.OH, g.OH, M, g.OH);
  fsl_cg_line(e, "const %s *xc_ = x + (y0 * %lld + y1 / %lld) * %lld, *wc_ = w + y1 * %lld;", c->T, (long long)c->C,
              (long long)c->Mg, g.H * g.W, g.KH * g.KW);
  if (flat) {
    char lo[32], qh[32], fidx[64];
    snprintf(lo, sizeof lo, "%lld", g.yl * g.OW + g.xl);
    snprintf(qh, sizeof qh, "%lld", (g.yh - 1) * g.OW + g.xh);
    snprintf(fidx, sizeof fidx, "p_ * %lld + q_", g.OH * g.OW);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "q_", .lo = lo, .hi = qh, .n_red = 1, .red = {"|:e_"}});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int64_t y2 = q_ / %lld, y3 = q_ %% %lld;", g.OW, g.OW);
    fsl_cg_line(e, "%s s_ = (%s)0;", c->T, c->T);
    for (long long k0 = 0; k0 < g.KH; k0++)
      for (long long k1 = 0; k1 < g.KW; k1++)
        fsl_cg_line(e, "s_ += wc_[%lld] * xc_[q_ + %lld];", k0 * g.KW + k1,
                    (k0 * g.dh - g.ph) * g.W + k1 * g.dw - g.pw);
    conv_store(e, c->Y, c->T, "s_", fidx);
    loop_close(e);
    fsl_cg_line(e, "for (int64_t y2 = %lld; y2 < %lld; y2++) {", g.yl, g.yh);
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int64_t r_ = p_ * %lld + y2;", g.OH);
    dw_inner_row(e, c, &g, idx, false);
    loop_close(e);
    fsl_cg_line(e, "for (int64_t y2 = 0; y2 < %lld; y2++) {", g.OH);
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "if (y2 == %lld) y2 = %lld;", g.yl, g.yh);
    fsl_cg_line(e, "if (y2 >= %lld) break;", g.OH);
    fsl_cg_line(e, "const int64_t r_ = p_ * %lld + y2;", g.OH);
    dw_row_passes(e, c, &g, idx);
    loop_close(e);
  } else if (fused) {
    fsl_cg_line(e, "if (y2 >= %lld && y2 < %lld) {", g.yl, g.yh);
    fsl_cg_open_scope(e);
    dw_inner_row(e, c, &g, idx, true);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "} else {");
    fsl_cg_open_scope(e);
    dw_row_passes(e, c, &g, idx);
    loop_close(e);
  } else {
    dw_row_passes(e, c, &g, idx);
  }
  fsl_cg_line(e, "err_ |= e_;");
  loop_close(e);
  if (!e->epi) fsl_cg_line(e, "(void)err_;");
}

bool fsl_codegen_conv_rows(const fsl_dialect *d, const fsl_node *cv) {
  if (!d || !cv || cv->op != FSL_OP_conv || cv->n_in < 2 || !cv->out[0] || d->par_min <= 0 || d->group) return false;
  const fsl_value *X = cv->in[0], *W = cv->in[1], *Y = cv->out[0];
  int64_t ld[2];
  conv_attr(cv, "lhs_dilation", 2, 1, ld);
  return X->rank == 4 && W->rank == 4 && Y->rank == 4 && is_f(X->dtype) && W->dtype == X->dtype &&
         Y->dtype == X->dtype && fsl_cg_ctype(d, X->dtype) && !fsl_cg_half(d, X->dtype) && W->dims[1] == 1 &&
         fsl_attr_int(cv, "group", 1) == X->dims[1] && ld[0] == 1 && ld[1] == 1 && Y->dims[3] <= 4096;
}

bool fsl_codegen_conv_dot(const fsl_dialect *d, const fsl_node *cv) {
  if (!d || !cv || cv->op != FSL_OP_conv || cv->n_in < 2 || !cv->out[0] || d->par_min <= 0 || d->group) return false;
  const fsl_value *X = cv->in[0], *W = cv->in[1], *Y = cv->out[0];
  int k = X->rank - 2;
  return k >= 1 && W->rank == X->rank && Y->rank == X->rank && is_f(X->dtype) && W->dtype == X->dtype &&
         Y->dtype == X->dtype && fsl_cg_ctype(d, X->dtype) && !fsl_cg_half(d, X->dtype) && fsl_attr_int(cv, "group", 1) == 1 &&
         W->dims[1] == X->dims[1] && fsl_numel(k, X->dims + 2) == 1 && fsl_numel(k, W->dims + 2) == 1 &&
         fsl_numel(k, Y->dims + 2) == 1;
}

/* y[n, m] = the dot product of x's row n and w's row m, four output
 * channels per iteration (four SIMD sums over the input channels in one
 * pass over x's row; the last channels one by one), in the element type
 * (as oneDNN; the sums reassociated), stored through the epilogue. */
static void dot_rows(em *e, const conv_dims *c) {
  long long N = (long long)c->X->dims[0], C = (long long)c->C, M = (long long)c->M, nrb = (M + 3) / 4;
  const char *T = c->T, *S = e->d->buf_space;
  char nt[32], nc[32], idx[64];
  snprintf(nt, sizeof nt, "%lld", N * nrb);
  snprintf(nc, sizeof nc, "%lld", C);
  snprintf(idx, sizeof idx, "y0 * %lld + y1", M);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = N * M * C > e->d->par_min ? FSL_CG_PARALLEL : FSL_CG_SERIAL, .var = "t_",
                                     .lo = "0", .hi = nt});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t y0 = t_ / %lld, m0_ = t_ %% %lld * 4;", nrb, nrb);
  fsl_cg_line(e, "const %s%s *xr_ = x + y0 * %lld;", S, T, C);
  if (M >= 4) {
    if (M % 4) fsl_cg_line(e, "if (m0_ + 4 <= %lld) {", M);
    if (M % 4) fsl_cg_open_scope(e);
    fsl_cg_line(e, "const %s%s *w0_ = w + m0_ * %lld, *w1_ = w0_ + %lld, *w2_ = w1_ + %lld, *w3_ = w2_ + %lld;", S, T, C,
                C, C, C);
    fsl_cg_line(e, "%s s0 = 0, s1 = 0, s2 = 0, s3 = 0;", T);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "c_", .lo = "0", .hi = nc, .n_red = 4,
                                       .red = {"+:s0", "+:s1", "+:s2", "+:s3"}});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const %s xv_ = xr_[c_];", T);
    fsl_cg_line(e, "s0 += xv_ * w0_[c_]; s1 += xv_ * w1_[c_]; s2 += xv_ * w2_[c_]; s3 += xv_ * w3_[c_];");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    for (int q = 0; q < 4; q++) {
      char sq[8];
      snprintf(sq, sizeof sq, "s%d", q);
      fsl_cg_line(e, "{");
      fsl_cg_open_scope(e);
      fsl_cg_line(e, "const int64_t y1 = m0_ + %d;", q);
      conv_store(e, c->Y, T, sq, idx);
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
    if (M % 4) fsl_cg_close_scope(e);
  }
  if (M % 4) {
    if (M >= 4) fsl_cg_line(e, "} else {");
    if (M >= 4) fsl_cg_open_scope(e);
    char mhi[32];
    snprintf(mhi, sizeof mhi, "%lld", M);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "y1", .lo = "m0_", .hi = mhi});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const %s%s *wr_ = w + y1 * %lld;", S, T, C);
    fsl_cg_line(e, "%s s = 0;", T);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "c_", .lo = "0", .hi = nc, .n_red = 1, .red = {"+:s"}});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "s += xr_[c_] * wr_[c_];");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    conv_store(e, c->Y, T, "s", idx);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    if (M >= 4) fsl_cg_close_scope(e);
    if (M >= 4) fsl_cg_line(e, "}");
  }
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

fsl_status fsl_codegen_conv(const fsl_dialect *d, int id, const fsl_node *cv, const fsl_cg_epilogue *epi, fsl_sbuf *b,
                            fsl_cg_launch *launch) {
  if (!d || !cv || !b) return fsl_errorf(FSL_ERR_ARG, "fsl_codegen_conv: NULL argument");
  const fsl_value *X = cv->in[0], *W = cv->in[1], *Y = cv->out[0];
  fsl_dtype dt = X->dtype;
  if (dt == FSL_DT_BOOL || !fsl_cg_ctype(d, dt) || fsl_cg_half(d, dt) || W->dtype != dt || Y->dtype != dt)
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
  const char *TO = fsl_cg_stype(d, epi ? epi->out->dtype : dt);
  fsl_cg_line(&e, "%s%s *y = (%s%s *)out[0];", S, TO, S, TO);
  conv_dims c = {.X = X, .W = W, .Y = Y, .T = T, .k = k, .C = C, .M = M, .Cg = Cg, .Mg = Mg,
                 .KS = fsl_numel(k, W->dims + 2), .P = fsl_numel(k, Y->dims + 2)};
  c.R = Cg * c.KS;
  memcpy(c.st, st, sizeof st);
  memcpy(c.dl, dl, sizeof dl);
  memcpy(c.ld, ld, sizeof ld);
  memcpy(c.pads, pads, sizeof pads);
  bool dot = fsl_codegen_conv_dot(d, cv);
  if (dot || fsl_codegen_conv_rows(d, cv)) {
    if (dot) dot_rows(&e, &c);
    else dw_rows(&e, &c);
    if (launch) *launch = (fsl_cg_launch){0};
    return fsl_cg_kernel_close(&e, &body, b);
  }
  if (is_f(dt) && fsl_cg_tiles_fit(d, dt)) {
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
  /* floats accumulate in double; integers in 64 bits (ConvInteger's
   * int32 operands: exact, wrapping to the output type as the reference) */
  const char *acc = is_f(dt) ? "double" : is_s(dt) ? "int64_t" : "uint64_t";
  fsl_cg_line(&e, "%s s = 0;", acc);
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
  fsl_cg_line(&e, "s += (%s)w[%s] * (%s)x[%s];", acc, wi, acc, xi);
  for (int i = 0; i <= k; i++) {
    fsl_cg_close_scope(&e);
    fsl_cg_line(&e, "}");
  }
  conv_store(&e, Y, T, "s", "i_");
  fsl_cg_close_scope(&e);
  fsl_cg_line(&e, "}");
  if (launch) *launch = (fsl_cg_launch){0};
  return fsl_cg_kernel_close(&e, &body, b);
}
