/*
 * onednn.c — matmul and conv primitives (docs/primitives.md) through the
 * oneDNN 2.6 C API, with the elementwise epilogue folded into post-ops
 * ("Primitive Attributes: Post-ops" in the oneDNN developer guide).
 *
 * Mapping:
 *   matmul [b..., M, K] x [b..., K, N]: dnnl_matmul over plain row-major
 *     src/dst descriptors.  Weights that are the same for every batch
 *     (constant weights reached through reshape/expand views, e.g. a [K, N]
 *     weight broadcast over the batch, or weights with batch dims 1) are
 *     used once, and the batch dims fold into M: one [b * M, K] x [K, N]
 *     GEMM, when every post-op operand merges over [b..., M] (fold_m).
 *     Otherwise the batch dims are merged into one (3-D matmul) unless a
 *     post-op operand broadcasts over only some of them, in which case the
 *     native rank is kept.  A reshape of a 2-D matmul's output that keeps N
 *     (the builder folds batch dims into M) is absorbed by giving the
 *     matmul those leading dims.  A 2-D GEMM with constant weights that
 *     the matmul would run on oneDNN's gemm path (AVX2) runs as a 1x1
 *     convolution over an nhwc image of M pixels, on the same memory
 *     (fsl_onednn_mm_conv_pays).
 *   conv x [N, C, s...] w [M, C/g, k...] (1-3 spatial dims): dnnl
 *     convolution forward (Winograd first where fsl_onednn_wino_pays, else direct,
 *     which without AVX-512 runs as fissile's F(2x2,3x3) Winograd where
 *     that takes the conv and its post-ops: fsl_onednn_wino_try, winograd.h;
 *     either takes a leading constant per-channel add as its bias,
 *     native_bias), dnnl dilation = ours - 1, padding_l /
 *     padding_r = our pads' begins / ends, groups as [g, M/g, C/g, k...]
 *     weights.  A conv with lhs_dilation (ConvTranspose) and stride 1 maps
 *     to a dnnl deconvolution with stride = lhs_dilation, the kernel flipped
 *     along every spatial axis, padding_l = (k-1)*d - pads_begin,
 *     padding_r from the output size; it absorbs no post-ops (see
 *     fsl_onednn_linear_create).  Activations use the layout oneDNN
 *     prefers (blocked: its brgemm/jit convolutions are ~20x faster than
 *     its gemm path on plain nchw here), reordered from/to plain per run,
 *     except a deconvolution to fewer than 8 channels (plain, make_pd).
 *   1x1 conv: a matmul over the plain data where conv_mm_rule says so (1x1
 *     spatial: x [N, C] w^T; >= 128 pixels: w [M, C] x [C, HW], unless the
 *     direct convolution runs on nhwc, fsl_onednn_direct_in_permutation).
 * Weights use a layout oneDNN chooses (format_tag any): constant weights
 * are reordered once at create time, others at every run (matmul keeps
 * run-time weights plain, no reorder).
 *
 * Epilogue: each epi node combines the chain value (the previous node's
 * output) with nothing (unary), itself, a scalar constant, or an outside
 * operand that is a broadcast of some source value through reshape/expand
 * views.  Broadcast operands become binary post-ops whose memory descriptor
 * has the destination's rank with 1 on broadcast dims and the source's
 * strides on the others; constant operands are copied (and shrunk to the
 * dims along which they actually vary, which also turns a folded
 * full-size bias back into [1, M, 1, 1]) at create time.  A full-size
 * run-time operand of a direct conv (a residual add) is the sum post-op
 * (or a binary one) in the destination's layout, without AVX-512 only
 * (translate, make_pd).  Among the
 * prefixes oneDNN accepts, the longest one with an optimized (non "ref")
 * implementation wins.
 */
#include "backend/cpu/onednn.h"

#include "backend/cpu/onednn_impl.h"

#include <oneapi/dnnl/dnnl_debug.h>

static fsl_status dnnl_fail(const fsl_node *lin, dnnl_status_t s, const char *what) {
  return fsl_node_errorf(lin, s == dnnl_out_of_memory ? FSL_ERR_NOMEM : FSL_ERR_UNSUPPORTED, "oneDNN %s: %s", what,
                         dnnl_status2str(s));
}

