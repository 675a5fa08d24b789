/*
 * columns.c — REDUCE kernels as columns (cg.h): per row of the kept space
 * without its innermost axis, one accumulator per element of that axis,
 * updated by a SIMD loop across it inside the loops over the reduced axes.
 * For reductions over outer axes (a column sum), over sliding windows
 * (pooling), and over inputs stored with that axis innermost (pooling a
 * channels-last convolution output), where rows would read with a stride
 * or be too short for SIMD.
 */
#include "codegen/cg.h"

/* What the loops of a float max/min column row note about NaNs: per
 * column flags n<k>[o] beside the accumulators (UPD_BOTH: rows shorter
 * than ROW_FLAG_MIN, where a reduction per SIMD loop costs more than the
 * flag arrays), only whether the row read one, rn_ (UPD_ROW_FLAG: no flag
 * arrays in the loops), or only the per-column flags (UPD_FLAGS: the
 * exact pass of a row that read a NaN, which leaves the accumulators
 * alone). */
typedef enum { UPD_BOTH, UPD_ROW_FLAG, UPD_FLAGS } upd_mode;
#define ROW_FLAG_MIN 64

/* The update of accumulator a<k>[o] by value v (mode: what it notes of
 * a NaN, upd_mode). */
static void col_update(em *e, const fsl_node *n, const char *acc, int k, const char *o, const char *v,
                       const fsl_cg_red_acc *a, upd_mode mode) {
  bool tn = fsl_cg_tracks_nan(e, n);
  const char *sym = n->op == FSL_OP_reduce_sum ? "+" : "*";
  switch (n->op) {
  case FSL_OP_reduce_sum:
  case FSL_OP_reduce_prod:
    if (mode != UPD_FLAGS) fsl_cg_line(e, "%s%d[%s] %s= (%s)%s;", acc, k, o, sym, a->type, v);
    break;
  default: {
    const char *cmp = n->op == FSL_OP_reduce_max ? ">" : "<";
    if (tn && mode == UPD_ROW_FLAG) fsl_cg_line(e, "rn_ |= %s != %s;", v, v);
    else if (tn) fsl_cg_line(e, "n%d[%s] |= %s != %s;", k, o, v, v);
    if (mode != UPD_FLAGS)
      fsl_cg_line(e, "%s%d[%s] = (%s)%s %s %s%d[%s] ? (%s)%s : %s%d[%s];", acc, k, o, a->type, v, cmp, acc, k, o, a->type,
                  v, acc, k, o);
  }
  }
}

/* Whether v depends on value y through the kernel's nodes; true past 64
 * nodes deep, where it cannot tell (the caller then keeps the row form,
 * which is correct for any dependence). */
static bool depends(const em *e, const fsl_value *v, const fsl_value *y, int depth) {
  if (v == y) return true;
  if (!e->inside[v->id]) return false;
  if (depth > 64) return true;
  const fsl_node *n = v->producer;
  for (int i = 0; i < n->n_in; i++)
    if (depends(e, n->in[i], y, depth + 1)) return true;
  return false;
}

/* Serial loops j<a> over the reduced axes ja[0..nj) of x, clamped by
 * the window row w where there is one, the innermost up to last_hi where
 * that is positive, each opened with its scope; with c, those coordinates
 * of c become the loop variables. */
static void reduced_loops(em *e, const fsl_value *x, const int *ja, int nj, const fsl_cg_win_row *w, coords *c,
                          int64_t last_hi) {
  for (int q = 0; q < nj; q++) {
    char jv[CLEN], jd[32];
    snprintf(jv, CLEN, "j%d", ja[q]);
    snprintf(jd, sizeof jd, "%lld", (long long)(q == nj - 1 && last_hi > 0 ? last_hi : x->dims[ja[q]]));
    if (c) memcpy(c->c[ja[q]], jv, CLEN);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = jv, .lo = w ? w->lo[q] : "0",
                                       .hi = w ? w->hi[q] : jd});
    fsl_cg_open_scope(e);
  }
}

