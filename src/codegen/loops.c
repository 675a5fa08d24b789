/*
 * loops.c — LOOP kernels: one loop nest per distinct output shape (a
 * parallel loop over rows and a loop along the innermost axis; in GPU
 * dialects, par_min 0, one flat parallel loop over the elements).
 */
#include "codegen/cg.h"

/* Writes the element at c of every output in outs (same shape). */
bool fsl_cg_store_outputs(em *e, int n, const int *outs, const coords *c) {
  for (int k = 0; k < n; k++) {
    const fsl_value *v = e->s->out[outs[k]];
    char r[CLEN], idx[CLEN];
    if (!fsl_cg_ev(e, v, c, r)) return false;
    fsl_cg_layout_index(e, v, fsl_cg_out_layout(e, outs[k]), c, idx);
    char sv[2 * CLEN + 16];
    fsl_cg_conv(e->d, v->dtype, false, r, sv, sizeof sv);
    fsl_cg_line(e, "out%d[%s] = %s;", outs[k], idx, sv);
  }
  return true;
}

/* Ends a nest: the thread's error bits, the parallel loop, the nest's block. */
static void nest_end(em *e) {
  fsl_cg_line(e, "err_ |= e_;");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

#define TILE 16 /* a tile of a transposing nest: TILE x TILE elements */

/* Opens a nest's outer loop r_ over `count` iterations, parallel when the
 * elements the nest writes (`elems`, over all its outputs) exceed the
 * dialect's par_min, and declares its error bits e_ (closed by nest_end). */
static void outer_loop_open(em *e, int64_t count, int64_t elems) {
  char hi[32];
  snprintf(hi, sizeof hi, "%lld", (long long)count);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = elems > e->d->par_min ? FSL_CG_PARALLEL : FSL_CG_SERIAL, .var = "r_",
                                     .lo = "0", .hi = hi, .n_red = 1, .red = {"|:err_"}});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "int e_ = 0;");
}

/* Whether output j's tile goes out through the dialect's tile16_store. */
static bool tile_stored(const em *e, int j) {
  return e->d->tile16_store && e->s->out[j]->dtype == FSL_DT_F32 && !fsl_cg_out_layout(e, j);
}

/* The boundaries inside (0, len) of the concats of the kernel that are
 * multiples of unit, ascending, into bk[4]; 0 when there are none or more
 * than 4 (a version of the tile loop each: code size). */
static int tile_breaks(const em *e, int64_t len, int64_t unit, int64_t *bk) {
  int nb = 0;
  for (int i = 0; i < e->s->n_nodes; i++) {
    const fsl_node *cat = e->s->nodes[i];
    if (cat->op != FSL_OP_concat) continue;
    int axis = (int)fsl_attr_int(cat, "axis", 0);
    int64_t off = 0;
    for (int k = 0; k + 1 < cat->n_in; k++) {
      off += cat->in[k]->dims[axis];
      if (off <= 0 || off >= len || off % unit) continue;
      int at = 0;
      while (at < nb && bk[at] < off) at++;
      if (at < nb && bk[at] == off) continue;
      if (nb == 4) return 0;
      memmove(bk + at + 1, bk + at, sizeof *bk * (size_t)(nb - at));
      bk[at] = off;
      nb++;
    }
  }
  return nb;
}

/* The first of the trailing axes of the nest's outputs that tiled_nest
 * tiles as one: the innermost when it is TILE long or more, else as many
 * as make TILE (a [C, 10, 10] slice of an NHWC buffer: [C, 100]), which
 * needs every output stored by the tile store (row-major f32); -1 when
 * all of them are shorter. */
static int tile_merge(const em *e, int n, const int *outs) {
  const fsl_value *v = e->s->out[outs[0]];
  int m = v->rank - 1;
  if (m < 1) return -1;
  int64_t len = v->dims[m];
  if (len >= TILE) return m;
  for (int k = 0; k < n; k++)
    if (!tile_stored(e, outs[k])) return -1;
  while (m > 1 && len < TILE) len *= v->dims[--m];
  return len >= TILE ? m : -1;
}