/* Memory for an activation (src or dst) of pd whose caller-side layout is
 * `plain`: *mem in the primitive's layout; when that is not plain, also a
 * buffer, a plain *user mem and the reorder between them (plain -> prim for
 * the input, prim -> plain for the output). */
dnnl_status_t fsl_onednn_act_memory(const_dnnl_primitive_desc_t pd, dnnl_query_t what, fsl_cmd plain, bool input,
                                    dnnl_memory_t *mem, dnnl_memory_t *user, void **buf, dnnl_primitive_t *reorder) {
  fsl_cmd md = dnnl_primitive_desc_query_md(pd, what, 0);
  if (!md) return dnnl_runtime_error;
  if (dnnl_memory_desc_equal(md, plain)) return dnnl_memory_create(mem, plain, fsl_onednn_engine, DNNL_MEMORY_NONE);
  size_t sz = dnnl_memory_desc_get_size(md);
  *buf = aligned_alloc(64, (sz + 63) / 64 * 64);
  if (!*buf) return dnnl_out_of_memory;
  dnnl_status_t s = dnnl_memory_create(mem, md, fsl_onednn_engine, *buf);
  if (s == dnnl_success) s = dnnl_memory_create(user, plain, fsl_onednn_engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success)
    s = input ? fsl_onednn_reorder_create(reorder, plain, md) : fsl_onednn_reorder_create(reorder, md, plain);
  return s;
}

/* Appends "AxBxC" (the dims of md) to buf (capacity n). */
static void put_dims(char *buf, size_t n, fsl_cmd md) {
  int64_t d[DNNL_MAX_NDIMS];
  int nd = md_query_dims(md, MD_DIMS, d) ? md_ndims(md) : 0;
  for (int i = 0; i < nd; i++) {
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%s%lld", i ? "x" : "", (long long)d[i]);
  }
}

/* op->desc: "<kind> <impl> <src dims>:<weights dims>:<dst dims> <plain |
 * reordered>" (whether the activations run on the caller's plain layout,
 * or are reordered to one oneDNN prefers). */
static void describe(fsl_onednn_linear *op, const_dnnl_primitive_desc_t pd) {
  dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) impl = "?";
  snprintf(op->desc, sizeof op->desc, "%s %s ", dnnl_prim_kind2str(kind), impl);
  put_dims(op->desc, sizeof op->desc, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0));
  strncat(op->desc, ":", sizeof op->desc - strlen(op->desc) - 1);
  put_dims(op->desc, sizeof op->desc, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
  strncat(op->desc, ":", sizeof op->desc - strlen(op->desc) - 1);
  put_dims(op->desc, sizeof op->desc, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0));
  size_t l = strlen(op->desc);
  snprintf(op->desc + l, sizeof op->desc - l, " %s%s", op->src_reorder ? "reordered" : "plain",
           op->bias_entry >= 0 ? ", bias" : "");
  op->desc_len = strlen(op->desc);
}