/* Closes n loops opened with their scopes. */
static void close_loops(em *e, int n) {
  for (int q = 0; q < n; q++) {
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
}

/* The results r<k> of reductions 0..nk-1 at column o, from their
 * accumulators and NaN flags, for what the loop body reads of them
 * (e->n_red = nk). */
static void col_results(em *e, const fsl_node **red, int nk, const char *o) {
  for (int k = 0; k < nk; k++) {
    const char *Y = fsl_cg_ctype(e->d, red[k]->out[0]->dtype);
    if (fsl_cg_tracks_nan(e, red[k])) fsl_cg_line(e, "const %s r%d = n%d[%s] ? (%s)NAN : (%s)a%d[%s];", Y, k, k, o, Y, Y, k, o);
    else fsl_cg_line(e, "const %s r%d = (%s)a%d[%s];", Y, k, Y, k, o);
  }
  e->n_red = nk;
  e->red_cols = true;
}

/* The direct form of a column row (fsl_cg_cols): the loops over the
 * reduced axes (ja[0..nj), clamped by the window row w where there is
 * one), then the SIMD loop across the innermost kept axis o in [lo, hi),
 * L long, updating the accumulators of reductions k0..k1-1 (col_update,
 * mode), whose inputs may read the results of those before k0.  With
 * half > 0 (no window), two streams: the innermost reduced loop runs over
 * [0, half), and each step updates a<k> at its coordinate and b<k> at the
 * coordinate + half (merge_streams adds them up after). */
static bool direct(em *e, const fsl_node **red, int k0, int k1, const fsl_cg_win_row *w, const fsl_cg_red_acc *a,
                   coords *c, const char *o, const char *lo, const char *hi, int64_t L, const int *ja, int nj,
                   upd_mode mode, int64_t half) {
  loop_ctx lc;
  /* the window loops, then the SIMD loop across the innermost kept axis */
  fsl_cg_loop_begin(e, &lc, "j", o);
  reduced_loops(e, red[0]->in[0], ja, nj, w, c, half);
  char olo[CLEN], ohi[CLEN];
  snprintf(olo, CLEN, "%s", lo);
  snprintf(ohi, CLEN, "%s", hi);
  if (w && w->simd_q >= 0) fsl_cg_win_simd_range(e, w, L, olo, ohi); /* nch is 1 */
  fsl_cg_loop l = {.kind = FSL_CG_SIMD, .var = o, .lo = olo, .hi = ohi, .n_red = 1, .red = {"|:e_"}};
  if (mode == UPD_ROW_FLAG) l.red[l.n_red++] = "|:rn_";
  fsl_cg_loop_open(e, &l);
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  col_results(e, red, k0, o);
  bool ok = true;
  coords ch = *c;
  for (int s = 0; s < (half > 0 ? 2 : 1) && ok; s++) {
    /* each stream in a block and scope of its own: the values it computes
     * hold at its own coordinates */
    fsl_cg_line(e, "{");
    fsl_cg_open_scope(e);
    if (s == 1) {
      fsl_cg_line(e, "const int64_t jh_ = j%d + %lld;", ja[nj - 1], (long long)half);
      snprintf(ch.c[ja[nj - 1]], CLEN, "jh_");
    }
    for (int k = k0; k < k1 && ok; k++) {
      char v[CLEN];
      ok = w ? fsl_cg_win_ev(e, w, c, v) : fsl_cg_ev(e, red[k]->in[0], s ? &ch : c, v);
      if (ok) col_update(e, red[k], s ? "b" : "a", k, o, v, &a[k], mode);
    }
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  close_loops(e, nj + 1);
  fsl_cg_loop_end(e, &lc);
  return ok;
}

/* Accumulators b<k> of the second stream (direct) into a<k>, for
 * reductions k0..k1-1 over columns o in [lo, hi); the NaN flags are
 * shared, so a max/min compares values only. */
static void merge_streams(em *e, const fsl_node **red, int k0, int k1, const char *o, const char *lo, const char *hi) {
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = lo, .hi = hi});
  for (int k = k0; k < k1; k++) {
    fsl_op op = red[k]->op;
    if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)
      fsl_cg_line(e, "  a%d[%s] %s= b%d[%s];", k, o, op == FSL_OP_reduce_sum ? "+" : "*", k, o);
    else
      fsl_cg_line(e, "  a%d[%s] = b%d[%s] %s a%d[%s] ? b%d[%s] : a%d[%s];", k, o, k, o,
                  op == FSL_OP_reduce_max ? ">" : "<", k, o, k, o, k, o);
  }
  fsl_cg_line(e, "}");
}

