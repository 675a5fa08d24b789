/*
 * reduce.c — REDUCE kernels: fused rows (every reduction over one input
 * space) or one pass per reduction through scratch buffers.
 */
#include "codegen/cg.h"

unsigned fsl_cg_red_mask(const fsl_node *n) {
  unsigned m = 0;
  if (n->op == FSL_OP_argmax || n->op == FSL_OP_argmin) return 1u << fsl_attr_int(n, "axis", 0);
  const int64_t *ax = NULL;
  int k = fsl_attr_ints(n, "axes", &ax);
  for (int i = 0; i < k; i++) m |= 1u << ax[i];
  return m;
}


int fsl_cg_red_last_axis(const fsl_node *n) {
  const fsl_value *x = n->in[0];
  unsigned m = fsl_cg_red_mask(n);
  int last = -1;
  for (int i = 0; i < x->rank; i++)
    if ((m & (1u << i)) && x->dims[i] > 1) last = i;
  return last;
}

bool fsl_cg_reads_across(const em *e, const fsl_value *x, const fsl_node *n) {
  int last = fsl_cg_red_last_axis(n);
  return last >= 0 && fsl_cg_stride_bytes_along(e, x, last) >= 64; /* a cache line */
}

void fsl_cg_red_acc_of(const fsl_dialect *d, const fsl_node *n, fsl_cg_red_acc *a) {
  fsl_dtype dt = n->in[0]->dtype;
  fsl_op op = n->op;
  int bits = (int)fsl_dtype_size(dt) * 8;
  if (is_f(dt)) {
    if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod) {
      a->type = "double";
      snprintf(a->init, CLEN, op == FSL_OP_reduce_sum ? "0.0" : "1.0");
    } else {
      a->type = fsl_cg_ctype(d, dt);
      snprintf(a->init, CLEN, "%sINFINITY", op == FSL_OP_reduce_max ? "-" : "");
    }
    return;
  }
  bool sg = is_s(dt);
  if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod) {
    a->type = "uint64_t";
    snprintf(a->init, CLEN, op == FSL_OP_reduce_sum ? "0" : "1");
    return;
  }
  /* max/min in the input's own type where no work-items exchange
   * accumulators (the C dialect): 16 uint8 lanes per 128 bits instead of 2
   * uint64 ones (a QDQ MaxPool on uint8, passes/qdq_lift.c) */
  a->type = !d->group && dt != FSL_DT_BOOL ? fsl_cg_ctype(d, dt) : sg ? "int64_t" : "uint64_t";
  if (op == FSL_OP_reduce_max) {
    if (!sg) snprintf(a->init, CLEN, "0");
    else if (bits >= 64) snprintf(a->init, CLEN, "INT64_MIN");
    else snprintf(a->init, CLEN, "(-%lldLL)", (long long)((int64_t)1 << (bits - 1)));
  } else {
    if (dt == FSL_DT_BOOL) snprintf(a->init, CLEN, "1");
    else if (sg) snprintf(a->init, CLEN, bits >= 64 ? "INT64_MAX" : "%lldLL", (long long)(((int64_t)1 << (bits - 1)) - 1));
    else snprintf(a->init, CLEN, bits >= 64 ? "UINT64_MAX" : "%lluULL", (unsigned long long)(((uint64_t)1 << bits) - 1));
  }
}

static bool is_arg(const fsl_node *n) { return n->op == FSL_OP_argmax || n->op == FSL_OP_argmin; }

/* Whether the rows of reduction n would read an input stored in a layout
 * (a oneDNN convolution's channels-last result) a cache line per element
 * (fsl_cg_reads_across: InstanceNormalization's H and W over an nhwc
 * tensor; style transfer's first one took 11.1 ms so on AVX2, 19.8 ms on
 * AVX-512; on the conv's output reordered to plain 1.0 and 0.9 ms).  The columns form
 * (columns.c) reads such an input in place; the rows form refuses it, and
 * the CPU backend then hands the kernel plain data. */
static bool rows_cross_layout(const em *e, const fsl_node *n) {
  return e->s->in_layout && !is_arg(n) && fsl_cg_reads_across(e, n->in[0], n);
}

/* fsl_cg_fail for a rows form of red[0..nr) that rows_cross_layout
 * refuses; true when none is. */
static bool rows_ok(em *e, const fsl_node **red, int nr) {
  for (int k = 0; k < nr; k++)
    if (rows_cross_layout(e, red[k]))
      return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "reduction '%s' would read an input layout across its rows",
                         red[k]->name ? red[k]->name : "?");
  return true;
}

/* The bound of a row's loops over its `inner` elements: none past the
 * last row when rows share a group (fsl_cg_row_loop_open). */
static void row_bound(const em *e, const char *inner, char *dst, size_t cap) {
  if (e->grp && e->grp_rows > 1) snprintf(dst, cap, "(rv_ ? %s : 0)", inner);
  else snprintf(dst, cap, "%s", inner);
}

/* The type of an argmax/argmin's best value b<k>: the input's type, in a
 * work-group row 64-bit for integers (exchanged between work-items). */
static const char *arg_best_type(const em *e, const fsl_value *x) {
  if (!e->grp || is_f(x->dtype)) return fsl_cg_ctype(e->d, x->dtype);
  return is_s(x->dtype) ? "int64_t" : "uint64_t";
}

/* Bytes of reduce node n's accumulator (fsl_cg_red_acc_of; an
 * argmax/argmin: its best value and index). */
static int acc_bytes(const fsl_node *n) {
  fsl_dtype dt = n->in[0]->dtype;
  if (is_arg(n)) return 8 + (is_f(dt) ? (int)fsl_dtype_size(dt) : 8);
  if (is_f(dt) && n->op != FSL_OP_reduce_sum && n->op != FSL_OP_reduce_prod) return (int)fsl_dtype_size(dt);
  return 8;
}

