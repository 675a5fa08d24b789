/*
 * kernel.c — the code generator's entry points (codegen.h).
 */
#include "codegen/cg.h"

static void em_free(em *e) {
  free(e->in_idx);
  free(e->inside);
  free(e->red_idx);
  for (int i = 0; i < e->n_memo; i++) free(e->memo[i].key);
  free(e->memo);
  free(e->tvar);
  free(e->dec);
  free(e->epi_in);
}

bool fsl_cg_value_tables(em *e, const fsl_graph *g) {
  e->nv = g->n_values;
  size_t nv = (size_t)(e->nv > 0 ? e->nv : 1);
  e->in_idx = malloc(sizeof(int) * nv);
  e->inside = calloc(nv, sizeof(bool));
  e->red_idx = malloc(sizeof(int) * nv);
  if (!e->in_idx || !e->inside || !e->red_idx) return false;
  for (size_t i = 0; i < nv; i++) e->in_idx[i] = e->red_idx[i] = -1;
  return true;
}

/* Whether a kernel has an output of the shape of an input it reads in a
 * layout and reduces across that layout (fsl_cg_reads_across: an
 * InstanceNormalization's H and W over a channels-last convolution output
 * of 16+ channels): a kernel with a reduction writes row-major, so that
 * output's loops would read the input a cache line per element (style transfer's
 * first one, as columns over its 32 x 128 x 128 nhwc input: 1.17 ms; on
 * the input reordered to plain: 0.3 ms).  A reduction to the kept space
 * alone (a global pooling) reads the layout as columns; one along the
 * layout's innermost axis (LayerNormalization over the channels) reads it
 * in rows. */
static bool rows_read_layout(const em *e) {
  const fsl_cg_spec *s = e->s;
  for (int i = 0; i < s->n_in; i++) {
    const fsl_value *x = s->in[i];
    bool out_like = false;
    for (int j = 0; j < s->n_out; j++) out_like = out_like || fsl_value_same_shape(s->out[j], x);
    if (!out_like || !fsl_cg_in_layout(e, x)) continue;
    for (int k = 0; k < s->n_nodes; k++) {
      const fsl_node *n = s->nodes[k];
      if (fsl_op_get(n->op)->kind == FSL_KIND_REDUCE && fsl_value_same_shape(n->in[0], x) && fsl_cg_reads_across(e, x, n))
        return true;
    }
  }
  return false;
}