/* The tile of tiled_nest along its axis var[0] (the read's contiguous
 * one) into the tile buffers tb<k>_, one row of var[1] at a time.  With
 * concat boundaries bk[0..nb) inside (0, len) of axis var[1], the rows go
 * in one loop per part between them, each within one input of every
 * concat along that axis (e->range[1]): the inner loop then holds no
 * branch on var[1] and vectorizes (YOLOX's decode, [xy, wh, scores] along
 * its last axis: 83 -> 31 us run alone). */
static bool tile_gather(em *e, int n, const int *outs, const coords *c0, char var[2][CLEN], char lo[2][CLEN],
                        char hv[2][CLEN], int nb, const int64_t *bk, int64_t len, int m) {
  const fsl_value *v = e->s->out[outs[0]];
  coords cm = *c0;
  const coords *c = &cm;
  int axes[FSL_MAX_RANK];
  for (int i = m; i < v->rank; i++) axes[i - m] = i;
  bool ok = true;
  for (int p = 0; p <= nb && ok; p++) {
    char plo[CLEN], phi[CLEN];
    snprintf(plo, CLEN, "%s", lo[1]);
    snprintf(phi, CLEN, "%s", hv[1]);
    if (nb) {
      e->range[1].var = var[1];
      e->range[1].lo = p ? bk[p - 1] : 0;
      e->range[1].hi = p < nb ? bk[p] : len;
      if (p) snprintf(plo, CLEN, "(%s > %lld ? %s : %lld)", lo[1], (long long)bk[p - 1], lo[1], (long long)bk[p - 1]);
      if (p < nb) snprintf(phi, CLEN, "(%s < %lld ? %s : %lld)", hv[1], (long long)bk[p], hv[1], (long long)bk[p]);
    }
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = var[1], .lo = plo, .hi = phi});
    fsl_cg_open_scope(e);
    /* merged trailing axes: their coordinates, once per row */
    if (m < v->rank - 1) fsl_cg_decompose(e, var[1], v->rank - m, axes, v->dims, "c", &cm);
    loop_ctx lc;
    fsl_cg_loop_begin(e, &lc, "", var[0]);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = var[0], .lo = lo[0], .hi = hv[0]});
    fsl_cg_open_scope(e);
    e->body_depth = e->depth;
    for (int k = 0; k < n && ok; k++) {
      char res[CLEN];
      ok = fsl_cg_ev(e, e->s->out[outs[k]], c, res);
      if (ok) fsl_cg_line(e, "tb%d_[(%s - tl1_)*%d + %s - tl0_] = %s;", k, var[1], TILE, var[0], res);
    }
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_loop_end(e, &lc);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  e->range[1].var = NULL;
  return ok;
}

/* A nest over TILE x TILE tiles of output axes ta and the innermost one,
 * for a read that is contiguous along ta and strided along the innermost
 * axis (fsl_cg_tile_axis).  Each tile is computed along ta, the read's
 * contiguous axis, into a local tile buffer per output (an inner loop
 * with contiguous reads, so the arithmetic vectorizes), then copied transposed into
 * the outputs row by row.  The tile's reads touch TILE cache lines, which
 * stay in L1.  Opened inside the nest's block (nest_box).  Like nest_box,
 * it runs in parallel when the elements it writes, over all n outputs,
 * exceed the dialect's par_min (efficientvit_b1's q, k and v of 25088
 * elements each, transposed out of one channels-last buffer). */
