/*
 * onednn_pd.c — the geometry of a linear op (fsl_onednn_lin_geom) and the
 * oneDNN primitive descriptor that runs it with a prefix of its post-ops:
 * how a matmul folds or merges its batch dims, when a conv runs as a
 * matmul (conv_mm_rule) and a GEMM as a 1x1 convolution
 * (fsl_onednn_mm_conv_pays), which activation layouts it asks for
 * (channels_last_pays, fsl_onednn_direct_in_permutation), its own bias
 * argument (fsl_onednn_bias_entry), and the longest prefix oneDNN runs with
 * an optimized implementation (fsl_onednn_best_prefix).  The measurements
 * behind each rule are in its comment.
 */
#include "backend/cpu/onednn_impl.h"

#include "codegen/linsplit.h"

/* Dims [0, n) of a view (bd, bst) over full dims merged into one; false
 * when only some of them are broadcast or they are not contiguous. */
static bool merge_dims(int n, const int64_t *full, const int64_t *bd, const int64_t *bst, int64_t *mbd,
                       int64_t *mbst) {
  *mbd = 1, *mbst = 0; /* on every path, false included */
  bool any_full = false, all_full = true;
  int64_t prod = 1, prev_stride = -1;
  for (int b = 0; b < n; b++) {
    if (full[b] == 1) continue;
    if (bd[b] == 1) { all_full = false; continue; }
    any_full = true;
    if (prev_stride >= 0 && prev_stride != bst[b] * full[b]) return false;
    prev_stride = bst[b];
    prod *= full[b];
  }
  if (!any_full) return true;
  if (!all_full) return false;
  *mbd = prod, *mbst = prev_stride;
  return true;
}

/* Memory descriptor over (nd, dims) with explicit strides; strides of
 * extent-1 dims are replaced by the row-major ones (they are never used). */
static dnnl_status_t md_strided(md_arena *a, fsl_md *md, int nd, const int64_t *dims, const int64_t *st) {
  int64_t s[DNNL_MAX_NDIMS], rm[DNNL_MAX_NDIMS];
  if (nd < 1 || nd > DNNL_MAX_NDIMS) return dnnl_invalid_arguments;
  rm_strides(nd, dims, rm);
  for (int i = 0; i < nd; i++) s[i] = st && dims[i] != 1 ? st[i] : rm[i];
  return md_make_strides(a, md, nd, dims, s);
}

/* Shape of the chain value after the first n entries (the last reshape's). */
static int prefix_space(const fsl_node *lin, const post_entry *e, int n, int64_t *fd) {
  for (int i = n - 1; i >= 0; i--)
    if (e[i].reshape) {
      memcpy(fd, e[i].sd, sizeof(int64_t) * (size_t)e[i].sr);
      return e[i].sr;
    }
  const fsl_value *y = lin->out[0];
  memcpy(fd, y->dims, sizeof(int64_t) * (size_t)y->rank);
  return y->rank;
}

/* A binary entry's operand view re-expressed over the chain shape (fr, fd).
 * Reshapes in the chain only split or merge the leading (M) dims of a 2-D
 * matmul output, so a view carries over when its leading dims merge into
 * one (all broadcast, or all full and contiguous). */
static bool entry_view(const post_entry *e, int fr, const int64_t *fd, int64_t *bd, int64_t *bst) {
  bool same = e->sr == fr;
  for (int i = 0; same && i < fr; i++) same = e->sd[i] == fd[i];
  if (same) {
    memcpy(bd, e->bd, sizeof(int64_t) * (size_t)fr);
    memcpy(bst, e->bst, sizeof(int64_t) * (size_t)fr);
    return true;
  }
  int64_t mbd, mbst;
  if (!merge_dims(e->sr - 1, e->sd, e->bd, e->bst, &mbd, &mbst)) return false;
  int64_t rm[FSL_MAX_RANK];
  rm_strides(fr - 1, fd, rm);
  for (int i = 0; i < fr - 1; i++) bd[i] = mbd == 1 ? 1 : fd[i], bst[i] = mbd == 1 ? 0 : rm[i] * mbst;
  bd[fr - 1] = e->bd[e->sr - 1], bst[fr - 1] = e->bst[e->sr - 1];
  return true;
}

/* A matmul whose weights are shared by every batch runs as one GEMM with
 * the batch dims folded into M: [batch..., m, N] -> [batch * m, N].  A
 * binary operand's view (bd, bst) over the chain shape (fr, fd) carries
 * over when its dims [0, fr - 1) merge into one (merge_dims: all broadcast,
 * or all full and contiguous); then d2/s2 (when not NULL) get the 2-D view.
 * false when they do not (e.g. an operand [b, 1, N] that varies per batch
 * but is broadcast over m): the matmul then stays batched. */
static bool fold_m(int fr, const int64_t *fd, const int64_t *bd, const int64_t *bst, int64_t *d2, int64_t *s2) {
  int64_t a, b;
  if (!merge_dims(fr - 1, fd, bd, bst, &a, &b)) return false;
  if (d2) d2[0] = a, s2[0] = b, d2[1] = bd[fr - 1], s2[1] = bst[fr - 1];
  return true;
}

/* A binary operand's view (bd, bst) over a conv's dst [N, M, s...] as a view
 * over the 2-D matmul dst of g->mm: [N, M] (FC: the spatial dims are 1), or
 * [M, HW] (WX, N = 1: the spatial dims merge, merge_dims).  false when they
 * do not merge. */
static bool conv_mm_view(const geom *g, const fsl_value *dst, const int64_t *bd, const int64_t *bst, int64_t *d2,
                         int64_t *s2) {
  if (g->mm == CONV_MM_FC) {
    d2[0] = bd[0], s2[0] = bst[0], d2[1] = bd[1], s2[1] = bst[1];
    return true;
  }
  d2[0] = bd[1], s2[0] = bst[1];
  return merge_dims(g->ns, dst->dims + 2, bd + 2, bst + 2, &d2[1], &s2[1]);
}