static fsl_status emit_with(const fsl_dialect *d, const fsl_cg_spec *s, emit_mode mode, fsl_sbuf *out, bool *fused_fail,
                            fsl_cg_launch *launch) {
  em e;
  memset(&e, 0, sizeof e);
  fsl_sbuf b = {0};
  e.d = d;
  e.s = s;
  e.b = &b;
  e.mode = mode;
  if (!fsl_cg_value_tables(&e, s->g)) {
    em_free(&e);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < s->n_in; i++) e.in_idx[s->in[i]->id] = i;
  const fsl_node *red[64];
  int nr = 0;
  for (int i = 0; i < s->n_nodes; i++) {
    const fsl_node *n = s->nodes[i];
    fsl_kind kind = fsl_op_get(n->op)->kind;
    if (!fsl_op_is_primitive(n->op) || kind == FSL_KIND_LINEAR || kind == FSL_KIND_OPAQUE ||
        n->op == FSL_OP_scatter_elements || n->op == FSL_OP_scatter_nd) {
      fsl_cg_fail(&e, FSL_ERR_UNSUPPORTED, "op %s", fsl_op_name(n->op));
      break;
    }
    for (int k = 0; k < n->n_out; k++) e.inside[n->out[k]->id] = true;
    if (kind == FSL_KIND_REDUCE) {
      if (nr == (int)FSL_ARRAY_LEN(red)) {
        fsl_cg_fail(&e, FSL_ERR_UNSUPPORTED, "too many reductions");
        break;
      }
      e.red_idx[n->out[0]->id] = nr;
      red[nr++] = n;
    }
  }
  for (int i = 0; i < s->n_in && e.st == FSL_OK; i++) fsl_cg_supported_dtype(&e, s->in[i]);
  for (int j = 0; j < s->n_out && e.st == FSL_OK; j++) {
    fsl_cg_supported_dtype(&e, s->out[j]);
    if (e.st == FSL_OK && !e.inside[s->out[j]->id])
      fsl_cg_fail(&e, FSL_ERR_INVALID, "output '%s' is not produced by the kernel", s->out[j]->name ? s->out[j]->name : "?");
  }
  if (e.st == FSL_OK) {
    d->kernel_open(&b, s->id, s->n_in, s->n_out);
    e.indent = 1;
    fsl_cg_line(&e, "(void)in; (void)out;");
    /* buffers never overlap, except that a kernel of elementwise nodes
     * only may write in place over an input (src/runtime/memplan.c) */
    bool ew_only = true;
    for (int i = 0; i < s->n_nodes; i++) ew_only = ew_only && fsl_op_get(s->nodes[i]->op)->kind == FSL_KIND_ELEMENTWISE;
    const char *rs = ew_only ? "" : d->restrict_kw;
    for (int i = 0; i < s->n_in; i++)
      fsl_cg_line(&e, "const %s%s *%sin%d = (const %s%s *)in[%d];", d->buf_space, fsl_cg_stype(e.d, s->in[i]->dtype), rs,
                  i, d->buf_space, fsl_cg_stype(e.d, s->in[i]->dtype), i);
    for (int j = 0; j < s->n_out; j++)
      fsl_cg_line(&e, "%s%s *%sout%d = (%s%s *)out[%d];", d->buf_space, fsl_cg_stype(e.d, s->out[j]->dtype), rs, j,
                  d->buf_space, fsl_cg_stype(e.d, s->out[j]->dtype), j);
    fsl_cg_line(&e, "int err_ = 0;");
    if (nr == 0) {
      bool *done = calloc((size_t)(s->n_out > 0 ? s->n_out : 1), sizeof(bool));
      if (!done) fsl_cg_fail(&e, FSL_ERR_NOMEM, "out of memory");
      else {
        fsl_cg_output_loops(&e, done);
        free(done);
      }
    } else if (mode == MODE_FUSED) {
      fsl_cg_fused_body(&e, red, nr);
    } else {
      fsl_cg_passes_body(&e, red, nr);
    }
    fsl_cg_line(&e, "%s", d->ret_err);
    fsl_sbuf_puts(&b, "}\n\n");
    /* a window over an input in a layout is read only as columns along
     * that layout's innermost axis: any other loop order would read it
     * with a stride per element */
    if (e.st == FSL_OK && fsl_cg_layout_windows(&e) > e.lay_windows)
      fsl_cg_fail(&e, FSL_ERR_UNSUPPORTED, "a window over an input in a layout, not read along its innermost axis");
    if (e.st == FSL_OK && nr > 0 && rows_read_layout(&e))
      fsl_cg_fail(&e, FSL_ERR_UNSUPPORTED, "an output in the rows of a reduction over an input in a layout");
  }
  *fused_fail = e.fused_fail;
  fsl_status st = e.st;
  if (st == FSL_OK && b.oom) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  if (st == FSL_OK) {
    fsl_sbuf_puts(out, b.p ? b.p : "");
    if (out->oom) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  if (st == FSL_OK && launch) *launch = e.launch;
  fsl_sbuf_free(&b);
  em_free(&e);
  return st;
}

fsl_status fsl_codegen_kernel(const fsl_dialect *d, const fsl_cg_spec *s, fsl_sbuf *b, fsl_cg_launch *launch) {
  if (!d || !s || !b || !s->g) return fsl_errorf(FSL_ERR_ARG, "fsl_codegen_kernel: NULL argument");
  bool has_red = false;
  for (int i = 0; i < s->n_nodes; i++) has_red = has_red || fsl_op_get(s->nodes[i]->op)->kind == FSL_KIND_REDUCE;
  for (int j = 0; has_red && s->out_layout && j < s->n_out; j++)
    if (s->out_layout[j].rank > 0)
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "an output layout in a kernel with a reduction");
  bool ff = false;
  fsl_status st = emit_with(d, s, has_red ? MODE_FUSED : MODE_LOOP, b, &ff, launch);
  if (st != FSL_OK && has_red && ff) {
    fsl_error_clear();
    st = emit_with(d, s, MODE_PASSES, b, &ff, launch);
  }
  return st;
}