/* Work-items of a group of gs that exchange accumulators directly
 * (group->warp; 1: none). */
static int warp_lanes(const fsl_cg_group *G, int gs) { return G->warp > 1 ? (gs < G->warp ? gs : G->warp) : 1; }

/* Work-items of each warp that run a group row's shuffles: the whole
 * group when it is below a warp (rows sharing it included). */
static int warp_active(const em *e) {
  int W = e->d->group->warp, gs = e->launch.group_size;
  return gs < W ? gs : W;
}

/* Partial results of a group row that meet in local memory: one per
 * warp (per work-item without warps); 1: none, no local memory. */
static int group_partials(const fsl_cg_group *G, int gs) { return gs / warp_lanes(G, gs); }

/* Into dst: the index of this row's partial `i` (an expression) in a
 * local array of P partials per row: rows share a group (grp_rows > 1)
 * at q_ * P. */
static void part_idx(const em *e, int P, const char *i, char *dst, size_t cap) {
  if (e->grp_rows > 1) snprintf(dst, cap, "q_ * %d + %s", P, i);
  else snprintf(dst, cap, "%s", i);
}

/* Combines accumulator a<k> of reduce node n across the work-items whose
 * indices differ in bits `from`, from/2, ..., 1 (aligned runs of `lanes`
 * work-items exchanging registers: group->warp_xor), in the order of the
 * local-memory tree below; every work-item of a run leaves with the run's
 * result.  Float max/min: a<k> already holds NaN where n<k> was set. */
static void warp_steps(em *e, const fsl_node *n, int k, const fsl_cg_red_acc *a, int from, int lanes) {
  fsl_op op = n->op;
  bool fl = is_f(n->in[0]->dtype);
  char av[16], sh[160];
  snprintf(av, sizeof av, "a%d", k);
  e->d->group->warp_xor(sh, sizeof sh, av, "s_", lanes, warp_active(e));
  fsl_cg_line(e, "for (int s_ = %d; s_ > 0; s_ >>= 1) {", from);
  fsl_cg_open_scope(e);
  if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)
    fsl_cg_line(e, "a%d %s= %s;", k, op == FSL_OP_reduce_sum ? "+" : "*", sh);
  else if (fl) /* NaN-propagating (helpers.h) */
    fsl_cg_line(e, "a%d = fsl_%s%s(a%d, %s);", k, op == FSL_OP_reduce_max ? "max" : "min",
                is_f32c(n->in[0]->dtype) ? "f" : "d", k, sh);
  else
    fsl_cg_line(e, "const %s v_ = %s; if (v_ %s a%d) a%d = v_;", a->type, sh, op == FSL_OP_reduce_max ? ">" : "<", k, k);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* Into dst: whether (value vb at index ib) beats (va at ia) for argmax /
 * argmin node n (fsl_argtake; index -1: none). */
static void arg_take(const fsl_node *n, const char *vb, const char *ib, const char *va, const char *ia, char *dst,
                     size_t cap) {
  int ismax = n->op == FSL_OP_argmax, last = fsl_attr_int(n, "select_last_index", 0) != 0;
  if (is_f(n->in[0]->dtype))
    snprintf(dst, cap, "fsl_argtake((double)%s, %s, (double)%s, %s, %d, %d)", vb, ib, va, ia, ismax, last);
  else
    snprintf(dst, cap, "(%s >= 0 && (%s < 0 || %s %s %s || (%s == %s && %s %s %s)))", ib, ia, vb, ismax ? ">" : "<", va,
             vb, va, ib, last ? ">" : "<", ia);
}

/* arg_steps / arg_tree: group_tree for argmax / argmin node n, whose
 * work-items hold best value b<k> (type BT) at index a<k> (-1: none);
 * the same exchanges, each keeping the pair that wins (arg_take), the
 * index kept in li<k>[] beside lr<k>[]. */
static void arg_steps(em *e, const fsl_node *n, int k, const char *BT, int from, int lanes) {
  char bv[16], av[16], shb[160], sha[160], take[512];
  snprintf(bv, sizeof bv, "b%d", k);
  snprintf(av, sizeof av, "a%d", k);
  e->d->group->warp_xor(shb, sizeof shb, bv, "s_", lanes, warp_active(e));
  e->d->group->warp_xor(sha, sizeof sha, av, "s_", lanes, warp_active(e));
  fsl_cg_line(e, "for (int s_ = %d; s_ > 0; s_ >>= 1) {", from);
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const %s ob_ = %s; const int64_t oa_ = %s;", BT, shb, sha);
  arg_take(n, "ob_", "oa_", bv, av, take, sizeof take);
  fsl_cg_line(e, "if (%s) { b%d = ob_; a%d = oa_; }", take, k, k);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

static void arg_tree(em *e, const fsl_node *n, int k, const char *BT) {
  const fsl_cg_group *G = e->d->group;
  int gs = e->grp_lanes, W = warp_lanes(G, gs), P = group_partials(G, gs);
  if (W > 1) arg_steps(e, n, k, BT, W / 2, W);
  if (P <= 1) return;
  char w[32], l[96], ls[96], r0[96];
  snprintf(w, sizeof w, "l_ / %d", W);
  part_idx(e, P, W > 1 ? w : "l_", l, sizeof l);
  part_idx(e, P, "l_ + s_", ls, sizeof ls);
  part_idx(e, P, "0", r0, sizeof r0);
  if (W > 1) fsl_cg_line(e, "if ((l_ & %d) == 0) { lr%d[%s] = b%d; li%d[%s] = a%d; }", W - 1, k, l, k, k, l, k);
  else fsl_cg_line(e, "lr%d[%s] = b%d; li%d[%s] = a%d;", k, l, k, k, l, k);
  fsl_cg_line(e, "%s", G->barrier);
  if (W > 1 && P <= W) {
    char lp[32], pi[96];
    snprintf(lp, sizeof lp, "(l_ & %d)", P - 1);
    part_idx(e, P, lp, pi, sizeof pi);
    fsl_cg_line(e, "b%d = lr%d[%s]; a%d = li%d[%s];", k, k, pi, k, k, pi);
    arg_steps(e, n, k, BT, P / 2, W);
  } else {
    char vb[128], ib[128], va[128], ia[128], take[768];
    snprintf(vb, sizeof vb, "lr%d[%s]", k, ls);
    snprintf(ib, sizeof ib, "li%d[%s]", k, ls);
    snprintf(va, sizeof va, "lr%d[%s]", k, l);
    snprintf(ia, sizeof ia, "li%d[%s]", k, l);
    arg_take(n, vb, ib, va, ia, take, sizeof take);
    fsl_cg_line(e, "for (int s_ = %d; s_ > 0; s_ >>= 1) {", P / 2);
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "if (l_ < s_ && %s) { %s = %s; %s = %s; }", take, va, vb, ia, ib);
    fsl_cg_line(e, "%s", G->barrier);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_line(e, "b%d = lr%d[%s]; a%d = li%d[%s];", k, k, r0, k, k, r0);
  }
  fsl_cg_line(e, "%s", G->barrier);
}