static bool tiled_nest(em *e, int n, const int *outs, int ta, int m, int64_t total) {
  const fsl_value *v = e->s->out[outs[0]];
  int r = v->rank, axes[FSL_MAX_RANK], na = 0;
  /* axes m..r-1 as one (their product long): the tile's second axis */
  int64_t bd[FSL_MAX_RANK], blocks = 1, len[2] = {v->dims[ta], 1};
  for (int i = m; i < r; i++) len[1] *= v->dims[i];
  for (int i = 0; i <= m; i++) {
    bd[i] = i == ta ? (len[0] + TILE - 1) / TILE : i == m ? (len[1] + TILE - 1) / TILE : v->dims[i];
    blocks *= bd[i];
    if (i != ta && i != m) axes[na++] = i;
  }
  axes[na++] = ta;
  axes[na++] = m;
  outer_loop_open(e, blocks, total * n);
  coords c;
  c.rank = r;
  /* b<ta> and b<m> are tile indices, the other b<i> coordinates */
  fsl_cg_decompose(e, "r_", na, axes, bd, "b", &c);
  int ax[2] = {ta, m};
  char var[2][CLEN], lo[2][CLEN], hv[2][CLEN];
  for (int q = 0; q < 2; q++) {
    int a = ax[q];
    const char *b = bd[a] == 1 ? "0" : c.c[a];
    if (q && m < r - 1) snprintf(var[q], CLEN, "cq_");
    else snprintf(var[q], CLEN, "c%d", a);
    snprintf(lo[q], CLEN, "tl%d_", q);
    snprintf(hv[q], CLEN, "th%d_", q);
    fsl_cg_line(e, "const int64_t tl%d_ = %s*%d, th%d_ = %s*%d + %d < %lld ? %s*%d + %d : %lld;", q, b, TILE, q, b, TILE,
                TILE, (long long)len[q], b, TILE, TILE, (long long)len[q]);
    snprintf(c.c[a], CLEN, "%s", var[q]);
  }
  for (int k = 0; k < n; k++)
    fsl_cg_line(e, "%s tb%d_[%d];", fsl_cg_ctype(e->d, e->s->out[outs[k]]->dtype), k, TILE * TILE);
  /* the tile along ta (the read's contiguous axis) into the tile buffers;
   * one version per part of axis ta between concat boundaries that are
   * multiples of TILE (every tile lies in one part, so a concat along ta
   * reads one input with no test; YOLOX's decode of three heads) */
  int64_t bk[4], bk1[4];
  int nb = tile_breaks(e, v->dims[ta], TILE, bk), nb1 = m == r - 1 ? tile_breaks(e, v->dims[r - 1], 1, bk1) : 0;
  if ((nb + 1) * (nb1 + 1) > 16) nb1 = 0; /* code size: a copy of the body each */
  bool ok = true;
  for (int p = 0; p <= nb && ok; p++) {
    if (nb) {
      if (p < nb) fsl_cg_line(e, "%sif (th0_ <= %lld) {", p ? "else " : "", (long long)bk[p]);
      else fsl_cg_line(e, "else {");
      fsl_cg_open_scope(e);
      e->range[0].var = var[0];
      e->range[0].lo = p ? bk[p - 1] : 0;
      e->range[0].hi = p < nb ? bk[p] : v->dims[ta];
    }
    ok = tile_gather(e, n, outs, &c, var, lo, hv, nb1, bk1, v->dims[r - 1], m);
    if (nb) {
      e->range[0].var = NULL;
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
  }
  if (!ok) return false;
  /* the tile buffers, transposed, into the outputs: f32 ones by the
   * dialect's tile store where it has one (row-major, so the tile's rows
   * are ld = the stride of axis ta apart) */
  bool rest = false;
  for (int k = 0; k < n; k++) {
    const fsl_value *o = e->s->out[outs[k]];
    if (!tile_stored(e, outs[k])) {
      rest = true;
      continue;
    }
    int64_t ld = 1;
    for (int i = ta + 1; i < r; i++) ld *= v->dims[i];
    coords tc = c;
    snprintf(tc.c[ta], CLEN, "tl0_");
    for (int i = m; i < r; i++) snprintf(tc.c[i], CLEN, i == m && m == r - 1 ? "tl1_" : "0");
    char idx[CLEN];
    fsl_cg_layout_index(e, o, NULL, &tc, idx);
    fsl_cg_line(e, "%s(out%d + %s%s, %lld, tb%d_, th0_ - tl0_, th1_ - tl1_);", e->d->tile16_store, outs[k], idx,
                m < r - 1 ? " + tl1_" : "", (long long)ld, k);
  }
  if (rest) {
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = var[0], .lo = lo[0], .hi = hv[0]});
    fsl_cg_open_scope(e);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = var[1], .lo = lo[1], .hi = hv[1]});
    fsl_cg_open_scope(e);
    for (int k = 0; k < n; k++) {
      const fsl_value *o = e->s->out[outs[k]];
      if (tile_stored(e, outs[k])) continue;
      char idx[CLEN];
      fsl_cg_layout_index(e, o, fsl_cg_out_layout(e, outs[k]), &c, idx);
      char tv[4 * CLEN], sv[4 * CLEN + 16];
      snprintf(tv, sizeof tv, "tb%d_[(%s - tl1_)*%d + %s - tl0_]", k, var[1], TILE, var[0]);
      fsl_cg_conv(e->d, o->dtype, false, tv, sv, sizeof sv);
      fsl_cg_line(e, "out%d[%s] = %s;", outs[k], idx, sv);
    }
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  nest_end(e);
  return true;
}