void fsl_cg_kernel_open(em *e, fsl_sbuf *body, const fsl_dialect *d, int id, int n_in, int n_out) {
  memset(e, 0, sizeof *e);
  *body = (fsl_sbuf){0};
  e->d = d;
  e->b = body;
  d->kernel_open(body, id, n_in, n_out);
  e->indent = 1;
}

fsl_status fsl_cg_kernel_close(em *e, fsl_sbuf *body, fsl_sbuf *b) {
  if (e->epi) fsl_cg_line(e, "%s", e->d->ret_err);
  else if (e->d->ret_ok[0]) fsl_cg_line(e, "%s", e->d->ret_ok);
  fsl_sbuf_puts(body, "}\n\n");
  fsl_status st = e->st != FSL_OK ? e->st : body->oom ? fsl_errorf(FSL_ERR_NOMEM, "out of memory") : FSL_OK;
  if (st == FSL_OK) fsl_sbuf_puts(b, body->p);
  if (st == FSL_OK && b->oom) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  fsl_sbuf_free(body);
  em_free(e);
  return st;
}

/* The matmul's row of a and batch of w for (b_, m). */
static void row_pointers(em *e, const char *S, const char *T, int64_t M, int64_t K, int64_t N) {
  fsl_cg_line(e, "const %s%s *ar = a + (b_ * %lld + m) * %lld; const %s%s *wb = w + b_ * %lld;", S, T, (long long)M,
              (long long)K, S, T, (long long)(K * N));
}

/* s = the dot product of row ar and column n of wb, accumulated in acc. */
static void dot_product(em *e, const char *acc, const char *nk, int64_t N) {
  fsl_cg_line(e, "%s s = 0;", acc);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "k", .lo = "0", .hi = nk});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "s += (%s)ar[k] * (%s)wb[k * %lld + n];", acc, acc, (long long)N);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

bool fsl_cg_tiles_fit(const fsl_dialect *d, fsl_dtype dt) {
  const fsl_cg_group *G = d->group;
  return G && G->tile > 0 && 2LL * G->tile * G->tile * (long long)fsl_dtype_size(dt) <= G->local_bytes;
}

void fsl_cg_tiles_open(em *e, const char *T, int64_t tiles) {
  const fsl_cg_group *G = e->d->group;
  int TL = G->tile;
  fsl_cg_line(e, "%s%s ta_[%d][%d], tb_[%d][%d];", G->local_kw, T, TL, TL, TL, TL);
  fsl_cg_line(e, "const int64_t l_ = %s, ly_ = l_ / %d, lx_ = l_ %% %d;", G->local_id, TL, TL);
  char nt[32];
  snprintf(nt, sizeof nt, "%lld", (long long)tiles);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_GROUPS, .var = "t_", .lo = "0", .hi = nt});
  fsl_cg_open_scope(e);
  e->launch = (fsl_cg_launch){.group_size = TL * TL, .groups = tiles};
}