/* Work-group rows (dialect group): combines the work-items' accumulators
 * a<k> (and NaN flags n<k>) of reduce node n of a group of gs work-items;
 * every work-item leaves with the row's a<k> (and n<k>).  With warps of W
 * lanes (group->warp): the lanes of each warp combine theirs by W/2, W/4,
 * ..., 1 (XOR butterfly, registers only); then, when the group has P =
 * gs/W > 1 warps, lane 0 of each writes lr<k>[warp], a barrier, and every
 * aligned run of P lanes combines the P partials the same way.  Without
 * warps (P = gs): the partials meet in lr<k>[] in local memory, a tree of
 * halving strides with a barrier after each step (work-item l takes l +
 * s: the same pairs as the butterfly's), read back from lr<k>[0].  A
 * barrier after the read lets the next row write lr<k>[] again. */
static void group_tree(em *e, const fsl_node *n, int k, const fsl_cg_red_acc *a) {
  const fsl_cg_group *G = e->d->group;
  int gs = e->grp_lanes, W = warp_lanes(G, gs), P = group_partials(G, gs);
  fsl_op op = n->op;
  bool fl = is_f(n->in[0]->dtype), tn = fsl_cg_tracks_nan(e, n);
  if (W > 1) {
    if (tn) fsl_cg_line(e, "if (n%d) a%d = (%s)NAN;", k, k, a->type);
    warp_steps(e, n, k, a, W / 2, W);
  }
  if (P > 1) {
    char w[32], lp[32], l[96], ls[96], r0[96];
    snprintf(w, sizeof w, "l_ / %d", W);
    snprintf(lp, sizeof lp, "(l_ & %d)", P - 1);
    part_idx(e, P, W > 1 ? w : "l_", l, sizeof l);
    part_idx(e, P, "l_ + s_", ls, sizeof ls);
    part_idx(e, P, "0", r0, sizeof r0);
    if (W > 1) fsl_cg_line(e, "if ((l_ & %d) == 0) lr%d[%s] = a%d;", W - 1, k, l, k);
    else if (tn) fsl_cg_line(e, "lr%d[%s] = n%d ? (%s)NAN : a%d;", k, l, k, a->type, k);
    else fsl_cg_line(e, "lr%d[%s] = a%d;", k, l, k);
    fsl_cg_line(e, "%s", G->barrier);
    if (W > 1 && P <= W) {
      char pi[96];
      part_idx(e, P, lp, pi, sizeof pi);
      fsl_cg_line(e, "a%d = lr%d[%s];", k, k, pi);
      warp_steps(e, n, k, a, P / 2, W);
    } else {
      fsl_cg_line(e, "for (int s_ = %d; s_ > 0; s_ >>= 1) {", P / 2);
      fsl_cg_open_scope(e);
      if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)
        fsl_cg_line(e, "if (l_ < s_) lr%d[%s] %s= lr%d[%s];", k, l, op == FSL_OP_reduce_sum ? "+" : "*", k, ls);
      else if (fl) /* NaN-propagating (helpers.h) */
        fsl_cg_line(e, "if (l_ < s_) lr%d[%s] = fsl_%s%s(lr%d[%s], lr%d[%s]);", k, l,
                    op == FSL_OP_reduce_max ? "max" : "min", is_f32c(n->in[0]->dtype) ? "f" : "d", k, l, k, ls);
      else
        fsl_cg_line(e, "if (l_ < s_ && lr%d[%s] %s lr%d[%s]) lr%d[%s] = lr%d[%s];", k, ls,
                    op == FSL_OP_reduce_max ? ">" : "<", k, l, k, l, k, ls);
      fsl_cg_line(e, "%s", G->barrier);
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
      fsl_cg_line(e, "a%d = lr%d[%s];", k, k, r0);
    }
  }
  if (tn) fsl_cg_line(e, "n%d = a%d != a%d;", k, k, k);
  if (P > 1) fsl_cg_line(e, "%s", G->barrier);
}

#define SUM_BLOCK 256  /* f32 sums: elements per float partial sum (then added in double) */