/* The column pass of a separable window row (separable): the clamped
 * loops over the window axes other than w->simd_q around a contiguous
 * SIMD loop over the lin columns jc_ of X, taking the max (min) of each
 * column into t0[jc_] and noting NaNs (mode, upd_mode: per column in
 * tn0[jc_], or in the row's rn_). */
static bool column_pass(em *e, const fsl_node *n, const fsl_cg_win_row *w, const fsl_cg_red_acc *a, bool nan, coords *c,
                        const char *o, const char *lin, upd_mode mode) {
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "j", o);
  for (int q = 0; q < w->nn; q++) {
    if (q == w->simd_q) continue;
    memcpy(c->c[w->axis[q]], w->var[q], CLEN);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = w->var[q], .lo = w->lo[q], .hi = w->hi[q]});
    fsl_cg_open_scope(e);
  }
  fsl_cg_loop l = {.kind = FSL_CG_SIMD, .var = "jc_", .lo = "0", .hi = lin, .n_red = 1, .red = {"|:e_"}};
  if (nan && mode == UPD_ROW_FLAG) l.red[l.n_red++] = "|:rn_";
  fsl_cg_loop_open(e, &l);
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  char v[CLEN];
  bool ok = fsl_cg_win_ev_col(e, w, c, "jc_", v);
  if (ok && nan) fsl_cg_line(e, mode == UPD_ROW_FLAG ? "rn_ |= %s != %s;" : "tn0[jc_] |= %s != %s;", v, v);
  if (ok && mode != UPD_FLAGS)
    fsl_cg_line(e, "t0[jc_] = (%s)%s %s t0[jc_] ? (%s)%s : t0[jc_];", a->type, v,
                n->op == FSL_OP_reduce_max ? ">" : "<", a->type, v);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  for (int q = 0; q < w->nn; q++) {
    if (q == w->simd_q) continue;
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  fsl_cg_loop_end(e, &lc);
  return ok;
}

/* The window pass of a separable window row (separable): per window
 * position j along the SIMD axis, a SIMD loop over the row's outputs o
 * (clamped as the direct form clamps it) reading column o*s + j*d - pb:
 * the max (min) of t0 into a0[o], and (nan, unless mode is UPD_ROW_FLAG)
 * tn0 into n0[o]. */
static void window_pass(em *e, const fsl_node *n, const fsl_cg_win_row *w, bool nan, const char *o, int64_t L,
                        upd_mode mode) {
  int qs = w->simd_q, i = w->axis[qs] - w->src->rank;
  char K[32], olo[CLEN], ohi[CLEN];
  snprintf(K, sizeof K, "%lld", (long long)n->in[0]->dims[w->axis[qs]]);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = w->var[qs], .lo = "0", .hi = K});
  fsl_cg_open_scope(e);
  fsl_cg_win_simd_range(e, w, L, olo, ohi);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = olo, .hi = ohi});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t jc_ = %s*%lld + %s*%lld - %lld;", o, (long long)w->stride[i], w->var[qs],
              (long long)w->dil[i], (long long)w->pad[i]);
  if (nan && mode != UPD_ROW_FLAG) fsl_cg_line(e, "n0[%s] |= tn0[jc_];", o);
  if (mode != UPD_FLAGS)
    fsl_cg_line(e, "a0[%s] = t0[jc_] %s a0[%s] ? t0[jc_] : a0[%s];", o, n->op == FSL_OP_reduce_max ? ">" : "<", o, o);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* The per-column NaN flags of a separable row, tn0[lin], cleared. */
