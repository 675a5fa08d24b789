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
  a->type = sg ? "int64_t" : "uint64_t";
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

/* Bytes of reduce node n's accumulator (fsl_cg_red_acc_of). */
static int acc_bytes(const fsl_node *n) {
  fsl_dtype dt = n->in[0]->dtype;
  if (is_f(dt) && n->op != FSL_OP_reduce_sum && n->op != FSL_OP_reduce_prod) return (int)fsl_dtype_size(dt);
  return 8;
}

/* Work-items of a group of gs that exchange accumulators directly
 * (group->warp; 1: none). */
static int warp_lanes(const fsl_cg_group *G, int gs) { return G->warp > 1 ? (gs < G->warp ? gs : G->warp) : 1; }

/* Partial results of a group row that meet in local memory: one per
 * warp (per work-item without warps); 1: none, no local memory. */
static int group_partials(const fsl_cg_group *G, int gs) { return gs / warp_lanes(G, gs); }

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
  e->d->group->warp_xor(sh, sizeof sh, av, "s_", lanes);
  fsl_cg_line(e, "for (int s_ = %d; s_ > 0; s_ >>= 1) {", from);
  fsl_cg_open_scope(e);
  if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)
    fsl_cg_line(e, "a%d %s= %s;", k, op == FSL_OP_reduce_sum ? "+" : "*", sh);
  else if (fl) /* NaN-propagating (helpers.h) */
    fsl_cg_line(e, "a%d = fsl_%s%s(a%d, %s);", k, op == FSL_OP_reduce_max ? "max" : "min",
                n->in[0]->dtype == FSL_DT_F32 ? "f" : "d", k, sh);
  else
    fsl_cg_line(e, "const %s v_ = %s; if (v_ %s a%d) a%d = v_;", a->type, sh, op == FSL_OP_reduce_max ? ">" : "<", k, k);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
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
  int gs = e->launch.group_size, W = warp_lanes(G, gs), P = group_partials(G, gs);
  fsl_op op = n->op;
  bool fl = is_f(n->in[0]->dtype), mx = op == FSL_OP_reduce_max || op == FSL_OP_reduce_min;
  if (W > 1) {
    if (fl && mx) fsl_cg_line(e, "if (n%d) a%d = (%s)NAN;", k, k, a->type);
    warp_steps(e, n, k, a, W / 2, W);
  }
  if (P > 1) {
    if (W > 1) fsl_cg_line(e, "if ((l_ & %d) == 0) lr%d[l_ / %d] = a%d;", W - 1, k, W, k);
    else if (fl && mx) fsl_cg_line(e, "lr%d[l_] = n%d ? (%s)NAN : a%d;", k, k, a->type, k);
    else fsl_cg_line(e, "lr%d[l_] = a%d;", k, k);
    fsl_cg_line(e, "%s", G->barrier);
    if (W > 1 && P <= W) {
      fsl_cg_line(e, "a%d = lr%d[l_ & %d];", k, k, P - 1);
      warp_steps(e, n, k, a, P / 2, W);
    } else {
      fsl_cg_line(e, "for (int s_ = %d; s_ > 0; s_ >>= 1) {", P / 2);
      fsl_cg_open_scope(e);
      if (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod)
        fsl_cg_line(e, "if (l_ < s_) lr%d[l_] %s= lr%d[l_ + s_];", k, op == FSL_OP_reduce_sum ? "+" : "*", k);
      else if (fl) /* NaN-propagating (helpers.h) */
        fsl_cg_line(e, "if (l_ < s_) lr%d[l_] = fsl_%s%s(lr%d[l_], lr%d[l_ + s_]);", k,
                    op == FSL_OP_reduce_max ? "max" : "min", n->in[0]->dtype == FSL_DT_F32 ? "f" : "d", k, k);
      else
        fsl_cg_line(e, "if (l_ < s_ && lr%d[l_ + s_] %s lr%d[l_]) lr%d[l_] = lr%d[l_ + s_];", k,
                    op == FSL_OP_reduce_max ? ">" : "<", k, k, k);
      fsl_cg_line(e, "%s", G->barrier);
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
      fsl_cg_line(e, "a%d = lr%d[0];", k, k);
    }
  }
  if (fl && mx) fsl_cg_line(e, "n%d = a%d != a%d;", k, k, k);
  if (P > 1) fsl_cg_line(e, "%s", G->barrier);
}