/* The inner loop of a row whose reads interleave f streams
 * (fsl_cg_interleave): a loop over c<inner>o in [0, len/f) with the body
 * written f times, for c<inner> = c<inner>o*f + k, k = 0..f-1.  A reshape
 * splitting that axis by f then reads c<inner>o and the literal k
 * (e->split), so each copy reads contiguously along the loop and the
 * compiler vectorizes it with interleaved stores (ppocr_det's BN + ReLU +
 * depth-to-space after a blockwise ConvTranspose, [24, 80, 128]: 0.57 ->
 * 0.07 ms; docs/cpu-backend.md). */
static bool interleaved_row(em *e, int n, const int *outs, coords *c, int inner, int64_t len, int f) {
  char ov[CLEN], hi[32];
  snprintf(ov, CLEN, "c%do", inner);
  snprintf(hi, sizeof hi, "%lld", (long long)(len / f));
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "", ov);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = ov, .lo = "0", .hi = hi});
  fsl_cg_open_scope(e);
  bool ok = true;
  for (int k = 0; k < f && ok; k++) {
    fsl_cg_line(e, "{");
    fsl_cg_open_scope(e);
    e->body_depth = e->depth;
    int t = fsl_cg_new_tmp(e);
    fsl_cg_line(e, "const int64_t i%d = %s*%d + %d;", t, ov, f, k);
    snprintf(c->c[inner], CLEN, "i%d", t);
    snprintf(e->split.var, CLEN, "i%d", t);
    snprintf(e->split.outer, CLEN, "%s", ov);
    e->split.f = f;
    e->split.k = k;
    ok = fsl_cg_store_outputs(e, n, outs, c);
    e->split.var[0] = 0;
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_loop_end(e, &lc);
  return ok;
}

/* Where a row of output v (its memory-innermost axis `inner`) enters and
 * leaves the interior of the kernel's pads along that axis: *bk = {lo,
 * hi}, every pad of v's shape reading its input in range there.  The nest
 * then runs the row as three loops, the middle one with plain indices
 * (index.c, e->range): the border tests (reflect, edge, the fill value)
 * stay out of it and it vectorizes (style_transfer on AVX2: its
 * InstanceNormalization + ReLU + reflect pad kernel 3.2 -> 1.0 ms, ReLU +
 * Resize + pad 6.0 -> 4.0 ms; all its generated kernels 33-48 -> 16-23
 * ms).  False when there is no such pad or the interior is shorter than 8. */