/* Whether direct convolution g over x (weights w) asks oneDNN for its
 * activations channels-last (nhwc, nwc, ndhwc) rather than the layout it
 * prefers: depthwise and 1x1 convolutions (grouped ones too: efficientvit_b1's
 * attention aggregates a depthwise 5x5 and a 1x1 with 24 or 48 groups; on
 * nhwc they chain, 0.116 + 0.073 -> 0.029 + 0.018 ms per block at 14x14,
 * and oneDNN's jit runs the grouped 1x1 as fast there: 384 channels, 24
 * groups, 14x14: 35 / 33 us AVX-512, 50 / 49 us AVX2), and narrow inputs
 * (fewer than 16 channels: the stems).  Where oneDNN prefers a blocked
 * layout (nChw8c with AVX2) its jit kernels run these as fast on
 * channels-last, which layout
 * chaining (lower.h) passes to and from generated code with no reorder;
 * where it prefers channels-last anyway (AVX-512) nothing changes.
 * Measured with oneDNN 2.6.3 limited to AVX2, 2 threads, bias + swish
 * post-ops, best of 5 x 100 runs (blocked / channels-last, us): depthwise
 * 3x3 64ch 40x40 56 / 49, 16ch 80x80 52 / 50, 5x5 96ch 28x28 56 / 56; 1x1
 * 64->64 40x40 97 / 95, 32->16 80x80 71 / 68, 512->128 14x14 172 / 179;
 * 3x3 12->16 160x160 821 / 648, 3->16 224x224 591 / 497.  Dense 3x3
 * convolutions over wider inputs stay blocked there: 64->64 56x56 1188 /
 * 1479, 128->128 28x28 1735 / 1818. */
static bool channels_last_pays(const geom *g, const fsl_value *x, const fsl_value *w) {
  if (g->deconv || g->mm != CONV_DIRECT) return false;
  bool k1 = true, strided = false;
  for (int i = 0; i < g->ns; i++) k1 = k1 && w->dims[2 + i] == 1, strided = strided || g->strides[i] > 1;
  int64_t C = x->dims[1];
  /* a dense strided 1x1 convolution is a ResNet downsample: its source is
   * also the source of the block's first 3x3 convolution and its result
   * the residual of the second, which keep oneDNN's blocked layout where
   * it has no more than AVX2 (nChw8c); in it the three chain (ResNet-18's
   * downsamples 0.13-0.17 -> 0.10-0.11 ms, FSL_CPU_PROFILE).  With
   * AVX-512 the block's convolutions run on nhwc or Winograd's nChw16c,
   * and there oneDNN's own choice for the downsample took 0.12-0.15 ms
   * against 0.05-0.07 on nhwc. */
  if (k1 && strided && g->group == 1 && C >= 16 && !fsl_onednn_has_avx512()) return false;
  return (g->group == C && w->dims[0] == C) || k1 || (g->group == 1 && C < 16);
}

/* Whether post-op entry e (the first of linear op g with output y that is
 * not a reshape: bias_entry) is a constant add that the op takes as its own
 * bias: per output channel for a direct or Winograd convolution, per column
 * for a matmul (and for a GEMM run as a 1x1 convolution, fsl_onednn_mm_conv_pays).
 * oneDNN's Winograd kernels accept no binary
 * post-op; its direct kernels start their accumulators from the bias,
 * where a binary post-op is one more pass over each output block.
 * Measured with oneDNN 2.6.3 alone, AMD EPYC Zen 4 (AVX-512), 2 threads,
 * channels-last, bias as a binary post-op / as the bias argument (us):
 * 1x1 16->32 80x80 39.7 / 36.0, 32->32 80x80 69.7 / 64.2, 64->64 40x40
 * 62.3 / 59.9, 128->128 20x20 62.1 / 59.5. */
static bool native_bias(const geom *g, const fsl_value *y, const post_entry *e) {
  if (!e->binary || e->reshape || e->alg != dnnl_binary_add || !e->cdata) return false;
  if (!g->conv) {
    /* a matmul's constant per-column add (over the chain value, whose last
     * dim is N: reshapes in the chain split or merge only the M dims) */
    int r = e->sr;
    if (r < 1 || e->sd[r - 1] != y->dims[y->rank - 1] || e->bd[r - 1] != e->sd[r - 1] || e->bst[r - 1] != 1)
      return false;
    for (int i = 0; i < r - 1; i++)
      if (e->bd[i] != 1) return false;
    return true;
  }
  if (g->deconv || g->mm != CONV_DIRECT || e->sr != y->rank) return false;
  for (int i = 0; i < y->rank; i++)
    if (e->sd[i] != y->dims[i] || e->bd[i] != (i == 1 ? y->dims[1] : 1)) return false;
  return e->bst[1] == 1;
}

/* The entry among the first n that the linear op takes as its own bias
 * (native_bias): the first one past the reshapes of the chain (a matmul's
 * result reshaped from its folded [M, N] back to the batch dims), or -1. */
int fsl_onednn_bias_entry(const geom *g, const fsl_value *y, const post_entry *e, int n) {
  int i = 0;
  while (i < n && e[i].reshape) i++;
  return i < n && native_bias(g, y, &e[i]) ? i : -1;
}

/* A descriptor of dims (rank r) in whatever layout the primitive prefers. */
static dnnl_status_t md_any(md_arena *a, fsl_md *md, int r, const int64_t *dims) {
  return md_make_tag(a, md, r, dims, dnnl_format_tag_any);
}

/* A descriptor of dims (rank r) with axis 1 innermost and the others in
 * their order. */
static dnnl_status_t md_channels_last(md_arena *a, fsl_md *md, int r, const int64_t *dims) {
  int64_t st[FSL_MAX_RANK], acc = dims[1];
  st[1] = 1;
  for (int i = r - 1; i >= 0; i--) {
    if (i == 1) continue;
    st[i] = acc;
    acc *= dims[i];
  }
  return md_strided(a, md, r, dims, st);
}

/* The primitive descriptor of direct convolution g over the given
 * activation and weight descriptors (a format_tag_any one lets oneDNN
 * choose). */