/* Float max/min rows of at least 2 x 64 elements are split into 2 or 4
 * contiguous streams of at least 64 (four 64-byte lines of f32), reduced
 * side by side in one loop into an accumulator each: one vector
 * accumulator makes every step wait for the previous max (4 cycles on
 * x86), and max/min are exact in any order.  Softmax 12x128x128 (a row
 * max, then exp and sum) on one AVX2 thread: 124 -> 102 us; per step
 * (FSL_CPU_PROFILE, 2 threads, input fresh) 0.076-0.090 -> 0.070 ms.
 * Four streams of 32 for those rows of 128 read 0.052 -> 0.055 ms per
 * step with AVX-512 (two of 64: 0.059 -> 0.056). */
#define MAX_STREAMS 4
#define STREAM_MIN 64

/* The number of streams of reduce node n's rows (1: one accumulator). */
static int row_streams(const em *e, const fsl_node *n, bool nested, int cache_out, int64_t inner) {
  if (!(n->op == FSL_OP_reduce_max || n->op == FSL_OP_reduce_min) || !is_f(n->in[0]->dtype) || nested || e->grp ||
      cache_out >= 0)
    return 1;
  for (int s = MAX_STREAMS; s > 1; s /= 2)
    if (inner % s == 0 && inner >= (int64_t)s * STREAM_MIN) return s;
  return 1;
}

/* The comparison under which v replaces a max/min accumulator a (v ? a). */
static const char *minmax_cmp(fsl_op op) { return op == FSL_OP_reduce_max ? ">" : "<"; }

/* The float max/min step of reduce k's accumulator of stream q (a<k>, or
 * a<k>_<q> for the streams after the first) over value v (NaN in n<k>
 * with tn, fsl_cg_tracks_nan). */
static void minmax_line(em *e, fsl_op op, int k, int q, const char *v, bool tn) {
  char acc[32];
  snprintf(acc, sizeof acc, q ? "a%d_%d" : "a%d", k, q);
  if (tn) fsl_cg_line(e, "n%d |= %s != %s;", k, v, v);
  fsl_cg_line(e, "%s = %s %s %s ? %s : %s;", acc, v, minmax_cmp(op), acc, v, acc);
}

/* Emits, at the current position (inside a row with kept coordinates
 * o<i> already declared in `oc`), the accumulation of reduce node n into a
 * local r<k> of the output dtype.  Loop-invariant parts of the input go
 * before the loop.  Float max/min track NaN in a flag so that the loop is
 * a plain vectorizable max; f32 sums add SIMD lanes of float partial sums
 * over blocks of SUM_BLOCK elements into a double.  With cache_out >= 0
 * the input element is also stored into output cache_out at cache_oc
 * (the row-space loop then reads it back instead of recomputing it). */