static bool pad_breaks(const em *e, const fsl_value *v, int inner, int64_t *bk) {
  int64_t lo = 0, hi = v->dims[inner];
  bool any = false;
  for (int k = 0; k < e->s->n_nodes; k++) {
    const fsl_node *n = e->s->nodes[k];
    if (n->op != FSL_OP_pad || !fsl_value_same_shape(n->out[0], v)) continue;
    const int64_t *pads = NULL;
    int np = fsl_attr_ints(n, "pads", &pads);
    if (np != 2 * v->rank || (pads[inner] == 0 && pads[v->rank + inner] == 0)) continue;
    any = true;
    if (pads[inner] > lo) lo = pads[inner];
    if (pads[inner] + n->in[0]->dims[inner] < hi) hi = pads[inner] + n->in[0]->dims[inner];
  }
  bk[0] = lo, bk[1] = hi;
  return any && hi - lo >= 8;
}

/* Whether layouts a and b (NULL: row-major) order the axes of a rank-r
 * value alike. */
static bool same_order(const fsl_cg_layout *a, const fsl_cg_layout *b, int r) {
  for (int i = 0; i < r; i++)
    if ((a ? a->order[i] : i) != (b ? b->order[i] : i)) return false;
  return true;
}

/* Whether the step is a map over the memory order of its outputs: every
 * node elementwise (or the broadcast of one element, or a table lookup),
 * every value it reads of one element or of the first
 * output's dims, computed in the step or an input stored in the first
 * output's layout, and every output of those dims in that layout.  Element
 * f of every output then reads element f of every such input, whatever
 * the axes are. */
static bool flat_map(const em *e, int n, const int *outs) {
  const fsl_value *v = e->s->out[outs[0]];
  const fsl_cg_layout *ol = fsl_cg_out_layout(e, outs[0]);
  for (int k = 1; k < n; k++)
    if (!fsl_value_same_shape(e->s->out[outs[k]], v) || !same_order(fsl_cg_out_layout(e, outs[k]), ol, v->rank))
      return false;
  for (int k = 0; k < e->s->n_nodes; k++) {
    const fsl_node *nd = e->s->nodes[k];
    if (nd->n_out != 1 || !nd->out[0]) return false;
    /* a node whose value nothing in the step reads (a per-channel
     * parameter's expand that only absorbed nodes of the library step read) */
    const fsl_value *y = nd->out[0];
    bool live = false;
    for (int j = 0; j < e->s->n_out && !live; j++) live = e->s->out[j] == y;
    for (int c = 0; c < y->n_cons && !live; c++) {
      const fsl_node *u = y->cons[c];
      live = u->n_out > 0 && u->out[0] && e->inside[u->out[0]->id];
    }
    if (!live) continue;
    /* a broadcast of one element (a quantization parameter expanded) reads the same everywhere */
    if ((nd->op == FSL_OP_expand || nd->op == FSL_OP_reshape) && nd->n_in >= 1 && nd->in[0] &&
        fsl_value_numel(nd->in[0]) == 1)
      continue;
    bool table = fsl_node_is_table_lookup(nd); /* its index is read where the output is */
    if (!fsl_op_is_elementwise(nd->op) && !table) return false;
    for (int i = table ? 1 : 0; i < nd->n_in; i++) {
      const fsl_value *x = nd->in[i];
      if (!x || fsl_value_numel(x) == 1) continue;
      if (!fsl_value_same_shape(x, v) || (!e->inside[x->id] && !same_order(fsl_cg_in_layout(e, x), ol, v->rank)))
        return false;
    }
  }
  return true;
}

/* The nest of a flat map (flat_map) whose innermost axis is short: one
 * loop over the memory order in blocks, the coordinates decomposed from
 * the flat index (the index printer composes them back into it).  A short
 * innermost loop of mixed widths (a channels-last uint8 requantize over 16
 * channels, YOLOX QDQ's stem) vectorizes with 128-bit vectors only: 1.35
 * -> 0.38 ms for 16 x 160 x 160 elements, 2 threads. */