static dnnl_status_t conv_pd(const geom *g, fsl_cmd src, fsl_cmd wei, fsl_cmd bias, fsl_cmd dst,
                             const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd) {
  dnnl_alg_kind_t alg = g->wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
  return pd_convolution(pd, fsl_onednn_engine, alg, src, wei, bias, dst, g->strides, g->dil, g->pl, g->pr, attr);
}

/* conv_pd of x -> dst over the activation descriptors *src and *dst (the
 * channels-last ones when chan_last: channels_last_pays), and where oneDNN
 * has only its reference code for those, over the layouts it chooses
 * (*src and *dst become format_tag_any ones). */
static dnnl_status_t direct_conv_pd(md_arena *a, const geom *g, const fsl_value *x, const fsl_value *y, fsl_md *src,
                                    fsl_cmd wei, fsl_cmd bias, fsl_md *dst, bool chan_last,
                                    const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd) {
  dnnl_status_t s = conv_pd(g, FSL_MD(*src), wei, bias, FSL_MD(*dst), attr, pd);
  if (!chan_last || (s == dnnl_success && !fsl_onednn_impl_is_ref(*pd))) return s;
  if (s == dnnl_success) dnnl_primitive_desc_destroy(*pd), *pd = NULL;
  if ((s = md_any(a, src, g->r, x->dims)) != dnnl_success || (s = md_any(a, dst, g->r, y->dims)) != dnnl_success)
    return s;
  return conv_pd(g, FSL_MD(*src), wei, bias, FSL_MD(*dst), attr, pd);
}

/* Whether md is a 2-D strided descriptor; dm and st (DNNL_MAX_NDIMS
 * entries) receive its dims and strides. */
static bool md_2d_strided(fsl_cmd md, int64_t *dm, int64_t *st) {
  return md_ndims(md) == 2 && md_query_dims(md, MD_DIMS, dm) && md_query_dims(md, MD_STRIDES, st);
}

/* A 2-D GEMM operand view md ([rows, cols], strides (sr, sc)) as the 4-D
 * activation [1, cols, 1, rows] of a 1x1 convolution, strides (-, sc, -,
 * sr): a row-major [M, K] src is then a channels-last (nhwc) image of M
 * pixels and K channels, and a per-column operand is per channel.  md
 * comes from md_strided (its unit dims carry row-major strides); a post-op
 * operand's view may be strided or broadcast. */
static dnnl_status_t md_gemm_act_as_conv(md_arena *a, fsl_md *md) {
  int64_t dm[DNNL_MAX_NDIMS], st[DNNL_MAX_NDIMS];
  if (!md_2d_strided(FSL_MD(*md), dm, st)) return dnnl_unimplemented;
  /* the unit dims get the outermost stride, as oneDNN's nhwc tag has it
   * (its implementations match layouts by tag) */
  int64_t outer = dm[0] * st[0];
  int64_t d[4] = {1, dm[1], 1, dm[0]}, s[4] = {outer, st[1], outer, st[0]};
  return md_make_strides(a, md, 4, d, s);
}

/* A 2-D GEMM weights view md ([K, N], strides (sk, sn)) as 1x1 convolution
 * weights [N, K, 1, 1], strides (sn, sk, 1, 1). */
static dnnl_status_t md_gemm_wei_as_conv(md_arena *a, fsl_md *md) {
  int64_t dm[DNNL_MAX_NDIMS], st[DNNL_MAX_NDIMS];
  if (!md_2d_strided(FSL_MD(*md), dm, st)) return dnnl_unimplemented;
  int64_t d[4] = {dm[1], dm[0], 1, 1}, s[4] = {st[1], st[0], 1, 1};
  return md_strided(a, md, 4, d, s);
}

void fsl_onednn_pd_mds_free(pd_mds *m) { md_arena_free(&m->arena); }

/* Creates the primitive descriptor with the first n entries as post-ops
 * (dnnl_unimplemented when an operand view cannot be expressed). */