void fsl_cg_tiles_kloop(em *e, const char *acc, int64_t K, void (*load)(em *e, const void *ctx), const void *ctx) {
  const fsl_cg_group *G = e->d->group;
  char nk[32], ntl[32];
  snprintf(nk, sizeof nk, "%lld", (long long)K);
  snprintf(ntl, sizeof ntl, "%d", G->tile);
  fsl_cg_line(e, "%s s = 0;", acc);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "k0", .lo = "0", .hi = nk, .step = G->tile});
  fsl_cg_open_scope(e);
  load(e, ctx);
  fsl_cg_line(e, "%s", G->barrier);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "k", .lo = "0", .hi = ntl});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "s += (%s)ta_[ly_][k] * (%s)tb_[k][lx_];", acc, acc);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_line(e, "%s", G->barrier);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* c[b_, m, n] = s (or the epilogue's value there): b_ the flat batch
 * index, m and n the row and column. */
static void mm_store(em *e, const fsl_value *C, const char *T) {
  int r = C->rank;
  coords c = {.rank = r};
  int axes[FSL_MAX_RANK];
  for (int i = 0; i < r - 2; i++) axes[i] = i;
  if (e->epi) fsl_cg_decompose(e, "b_", r - 2, axes, C->dims, "bq", &c);
  snprintf(c.c[r - 2], CLEN, "%s", C->dims[r - 2] == 1 ? "0" : "m");
  snprintf(c.c[r - 1], CLEN, "%s", C->dims[r - 1] == 1 ? "0" : "n");
  char idx[128];
  snprintf(idx, sizeof idx, "(b_ * %lld + m) * %lld + n", (long long)C->dims[r - 2], (long long)C->dims[r - 1]);
  fsl_cg_epi_store(e, T, "s", &c, "c", idx);
}

typedef struct mm_dims {
  const char *T;
  int64_t M, K, N;
  const fsl_value *op[2]; /* the operands read through views (fsl_cg_epilogue.src), else NULL */
  coords batch;           /* b_ as the operands' batch coordinates (with views) */
} mm_dims;

/* tile[ly_][lx_] = operand v at (batch.., row, col) when `in` holds, else
 * 0: evaluated through v's views (fsl_cg_ev), inside the bounds check. */
static void view_load(em *e, const mm_dims *m, const char *tile, const fsl_value *v, const char *in, const char *row,
                      const char *col) {
  fsl_cg_line(e, "{");
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "%s v_ = (%s)0;", m->T, m->T);
  fsl_cg_line(e, "if (%s) {", in);
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t r_ = %s, c_ = %s;", row, col);
  coords c = m->batch;
  c.rank = v->rank;
  snprintf(c.c[v->rank - 2], CLEN, "r_");
  snprintf(c.c[v->rank - 1], CLEN, "c_");
  char res[CLEN];
  if (fsl_cg_ev(e, v, &c, res)) fsl_cg_line(e, "v_ = %s;", res);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_line(e, "%s[ly_][lx_] = v_;", tile);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* The matmul's tiles at k0: a's rows m, b's columns n of batch b_. */
static void mm_load(em *e, const void *ctx) {
  const mm_dims *m = ctx;
  long long M = (long long)m->M, K = (long long)m->K, N = (long long)m->N;
  char in[96];
  snprintf(in, sizeof in, "m < %lld && k0 + lx_ < %lld", M, K);
  if (m->op[0]) view_load(e, m, "ta_", m->op[0], in, "m", "k0 + lx_");
  else fsl_cg_line(e, "ta_[ly_][lx_] = %s ? a[(b_ * %lld + m) * %lld + k0 + lx_] : (%s)0;", in, M, K, m->T);
  snprintf(in, sizeof in, "k0 + ly_ < %lld && n < %lld", K, N);
  if (m->op[1]) view_load(e, m, "tb_", m->op[1], in, "k0 + ly_", "n");
  else fsl_cg_line(e, "tb_[ly_][lx_] = %s ? w[(b_ * %lld + k0 + ly_) * %lld + n] : (%s)0;", in, K, N, m->T);
}

/* The tiled matmul of a dialect with work-groups (codegen.h): a tile of
 * c per work-group, row m = the work-item's ly_, column n = its lx_. */
static void tiled_matmul(em *e, const fsl_node *mm, const char *T, const char *acc, int64_t batch, int64_t M, int64_t K,
                         int64_t N) {
  const fsl_value *C = e->lin_out;
  int TL = e->d->group->tile;
  int64_t tm = (M + TL - 1) / TL, tn = (N + TL - 1) / TL;
  fsl_cg_tiles_open(e, T, batch * tm * tn);
  fsl_cg_line(e, "const int64_t b_ = t_ / %lld, m = (t_ / %lld) %% %lld * %d + ly_, n = t_ %% %lld * %d + lx_;",
              (long long)(tm * tn), (long long)tn, (long long)tm, TL, (long long)tn, TL);
  mm_dims md = {.T = T, .M = M, .K = K, .N = N};
  const fsl_cg_epilogue *epi = e->epi;
  for (int i = 0; i < 2; i++) md.op[i] = epi && epi->src[i] ? mm->in[i] : NULL;
  if (md.op[0] || md.op[1]) {
    int r = C->rank, axes[FSL_MAX_RANK];
    for (int i = 0; i < r - 2; i++) axes[i] = i;
    md.batch.rank = r;
    fsl_cg_decompose(e, "b_", r - 2, axes, C->dims, "bv", &md.batch);
  }
  fsl_cg_tiles_kloop(e, acc, K, mm_load, &md);
  fsl_cg_line(e, "if (m < %lld && n < %lld) {", (long long)M, (long long)N);
  fsl_cg_open_scope(e);
  mm_store(e, C, T);
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

/* The matmul in a dialect whose threads work alone (C): one iteration per
 * block of columns of c and row of c (batch and rows collapsed, the block
 * outermost so that consecutive iterations reuse w's block), in parallel
 * when the work is large enough.  Blocks are at most MM_BLOCK columns, an
 * even number of them where there is more than one (two threads share
 * them evenly), a multiple of 8 wide but the last.  The block's sums lie
 * in a local array of type acc; over k in order, each k adds a[m, k]
 * times w's row k across the block, one SIMD pass over contiguous
 * columns of a constant width (it unrolls into vector registers: a GEMV
 * streams w once, at memory speed); then the block is stored through the
 * epilogue. */
#define MM_BLOCK 64
static void column_blocks(em *e, const char *S, const char *T, const char *acc, int64_t batch, int64_t M, int64_t K,
                          int64_t N) {
  long long n = (long long)N, nblk = (n + MM_BLOCK - 1) / MM_BLOCK;
  if (nblk > 1 && nblk % 2) nblk++;
  long long nb = (n + nblk - 1) / nblk;
  if (nb < n) nb = (nb + 7) / 8 * 8;
  nblk = (n + nb - 1) / nb;
  long long last = n - (nblk - 1) * nb; /* the last block's width */
  long long rows = (long long)(batch * M);
  char nt[32], nk[32];
  snprintf(nt, sizeof nt, "%lld", rows * nblk);
  snprintf(nk, sizeof nk, "%lld", (long long)K);
  fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = batch * M * N * K > e->d->par_min ? FSL_CG_PARALLEL : FSL_CG_SERIAL,
                                     .var = "t_", .lo = "0", .hi = nt});
  fsl_cg_open_scope(e);
  fsl_cg_line(e, "const int64_t r_ = t_ %% %lld, n0_ = t_ / %lld * %lld, b_ = r_ / %lld, m = r_ %% %lld;", rows, rows,
              nb, (long long)M, (long long)M);
  row_pointers(e, S, T, M, K, N);
  fsl_cg_line(e, "%s acc_[%lld];", acc, nb);
  for (int part = 0; part < (last < nb ? 2 : 1); part++) {
    char w[32];
    snprintf(w, sizeof w, "%lld", part == 0 ? nb : last);
    if (last < nb) fsl_cg_line(e, part == 0 ? "if (n0_ < %lld) {" : "} else {", (nblk - 1) * nb);
    if (last < nb) fsl_cg_open_scope(e);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "j_", .lo = "0", .hi = w});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "acc_[j_] = 0;");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "k", .lo = "0", .hi = nk});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const %s av_ = (%s)ar[k]; const %s%s *wr_ = wb + k * %lld + n0_;", acc, acc, S, T, n);
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SIMD, .var = "j_", .lo = "0", .hi = w});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "acc_[j_] += av_ * (%s)wr_[j_];", acc);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    fsl_cg_loop_open(e, &(fsl_cg_loop){.kind = FSL_CG_SERIAL, .var = "j_", .lo = "0", .hi = w});
    fsl_cg_open_scope(e);
    fsl_cg_line(e, "const int64_t n = n0_ + j_;");
    fsl_cg_line(e, "const %s s = acc_[j_];", acc);
    mm_store(e, e->lin_out, T);
    fsl_cg_close_scope(e);
    fsl_cg_line(e, "}");
    if (last < nb) fsl_cg_close_scope(e);
  }
  if (last < nb) fsl_cg_line(e, "}");
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}