static bool flat_nest(em *e, int n, const int *outs, const int *ord, const int64_t *dims, int64_t total) {
  int r = e->s->out[outs[0]]->rank;
  int64_t B = total < 8192 ? total : (total + 63) / 64;
  if (B < 2048) B = 2048;
  int64_t nblk = (total + B - 1) / B;
  outer_loop_open(e, nblk, total * n);
  fsl_cg_line(e, "const int64_t lo_ = r_ * %lld, hi_ = lo_ + %lld < %lld ? lo_ + %lld : %lld;", (long long)B,
              (long long)B, (long long)total, (long long)B, (long long)total);
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "c", "f_"); /* every coordinate varies with f_ */
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "f_", .lo = "lo_", .hi = "hi_"});
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  coords c;
  c.rank = r;
  fsl_cg_decompose(e, "f_", r, ord, dims, "c", &c);
  bool ok = fsl_cg_store_outputs(e, n, outs, &c);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_loop_end(e, &lc);
  if (!ok) return false;
  nest_end(e);
  return true;
}

/* One loop nest over the shape of out[outs[0]], writing every listed
 * output; with seg_len >= 0, only over coordinates seg_lo .. seg_lo +
 * seg_len - 1 of axis seg_axis (not the innermost).  The loops run along
 * the first output's memory order (its fsl_cg_layout, else row-major).
 * icat (or NULL): a concat along the innermost axis of that order, whose
 * result the output is; each row then runs one inner loop per concat
 * input over that input's part of the row, reading only that input. */