static fsl_status linear_create(const fsl_node *lin, fsl_node *const *epi, int n_epi, int n_threads,
                                const avail_fn *avail, fsl_onednn_linear **out, int *n_absorbed) {
  if (!lin || !out || !n_absorbed || (n_epi > 0 && !epi) || n_epi < 0)
    return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_create: NULL argument");
  *out = NULL;
  *n_absorbed = 0;
  geom g;
  FSL_TRY(fsl_onednn_lin_geom(lin, &g, true));
  FSL_TRY(fsl_onednn_engine_get());
  geom gd;
  if (g.mm == CONV_MM_WX && fsl_onednn_lin_geom(lin, &gd, false) == FSL_OK &&
      fsl_onednn_direct_in_permutation(lin, &gd))
    g = gd;
  fsl_error_clear();
  fsl_onednn_omp_init();

  /* epilogue -> post-op entries (longest expressible prefix) */
  post_entry *e = calloc(MAX_POST, sizeof *e);
  fsl_onednn_linear *op = calloc(1, sizeof *op);
  if (!e || !op) {
    free(e), free(op);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  int ne = 0;
  if (!fsl_onednn_epilogue(lin, epi, n_epi, 0, g.deconv, avail, e, &ne)) {
    fsl_onednn_entries_free(e, ne);
    free(op);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }

  /* the longest prefix (at node boundaries) that oneDNN implements, preferring
   * an optimized implementation over the reference one; Winograd first
   * where it pays (fsl_onednn_wino_pays), with whatever prefix it takes */
  dnnl_primitive_desc_t pd = NULL;
  pd_mds m;
  memset(&m, 0, sizeof m);
  int n_used = -1;
  dnnl_status_t last = dnnl_unimplemented;
  bool wino_wanted = fsl_onednn_wino_pays(&g, lin);
  g.wino = wino_wanted;
  if (g.wino && !(pd = fsl_onednn_best_prefix(lin, &g, epi, e, ne, &m, &n_used, &last))) g.wino = false;
  if (!pd) pd = fsl_onednn_best_prefix(lin, &g, epi, e, ne, &m, &n_used, &last);
  if (pd && fsl_onednn_mm_conv_pays(&g, pd)) {
    geom gc = g;
    gc.mm_conv = true;
    pd_mds mc;
    memset(&mc, 0, sizeof mc);
    int nc = -1;
    dnnl_status_t lc;
    dnnl_primitive_desc_t pc = fsl_onednn_best_prefix(lin, &gc, epi, e, ne, &mc, &nc, &lc);
    if (pc && nc >= n_used && !fsl_onednn_impl_is_ref(pc) && !fsl_onednn_impl_has(pc, "gemm")) {
      dnnl_primitive_desc_destroy(pd);
      fsl_onednn_pd_mds_free(&m);
      pd = pc, m = mc, n_used = nc, g = gc;
    } else if (pc) {
      dnnl_primitive_desc_destroy(pc);
      fsl_onednn_pd_mds_free(&mc);
    }
  }
  if (!pd) {
    fsl_onednn_entries_free(e, ne);
    free(op);
    return dnnl_fail(lin, last, "primitive descriptor");
  }
  for (int i = n_used; i < ne; i++) free(e[i].cdata), e[i].cdata = NULL;
  for (int i = 0; i < n_used && m.no_sum; i++) e[i].sum = false;
  op->entries = e;
  op->n_entries = n_used;
  op->n_absorbed = n_used ? e[n_used - 1].node + 1 : 0;
  op->bias_entry = fsl_onednn_bias_entry(&g, lin->out[0], e, n_used);
  op->n_threads = n_threads;
  op->n_spatial = g.ns;
  op->src_const = g.src_const;

  fsl_status st = FSL_OK;
  dnnl_status_t s = dnnl_primitive_create(&op->prim, pd);
  fsl_cmd wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  if (s != dnnl_success || !wmd) {
    st = dnnl_fail(lin, s, "primitive");
    goto fail;
  }
  fsl_cmd smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (smd && dnnl_memory_desc_get_size(smd) > 0 &&
      (s = dnnl_memory_create(&op->scratch_mem, smd, fsl_onednn_engine, DNNL_MEMORY_NONE)) != dnnl_success) {
    st = dnnl_fail(lin, s, "scratchpad");
    goto fail;
  }
  if (op->scratch_mem) op->scratch_bytes = dnnl_memory_desc_get_size(smd);
  if ((s = fsl_onednn_act_memory(pd, dnnl_query_src_md, FSL_MD(m.src), true, &op->src_mem, &op->src_user_mem,
                                 &op->src_buf, &op->src_reorder)) != dnnl_success ||
      (s = fsl_onednn_act_memory(pd, dnnl_query_dst_md, FSL_MD(m.dst), false, &op->dst_mem, &op->dst_user_mem,
                                 &op->dst_buf, &op->dst_reorder)) != dnnl_success) {
    st = dnnl_fail(lin, s, "memory");
    goto fail;
  }
  /* weights */
  bool plain = dnnl_memory_desc_equal(wmd, FSL_MD(m.wei_user));
  op->flip = g.deconv && !g.wdata;
  if (g.deconv) {
    op->flip_outer = lin->in[1]->dims[0] * lin->in[1]->dims[1];
    for (int i = 0; i < g.ns; i++) op->flip_inner[i] = lin->in[1]->dims[2 + i];
  }
  if (g.wdata) {
    op->wei_const = true;
    const float *wsrc = g.wdata;
    float *flipped = NULL;
    if (g.deconv) {
      flipped = malloc(sizeof(float) * (size_t)fsl_value_numel(lin->in[1]));
      if (!flipped) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
      fsl_onednn_flip_weights(g.wdata, flipped, op->flip_outer, g.ns, op->flip_inner);
      wsrc = flipped;
    }
    size_t sz = dnnl_memory_desc_get_size(wmd);
    op->wei_buf = aligned_alloc(64, (sz + 63) / 64 * 64);
    if (!op->wei_buf) { free(flipped); st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
    s = fsl_onednn_run_reorder(FSL_MD(m.wei_user), (void *)wsrc, wmd, op->wei_buf);
    free(flipped);
    if (s == dnnl_success) s = dnnl_memory_create(&op->wei_mem, wmd, fsl_onednn_engine, op->wei_buf);
  } else if (plain && !op->flip) {
    s = dnnl_memory_create(&op->wei_mem, wmd, fsl_onednn_engine, DNNL_MEMORY_NONE);
  } else {
    if (op->flip) {
      op->flip_buf = malloc(sizeof(float) * (size_t)fsl_value_numel(lin->in[1]));
      if (!op->flip_buf) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
    }
    size_t sz = dnnl_memory_desc_get_size(wmd);
    op->wei_buf = aligned_alloc(64, (sz + 63) / 64 * 64);
    if (!op->wei_buf) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
    s = dnnl_memory_create(&op->wei_mem, wmd, fsl_onednn_engine, op->wei_buf);
    if (s == dnnl_success)
      s = dnnl_memory_create(&op->wei_user_mem, FSL_MD(m.wei_user), fsl_onednn_engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = fsl_onednn_reorder_create(&op->wei_reorder, FSL_MD(m.wei_user), wmd);
  }
  if (s != dnnl_success) {
    st = dnnl_fail(lin, s, "weights");
    goto fail;
  }
  /* binary post-op operands */
  for (int i = 0; i < n_used; i++) {
    if (!e[i].binary) continue;
    void *h = e[i].cdata ? (void *)e[i].cdata : DNNL_MEMORY_NONE;
    if (e[i].full && !dnnl_memory_desc_equal(FSL_MD(m.post[i]), FSL_MD(m.dst))) {
      /* a full-size operand in the destination's layout, reordered from row-major */
      size_t sz = dnnl_memory_desc_get_size(FSL_MD(m.post[i]));
      /* a sum operand is reordered into the destination itself */
      h = e[i].sum ? DNNL_MEMORY_NONE : (op->post_buf[i] = aligned_alloc(64, (sz + 63) / 64 * 64));
      s = e[i].sum || h ? dnnl_memory_create(&op->post_user_mem[i], FSL_MD(m.dst), fsl_onednn_engine, DNNL_MEMORY_NONE)
                        : dnnl_out_of_memory;
      if (s == dnnl_success) s = fsl_onednn_reorder_create(&op->post_reorder[i], FSL_MD(m.dst), FSL_MD(m.post[i]));
    }
    if (s == dnnl_success) s = dnnl_memory_create(&op->post_mem[i], FSL_MD(m.post[i]), fsl_onednn_engine, h);
    /* a parallel copy (oneDNN's reorder), not memcpy */
    if (s == dnnl_success && e[i].sum)
      s = fsl_onednn_reorder_create(&op->post_copy[i], FSL_MD(m.post[i]), FSL_MD(m.post[i]));
    if (s != dnnl_success) {
      st = dnnl_fail(lin, s, "post-op operand");
      goto fail;
    }
    if (!e[i].cdata) op->post_val[e[i].node] = e[i].src;
  }
  describe(op, pd);
  if (wino_wanted && !g.wino && (st = fsl_onednn_wino_try(op, lin, &g, pd)) != FSL_OK) goto fail;
  dnnl_primitive_desc_destroy(pd);
  fsl_onednn_pd_mds_free(&m);
  *out = op;
  *n_absorbed = op->n_absorbed;
  return FSL_OK;
fail:
  dnnl_primitive_desc_destroy(pd);
  fsl_onednn_pd_mds_free(&m);
  fsl_onednn_linear_free(op);
  return st;
}

fsl_status fsl_onednn_linear_create(const fsl_node *lin, fsl_node *const *epi, int n_epi, int n_threads,
                                    fsl_onednn_linear **out, int *n_absorbed) {
  return linear_create(lin, epi, n_epi, n_threads, NULL, out, n_absorbed);
}

/** Outside value whose data fsl_onednn_linear_run expects in post[i] for
 *  the i-th absorbed epi node: the source reached from the node's outside
 *  operand through reshape/expand views.  NULL when none is needed (an
 *  eltwise post-op, or a constant operand captured at create time). */
const fsl_value *fsl_onednn_linear_post_value(const fsl_onednn_linear *op, int i) {
  if (!op || i < 0 || i >= op->n_absorbed || i >= MAX_POST) return NULL;
  return op->post_val[i];
}

bool fsl_onednn_linear_sum_in_place(const fsl_onednn_linear *op, const fsl_value *v) {
  if (!op || !v || (op->dst_reorder && !op->dst_chained)) return false;
  int sums = 0;
  for (int i = 0; i < op->n_entries; i++) {
    const post_entry *e = &op->entries[i];
    if (!e->binary || e->cdata || fsl_onednn_linear_post_value(op, e->node) != v) continue;
    if (!e->sum || (op->post_reorder[i] && !op->post_chained[i])) return false;
    sums++;
  }
  return sums == 1;
}

fsl_status fsl_onednn_linear_create_avail(const fsl_node *lin, fsl_node *const *epi, int n_epi, int n_threads,
                                          bool (*avail)(const void *ctx, const fsl_value *v),
                                          bool (*keep_residual)(const void *ctx, const fsl_onednn_linear *op,
                                                                int node, const fsl_value *v),
                                          const void *ctx, fsl_onednn_linear **out, int *n_absorbed) {
  for (;;) {
    avail_fn af = {avail, ctx};
    FSL_TRY(linear_create(lin, epi, n_epi, n_threads, &af, out, n_absorbed));
    int bad = -1;
    for (int i = 0; i < *n_absorbed && bad < 0; i++) {
      const fsl_value *pv = fsl_onednn_linear_post_value(*out, i);
      if (pv && (!avail(ctx, pv) ||
                 (keep_residual && fsl_onednn_full_entry(*out, i) >= 0 && !keep_residual(ctx, *out, i, pv))))
        bad = i;
    }
    if (bad < 0) return FSL_OK;
    fsl_onednn_linear_free(*out);
    *out = NULL;
    n_epi = bad; /* the operand of epi[bad] is not materialised: stop before it */
  }
}

const char *fsl_onednn_linear_describe(const fsl_onednn_linear *op) { return op ? op->desc : ""; }

bool fsl_onednn_linear_winograd(const fsl_onednn_linear *op) { return op && op->wino; }

void fsl_onednn_linear_free(fsl_onednn_linear *op) {
  if (!op) return;
  fsl_wino_free(op->wino);
  if (op->prim) dnnl_primitive_destroy(op->prim);
  if (op->wei_reorder) dnnl_primitive_destroy(op->wei_reorder);
  if (op->src_reorder) dnnl_primitive_destroy(op->src_reorder);
  if (op->dst_reorder) dnnl_primitive_destroy(op->dst_reorder);
  if (op->src_user_mem) dnnl_memory_destroy(op->src_user_mem);
  if (op->dst_user_mem) dnnl_memory_destroy(op->dst_user_mem);
  free(op->src_buf);
  free(op->dst_buf);
  if (op->src_mem) dnnl_memory_destroy(op->src_mem);
  if (op->wei_mem) dnnl_memory_destroy(op->wei_mem);
  if (op->dst_mem) dnnl_memory_destroy(op->dst_mem);
  if (op->wei_user_mem) dnnl_memory_destroy(op->wei_user_mem);
  if (op->scratch_mem) dnnl_memory_destroy(op->scratch_mem);
  if (op->zp_mem) dnnl_memory_destroy(op->zp_mem);
  if (op->wei2_mem) dnnl_memory_destroy(op->wei2_mem);
  if (op->acc2_mem) dnnl_memory_destroy(op->acc2_mem);
  free(op->wei2_buf);
  free(op->acc2_buf);
  for (int i = 0; i < MAX_POST; i++) {
    if (op->post_mem[i]) dnnl_memory_destroy(op->post_mem[i]);
    if (op->post_user_mem[i]) dnnl_memory_destroy(op->post_user_mem[i]);
    if (op->post_reorder[i]) dnnl_primitive_destroy(op->post_reorder[i]);
    if (op->post_copy[i]) dnnl_primitive_destroy(op->post_copy[i]);
    free(op->post_buf[i]);
  }
  fsl_onednn_entries_free(op->entries, op->n_entries);
  free(op->wei_buf);
  free(op->flip_buf);
  free(op);
}