fsl_status fsl_codegen_matmul(const fsl_dialect *d, int id, const fsl_node *mm, const fsl_cg_epilogue *epi, fsl_sbuf *b,
                              fsl_cg_launch *launch) {
  if (!d || !mm || !b) return fsl_errorf(FSL_ERR_ARG, "fsl_codegen_matmul: NULL argument");
  const fsl_value *A = mm->in[0], *W = mm->in[1], *C = mm->out[0];
  fsl_dtype dt = A->dtype;
  if (!fsl_cg_ctype(d, dt) || fsl_cg_half(d, dt) || dt == FSL_DT_BOOL || W->dtype != dt || C->dtype != dt)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s codegen: matmul on %s", d->name, fsl_dtype_name(dt));
  int r = A->rank;
  int64_t M = A->dims[r - 2], K = A->dims[r - 1], N = W->dims[r - 1];
  int64_t batch = fsl_numel(r - 2, A->dims);
  const char *T = fsl_cg_ctype(d, dt), *acc = is_f(dt) ? "double" : "uint64_t";
  em e;
  fsl_sbuf body;
  bool views = epi && (epi->src[0] || epi->src[1]);
  if (views && !fsl_cg_tiles_fit(d, dt))
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s codegen: matmul operand views without matmul tiles", d->name);
  fsl_cg_kernel_open(&e, &body, d, id, 2 + (epi ? epi->n_in : 0), 1);
  const char *S = d->buf_space;
  /* an operand read through views is in<i> instead (fsl_cg_epi_open) */
  if (!views) fsl_cg_line(&e, "const %s%s *a = (const %s%s *)in[0], *w = (const %s%s *)in[1];", S, T, S, T, S, T);
  else if (!epi->src[0]) fsl_cg_line(&e, "const %s%s *a = (const %s%s *)in[0];", S, T, S, T);
  else if (!epi->src[1]) fsl_cg_line(&e, "const %s%s *w = (const %s%s *)in[1];", S, T, S, T);
  if (!fsl_cg_epi_open(&e, epi, mm)) return fsl_cg_kernel_close(&e, &body, b);
  const char *TO = fsl_cg_stype(d, epi ? epi->out->dtype : dt);
  fsl_cg_line(&e, "%s%s *c = (%s%s *)out[0];", S, TO, S, TO);
  if (fsl_cg_tiles_fit(d, dt)) {
    tiled_matmul(&e, mm, T, acc, batch, M, K, N);
  } else if (d->par_min == 0) {
    /* every thread runs the kernel (GPU dialects): one thread per element of c */
    char nt[32], nk[32];
    snprintf(nt, sizeof nt, "%lld", (long long)(batch * M * N));
    snprintf(nk, sizeof nk, "%lld", (long long)K);
    fsl_cg_loop_open(&e, &(fsl_cg_loop){.kind = FSL_CG_PARALLEL, .var = "i_", .lo = "0", .hi = nt});
    fsl_cg_open_scope(&e);
    fsl_cg_line(&e, "const int64_t b_ = i_ / %lld, m = (i_ / %lld) %% %lld, n = i_ %% %lld;", (long long)(M * N),
                (long long)N, (long long)M, (long long)N);
    row_pointers(&e, S, T, M, K, N);
    dot_product(&e, acc, nk, N);
    mm_store(&e, C, T);
    fsl_cg_close_scope(&e);
    fsl_cg_line(&e, "}");
  } else {
    column_blocks(&e, S, T, is_f(dt) ? T : acc, batch, M, K, N);
  }
  fsl_cg_launch L = e.launch;
  fsl_status st = fsl_cg_kernel_close(&e, &body, b);
  if (st == FSL_OK && launch) *launch = L;
  return st;
}

extern const char fsl_cg_helpers[]; /* helpers.h, embedded by cmake/embed.cmake */

void fsl_codegen_prelude(const fsl_dialect *d, fsl_sbuf *b) {
  if (!d || !b) return;
  fsl_sbuf_puts(b, d->prelude);
  fsl_sbuf_puts(b, fsl_cg_helpers);
}