static bool nest_box(em *e, int n, const int *outs, int seg_axis, int64_t seg_lo, int64_t seg_len,
                     const fsl_node *icat) {
  const fsl_value *v = e->s->out[outs[0]];
  int r = v->rank;
  int64_t dims[FSL_MAX_RANK], total = 1;
  for (int i = 0; i < r; i++) {
    dims[i] = seg_len >= 0 && i == seg_axis ? seg_len : v->dims[i];
    total *= dims[i];
  }
  if (total == 0) return true;
  /* the axes in the order the nest runs: memory order of the first output */
  const fsl_cg_layout *ol = fsl_cg_out_layout(e, outs[0]);
  int ord[FSL_MAX_RANK];
  for (int i = 0; i < r; i++) ord[i] = ol ? ol->order[i] : i;
  int inner = r > 0 ? ord[r - 1] : 0;
  coords c;
  c.rank = r;
  fsl_cg_line(e, "{");
  fsl_cg_open_scope(e);
  if (r == 0) {
    fsl_cg_line(e, "int e_ = 0;");
    if (!fsl_cg_store_outputs(e, n, outs, &c)) return false;
    fsl_cg_line(e, "err_ |= e_;");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    return true;
  }
  if (e->d->par_min == 0) {
    /* every thread runs the kernel (GPU dialects): one thread per output
     * element, all outputs of the shape written by the same thread */
    char hi[32];
    snprintf(hi, sizeof hi, "%lld", (long long)total);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_PARALLEL, .var = "r_", .lo = "0", .hi = hi, .n_red = 1,
                                       .red = {"|:err_"}});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "int e_ = 0;");
    fsl_cg_decompose(e, "r_", r, ord, dims, "c", &c);
    if (!fsl_cg_store_outputs(e, n, outs, &c)) return false;
    nest_end(e);
    return true;
  }
  int64_t L = dims[inner], rows = total / L, B = L, nblk = 1;
  if (L < 64 && rows > 1 && seg_len < 0 && !icat && flat_map(e, n, outs)) return flat_nest(e, n, outs, ord, dims, total);
  /* a row-major output only: tiles for an NHWC one (a [C, HW] -> [HW, C]
   * transpose) measured 4x slower than the plain nest along its memory
   * order, whose strided reads stay in L1 across the row */
  int m = seg_len < 0 && !ol ? tile_merge(e, n, outs) : -1;
  int ta = m >= 0 ? fsl_cg_tile_axis(e, v) : -1;
  if (ta >= 0 && ta < m) return tiled_nest(e, n, outs, ta, m, total);
  if (rows < 64 && L > 8192 && !icat) {
    B = (L + 63) / 64;
    if (B < 2048) B = 2048;
    nblk = (L + B - 1) / B;
  }
  outer_loop_open(e, rows * nblk, total * n);
  if (nblk > 1) {
    fsl_cg_line(e, "const int64_t rr_ = r_ / %lld, lo_ = (r_ %% %lld) * %lld;", (long long)nblk, (long long)nblk, (long long)B);
    fsl_cg_line(e, "const int64_t hi_ = lo_ + %lld < %lld ? lo_ + %lld : %lld;", (long long)B, (long long)L, (long long)B,
         (long long)L);
  } else {
    fsl_cg_line(e, "const int64_t rr_ = r_;");
  }
  fsl_cg_decompose(e, "rr_", r - 1, ord, dims, "c", &c);
  fsl_cg_line(e, "(void)rr_;");
  if (seg_len >= 0 && seg_lo > 0) {
    /* the segment's coordinate along its axis, in the whole output */
    fsl_cg_line(e, "const int64_t g%d = %s + %lld;", seg_axis, c.c[seg_axis], (long long)seg_lo);
    snprintf(c.c[seg_axis], CLEN, "g%d", seg_axis);
  }
  char lv[CLEN];
  snprintf(lv, CLEN, "c%d", inner);
  int f = !icat && !ol && nblk == 1 ? fsl_cg_interleave(e, v) : 1;
  if (f > 1) {
    if (!interleaved_row(e, n, outs, &c, inner, L, f)) return false;
    nest_end(e);
    return true;
  }
  int cat_axis = icat ? (int)fsl_attr_int(icat, "axis", 0) : 0, n_seg = icat ? icat->n_in : 1;
  int64_t pb[2];
  bool at_pads = !icat && nblk == 1 && pad_breaks(e, v, inner, pb);
  if (at_pads) n_seg = 3;
  int64_t off = 0;
  bool ok = true;
  for (int k = 0; k < n_seg && ok; k++) {
    int64_t seg = icat ? icat->in[k]->dims[cat_axis] : at_pads ? (k < 2 ? pb[k] : L) - off : L;
    if (at_pads) e->range[0].var = lv, e->range[0].lo = off, e->range[0].hi = off + seg;
    char lo[32], len[32];
    snprintf(lo, sizeof lo, "%lld", (long long)off);
    snprintf(len, sizeof len, "%lld", (long long)(off + seg));
    off += seg;
    if (seg == 0) continue;
    if (icat) e->pin_node = icat, e->pin_k = k;
    loop_ctx lc;
    fsl_cg_loop_begin(e, &lc, "", lv);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = lv, .lo = nblk > 1 ? "lo_" : lo,
                                       .hi = nblk > 1 ? "hi_" : len});
    fsl_cg_open_scope(e);
    e->body_depth = e->depth;
    if (L == 1) snprintf(c.c[inner], CLEN, "0");
    else snprintf(c.c[inner], CLEN, "c%d", inner);
    ok = fsl_cg_store_outputs(e, n, outs, &c);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_loop_end(e, &lc);
  }
  if (icat) e->pin_node = NULL;
  if (at_pads) e->range[0].var = NULL;
  if (!ok) return false;
  nest_end(e);
  return true;
}

/* The axis of v that is concat node cat's axis when v is cat itself or a
 * reshape of it (through reshapes inside the kernel) that keeps the dims
 * before the concat axis (their product) and the axis whole, so that v's
 * coordinate along it is the concat's; -1 otherwise. */
static int concat_axis_of(em *e, const fsl_value *v, const fsl_node **cat) {
  const fsl_value *u = v;
  while (u->producer && u->producer->op == FSL_OP_reshape && e->inside[u->id] && u->producer->in[0])
    u = u->producer->in[0];
  *cat = u->producer;
  if (!*cat || (*cat)->op != FSL_OP_concat || !e->inside[u->id]) return -1;
  int a = (int)fsl_attr_int(*cat, "axis", 0);
  if (a < 0 || a >= u->rank) return -1;
  int64_t before = 1, vb = 1;
  for (int i = 0; i < a; i++) before *= u->dims[i];
  for (int va = 0; va < v->rank; va++) {
    if (vb == before && v->dims[va] == u->dims[a]) return va;
    vb *= v->dims[va];
    if (vb > before) break;
  }
  return -1;
}