static dnnl_status_t make_pd(const fsl_node *lin, const geom *g, const post_entry *e, int n, pd_mds *m,
                             dnnl_primitive_desc_t *pd) {
  const fsl_value *x = lin->in[0], *dst = lin->out[0];
  dnnl_status_t s;
  fsl_md wei_any, src_any, dst_any;
  md_arena *A = &m->arena;
  bool chan_last = g->conv && !g->wino && channels_last_pays(g, x, lin->in[1]);
  int64_t fd[FSL_MAX_RANK];
  int fr = prefix_space(lin, e, n, fd);
  int64_t vbd[FSL_MAX_RANK], vst[FSL_MAX_RANK];
  for (int i = 0; i < n; i++)
    if (e[i].binary && !entry_view(&e[i], fr, fd, vbd, vst)) return dnnl_unimplemented;
  bool flat = false, fold = false;
  if (!g->conv) {
    /* dst fd = [batch..., m, N]; src [batch..., m, K]; weights [batch or 1s, K, N] */
    /* weights shared by every batch: 1 on every batch dim (constant weights
     * broadcast over the batch, or a 2-D matmul whose output the chain
     * reshaped) */
    bool wb = true;
    for (int i = 0; i < g->wnd - 2; i++) wb = wb && g->wdims[i] == 1;
    int nb = fr - 2;
    /* then the batch dims fold into M (one GEMM, not a batch of small
     * ones: bert's [128, 1, 768] x [768, 2304] ran as 128 GEMVs) when every
     * binary operand merges over [batch..., m] (fold_m) */
    fold = wb && nb > 0;
    for (int i = 0; fold && i < n; i++)
      if (e[i].binary) {
        entry_view(&e[i], fr, fd, vbd, vst);
        fold = fold_m(fr, fd, vbd, vst, NULL, NULL);
      }
    flat = !fold && nb > 1;
    for (int i = 0; flat && i < n; i++) {
      int64_t a, b;
      if (e[i].binary) {
        entry_view(&e[i], fr, fd, vbd, vst);
        flat = merge_dims(nb, fd, vbd, vst, &a, &b);
      }
    }
    int64_t sd[FSL_MAX_RANK], dd[FSL_MAX_RANK], wd[FSL_MAX_RANK], ws[FSL_MAX_RANK];
    int lead = fold ? 0 : flat ? 1 : nb;
    int nd = lead + 2;
    for (int i = 0; i < lead; i++) sd[i] = flat ? fsl_numel(nb, fd) : fd[i];
    for (int i = 0; i < lead; i++) dd[i] = sd[i], wd[i] = wb ? 1 : sd[i];
    sd[lead] = dd[lead] = fold ? fsl_numel(fr - 1, fd) : fd[fr - 2];
    sd[lead + 1] = g->K;
    dd[lead + 1] = g->N;
    wd[lead] = g->K, wd[lead + 1] = g->N;
    rm_strides(nd, wd, ws);
    ws[lead] = g->wstr[g->wnd - 2], ws[lead + 1] = g->wstr[g->wnd - 1];
    if ((s = md_strided(A, &m->src, nd, sd, NULL)) != dnnl_success) return s;
    if ((s = md_strided(A, &m->dst, nd, dd, NULL)) != dnnl_success) return s;
    if ((s = md_strided(A, &m->wei_user, nd, wd, ws)) != dnnl_success) return s;
    if (g->wdata) {
      if ((s = md_any(A, &wei_any, nd, wd)) != dnnl_success) return s;
    } else {
      wei_any = m->wei_user;
    }
  } else if (g->mm != CONV_DIRECT) {
    /* conv as a 2-D matmul over the plain data (conv_mm_rule) */
    int64_t sd[2], dd[2];
    if (g->mm == CONV_MM_FC) {
      sd[0] = dd[0] = x->dims[0], sd[1] = x->dims[1], dd[1] = dst->dims[1];
    } else {
      sd[0] = dd[0] = dst->dims[1], sd[1] = x->dims[1], dd[1] = g->wdims[1];
    }
    if ((s = md_strided(A, &m->src, 2, sd, NULL)) != dnnl_success) return s;
    if ((s = md_strided(A, &m->dst, 2, dd, NULL)) != dnnl_success) return s;
    if ((s = md_strided(A, &m->wei_user, 2, g->wdims, g->wstr)) != dnnl_success) return s;
    if (g->wdata) {
      if ((s = md_any(A, &wei_any, 2, g->wdims)) != dnnl_success) return s;
    } else {
      wei_any = m->wei_user;
    }
  } else {
    if ((s = md_strided(A, &m->src, g->r, x->dims, NULL)) != dnnl_success) return s;
    if ((s = md_strided(A, &m->dst, g->r, dst->dims, NULL)) != dnnl_success) return s;
    if ((s = md_strided(A, &m->wei_user, g->wnd, g->wdims, g->wstr)) != dnnl_success) return s;
    if ((s = md_any(A, &wei_any, g->wnd, g->wdims)) != dnnl_success) return s;
    /* activations in the layout oneDNN prefers (blocked nChw16c-style:
     * its direct jit convolutions), reordered from/to plain at run time */
    if ((s = md_any(A, &src_any, g->r, x->dims)) != dnnl_success ||
        (s = md_any(A, &dst_any, g->r, dst->dims)) != dnnl_success)
      return s;
    /* A deconvolution to fewer than 8 channels stays on plain nchw (no
     * reorders): the blocked jit pads the channels to 16.  Measured on
     * [1, 24, 80, 128] -> [1, M, 160, 256], k 2, stride 2 (ppocr_det), 1
     * thread, without the reorders: M = 1: blocked 0.33 ms, plain (gemm)
     * 0.055 ms; M = 4: 0.34 / 0.19 ms; M = 8: 0.34 / 0.43 ms. */
    if (g->deconv && dst->dims[1] < 8) src_any = m->src, dst_any = m->dst;
    if (chan_last &&
        ((s = md_channels_last(A, &src_any, g->r, x->dims)) != dnnl_success ||
         (s = md_channels_last(A, &dst_any, g->r, dst->dims)) != dnnl_success))
      return s;
  }
  /* a leading constant add, per channel or per column, is the op's own bias (below) */
  int bi = fsl_onednn_bias_entry(g, dst, e, n);
  bool bias = bi >= 0;
  for (int i = 0; i < n; i++) {
    if (!e[i].binary || i == bi) continue;
    entry_view(&e[i], fr, fd, vbd, vst);
    if (g->mm != CONV_DIRECT) {
      int64_t d2[2], s2[2];
      if (!conv_mm_view(g, dst, vbd, vst, d2, s2)) return dnnl_unimplemented;
      s = md_strided(A, &m->post[i], 2, d2, s2);
    } else if (fold) {
      int64_t d2[2] = {1, 1}, s2[2] = {0, 0};
      fold_m(fr, fd, vbd, vst, d2, s2);
      s = md_strided(A, &m->post[i], 2, d2, s2);
    } else if (flat) {
      int64_t d3[3], s3[3];
      merge_dims(fr - 2, fd, vbd, vst, &d3[0], &s3[0]);
      d3[1] = vbd[fr - 2], s3[1] = vst[fr - 2];
      d3[2] = vbd[fr - 1], s3[2] = vst[fr - 1];
      s = md_strided(A, &m->post[i], 3, d3, s3);
    } else {
      s = md_strided(A, &m->post[i], fr, vbd, vst);
    }
    if (s != dnnl_success) return s;
  }
  if (g->mm_conv) {
    /* the 2-D GEMM as a 1x1 convolution over M pixels (fsl_onednn_mm_conv_pays) */
    int64_t wud[DNNL_MAX_NDIMS];
    if (!g->wdata || md_ndims(FSL_MD(m->src)) != 2) return dnnl_unimplemented;
    if ((s = md_gemm_act_as_conv(A, &m->src)) != dnnl_success ||
        (s = md_gemm_act_as_conv(A, &m->dst)) != dnnl_success ||
        (s = md_gemm_wei_as_conv(A, &m->wei_user)) != dnnl_success)
      return s;
    if (!md_query_dims(FSL_MD(m->wei_user), MD_DIMS, wud)) return dnnl_unimplemented;
    if ((s = md_any(A, &wei_any, 4, wud)) != dnnl_success) return s;
    for (int i = 0; i < n; i++)
      if (e[i].binary && i != bi && (s = md_gemm_act_as_conv(A, &m->post[i])) != dnnl_success) return s;
  }
  if (bias) {
    /* the bias argument: [C_out] for a convolution and for the 1x1
     * convolution of a GEMM, [1..., N] (dst's rank, row-major) for a matmul */
    int64_t bd[DNNL_MAX_NDIMS];
    int nd = g->conv || g->mm_conv ? 1 : md_ndims(FSL_MD(m->dst));
    for (int i = 0; i < nd; i++) bd[i] = 1;
    bd[nd - 1] = g->conv ? dst->dims[1] : g->N;
    if ((s = md_strided(A, &m->post[bi], nd, bd, NULL)) != dnnl_success) return s;
  }
  /* full-size operands (post_entry.full) in the destination's layout: the
   * activation layouts oneDNN chooses for this convolution without post-ops,
   * then fixed, so that the primitive writes the layout they are given in */
  bool full = false;
  char probe_impl[128] = "";
  for (int i = 0; i < n; i++) full = full || (e[i].binary && e[i].full);
  if (full) {
    if (!g->conv || g->deconv || g->mm != CONV_DIRECT || g->mm_conv) return dnnl_unimplemented;
    for (int i = 0; i < n; i++)
      if (e[i].binary && e[i].full &&
          (e[i].sr != dst->rank || memcmp(e[i].sd, dst->dims, sizeof(int64_t) * (size_t)dst->rank) != 0))
        return dnnl_unimplemented;
    dnnl_primitive_desc_t probe = NULL;
    s = direct_conv_pd(A, g, x, dst, &src_any, FSL_MD(wei_any), bias ? FSL_MD(m->post[bi]) : NULL, &dst_any, chan_last,
                       NULL, &probe);
    if (s != dnnl_success) return s;
    const char *pi = NULL;
    if (dnnl_primitive_desc_query(probe, dnnl_query_impl_info_str, 0, &pi) == dnnl_success && pi)
      snprintf(probe_impl, sizeof probe_impl, "%s", pi);
    s = md_copy(A, &src_any, dnnl_primitive_desc_query_md(probe, dnnl_query_src_md, 0));
    if (s == dnnl_success) s = md_copy(A, &dst_any, dnnl_primitive_desc_query_md(probe, dnnl_query_dst_md, 0));
    dnnl_primitive_desc_destroy(probe);
    if (s != dnnl_success) return s;
    chan_last = false;
    for (int i = 0; i < n; i++)
      if (e[i].binary && e[i].full) m->post[i] = dst_any;
  }
  /* a residual add as the sum post-op first; where the kernel refuses that
   * (after a binary post-op, e.g. a run-time per-channel operand, oneDNN
   * 2.6's AVX2 kernels do), as a binary add */
  m->no_sum = true;
  for (int i = 0; i < n; i++) m->no_sum = m->no_sum && !e[i].sum;
  dnnl_primitive_attr_t attr;
  dnnl_post_ops_t po;
retry:
  attr = NULL, po = NULL;
  if ((s = fsl_onednn_user_scratchpad_attr(&attr)) != dnnl_success) return s;
  if ((s = dnnl_post_ops_create(&po)) != dnnl_success) goto out;
  for (int i = 0; i < n; i++) {
    if (e[i].reshape || i == bi) continue;
    if (e[i].sum && !m->no_sum) {
      s = po_append_sum(po);
    } else if (e[i].binary) {
      s = dnnl_post_ops_append_binary(po, e[i].alg, FSL_MD(m->post[i]));
    } else {
      s = po_append_eltwise(po, e[i].alg, e[i].alpha, e[i].beta);
    }
    if (s != dnnl_success) goto out;
  }
  if ((s = dnnl_primitive_attr_set_post_ops(attr, po)) != dnnl_success) goto out;
  fsl_cmd bias_md = bias ? FSL_MD(m->post[bi]) : NULL;
  if (g->mm_conv) {
    dnnl_dims_t one = {1, 1}, zero = {0, 0};
    s = pd_convolution(pd, fsl_onednn_engine, dnnl_convolution_direct, FSL_MD(m->src), FSL_MD(wei_any), bias_md,
                       FSL_MD(m->dst), one, zero, zero, zero, attr);
  } else if (!g->conv || g->mm != CONV_DIRECT) {
    s = pd_matmul(pd, fsl_onednn_engine, FSL_MD(m->src), FSL_MD(wei_any), bias_md, FSL_MD(m->dst), attr);
  } else if (!g->deconv) {
    s = direct_conv_pd(A, g, x, dst, &src_any, FSL_MD(wei_any), bias_md, &dst_any, chan_last, attr, pd);
  } else {
    s = pd_deconvolution(pd, fsl_onednn_engine, FSL_MD(src_any), FSL_MD(wei_any), NULL, FSL_MD(dst_any), g->strides,
                         g->dil, g->pl, g->pr, attr);
  }
  /* a full-size operand only where the kernel that runs the convolution
   * without post-ops takes it: oneDNN 2.6's brgemm 1x1 convolutions
   * (AVX-512) refuse it and hand it to the older jit_1x1 ones, 1.2-1.4x
   * slower than brgconv_1x1 plus the generated add (mobilenet_v3_small's
   * projections; FSL_CPU_PROFILE); a plain operand would take the gemm path */
  const char *impl = NULL;
  if (s == dnnl_success && full &&
      (fsl_onednn_impl_is_ref(*pd) || fsl_onednn_impl_has(*pd, "gemm") ||
       dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
       strcmp(impl, probe_impl) != 0)) {
    dnnl_primitive_desc_destroy(*pd), *pd = NULL;
    s = dnnl_unimplemented;
  }
  if (s != dnnl_success && !m->no_sum) {
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    m->no_sum = true;
    goto retry;
  }
out:
  if (po) dnnl_post_ops_destroy(po);
  dnnl_primitive_attr_destroy(attr);
  return s;
}