static bool reduce_row(em *e, const fsl_node *n, int k, const coords *oc, int cache_out, const coords *cache_oc) {
  const fsl_value *x = n->in[0];
  unsigned m = fsl_cg_red_mask(n);
  int axes[FSL_MAX_RANK], na = 0;
  int64_t inner = 1;
  for (int i = 0; i < x->rank; i++)
    if (m & (1u << i)) {
      axes[na++] = i;
      inner *= x->dims[i];
    }
  fsl_op op = n->op;
  bool arg = op == FSL_OP_argmax || op == FSL_OP_argmin;
  bool fl = is_f(x->dtype), mx = op == FSL_OP_reduce_max || op == FSL_OP_reduce_min, tn = fsl_cg_tracks_nan(e, n);
  fsl_cg_red_acc a;
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "j", "");
  fsl_cg_win_row w;
  bool nested = fsl_cg_win_plan(e, n, axes, na, oc, -1, &w);
  /* a work-item's strided part of a group row adds straight into double,
   * as does a window row */
  bool fsum = !e->grp && !nested && fl && op == FSL_OP_reduce_sum && x->dtype == FSL_DT_F32 && inner >= 8;
  bool blocked = fsum && inner > SUM_BLOCK;
  int ns = row_streams(e, n, nested, cache_out, inner);
  bool streams = ns > 1;
  if (arg) {
    fsl_cg_line(e, "%s b%d = 0; int64_t a%d = %d;", arg_best_type(e, x), k, k, e->grp ? -1 : 0);
  } else {
    fsl_cg_red_acc_of(e->d, n, &a);
    fsl_cg_line(e, "%s a%d = %s;", a.type, k, a.init);
    for (int q = 1; q < ns; q++) fsl_cg_line(e, "%s a%d_%d = %s;", a.type, k, q, a.init);
  }
  if (tn) fsl_cg_line(e, "int n%d = 0;", k);
  char n_inner[32];
  snprintf(n_inner, sizeof n_inner, "%lld", (long long)(inner / ns));
  if (blocked) {
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "jb_", .lo = "0", .hi = n_inner, .step = SUM_BLOCK});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int64_t je_ = jb_ + %d < %lld ? jb_ + %d : %lld;", SUM_BLOCK, (long long)inner, SUM_BLOCK,
         (long long)inner);
  }
  if (fsum) fsl_cg_line(e, "float ps%d = 0.0f;", k);
  /* the accumulations below may be reassociated: let the compiler vectorize */
  fsl_cg_loop jl = {.kind = FSL_CG_SERIAL, .var = "j_", .lo = blocked ? "jb_" : "0", .hi = blocked ? "je_" : n_inner};
  char r0[64] = "", r1[32] = "";
  if (fsum) snprintf(r0, sizeof r0, "+:ps%d", k);
  else if (streams) {
    size_t o = (size_t)snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_max ? "max" : "min", k);
    for (int q = 1; q < ns && o < sizeof r0; q++) o += (size_t)snprintf(r0 + o, sizeof r0 - o, ",a%d_%d", k, q);
  } else if (!arg && (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod) && inner >= 8)
    snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_sum ? "+" : "*", k);
  else if (mx && inner >= 8)
    snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_max ? "max" : "min", k);
  if (r0[0] && tn) snprintf(r1, sizeof r1, "|:n%d", k);
  coords c = *oc;
  c.rank = x->rank;
  if (nested) {
    /* the window's innermost loop is a SIMD loop whatever its extent */
    if (!r0[0] && (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod || mx)) {
      snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_sum ? "+" : op == FSL_OP_reduce_prod ? "*" :
                                        op == FSL_OP_reduce_max ? "max" : "min", k);
      if (tn) snprintf(r1, sizeof r1, "|:n%d", k);
    }
    for (int q = 0; q < na; q++) snprintf(c.c[axes[q]], CLEN, "0");
    for (int q = 0; q < w.nn; q++) memcpy(c.c[w.axis[q]], w.var[q], CLEN);
    for (int q = 0; q + 1 < w.nn; q++) {
      fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = w.var[q], .lo = w.lo[q], .hi = w.hi[q]});
      fsl_cg_open_scope(e);
    }
    jl.var = w.var[w.nn - 1];
    jl.lo = w.lo[w.nn - 1];
    jl.hi = w.hi[w.nn - 1];
  }
  if (r0[0]) {
    jl.kind = FSL_CG_SIMD;
    jl.red[jl.n_red++] = r0;
    if (r1[0]) jl.red[jl.n_red++] = r1;
    jl.red[jl.n_red++] = "|:e_";
  }
  char row_hi[64];
  row_bound(e, n_inner, row_hi, sizeof row_hi);
  if (e->grp) jl = (fsl_cg_loop){.kind = FSL_CG_LANES, .var = "j_", .lo = "0", .hi = row_hi, .step = e->grp_lanes};
  fsl_cg_loop_open(e, &jl);
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  char v[CLEN];
  bool ok = true;
  /* stream q at j_ + q inner / ns, each in a scope of its own (the memo
   * of one stream's values ends with it) */
  for (int q = 0; streams && q < ns && ok; q++) {
    fsl_cg_line(e, "{");
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int64_t jq_ = j_ + %lld;", (long long)(q * (inner / ns)));
    coords cq = c;
    fsl_cg_decompose(e, "jq_", na, axes, x->dims, "j", &cq);
    if ((ok = fsl_cg_ev(e, x, &cq, v))) minmax_line(e, op, k, q, v, tn);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  if (!streams && !nested) fsl_cg_decompose(e, "j_", na, axes, x->dims, "j", &c);
  if (!streams) ok = nested && w.src ? fsl_cg_win_ev(e, &w, &c, v) : fsl_cg_ev(e, x, &c, v);
  if (ok && cache_out >= 0) {
    char idx[CLEN];
    fsl_cg_flat_index(e, e->s->out[cache_out]->rank, e->s->out[cache_out]->dims, cache_oc, idx);
    char sv[2 * CLEN + 16];
    fsl_cg_conv(e->d, e->s->out[cache_out]->dtype, false, v, sv, sizeof sv);
    fsl_cg_line(e, "out%d[%s] = %s;", cache_out, idx, sv);
  }
  if (!ok || streams) {
  } else if (arg) {
    int last = fsl_attr_int(n, "select_last_index", 0) != 0, ismax = op == FSL_OP_argmax;
    /* a work-item of a group row starts at its first element, j_ = l_ */
    char first[16];
    snprintf(first, sizeof first, e->grp ? "a%d < 0" : "j_ == 0", k);
    if (fl)
      fsl_cg_line(e, "if (%s || fsl_argbetter((double)%s, (double)b%d, %d, %d)) { b%d = %s; a%d = j_; }", first, v, k,
                  ismax, last, k, v, k);
    else
      fsl_cg_line(e, "if (%s || %s %s b%d || (%d && %s == b%d)) { b%d = %s; a%d = j_; }", first, v, ismax ? ">" : "<", k,
                  last, v, k, k, v, k);
  } else if (fl) {
    switch (op) {
    case FSL_OP_reduce_sum:
      if (fsum) fsl_cg_line(e, "ps%d += %s;", k, v);
      else fsl_cg_line(e, "a%d += (double)%s;", k, v);
      break;
    case FSL_OP_reduce_prod: fsl_cg_line(e, "a%d *= (double)%s;", k, v); break;
    default: minmax_line(e, op, k, 0, v, tn);
    }
  } else {
    switch (op) {
    case FSL_OP_reduce_sum: fsl_cg_line(e, "a%d += (uint64_t)%s;", k, v); break;
    case FSL_OP_reduce_prod: fsl_cg_line(e, "a%d *= (uint64_t)%s;", k, v); break;
    case FSL_OP_reduce_max: fsl_cg_line(e, "a%d = (%s)%s > a%d ? (%s)%s : a%d;", k, a.type, v, k, a.type, v, k); break;
    default: fsl_cg_line(e, "a%d = (%s)%s < a%d ? (%s)%s : a%d;", k, a.type, v, k, a.type, v, k);
    }
  }
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  for (int q = 0; nested && q + 1 < w.nn; q++) {
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  if (blocked) {
    fsl_cg_line(e, "a%d += (double)ps%d;", k, k);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  } else if (fsum) {
    fsl_cg_line(e, "a%d = (double)ps%d;", k, k);
  }
  fsl_cg_loop_end(e, &lc);
  if (!ok) return false;
  for (int q = 1; q < ns; q++)
    fsl_cg_line(e, "a%d = a%d_%d %s a%d ? a%d_%d : a%d;", k, k, q, minmax_cmp(op), k, k, q, k);
  if (e->grp && arg) arg_tree(e, n, k, arg_best_type(e, x));
  else if (e->grp) group_tree(e, n, k, &a);
  const char *Y = fsl_cg_ctype(e->d, n->out[0]->dtype);
  if (arg) fsl_cg_line(e, "const int64_t r%d = a%d;", k, k);
  else if (tn) fsl_cg_line(e, "const %s r%d = n%d ? (%s)NAN : (%s)a%d;", Y, k, k, Y, Y, k);
  else fsl_cg_line(e, "const %s r%d = (%s)a%d;", Y, k, Y, k);
  return true;
}

/* Whether computing v inside the kernel costs a transcendental function
 * (looking through elementwise nodes). */
static bool costly(const em *e, const fsl_value *v, int depth) {
  if (!e->inside[v->id] || depth > 16) return false;
  const fsl_node *n = v->producer;
  if (fsl_op_get(n->op)->kind != FSL_KIND_ELEMENTWISE) return false;
  if (fsl_cg_float_unary(n->op) || n->op == FSL_OP_sigmoid || n->op == FSL_OP_pow) {
    if (n->op != FSL_OP_abs && n->op != FSL_OP_floor && n->op != FSL_OP_ceil && n->op != FSL_OP_round) return true;
  }
  for (int i = 0; i < n->n_in; i++)
    if (costly(e, n->in[i], depth + 1)) return true;
  return false;
}

/* Whether v reads x at its own coordinates through elementwise nodes of
 * the kernel only. */
static bool reaches(const em *e, const fsl_value *v, const fsl_value *x, int depth) {
  if (v == x) return true;
  if (!e->inside[v->id] || depth > 16) return false;
  const fsl_node *n = v->producer;
  if (fsl_op_get(n->op)->kind != FSL_KIND_ELEMENTWISE) return false;
  for (int i = 0; i < n->n_in; i++)
    if (fsl_value_same_shape(n->in[i], v) && reaches(e, n->in[i], x, depth + 1)) return true;
  return false;
}

void fsl_cg_row_loop_open(em *e, int64_t outer, int64_t inner) {
  char n_outer[32];
  snprintf(n_outer, sizeof n_outer, "%lld", (long long)outer);
  bool par = outer * inner > e->d->par_min && (outer > 1 || e->d->par_min == 0);
  if (e->grp && e->grp_rows > 1) {
    /* grp_rows rows per group: row q_ of group iteration t_; a work-item
     * past the last row works on the last one (every work-item meets
     * every barrier) but loads and stores nothing in its loops (rv_) */
    int R = e->grp_rows;
    snprintf(n_outer, sizeof n_outer, "%lld", (long long)((outer + R - 1) / R));
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_GROUPS, .var = "t_", .lo = "0", .hi = n_outer, .n_red = 1,
                                       .red = {"|:err_"}});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int rv_ = t_ * %d + q_ < %lld;", R, (long long)outer);
    fsl_cg_line(e, "const int64_t o_ = rv_ ? t_ * %d + q_ : %lld;", R, (long long)(outer - 1));
    fsl_cg_line(e, "int e_ = 0;");
    return;
  }
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = e->grp ? FSL_CG_GROUPS : par ? FSL_CG_PARALLEL : FSL_CG_SERIAL,
                                     .var = "o_", .lo = "0", .hi = n_outer, .n_red = 1, .red = {"|:err_"}});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "int e_ = 0;");
}