static void flag_columns(em *e, const char *lin) {
  fsl_cg_line(e, "int tn0[%s];", lin);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "jc_", .lo = "0", .hi = lin});
  fsl_cg_line(e, "  tn0[jc_] = 0;");
  fsl_cg_line(e, "}");
}

/* A separable max/min window row (fsl_cg_cols): t0[Lin] gets, per column
 * of X, the max over the window positions on the other window axes (a
 * contiguous SIMD loop over the Lin columns); then the max along the SIMD
 * axis's window positions of those goes into a0[o].  The same result as
 * the direct form: max is associative and every column read lies inside
 * X.  Floats over rows of ROW_FLAG_MIN columns or more note only whether
 * the row read a NaN (rn_), so that the loops carry no flag arrays; a row
 * that did (rare) runs both passes again for the per-column flags tn0,
 * then per-output ones in n0. */
static bool separable(em *e, const fsl_node *n, const fsl_cg_win_row *w, const fsl_cg_red_acc *a, bool nan,
                      coords *c, const char *o, int64_t L, int64_t Lin) {
  char lin[32];
  snprintf(lin, sizeof lin, "%lld", (long long)Lin);
  upd_mode mode = nan && Lin >= ROW_FLAG_MIN ? UPD_ROW_FLAG : UPD_BOTH;
  fsl_cg_line(e, "%s t0[%lld];", a->type, (long long)Lin);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "jc_", .lo = "0", .hi = lin});
  fsl_cg_line(e, "  t0[jc_] = %s;", a->init);
  fsl_cg_line(e, "}");
  if (mode == UPD_ROW_FLAG) fsl_cg_line(e, "int rn_ = 0;");
  else if (nan) flag_columns(e, lin);
  if (!column_pass(e, n, w, a, nan, c, o, lin, mode)) return false;
  window_pass(e, n, w, nan, o, L, mode);
  if (mode != UPD_ROW_FLAG) return true;
  fsl_cg_line(e, "if (rn_) {");
  fsl_cg_open_scope(e);
  flag_columns(e, lin);
  bool ok = column_pass(e, n, w, a, nan, c, o, lin, UPD_FLAGS);
  if (ok) window_pass(e, n, w, nan, o, L, UPD_FLAGS);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  return ok;
}

/* The row-space outputs of a column row (cls[j] == 2; a softmax's
 * quotient): the loops over the reduced axes ja[0..nj) around a SIMD loop
 * across the innermost kept axis o in [lo, hi), storing each at its
 * coordinates oc[j] with every reduction's result at hand. */
static bool row_outputs(em *e, const fsl_node **red, int nr, const int *cls, const coords *oc, const char *o,
                        const char *lo, const char *hi, const int *ja, int nj) {
  const fsl_cg_spec *s = e->s;
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "j", o);
  reduced_loops(e, red[0]->in[0], ja, nj, NULL, NULL, 0);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = lo, .hi = hi, .n_red = 1, .red = {"|:e_"}});
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  col_results(e, red, nr, o);
  bool ok = true;
  for (int j = 0; j < s->n_out && ok; j++)
    if (cls[j] == 2) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
  close_loops(e, nj + 1);
  fsl_cg_loop_end(e, &lc);
  return ok;
}

#define COL_MIN 8               /* the innermost kept axis: at least a vector */
#define COL_BYTES (32 * 1024)   /* accumulators of a row: in L1 */
#define COL_ROWS 16             /* fewer rows than this: the innermost kept axis is split in slots */
#define COL_CHUNK 16            /* a slot holds whole units of this many columns (a cache line of f32) */
#define COL_FLOAT_SUM 32        /* f32 sums of at most this many elements add in float (error 32 ulp at worst) */