/*
 * A 1x1 conv on plain nchw data is a matmul, which oneDNN runs on the plain
 * layout without the two activation reorders of its blocked convolutions
 * (3 primitives, and 2 more parallel regions, per conv).  Measured per conv
 * of mobilenet_v3_small (bias post-op, 1 thread, min of 100 runs, oneDNN
 * 2.6): over 1x1 spatial (the squeeze-excite FCs) the blocked conv costs
 * 2-17 us, mostly reorders of channel counts that are not multiples of 16;
 * 16->72 over 56x56 209 us -> 97 us, 24->96 over 28x28 96 -> 38 us, over
 * 14x14 about equal or better (e.g. 240->40: 41 -> 28 us), but over 7x7 the
 * matmul (N = 49, a poor GEMM width) is slower (96->576: 47 -> 59 us).  So:
 *   CONV_MM_FC  every spatial dim of x and of the kernel is 1 (no pads):
 *               y [N, M] = x [N, C] w^T, per-channel operands are per-column
 *               (oneDNN's native broadcast);
 *   CONV_MM_WX  a 1x1 kernel, stride 1, no pads, batch 1, constant weights
 *               and at least 128 output pixels: y [M, HW] = w [M, C] x [C, HW].
 *               A per-channel operand then broadcasts per row, which oneDNN
 *               2.6's matmul implements only in its reference version, so
 *               the prefix search (fsl_onednn_linear_create) leaves it and the
 *               rest of the chain to the generated epilogue.
 * Both need group 1 and no lhs_dilation.
 */