/* Whether the fused body runs its rows with work-groups (e->grp): the
 * dialect has them, rows have more than one element and the accumulators
 * (an argmax/argmin: its best value and index) fit in local memory.
 * A row gets gs work-items (grp_lanes): the dialect's group size or, for
 * shorter rows, the smallest power of two that covers a row; rows shorter
 * than a group share one, R = grp_rows of them (a power of two, at most
 * group size / gs and the rows there are, within local memory).  Then
 * declares the accumulators at kernel scope, lr<k>[P * R] with P partials
 * per row (group_tree: one per warp, or per work-item without warps; none
 * when a row is one warp), and l_, the work-item's index in its row (q_:
 * its row in the group when R > 1), and sets the launch: groups of gs * R
 * work-items, one per R rows. */
static void group_open(em *e, const fsl_node **red, int nr, int64_t outer, int64_t inner) {
  const fsl_cg_group *G = e->d->group;
  if (!G || inner <= 1) return;
  int gs = 1;
  while (gs < G->size && gs < inner) gs *= 2;
  int P = group_partials(G, gs);
  long long bytes = 0;
  for (int k = 0; k < nr; k++) bytes += P > 1 ? (long long)acc_bytes(red[k]) * P : 0;
  if (bytes > G->local_bytes) return;
  /* rows shorter than a group share one: R rows of gs work-items */
  int R = 1;
  while ((long long)R * 2 * gs <= G->size && R < outer && (long long)R * 2 * bytes <= G->local_bytes) R *= 2;
  e->grp = true;
  e->grp_lanes = gs;
  e->grp_rows = R;
  e->launch = (fsl_cg_launch){.group_size = gs * R, .groups = (outer + R - 1) / R};
  for (int k = 0; k < nr && P > 1; k++) {
    if (is_arg(red[k])) {
      fsl_cg_line(e, "%s%s lr%d[%d];", G->local_kw, arg_best_type(e, red[k]->in[0]), k, P * R);
      fsl_cg_line(e, "%sint64_t li%d[%d];", G->local_kw, k, P * R);
      continue;
    }
    fsl_cg_red_acc a;
    fsl_cg_red_acc_of(e->d, red[k], &a);
    fsl_cg_line(e, "%s%s lr%d[%d];", G->local_kw, a.type, k, P * R);
  }
  if (R > 1) fsl_cg_line(e, "const int64_t lg_ = %s, q_ = lg_ / %d, l_ = lg_ %% %d;", G->local_id, gs, gs);
  else fsl_cg_line(e, "const int64_t l_ = %s;", G->local_id);
}