#define SUM_BLOCK 256  /* f32 sums: elements per float partial sum (then added in double) */

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
  bool fl = is_f(x->dtype), mx = op == FSL_OP_reduce_max || op == FSL_OP_reduce_min;
  fsl_cg_red_acc a;
  const char *T = fsl_cg_ctype(e->d, x->dtype);
  loop_ctx lc;
  fsl_cg_loop_begin(e, &lc, "j", "");
  fsl_cg_win_row w;
  bool nested = fsl_cg_win_plan(e, n, axes, na, oc, &w);
  /* a work-item's strided part of a group row adds straight into double,
   * as does a window row */
  bool fsum = !e->grp && !nested && fl && op == FSL_OP_reduce_sum && x->dtype == FSL_DT_F32 && inner >= 8;
  bool blocked = fsum && inner > SUM_BLOCK;
  if (arg) {
    fsl_cg_line(e, "%s b%d = 0; int64_t a%d = 0;", T, k, k);
  } else {
    fsl_cg_red_acc_of(e->d, n, &a);
    fsl_cg_line(e, "%s a%d = %s;", a.type, k, a.init);
  }
  if (fl && mx) fsl_cg_line(e, "int n%d = 0;", k);
  char n_inner[32];
  snprintf(n_inner, sizeof n_inner, "%lld", (long long)inner);
  if (blocked) {
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "jb_", .lo = "0", .hi = n_inner, .step = SUM_BLOCK});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int64_t je_ = jb_ + %d < %lld ? jb_ + %d : %lld;", SUM_BLOCK, (long long)inner, SUM_BLOCK,
         (long long)inner);
  }
  if (fsum) fsl_cg_line(e, "float ps%d = 0.0f;", k);
  /* the accumulations below may be reassociated: let the compiler vectorize */
  fsl_cg_loop jl = {.kind = FSL_CG_SERIAL, .var = "j_", .lo = blocked ? "jb_" : "0", .hi = blocked ? "je_" : n_inner};
  char r0[32] = "", r1[32] = "";
  if (fsum) snprintf(r0, sizeof r0, "+:ps%d", k);
  else if (!arg && (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod) && inner >= 8)
    snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_sum ? "+" : "*", k);
  else if (mx && inner >= 8)
    snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_max ? "max" : "min", k);
  if (r0[0] && mx && fl) snprintf(r1, sizeof r1, "|:n%d", k);
  coords c = *oc;
  c.rank = x->rank;
  if (nested) {
    /* the window's innermost loop is a SIMD loop whatever its extent */
    if (!r0[0] && (op == FSL_OP_reduce_sum || op == FSL_OP_reduce_prod || mx)) {
      snprintf(r0, sizeof r0, "%s:a%d", op == FSL_OP_reduce_sum ? "+" : op == FSL_OP_reduce_prod ? "*" :
                                        op == FSL_OP_reduce_max ? "max" : "min", k);
      if (mx && fl) snprintf(r1, sizeof r1, "|:n%d", k);
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
  if (e->grp) jl = (fsl_cg_loop){.kind = FSL_CG_LANES, .var = "j_", .lo = "0", .hi = n_inner, .step = e->launch.group_size};
  fsl_cg_loop_open(e, &jl);
  fsl_cg_open_scope(e);
  e->body_depth = e->depth;
  if (!nested) fsl_cg_decompose(e, "j_", na, axes, x->dims, "j", &c);
  char v[CLEN];
  bool ok = nested && w.src ? fsl_cg_win_ev(e, &w, &c, v) : fsl_cg_ev(e, x, &c, v);
  if (ok && cache_out >= 0) {
    char idx[CLEN];
    fsl_cg_flat_index(e, e->s->out[cache_out]->rank, e->s->out[cache_out]->dims, cache_oc, idx);
    fsl_cg_line(e, "out%d[%s] = %s;", cache_out, idx, v);
  }
  if (!ok) {
  } else if (arg) {
    int last = fsl_attr_int(n, "select_last_index", 0) != 0, ismax = op == FSL_OP_argmax;
    if (fl)
      fsl_cg_line(e, "if (j_ == 0 || fsl_argbetter((double)%s, (double)b%d, %d, %d)) { b%d = %s; a%d = j_; }", v, k, ismax,
           last, k, v, k);
    else
      fsl_cg_line(e, "if (j_ == 0 || %s %s b%d || (%d && %s == b%d)) { b%d = %s; a%d = j_; }", v, ismax ? ">" : "<", k, last,
           v, k, k, v, k);
  } else if (fl) {
    switch (op) {
    case FSL_OP_reduce_sum:
      if (fsum) fsl_cg_line(e, "ps%d += %s;", k, v);
      else fsl_cg_line(e, "a%d += (double)%s;", k, v);
      break;
    case FSL_OP_reduce_prod: fsl_cg_line(e, "a%d *= (double)%s;", k, v); break;
    case FSL_OP_reduce_max: fsl_cg_line(e, "n%d |= %s != %s; a%d = %s > a%d ? %s : a%d;", k, v, v, k, v, k, v, k); break;
    default: fsl_cg_line(e, "n%d |= %s != %s; a%d = %s < a%d ? %s : a%d;", k, v, v, k, v, k, v, k);
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
  if (e->grp) group_tree(e, n, k, &a);
  const char *Y = fsl_cg_ctype(e->d, n->out[0]->dtype);
  if (arg) fsl_cg_line(e, "const int64_t r%d = a%d;", k, k);
  else if (fl && mx) fsl_cg_line(e, "const %s r%d = n%d ? (%s)NAN : (%s)a%d;", Y, k, k, Y, Y, k);
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
    if (fsl_cg_same_shape(n->in[i], v) && reaches(e, n->in[i], x, depth + 1)) return true;
  return false;
}

void fsl_cg_row_loop_open(em *e, int64_t outer, int64_t inner) {
  char n_outer[32];
  snprintf(n_outer, sizeof n_outer, "%lld", (long long)outer);
  bool par = outer * inner > e->d->par_min && (outer > 1 || e->d->par_min == 0);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = e->grp ? FSL_CG_GROUPS : par ? FSL_CG_PARALLEL : FSL_CG_SERIAL,
                                     .var = "o_", .lo = "0", .hi = n_outer, .n_red = 1, .red = {"|:err_"}});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "int e_ = 0;");
}