static conv_mm conv_mm_rule(const geom *g, const fsl_value *x, const fsl_value *w) {
  if (g->deconv || g->group != 1) return CONV_DIRECT;
  bool k1 = true, nopad = true, s1 = true, x1 = true;
  for (int i = 0; i < g->ns; i++) {
    k1 = k1 && w->dims[2 + i] == 1;
    nopad = nopad && g->pl[i] == 0 && g->pr[i] == 0;
    s1 = s1 && g->strides[i] == 1;
    x1 = x1 && x->dims[2 + i] == 1;
  }
  if (!k1 || !nopad) return CONV_DIRECT;
  if (x1) return CONV_MM_FC;
  if (s1 && x->dims[0] == 1 && w->data && fsl_numel(g->ns, x->dims + 2) >= 128) return CONV_MM_WX;
  return CONV_DIRECT;
}

/* Fills the geometry of lin; FSL_ERR_UNSUPPORTED (with a message) for what
 * this mapping does not cover. */
fsl_status fsl_onednn_lin_geom(const fsl_node *lin, geom *g, bool allow_mm_wx) {
  memset(g, 0, sizeof *g);
  if (lin->n_in != 2 || lin->n_out != 1 || !lin->in[0] || !lin->in[1] || !lin->out[0])
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN: expected 2 inputs and 1 output");
  const fsl_value *x = lin->in[0], *w = lin->in[1], *y = lin->out[0];
  if (x->dtype != FSL_DT_F32 || w->dtype != FSL_DT_F32 || y->dtype != FSL_DT_F32)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN path takes float32 only, got %s",
                           fsl_dtype_name(x->dtype));
  if (!fsl_value_has_shape(x) || !fsl_value_has_shape(w) || !fsl_value_has_shape(y))
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN: static shapes expected");
  if (fsl_value_numel(x) <= 0 || fsl_value_numel(w) <= 0 || fsl_value_numel(y) <= 0)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN: empty tensors are left to generated code");
  g->r = y->rank;
  if (lin->op == FSL_OP_matmul) {
    int r = x->rank;
    if (r < 2 || w->rank != r || y->rank != r)
      return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN matmul: expected equal ranks >= 2");
    g->M = x->dims[r - 2], g->K = x->dims[r - 1], g->N = w->dims[r - 1];
    g->wnd = r;
    /* constant weights, possibly broadcast over the batch through views */
    const fsl_value *ws;
    int64_t bd[FSL_MAX_RANK], bst[FSL_MAX_RANK];
    fsl_onednn_operand_view(w, r, &ws, bd, bst);
    bool all_b = true, no_b = true;
    for (int b = 0; b < r - 2; b++) {
      if (w->dims[b] == 1) continue;
      if (bd[b] == 1) no_b = false;
      else all_b = false;
    }
    if (ws->data && ws->dtype == FSL_DT_F32 && bd[r - 2] == g->K && bd[r - 1] == g->N && (all_b || no_b)) {
      g->wdata = ws->data;
      for (int i = 0; i < r; i++) g->wdims[i] = bd[i], g->wstr[i] = bst[i];
      bool bcast = all_b && !no_b;
      if (bcast || no_b) {
        /* dims of extent 1: keep the row-major layout of the source */
        int64_t rm[FSL_MAX_RANK];
        rm_strides(r, g->wdims, rm);
        if (no_b && !bcast) {
          /* full batch: the walked strides must be row-major over w's dims */
          int64_t wr[FSL_MAX_RANK];
          rm_strides(r, w->dims, wr);
          for (int i = 0; i < r; i++)
            if (w->dims[i] != 1 && bst[i] != wr[i]) g->wdata = NULL;
        }
        for (int i = 0; i < r; i++)
          if (g->wdims[i] == 1) g->wstr[i] = rm[i];
      }
    }
    if (!g->wdata) {
      g->wdata = w->data;  /* NULL for run-time weights */
      for (int i = 0; i < r; i++) g->wdims[i] = w->dims[i];
      rm_strides(r, w->dims, g->wstr);
    }
    return FSL_OK;
  }
  if (lin->op != FSL_OP_conv) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN: not a matmul or conv");
  g->conv = true;
  int ns = x->rank - 2;
  if (ns < 1 || ns > 3 || w->rank != x->rank || y->rank != x->rank)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN conv: 1 to 3 spatial dims, got rank %d", x->rank);
  g->ns = ns;
  const int64_t *st = NULL, *di = NULL, *pa = NULL, *ld = NULL;
  if (fsl_attr_ints(lin, "strides", &st) < 0) st = NULL;
  if (fsl_attr_ints(lin, "dilations", &di) < 0) di = NULL;
  if (fsl_attr_ints(lin, "pads", &pa) < 0) pa = NULL;
  if (fsl_attr_ints(lin, "lhs_dilation", &ld) < 0) ld = NULL;
  g->group = fsl_attr_int(lin, "group", 1);
  int64_t C = x->dims[1], M = w->dims[0];
  if (g->group < 1 || C % g->group || M % g->group || w->dims[1] != C / g->group)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN conv: bad group %lld", (long long)g->group);
  bool lhs = false;
  for (int i = 0; i < ns; i++) {
    int64_t s = st ? st[i] : 1, d = di ? di[i] : 1, l = ld ? ld[i] : 1;
    if (s < 1 || d < 1 || l < 1) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN conv: bad attributes");
    if (l != 1) lhs = true;
    g->strides[i] = s, g->dil[i] = d - 1;
    g->pl[i] = pa ? pa[i] : 0, g->pr[i] = pa ? pa[ns + i] : 0;
  }
  if (lhs) {
    /* conv over the lhs-dilated input == deconvolution with stride l and the
     * kernel flipped; only for conv stride 1 */
    for (int i = 0; i < ns; i++)
      if (g->strides[i] != 1)
        return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN: conv with both lhs_dilation and stride");
    g->deconv = true;
    for (int i = 0; i < ns; i++) {
      int64_t l = ld[i], d = g->dil[i] + 1, k = w->dims[2 + i], in = x->dims[2 + i], o = y->dims[2 + i];
      int64_t pl = (k - 1) * d - g->pl[i];
      int64_t pr = (in - 1) * l + (k - 1) * d + 1 - pl - o;
      if (pl < 0 || pr < 0)
        return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN: lhs-dilated conv needs pads <= dilated kernel - 1");
      g->strides[i] = l, g->pl[i] = pl, g->pr[i] = pr;
    }
  }
  int wnd = 0;
  if (g->group > 1) g->wdims[wnd++] = g->group;
  g->wdims[wnd++] = M / g->group;
  g->wdims[wnd++] = C / g->group;
  for (int i = 0; i < ns; i++) g->wdims[wnd++] = w->dims[2 + i];
  g->wnd = wnd;
  rm_strides(wnd, g->wdims, g->wstr);
  g->wdata = w->data;
  g->mm = conv_mm_rule(g, x, w);
  if (g->mm == CONV_MM_WX && !allow_mm_wx) g->mm = CONV_DIRECT;
  if (g->mm == CONV_MM_FC) {
    /* weights w [M, C, 1...] read as w^T [C, M] */
    g->wnd = 2;
    g->wdims[0] = C, g->wdims[1] = M;
    g->wstr[0] = 1, g->wstr[1] = C;
  } else if (g->mm == CONV_MM_WX) {
    /* oneDNN's weights are the run-time x [C, HW]; the constant w [M, C] is its src */
    g->src_const = w->data;
    g->wnd = 2;
    g->wdims[0] = C, g->wdims[1] = fsl_numel(ns, x->dims + 2);
    rm_strides(2, g->wdims, g->wstr);
    g->wdata = NULL;
  }
  return FSL_OK;
}