/* Fused REDUCE body: one parallel loop over the kept space; per row every
 * reduction in order, then the outputs. */
bool fsl_cg_fused_body(em *e, const fsl_node **red, int nr) {
  const fsl_cg_spec *s = e->s;
  const fsl_value *x0 = red[0]->in[0];
  unsigned m0 = fsl_cg_red_mask(red[0]);
  for (int k = 1; k < nr; k++)
    if (!fsl_value_same_shape(red[k]->in[0], x0) || fsl_cg_red_mask(red[k]) != m0) {
      e->fused_fail = true;
      return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "reductions over different spaces");
    }
  int r = x0->rank, kept[FSL_MAX_RANK], nk = 0;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < r; i++) {
    if (m0 & (1u << i)) inner *= x0->dims[i];
    else {
      kept[nk++] = i;
      outer *= x0->dims[i];
    }
  }
  /* classify outputs: kept-space (coordinates o<i>) or row-space (o<i>, j<i>) */
  int64_t nonone_k[FSL_MAX_RANK], nonone_r[FSL_MAX_RANK];
  int nk1 = 0, nr1 = 0;
  for (int i = 0; i < r; i++) {
    if (x0->dims[i] == 1) continue;
    nonone_r[nr1++] = i;
    if (!(m0 & (1u << i))) nonone_k[nk1++] = i;
  }
  int *cls = calloc((size_t)(s->n_out > 0 ? s->n_out : 1), sizeof(int));
  coords *oc = calloc((size_t)(s->n_out > 0 ? s->n_out : 1), sizeof(coords));
  bool ok = cls && oc;
  if (!ok) {
    free(cls);
    free(oc);
    return fsl_cg_fail(e, FSL_ERR_NOMEM, "out of memory");
  }
  for (int j = 0; j < s->n_out && ok; j++) {
    const fsl_value *v = s->out[j];
    for (int want = 1; want <= 2 && !cls[j]; want++) {
      const int64_t *ax = want == 1 ? nonone_k : nonone_r;
      int na = want == 1 ? nk1 : nr1, p = 0;
      bool match = true;
      oc[j].rank = v->rank;
      for (int i = 0; i < v->rank && match; i++) {
        if (v->dims[i] == 1) {
          snprintf(oc[j].c[i], CLEN, "0");
          continue;
        }
        if (p >= na || x0->dims[ax[p]] != v->dims[i]) match = false;
        else {
          snprintf(oc[j].c[i], CLEN, "%s%d", (m0 & (1u << ax[p])) ? "j" : "o", (int)ax[p]);
          p++;
        }
      }
      if (match && p == na) cls[j] = want;
    }
    if (!cls[j]) {
      e->fused_fail = true;
      ok = fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "output '%s' is neither in the kept nor the row space", v->name ? v->name : "?");
    }
  }
  bool cols = false;
  if (ok) ok = fsl_cg_cols(e, red, nr, cls, oc, 0, &cols);
  if (ok && cols) e->n_red = nr;
  if (ok && !cols && !rows_ok(e, red, nr)) e->fused_fail = true, ok = false;
  if (ok && !cols) {
    group_open(e, red, nr, outer, inner);
    fsl_cg_row_loop_open(e, outer, inner);
    coords c;
    c.rank = r;
    for (int i = 0; i < r; i++) snprintf(c.c[i], CLEN, "0");
    fsl_cg_decompose(e, "o_", nk, kept, x0->dims, "o", &c);
    /* a costly f32 sum input that a row-space output also reads at the
     * same element (softmax's exp) is kept in that output's buffer */
    int ck = -1, cj = -1;
    for (int k = 0; k < nr && ck < 0; k++) {
      const fsl_value *x = red[k]->in[0];
      if (red[k]->op != FSL_OP_reduce_sum || x->dtype != FSL_DT_F32 || !costly(e, x, 0)) continue;
      for (int j = 0; j < s->n_out && cj < 0; j++)
        if (cls[j] == 2 && s->out[j]->dtype == x->dtype && fsl_value_same_shape(s->out[j], x) && reaches(e, s->out[j], x, 0)) {
          ck = k;
          cj = j;
        }
    }
    for (int k = 0; k < nr && ok; k++) {
      ok = reduce_row(e, red[k], k, &c, k == ck ? cj : -1, k == ck ? &oc[cj] : NULL);
      e->n_red = k + 1;
    }
    /* kept-space outputs: once per row (the group's first work-item) */
    bool any_kept = false;
    for (int j = 0; j < s->n_out; j++) any_kept = any_kept || cls[j] == 1;
    if (any_kept && e->grp) {
      fsl_cg_line(e, "if (l_ == 0%s) {", e->grp_rows > 1 ? " && rv_" : "");
      fsl_cg_open_scope(e);
    }
    for (int j = 0; j < s->n_out && ok; j++)
      if (cls[j] == 1) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
    if (any_kept && e->grp) {
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
    /* an output that is the cached value itself already holds its row (a
     * kernel with a reduction has no output layout: fsl_codegen_kernel) */
    int done_j = ck >= 0 && s->out[cj] == red[ck]->in[0] ? cj : -1;
    bool any_row = false;
    for (int j = 0; j < s->n_out; j++) any_row = any_row || (cls[j] == 2 && j != done_j);
    if (ok && any_row) {
      int axes[FSL_MAX_RANK], na = 0;
      for (int i = 0; i < r; i++)
        if (m0 & (1u << i)) axes[na++] = i;
      loop_ctx lc;
      fsl_cg_loop_begin(e, &lc, "j", "");
      char n_inner[32];
      snprintf(n_inner, sizeof n_inner, "%lld", (long long)inner);
      /* in a group row, each work-item writes the elements it reduced (the cached ones among them) */
      char row_hi[64];
      row_bound(e, n_inner, row_hi, sizeof row_hi);
      fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = e->grp ? FSL_CG_LANES : FSL_CG_SERIAL, .var = "j_", .lo = "0",
                                         .hi = row_hi, .step = e->grp ? e->grp_lanes : 1});
      fsl_cg_open_scope(e);
      e->body_depth = e->depth;
      coords jc = c;
      fsl_cg_decompose(e, "j_", na, axes, x0->dims, "j", &jc);
      if (ck >= 0) {
        e->cache_on = true;
        e->cache_vid = red[ck]->in[0]->id;
        e->cache_out = cj;
        e->cache_c = jc;
        e->cache_oc = oc[cj];
      }
      for (int j = 0; j < s->n_out && ok; j++)
        if (cls[j] == 2 && j != done_j) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
      e->cache_on = false;
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
      fsl_cg_loop_end(e, &lc);
    }
    fsl_cg_line(e, "err_ |= e_;");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  free(cls);
  free(oc);
  return ok;
}