/* Whether the fused body runs its rows with work-groups (e->grp): the
 * dialect has them, rows have more than one element, no reduction is an
 * argmax/argmin (ties would need the index in the tree too) and the
 * accumulators fit in local memory.  Then declares them at kernel scope,
 * lr<k>[P] with P partials per row (group_tree: one per warp, or per
 * work-item without warps; none when a row is one warp), and l_, the
 * work-item's index in its group, and sets the launch: one group per row,
 * of the dialect's group size or, for shorter rows, the smallest power of
 * two that covers a row. */
static void group_open(em *e, const fsl_node **red, int nr, int64_t outer, int64_t inner) {
  const fsl_cg_group *G = e->d->group;
  if (!G || inner <= 1) return;
  int gs = 1;
  while (gs < G->size && gs < inner) gs *= 2;
  int P = group_partials(G, gs);
  long long bytes = 0;
  for (int k = 0; k < nr; k++) {
    if (red[k]->op == FSL_OP_argmax || red[k]->op == FSL_OP_argmin) return;
    bytes += P > 1 ? (long long)acc_bytes(red[k]) * P : 0;
  }
  if (bytes > G->local_bytes) return;
  e->grp = true;
  e->launch = (fsl_cg_launch){.group_size = gs, .groups = outer};
  for (int k = 0; k < nr && P > 1; k++) {
    fsl_cg_red_acc a;
    fsl_cg_red_acc_of(e->d, red[k], &a);
    fsl_cg_line(e, "%s%s lr%d[%d];", G->local_kw, a.type, k, P);
  }
  fsl_cg_line(e, "const int64_t l_ = %s;", G->local_id);
}

/* Fused REDUCE body: one parallel loop over the kept space; per row every
 * reduction in order, then the outputs. */