/* Whether layout lay keeps the axes in their order (row-major). */
static bool row_major(const fsl_cg_layout *lay) {
  for (int k = 0; k < lay->rank; k++)
    if (lay->order[k] != k) return false;
  return true;
}

/* Whether a reshape reads y [N, C, ...] splitting its channel axis (the
 * depth-to-space after a blockwise ConvTranspose, src/fission/linear.c):
 * its readers permute channels into space, which no generated kernel
 * reads from a channels-last layout (lower.c, layout_friendly), so y
 * would be reordered back to nchw anyway. */
static bool channels_split(const fsl_value *y) {
  for (int k = 0; k < y->n_cons; k++) {
    const fsl_node *c = y->cons[k];
    if (c->op == FSL_OP_reshape && c->out[0] && (c->out[0]->rank <= 1 || c->out[0]->dims[1] != y->dims[1])) return true;
  }
  return false;
}

/* Whether y leaves the graph through at most a chain of elementwise
 * nodes (its bias and activation): its consumer must then read nchw, so a
 * permuted dst would be reordered back. */
static bool leaves_graph(const fsl_value *y, int depth) {
  if (y->is_output) return true;
  if (depth > 8 || y->n_cons != 1) return false;
  const fsl_node *c = y->cons[0];
  return fsl_op_get(c->op)->kind == FSL_KIND_ELEMENTWISE && c->n_out == 1 && c->out[0] &&
         fsl_value_numel(c->out[0]) == fsl_value_numel(y) && leaves_graph(c->out[0], depth + 1);
}

/* Whether oneDNN runs the direct convolution g (a 1x1 conv conv_mm_rule
 * would run as CONV_MM_WX) on a permuted layout (nhwc, as on AVX-512): then
 * the direct convolution is used, because layout chaining (lower.h) lets
 * its neighbours read and write that layout and drops the reorders that
 * made the plain matmul faster, and its per-channel post-ops (bias and
 * activation) have oneDNN's fast path, which the matmul's per-row ones
 * lack.  On a blocked layout (nChw8c on AVX2) the matmul stays. */