bool fsl_cg_cols(em *e, const fsl_node **red, int nr, const int *cls, const coords *oc, int s0, bool *used) {
  const fsl_cg_spec *s = e->s;
  const fsl_value *x0 = red[0]->in[0];
  *used = false;
  if (e->d->par_min == 0 || e->grp) return true;
  /* row-space outputs (a softmax's): loops of their own after the
   * reductions; kept-space ones (or a pass's scratch): a loop after those */
  bool rows_out = false, kept_out = !cls;
  for (int j = 0; cls && j < s->n_out; j++) {
    rows_out = rows_out || cls[j] != 1;
    kept_out = kept_out || cls[j] == 1;
  }
  long long bytes = 0;
  int r = x0->rank, la = -1, last_red = -1;
  unsigned m0 = fsl_cg_red_mask(red[0]);
  for (int i = 0; i < r; i++) {
    if (!(m0 & (1u << i)) && x0->dims[i] > 1) la = i;
    if ((m0 & (1u << i)) && x0->dims[i] > 1) last_red = i;
  }
  /* a window over an input read in a layout (channels-last): the SIMD loop
   * runs along the layout's innermost axis, so each tap reads a contiguous
   * row of X; in the fused body only (a pass's scratch is flat over the
   * kept space in its logical order) */
  int lw = cls ? fsl_cg_layout_window_axis(e, x0) : -1;
  if (lw >= 0 && !(m0 & (1u << lw))) la = lw;
  if (la < 0 || x0->dims[la] < COL_MIN) return true;
  int64_t L = x0->dims[la];
  bool win = false, staged = false;
  for (int k = 0; k < nr; k++) {
    fsl_op op = red[k]->op;
    bool wk = fsl_cg_windowed(e, red[k]->in[0], 0);
    win = win || wk;
    if ((op != FSL_OP_reduce_sum && op != FSL_OP_reduce_prod && op != FSL_OP_reduce_max && op != FSL_OP_reduce_min) ||
        (la < last_red && !wk && !fsl_cg_contig_along(e, red[k]->in[0], la)))
      return true;
    /* a reduction reading an earlier one's result (a softmax's sum of
     * exp(x - max)) runs in a sweep of its own after it; not past it */
    for (int j = 0; j < nr; j++)
      if (depends(e, red[k]->in[0], red[j]->out[0], 0)) {
        if (j >= k || !cls) return true;
        staged = true;
      }
    bytes += (long long)L * ((is_f(x0->dtype) && (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)) ? 8 : 12);
  }
  /* columns of those kernels are only for reads along the innermost kept
   * axis (a softmax over the channels of an NHWC buffer keeps its rows) */
  for (int k = 0; k < nr && (staged || rows_out); k++)
    if (win || fsl_cg_strided_along(e, red[k]->in[0], la)) return true;
  int kept[FSL_MAX_RANK], nk = 0, ja[FSL_MAX_RANK], nj = 0;
  int64_t rows = 1, inner = 1;
  for (int i = 0; i < r; i++) {
    if (m0 & (1u << i)) {
      inner *= x0->dims[i];
      if (x0->dims[i] > 1) ja[nj++] = i;
    } else if (i != la) {
      kept[nk++] = i;
      rows *= x0->dims[i];
    }
  }
  /* few rows (a global pooling): the parallel loop also runs over nch
   * slots of the innermost kept axis, [ob_, oe_), each an equal share of
   * its units of COL_CHUNK columns (a slot may be empty), so a static
   * schedule gives every thread a contiguous, balanced part; windows keep
   * whole rows.  The accumulators a slot touches are what must stay in L1 */
  int64_t nch = 1, units = (L + COL_CHUNK - 1) / COL_CHUNK;
  if (!win && rows < COL_ROWS && units > 1) nch = (COL_ROWS + rows - 1) / rows;
  int64_t span = (units + nch - 1) / nch * COL_CHUNK;
  if (bytes / L * (span < L ? span : L) > COL_BYTES) return true;
  *used = true;
  for (int k = 0; k < nr && la == lw; k++) { /* each window node read along the layout, once */
    bool seen = false;
    for (int j = 0; j < k; j++) seen = seen || red[j]->in[0]->producer == red[k]->in[0]->producer;
    if (!seen && fsl_cg_layout_window_axis(e, red[k]->in[0]) == la) e->lay_windows++;
  }
  char o[CLEN], lo[CLEN] = "0", hi[CLEN];
  const char *row = "o_";
  snprintf(o, CLEN, "o%d", la);
  snprintf(hi, CLEN, "%lld", (long long)L);
  fsl_cg_row_loop_open(e, rows * nch, inner * (L + nch - 1) / nch);
  if (nch > 1) {
    fsl_cg_line(e, "const int64_t or_ = o_ / %lld, oq_ = o_ %% %lld;", (long long)nch, (long long)nch);
    fsl_cg_line(e, "const int64_t ob_ = %lld * oq_ / %lld * %d, oh_ = %lld * (oq_ + 1) / %lld * %d;", (long long)units,
                (long long)nch, COL_CHUNK, (long long)units, (long long)nch, COL_CHUNK);
    fsl_cg_line(e, "const int64_t oe_ = oh_ < %lld ? oh_ : %lld;", (long long)L, (long long)L);
    fsl_cg_line(e, "(void)or_;");
    row = "or_";
    snprintf(lo, CLEN, "ob_");
    snprintf(hi, CLEN, "oe_");
  }
  coords c;
  c.rank = r;
  for (int i = 0; i < r; i++) snprintf(c.c[i], CLEN, "0");
  fsl_cg_decompose(e, row, nk, kept, x0->dims, "o", &c);
  snprintf(c.c[la], CLEN, "%s", o);
  /* every reduction reading window(pad(X)) with the identity as padding
   * (MaxPool, AveragePool counting the pads): the window loops and, where
   * the SIMD axis is a window axis, the SIMD loop are clamped to the
   * positions inside X, which is read with no bounds test.  A window row with one loop, over the SIMD axis (the W
   * pass of a pool split per axis), keeps the bounds test: a clamped SIMD
   * range per window position measured slower on 10-column rows
   * (bench/results/spp-maxpool-zen5.md) */
  fsl_cg_win_row w = {.src = NULL};
  bool same = true;
  for (int k = 1; k < nr; k++) same = same && red[k]->in[0] == x0 && red[k]->op == red[0]->op;
  if (same) {
    int ax[FSL_MAX_RANK], na = 0;
    for (int i = 0; i < r; i++)
      if (m0 & (1u << i)) ax[na++] = i;
    if (!fsl_cg_win_plan(e, red[0], ax, na, &c, la, &w) || (w.nn == 1 && w.simd_q >= 0)) w.src = NULL;
  }
  /* one max/min over a window is separable (separable) where that reads
   * no more taps: other * Lin column taps and K * L window taps against
   * other * K * L, with its buffer of Lin columns in L1 */
  int64_t Lin = 0;
  bool sep = false;
  if (w.src && w.simd_q >= 0 && nr == 1 && nj == w.nn &&
      (red[0]->op == FSL_OP_reduce_max || red[0]->op == FSL_OP_reduce_min)) {
    int qs = w.simd_q, R = w.src->rank;
    Lin = w.src->dims[w.lead + w.axis[qs] - R];
    int64_t other = 1, K = x0->dims[w.axis[qs]];
    for (int q = 0; q < nj; q++)
      if (q != qs) other *= x0->dims[w.axis[q]];
    sep = other > 1 && other * Lin + K * L <= other * K * L && Lin * 12 <= COL_BYTES;
  }
  /* two streams along the innermost reduced axis (direct): the
   * accumulators live in memory, so with one stream each column's update
   * waits on its previous store; two halve that chain (a global average
   * pooling over a 96 x 40 x 64 nhwc tensor: 33 -> 17 us, AVX2 28 -> 15 us,
   * bench/results/pool-nhwc-columns-zen4.md) where their accumulators
   * still fit in L1 */
  int64_t E = nj > 0 ? x0->dims[ja[nj - 1]] : 0, half = 0;
  if (!sep && !w.src && E >= 4 && E % 2 == 0 && 2 * (bytes / L) * (span < L ? span : L) <= COL_BYTES) half = E / 2;
  fsl_cg_red_acc a[FSL_MAX_RANK * 8];
  bool nan[FSL_MAX_RANK * 8];
  if (nr > (int)(sizeof a / sizeof a[0])) return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "too many reductions in one kernel");
  for (int k = 0; k < nr; k++) {
    fsl_cg_red_acc_of(e->d, red[k], &a[k]);
    if (red[k]->op == FSL_OP_reduce_sum && x0->dtype == FSL_DT_F32 && inner <= COL_FLOAT_SUM) {
      a[k].type = "float";
      snprintf(a[k].init, CLEN, "0.0f");
    }
    nan[k] = fsl_cg_tracks_nan(e, red[k]);
    fsl_cg_line(e, "%s a%d[%lld];", a[k].type, k, (long long)L);
    if (half) fsl_cg_line(e, "%s b%d[%lld];", a[k].type, k, (long long)L);
    if (nan[k]) fsl_cg_line(e, "int n%d[%lld];", k, (long long)L);
  }
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = lo, .hi = hi});
  fsl_cg_open_scope(e);
  for (int k = 0; k < nr; k++) {
    fsl_cg_line(e, "a%d[%s] = %s;", k, o, a[k].init);
    if (half) fsl_cg_line(e, "b%d[%s] = %s;", k, o, a[k].init);
    if (nan[k]) fsl_cg_line(e, "n%d[%s] = 0;", k, o);
  }
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  bool ok;
  if (sep) {
    ok = separable(e, red[0], &w, &a[0], nan[0], &c, o, L, Lin);
  } else {
    /* a long row notes only whether it read a NaN; one that did runs its
     * loops again for the per-column flags (rare).  Staged: a sweep per
     * reduction, each after those it reads */
    const fsl_cg_win_row *wr = w.src ? &w : NULL;
    ok = true;
    for (int k0 = 0; k0 < nr && ok; k0 = staged ? k0 + 1 : nr) {
      int k1 = staged ? k0 + 1 : nr;
      bool flag = false;
      for (int k = k0; k < k1; k++) flag = flag || (nan[k] && L >= ROW_FLAG_MIN);
      fsl_cg_line(e, "{");
      fsl_cg_open_scope(e);
      if (flag) fsl_cg_line(e, "int rn_ = 0;");
      ok = direct(e, red, k0, k1, wr, a, &c, o, lo, hi, L, ja, nj, flag ? UPD_ROW_FLAG : UPD_BOTH, half);
      if (ok && flag) {
        fsl_cg_line(e, "if (rn_) {");
        fsl_cg_open_scope(e);
        ok = direct(e, red, k0, k1, wr, a, &c, o, lo, hi, L, ja, nj, UPD_FLAGS, half);
        fsl_cg_close_scope(e);
        fsl_cg_line(e, "}");
      }
      if (ok && half) merge_streams(e, red, k0, k1, o, lo, hi);
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
  }
  if (!ok) return false;
  if (rows_out && !row_outputs(e, red, nr, cls, oc, o, lo, hi, ja, nj)) return false;
  if (kept_out) {
    /* the kept-space outputs, element by element of the innermost kept axis */
    loop_ctx lc;
    fsl_cg_loop_begin(e, &lc, "", o);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = o, .lo = lo, .hi = hi, .n_red = 1, .red = {"|:e_"}});
    fsl_cg_open_scope(e);
    e->body_depth = e->depth;
    col_results(e, red, nr, o);
    if (!cls) /* a pass: the row's results into the scratch buffers, kept space flat */
      for (int k = 0; k < nr; k++) {
        char rk[16], sv[CLEN + 16];
        snprintf(rk, sizeof rk, "r%d", k);
        fsl_cg_conv(e->d, red[k]->out[0]->dtype, false, rk, sv, sizeof sv);
        fsl_cg_line(e, "s%d[%s * %lld + %s] = %s;", s0 + k, row, (long long)L, o, sv);
      }
    for (int j = 0; cls && j < s->n_out && ok; j++)
      if (cls[j] == 1) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
    close_loops(e, 1);
    fsl_cg_loop_end(e, &lc);
  }
  e->red_cols = false;
  fsl_cg_line(e, "err_ |= e_;");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  return ok;
}