/* Whether the nest of concat cat along output axis `axis` runs over
 * transposing tiles (nest_box) along that axis: the read is contiguous
 * along it and every boundary between cat's inputs is a multiple of TILE,
 * so that each tile reads one input (tiled_nest's parts; the two heads of
 * a detector, 64 + 18 channels of NHWC conv outputs, into one NCHW
 * buffer: a nest per input strided every element instead). */
static bool tiles_concat(const em *e, int n, const int *outs, const fsl_node *cat, int axis) {
  int m = tile_merge(e, n, outs);
  if (m < 0 || axis >= m || fsl_cg_tile_axis(e, e->s->out[outs[0]]) != axis) return false;
  int ca = (int)fsl_attr_int(cat, "axis", 0);
  int64_t off = 0;
  for (int k = 0; k + 1 < cat->n_in; k++)
    if ((off += cat->in[k]->dims[ca]) % TILE) return false;
  return true;
}

/* One loop nest over the shape of out[outs[0]].  Where that output is a
 * concat inside the kernel, or a reshape of one that keeps the concat's
 * axis (concat_axis_of), on a dialect with SIMD loops, each loop reads only
 * one concat input, so that the innermost loop holds no branch on the
 * concat's coordinate and vectorizes: along an outer axis of the output's
 * memory order, one nest per concat input; along the innermost one (a
 * channel concat written NHWC, or a concat along the last axis), one inner
 * loop per input in each row. */
static bool loop_nest(em *e, int n, const int *outs) {
  const fsl_value *v = e->s->out[outs[0]];
  const fsl_node *cat = NULL;
  const fsl_cg_layout *ol = fsl_cg_out_layout(e, outs[0]);
  int axis = n == 1 && e->d->par_min != 0 && e->inside[v->id] && !e->pin_node ? concat_axis_of(e, v, &cat) : -1;
  int inner = v->rank > 0 ? (ol ? ol->order[v->rank - 1] : v->rank - 1) : -1;
  if (axis >= 0 && axis == inner && v->rank >= 2) return nest_box(e, n, outs, -1, 0, -1, cat);
  if (axis < 0 || axis == inner || ol || tiles_concat(e, n, outs, cat, axis))
    return nest_box(e, n, outs, -1, 0, -1, NULL);
  int cat_axis = (int)fsl_attr_int(cat, "axis", 0);
  int64_t off = 0;
  bool ok = true;
  e->pin_node = cat;
  for (int k = 0; k < cat->n_in && ok; k++) {
    e->pin_k = k;
    ok = nest_box(e, n, outs, axis, off, cat->in[k]->dims[cat_axis], NULL);
    off += cat->in[k]->dims[cat_axis];
  }
  e->pin_node = NULL;
  return ok;
}


/* Loop nests for the outputs not yet written (done[j] false), grouped by shape. */
bool fsl_cg_output_loops(em *e, bool *done) {
  const fsl_cg_spec *s = e->s;
  int *grp = malloc(sizeof(int) * (size_t)(s->n_out > 0 ? s->n_out : 1));
  if (!grp) return fsl_cg_fail(e, FSL_ERR_NOMEM, "out of memory");
  bool ok = true;
  for (int j = 0; j < s->n_out && ok; j++) {
    if (done[j]) continue;
    int n = 0;
    for (int k = j; k < s->n_out; k++)
      if (!done[k] && fsl_value_same_shape(s->out[k], s->out[j])) {
        grp[n++] = k;
        done[k] = true;
      }
    ok = loop_nest(e, n, grp);
  }
  free(grp);
  return ok;
}