bool fsl_cg_fused_body(em *e, const fsl_node **red, int nr) {
  const fsl_cg_spec *s = e->s;
  const fsl_value *x0 = red[0]->in[0];
  unsigned m0 = fsl_cg_red_mask(red[0]);
  for (int k = 1; k < nr; k++)
    if (!fsl_cg_same_shape(red[k]->in[0], x0) || fsl_cg_red_mask(red[k]) != m0) {
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
        if (cls[j] == 2 && s->out[j]->dtype == x->dtype && fsl_cg_same_shape(s->out[j], x) && reaches(e, s->out[j], x, 0)) {
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
      fsl_cg_line(e, "if (l_ == 0) {");
      fsl_cg_open_scope(e);
    }
    for (int j = 0; j < s->n_out && ok; j++)
      if (cls[j] == 1) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
    if (any_kept && e->grp) {
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
    bool any_row = false;
    for (int j = 0; j < s->n_out; j++) any_row = any_row || cls[j] == 2;
    if (ok && any_row) {
      int axes[FSL_MAX_RANK], na = 0;
      for (int i = 0; i < r; i++)
        if (m0 & (1u << i)) axes[na++] = i;
      loop_ctx lc;
      fsl_cg_loop_begin(e, &lc, "j", "");
      char n_inner[32];
      snprintf(n_inner, sizeof n_inner, "%lld", (long long)inner);
      /* in a group row, each work-item writes the elements it reduced (the cached ones among them) */
      fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = e->grp ? FSL_CG_LANES : FSL_CG_SERIAL, .var = "j_", .lo = "0",
                                         .hi = n_inner, .step = e->grp ? e->launch.group_size : 1});
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
        if (cls[j] == 2) ok = fsl_cg_store_outputs(e, 1, &j, &oc[j]);
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

/* Multi-pass REDUCE body: each reduction into a scratch buffer (or its
 * output buffer) in its own parallel loop, then loop nests for the rest. */
bool fsl_cg_passes_body(em *e, const fsl_node **red, int nr) {
  const fsl_cg_spec *s = e->s;
  if (!e->d->multi_pass) return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "reductions needing several passes");
  bool *done = calloc((size_t)(s->n_out > 0 ? s->n_out : 1), sizeof(bool));
  if (!done) return fsl_cg_fail(e, FSL_ERR_NOMEM, "out of memory");
  for (int k = 0; k < nr; k++) {
    const fsl_value *y = red[k]->out[0];
    int oj = -1;
    for (int j = 0; j < s->n_out; j++)
      if (s->out[j] == y) oj = j;
    if (oj >= 0) {
      fsl_cg_line(e, "%s *s%d = out%d;", fsl_cg_ctype(e->d, y->dtype), k, oj);
      done[oj] = true;
    } else {
      fsl_cg_line(e, "%s *s%d = NULL;", fsl_cg_ctype(e->d, y->dtype), k);
    }
  }
  for (int k = 0; k < nr; k++) {
    const fsl_value *y = red[k]->out[0];
    bool isout = false;
    for (int j = 0; j < s->n_out; j++) isout = isout || s->out[j] == y;
    if (isout) continue;
    fsl_cg_line(e, "s%d = (%s *)malloc(%lld);", k, fsl_cg_ctype(e->d, y->dtype), (long long)(fsl_value_nbytes(y) > 0 ? fsl_value_nbytes(y) : 1));
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
    if (ok && !cols) {
      fsl_cg_row_loop_open(e, outer, inner);
      coords c;
      c.rank = x->rank;
      for (int i = 0; i < x->rank; i++) snprintf(c.c[i], CLEN, "0");
      fsl_cg_decompose(e, "o_", nk, kept, x->dims, "o", &c);
      ok = reduce_row(e, n, k, &c, -1, NULL);
      fsl_cg_line(e, "s%d[o_] = r%d;", k, k);
      fsl_cg_line(e, "err_ |= e_;");
      fsl_cg_close_scope(e);
      fsl_cg_line(e, "}");
    }
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
  }
  if (ok) ok = fsl_cg_output_loops(e, done);
  free(done);
  if (!ok) return false;
  fsl_cg_line(e, "goto done_;");
  fsl_cg_line(e, "done_:");
  for (int k = 0; k < nr; k++) {
    bool isout = false;
    for (int j = 0; j < s->n_out; j++) isout = isout || s->out[j] == red[k]->out[0];
    if (!isout) fsl_cg_line(e, "free(s%d);", k);
  }
  fsl_cg_line(e, ";");
  return true;
}