bool fsl_onednn_direct_in_permutation(const fsl_node *lin, const geom *g) {
  /* the inverted-bottleneck sizes measured (mobilenet_v3_small,
   * efficientvit_b1: 16 to 512 input channels, 24 to 512 outputs; the
   * 512 -> 128 projections over 14x14 of efficientvit_b1 run direct since
   * the matmul's plain input made the depthwise conv before it write nchw:
   * the model 8.4 -> 7.8 ms, AVX2 9.2 -> 8.6 ms, nudenet_320n and ppocr_rec
   * level); 16 to 31 outputs too since the 88 -> 24 and 72 -> 24
   * projections of mobilenet_v3_small made the depthwise convs before them
   * write nchw (0.045 -> 0.017 ms each, the model 1.21 -> 1.14 ms), and on
   * AVX2 yolox_nano's 16-channel dark2 block chains (1.29 -> 0.72 ms); a
   * wide reduction such as segformer_b0's 1024 -> 256 fuse conv over 56x56
   * ran 7.9 ms as the matmul, 9.1 ms as brgconv_1x1; ppocr_det's blockwise
   * ConvTranspose, a 24 -> 96 1x1 conv over 40x64 read through a
   * depth-to-space (channels_split), 0.36 ms as brgconv_1x1 with its two
   * reorders, 0.15 ms as the matmul; segformer_b0's 256 -> 19 classifier,
   * the model's output (leaves_graph), 0.91 ms as brgconv_1x1 with its
   * reorders and 19 channels padded to 32, 0.27 ms as the matmul and its
   * generated bias */
  if (lin->in[0]->dims[1] > 512 || lin->out[0]->dims[1] < 16 || channels_split(lin->out[0]) ||
      leaves_graph(lin->out[0], 0))
    return false;
  pd_mds m;
  memset(&m, 0, sizeof m);
  dnnl_primitive_desc_t pd = NULL;
  if (make_pd(lin, g, NULL, 0, &m, &pd) != dnnl_success || !pd) {
    fsl_onednn_pd_mds_free(&m);
    return false;
  }
  fsl_cg_layout ls, ld;
  fsl_cmd psrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  fsl_cmd pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  bool perm = fsl_onednn_perm_layout(psrc, FSL_MD(m.src), lin->in[0], &ls) &&
              fsl_onednn_perm_layout(pdst, FSL_MD(m.dst), lin->out[0], &ld) &&
              !row_major(&ls) && !row_major(&ld);
  dnnl_primitive_desc_destroy(pd);
  fsl_onednn_pd_mds_free(&m);
  return perm;
}

/*
 * Whether the constant-weight GEMM of geometry g (a matmul or a
 * CONV_MM_FC conv), which oneDNN's matmul runs as pd, should run as oneDNN's
 * 1x1 convolution instead (g->mm_conv): [M, K] x [K, N] is a 1x1
 * convolution over an nhwc image of M pixels and K channels to N channels,
 * on the same plain memory.  Where the matmul runs on oneDNN's gemm path
 * (oneDNN 2.6 on AVX2: its brgemm matmul needs AVX-512) it packs the
 * weights at every call; the direct 1x1 convolution (jit_1x1) packs them
 * once, when the primitive is created.  Measured with oneDNN 2.6.3 alone,
 * limited to AVX2, 2 threads, Intel Xeon Cascade Lake, bias + erf-GELU
 * post-ops, median of 200-1000 runs in 3 rounds (matmul / convolution,
 * us): 128x768x3072 7445 / 5165, 8x768x768 165 / 113, 49x576x1024 998 /
 * 561, 197x192x768 1172 / 879, 50x1024x1024 1174 / 898, 4096x32x128 1384
 * / 956, 16x64x64 12.2 / 7.1; but below 8 rows the convolution is slower
 * (2x512x1000 97 / 111, 6x768x768 124 / 145) and for one row it falls
 * back to a gemm itself (1x512x1000 51 / 192).  On AVX-512 both run
 * brgemm kernels and are level (128x768x3072 4196 / 4054 without
 * post-ops), so the matmul stays.  The caller keeps the convolution only
 * if it absorbs as much of the epilogue with a jit (not gemm, not
 * reference) implementation.
 */
bool fsl_onednn_mm_conv_pays(const geom *g, const_dnnl_primitive_desc_t pd) {
  if (!g->wdata || (g->conv && g->mm != CONV_MM_FC) || !fsl_onednn_impl_has(pd, "gemm")) return false;
  fsl_cmd src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  int64_t d[DNNL_MAX_NDIMS];
  return md_ndims(src) == 2 && md_query_dims(src, MD_DIMS, d) && d[0] >= 8;
}

/* The primitive descriptor for the longest prefix of e[0..ne) (at node
 * boundaries, over a closed chain) that oneDNN implements with geometry g,
 * an optimized implementation preferred over the reference one; its
 * descriptors in *m and its length in *n_used.  NULL when none (*last:
 * the last status). */
dnnl_primitive_desc_t fsl_onednn_best_prefix(const fsl_node *lin, const geom *g, fsl_node *const *epi,
                                         const post_entry *e, int ne, pd_mds *m, int *n_used,
                                         dnnl_status_t *last) {
  dnnl_primitive_desc_t fallback = NULL;
  pd_mds fb_m;
  int fb_used = -1;
  for (int L = ne; L >= 0; L--) {
    if (L > 0 && L < ne && e[L].node == e[L - 1].node) continue;
    if (!fsl_linear_chain_closed(lin, epi, L > 0 ? e[L - 1].node + 1 : 0)) continue;
    dnnl_primitive_desc_t cand = NULL;
    pd_mds cm;
    memset(&cm, 0, sizeof cm);
    *last = make_pd(lin, g, e, L, &cm, &cand);
    if (*last != dnnl_success) {
      fsl_onednn_pd_mds_free(&cm);
      continue;
    }
    if (!fsl_onednn_impl_is_ref(cand)) {
      if (fallback) dnnl_primitive_desc_destroy(fallback), fsl_onednn_pd_mds_free(&fb_m);
      *m = cm, *n_used = L;
      return cand;
    }
    if (!fallback) {
      fallback = cand, fb_m = cm, fb_used = L;
    } else {
      dnnl_primitive_desc_destroy(cand);
      fsl_onednn_pd_mds_free(&cm);
    }
  }
  if (fallback) *m = fb_m, *n_used = fb_used;
  return fallback;
}