/* The kernel output that holds reduction result y's elements in y's
 * row-major order: y itself, or a reshape of it inside the kernel (a
 * pooling's kernel axes dropped) stored row-major; -1 when none. */
static int result_output(const em *e, const fsl_value *y) {
  const fsl_cg_spec *s = e->s;
  for (int j = 0; j < s->n_out; j++) {
    const fsl_value *v = s->out[j];
    while (v != y && v->producer && v->producer->op == FSL_OP_reshape && v->producer->in[0] &&
           e->inside[v->producer->in[0]->id])
      v = v->producer->in[0];
    if (v == y && (s->out[j] == y || !fsl_cg_out_layout(e, j))) return j;
  }
  return -1;
}

/* Multi-pass REDUCE body: each reduction into a scratch buffer (or the
 * output buffer holding its result, result_output: no copy after the last
 * pass of a separable MaxPool) in its own parallel loop, then loop nests
 * for the rest. */
bool fsl_cg_passes_body(em *e, const fsl_node **red, int nr) {
  const fsl_cg_spec *s = e->s;
  if (!e->d->multi_pass) return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "reductions needing several passes");
  bool *done = calloc((size_t)(s->n_out > 0 ? s->n_out : 1), sizeof(bool));
  int *oj = malloc(sizeof(int) * (size_t)(nr > 0 ? nr : 1)); /* reduction k -> the output it writes, -1: scratch */
  if (!done || !oj) {
    free(done);
    free(oj);
    return fsl_cg_fail(e, FSL_ERR_NOMEM, "out of memory");
  }
  for (int k = 0; k < nr; k++) {
    const fsl_value *y = red[k]->out[0];
    oj[k] = result_output(e, y);
    if (oj[k] >= 0 && done[oj[k]]) oj[k] = -1;
    if (oj[k] >= 0) {
      fsl_cg_line(e, "%s *s%d = out%d;", fsl_cg_stype(e->d, y->dtype), k, oj[k]);
      done[oj[k]] = true;
    } else {
      fsl_cg_line(e, "%s *s%d = NULL;", fsl_cg_stype(e->d, y->dtype), k);
    }
  }
  for (int k = 0; k < nr; k++) {
    const fsl_value *y = red[k]->out[0];
    if (oj[k] >= 0) continue;
    fsl_cg_line(e, "s%d = (%s *)malloc(%lld);", k, fsl_cg_stype(e->d, y->dtype), (long long)(fsl_value_nbytes(y) > 0 ? fsl_value_nbytes(y) : 1));
    fsl_cg_line(e, "if (!s%d) { err_ |= %d; goto done_; }", k, FSL_KERR_NOMEM);
  }
  bool ok = true;
  for (int k = 0; k < nr && ok; k++) {
    const fsl_node *n = red[k];
    const fsl_value *x = n->in[0], *y = n->out[0];
    unsigned m = fsl_cg_red_mask(n);
    int kept[FSL_MAX_RANK], nk = 0;
    int64_t outer = fsl_value_numel(y), inner = 1;
    for (int i = 0; i < x->rank; i++) {
      if (m & (1u << i)) inner *= x->dims[i];
      else kept[nk++] = i;
    }
    if (outer == 0) continue;
    fsl_cg_line(e, "{");
    fsl_cg_open_scope(e);
    bool cols = false;
    ok = fsl_cg_cols(e, &red[k], 1, NULL, NULL, k, &cols);
    if (ok && !cols) ok = rows_ok(e, &red[k], 1);
    if (ok && !cols) {
      fsl_cg_row_loop_open(e, outer, inner);
      coords c;
      c.rank = x->rank;
      for (int i = 0; i < x->rank; i++) snprintf(c.c[i], CLEN, "0");
      fsl_cg_decompose(e, "o_", nk, kept, x->dims, "o", &c);
      ok = reduce_row(e, n, k, &c, -1, NULL);
      char rk[16], sv[CLEN + 16];
      snprintf(rk, sizeof rk, "r%d", k);
      fsl_cg_conv(e->d, y->dtype, false, rk, sv, sizeof sv);
      fsl_cg_line(e, "s%d[o_] = %s;", k, sv);
      fsl_cg_line(e, "err_ |= e_;");
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  if (ok) ok = fsl_cg_output_loops(e, done);
  free(done);
  if (ok) {
    fsl_cg_line(e, "goto done_;");
    fsl_cg_line(e, "done_:");
    for (int k = 0; k < nr; k++)
      if (oj[k] < 0) fsl_cg_line(e, "free(s%d);", k);
    fsl_cg_line(e, ";");
  }
  free(oj);
  return ok;
}
