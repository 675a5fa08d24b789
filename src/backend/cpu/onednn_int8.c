/*
 * onednn_int8.c — integer matmuls and convolutions (the int32 linear
 * primitives that fission makes of MatMulInteger, ConvInteger,
 * QLinearMatMul and QLinearConv: docs/primitives.md) as oneDNN int8
 * primitives: u8 or s8 source x s8 weights -> s32 destination, the
 * source's zero point subtracted by the primitive ("Quantization" and
 * "Primitive Attributes: Zero Points" in the oneDNN developer guide).
 *
 * The linear node's operands are int32 values; what oneDNN reads is found
 * by walking back from them (fsl_onednn_int8_match):
 *   source   [reshapes] <- sub(A, Z)? <- cast to int32 <- [reshapes] <- x,
 *            x uint8 or int8, Z one value broadcast (a per-tensor zero
 *            point: reshapes, expands and casts of a one-element value);
 *   weights  the same over a constant w of an 8-bit type, with a constant
 *            per-tensor zero point, or an integer constant (the widening
 *            folded): w - zp is computed once here and must lie in
 *            [-128, 127] (uint8 weights with zero point 128 do).
 * Reshapes are the same row-major bytes, so oneDNN reads x and w with the
 * linear operands' dims.  Anything else (a per-row or per-channel source
 * zero point, run-time weights, 16-bit data) is FSL_ERR_UNSUPPORTED and
 * stays generated code.
 *
 * Exactness: the products are exact and accumulate in s32, as ONNX's
 * ConvInteger/MatMulInteger define them.  With VNNI (AVX512-VNNI,
 * AVX-VNNI) oneDNN multiplies and accumulates 8-bit pairs into s32
 * directly.  Without it, its AVX2 and AVX-512 int8 kernels add pairs of
 * u8 x s8 products in int16 with saturation (vpmaddubsw; an s8 source is
 * shifted to u8 first): a pair beyond 32767 (255 x 127 twice) would
 * saturate, while weights within [-64, 64] fit (2 x 255 x 64 = 32640;
 * ONNX Runtime's quantizer makes such 7-bit weights for these CPUs with
 * reduce_range).  So without VNNI, weights beyond that are split:
 * w = 2 * (w >> 1) + (w & 1), both halves within [-64, 63], run through
 * the same primitive twice and combined as 2 * acc_hi + acc_lo in s32
 * (fsl_onednn_linear_run): exact, at twice the multiply-adds.  An int8 convolution source with a zero
 * point also needs VNNI: oneDNN 2.6.3's AVX2 kernel returned wrong sums
 * for it (every element of tests/python/test_int8_linear.py's case,
 * FSL_CPU_ISA=avx2; its matmul was right).  tests/python/test_int8_linear.py checks
 * results bit for bit against the reference interpreter.
 */
#include "backend/cpu/onednn_impl.h"

#include <oneapi/dnnl/dnnl_debug.h>

static fsl_status q_fail(const fsl_node *lin, dnnl_status_t s, const char *what) {
  return fsl_node_errorf(lin, s == dnnl_out_of_memory ? FSL_ERR_NOMEM : FSL_ERR_UNSUPPORTED, "oneDNN int8 %s: %s",
                         what, dnnl_status2str(s));
}

typedef struct int8_avail {
  bool (*fn)(const void *ctx, const fsl_value *v);
  const void *ctx;
} int8_avail;

static bool is8(fsl_dtype dt) { return dt == FSL_DT_U8 || dt == FSL_DT_I8; }

/* Whether v is where the walk back stops: a constant, or materialised
 * (av->fn; NULL: walk to the end). */
static bool stop_at(const fsl_value *v, const int8_avail *av) { return v->data || (av->fn && av->fn(av->ctx, v)); }

static const fsl_value *through_reshapes(const fsl_value *v, const int8_avail *av) {
  while (v && !stop_at(v, av) && v->producer && v->producer->op == FSL_OP_reshape && v->producer->n_in >= 1)
    v = v->producer->in[0];
  return v;
}

/* The one-element value a per-tensor zero point z is made from through
 * reshapes, expands and casts (the casts recorded in q), or a constant
 * whose elements are all equal; NULL otherwise. */
static const fsl_value *zero_point_source(const fsl_value *z, fsl_onednn_int8 *q, const int8_avail *av) {
  q->n_zp_casts = 0;
  for (int hops = 0; z && hops < 16; hops++) {
    if (stop_at(z, av) || !z->producer) break;
    const fsl_node *p = z->producer;
    if (p->n_in < 1 || !p->in[0]) return NULL;
    if (p->op == FSL_OP_cast) {
      if (q->n_zp_casts >= FSL_INT8_MAX_CASTS) return NULL;
      q->zp_casts[q->n_zp_casts++] = z->dtype;
    } else if (p->op != FSL_OP_reshape && p->op != FSL_OP_expand) {
      break;
    }
    z = p->in[0];
  }
  double one;
  if (!z || (z->data ? !fsl_value_uniform_const(z, &one) : fsl_value_numel(z) != 1)) return NULL;
  /* applied source first */
  for (int i = 0, j = q->n_zp_casts - 1; i < j; i++, j--) {
    fsl_dtype t = q->zp_casts[i];
    q->zp_casts[i] = q->zp_casts[j];
    q->zp_casts[j] = t;
  }
  return z;
}

bool fsl_onednn_int8_available(void) {
  if (fsl_onednn_engine_get() == FSL_OK) return true;
  fsl_error_clear();
  return false;
}

int32_t fsl_onednn_int8_zero_point(const fsl_onednn_int8 *q, const void *data) {
  double v = fsl_load_f64(q->zp_dtype, data, 0);
  for (int i = 0; i < q->n_zp_casts; i++) {
    unsigned char buf[16];
    fsl_store_f64(q->zp_casts[i], buf, 0, v);
    v = fsl_load_f64(q->zp_casts[i], buf, 0);
  }
  return (int32_t)v;
}

/* One operand: v (int32, read by lin) = cast(x) [- z]; false when v is not
 * of that form. */
static bool match_operand(const fsl_value *v, const fsl_value **x, const fsl_value **z, const int8_avail *av) {
  *z = NULL;
  v = through_reshapes(v, &(int8_avail){0});
  if (!v || v->dtype != FSL_DT_I32 || !v->producer) return false;
  const fsl_node *p = v->producer;
  if (p->op == FSL_OP_sub && p->n_in == 2 && p->in[0] && p->in[1]) {
    *z = p->in[1];
    v = p->in[0];
    if (v->dtype != FSL_DT_I32 || !v->producer) return false;
    p = v->producer;
  }
  if (p->op != FSL_OP_cast || p->n_in < 1 || !p->in[0]) return false;
  *x = through_reshapes(p->in[0], av);
  return *x && is8((*x)->dtype) && fsl_value_numel(*x) == fsl_value_numel(v);
}

fsl_status fsl_onednn_int8_match(const fsl_node *lin, bool (*avail)(const void *ctx, const fsl_value *v),
                                 const void *ctx, fsl_onednn_int8 *q) {
  memset(q, 0, sizeof *q);
  int8_avail av = {avail, ctx};
  if ((lin->op != FSL_OP_matmul && lin->op != FSL_OP_conv) || lin->n_in != 2 || lin->n_out != 1 || !lin->out[0] ||
      lin->out[0]->dtype != FSL_DT_I32)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: not an int32 matmul or conv");
  const fsl_value *z = NULL, *wz = NULL;
  /* weights: an integer constant (a widening fission's constant folding
   * did), or widened like the source */
  const fsl_value *wc = through_reshapes(lin->in[1], &(int8_avail){0});
  if (wc && wc->data && fsl_dtype_is_int(wc->dtype) && fsl_value_numel(wc) == fsl_value_numel(lin->in[1])) q->wei = wc;
  if (!match_operand(lin->in[0], &q->src, &z, &av) || (!q->wei && !match_operand(lin->in[1], &q->wei, &wz, &av)))
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: operands are not 8-bit values cast to int32");
  if (!q->wei->data)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: run-time weights");
  if (z) {
    const fsl_value *zs = zero_point_source(z, q, &av);
    if (!zs) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: the source zero point is not per tensor");
    q->zp_dtype = zs->dtype;
    if (zs->data) q->zp = fsl_onednn_int8_zero_point(q, zs->data);
    else q->zp_src = zs;
  }
  if (wz) {
    fsl_onednn_int8 t;
    const fsl_value *ws = zero_point_source(wz, &t, &av);
    if (!ws || !ws->data)
      return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: the weights' zero point is not a constant per tensor");
    t.zp_dtype = ws->dtype;
    q->wzp = fsl_onednn_int8_zero_point(&t, ws->data);
  }
  /* the engine started first: its ISA limit (FSL_CPU_ISA) applies before asking for VNNI */
  if (!fsl_onednn_int8_available()) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: no engine");
  if (!fsl_onednn_has_vnni() && lin->op == FSL_OP_conv && q->src->dtype == FSL_DT_I8 && (q->zp || q->zp_src))
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: an int8 convolution source with a zero point "
                                                     "needs VNNI (oneDNN 2.6's AVX2 kernel gets it wrong)");
  int64_t n = fsl_value_numel(q->wei);
  for (int64_t i = 0; i < n; i++) {
    int64_t w = fsl_load_i64(q->wei->dtype, q->wei->data, i) - q->wzp;
    if (w < -128 || w > 127)
      return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: weight %lld minus its zero point is %lld "
                             "(outside int8)", (long long)i, (long long)w);
    q->split = q->split || w < -64 || w > 64;
  }
  q->split = q->split && !fsl_onednn_has_vnni();
  return FSL_OK;
}

/* Dims and row-major strides of lin's operands as oneDNN sees them:
 * matmul [b..., M, K] x [K, N] (weights the same for every batch: batch
 * dims 1) as one [b * M, K] x [K, N] GEMM; conv as itself, weights
 * [g, M/g, C/g, k...] when grouped. */
typedef struct q_geom {
  int sd, wd, dd;
  int64_t sdims[5], wdims[6], ddims[5];
  dnnl_dims_t strides, dil, pl, pr;
} q_geom;

static fsl_status q_geometry(const fsl_node *lin, q_geom *g) {
  memset(g, 0, sizeof *g);
  const fsl_value *x = lin->in[0], *w = lin->in[1], *y = lin->out[0];
  if (!fsl_value_has_shape(x) || !fsl_value_has_shape(w) || !fsl_value_has_shape(y) || fsl_value_numel(y) <= 0 ||
      fsl_value_numel(x) <= 0)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: static, non-empty shapes expected");
  if (lin->op == FSL_OP_matmul) {
    int r = x->rank;
    if (r < 2 || w->rank != r || y->rank != r)
      return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8 matmul: expected equal ranks >= 2");
    for (int i = 0; i < r - 2; i++)
      if (w->dims[i] != 1) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8 matmul: batched weights");
    int64_t bm = fsl_value_numel(x) / x->dims[r - 1];
    g->sd = g->wd = g->dd = 2;
    g->sdims[0] = bm, g->sdims[1] = x->dims[r - 1];
    g->wdims[0] = w->dims[r - 2], g->wdims[1] = w->dims[r - 1];
    g->ddims[0] = bm, g->ddims[1] = y->dims[r - 1];
    return FSL_OK;
  }
  int ns = x->rank - 2;
  if (ns < 1 || ns > 3 || w->rank != x->rank || y->rank != x->rank)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8 conv: 1 to 3 spatial dims, got rank %d", x->rank);
  const int64_t *st = NULL, *di = NULL, *pa = NULL, *ld = NULL;
  if (fsl_attr_ints(lin, "strides", &st) < 0) st = NULL;
  if (fsl_attr_ints(lin, "dilations", &di) < 0) di = NULL;
  if (fsl_attr_ints(lin, "pads", &pa) < 0) pa = NULL;
  if (fsl_attr_ints(lin, "lhs_dilation", &ld) >= 0)
    for (int i = 0; i < ns; i++)
      if (ld[i] != 1) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: lhs-dilated conv");
  int64_t group = fsl_attr_int(lin, "group", 1), C = x->dims[1], M = w->dims[0];
  if (group < 1 || C % group || M % group || w->dims[1] != C / group)
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8 conv: bad group %lld", (long long)group);
  for (int i = 0; i < ns; i++) {
    int64_t s = st ? st[i] : 1, d = di ? di[i] : 1;
    if (s < 1 || d < 1) return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8 conv: bad attributes");
    g->strides[i] = s, g->dil[i] = d - 1;
    g->pl[i] = pa ? pa[i] : 0, g->pr[i] = pa ? pa[ns + i] : 0;
  }
  g->sd = g->dd = x->rank;
  for (int i = 0; i < x->rank; i++) g->sdims[i] = x->dims[i], g->ddims[i] = y->dims[i];
  if (group > 1) g->wdims[g->wd++] = group;
  g->wdims[g->wd++] = M / group;
  g->wdims[g->wd++] = C / group;
  for (int i = 0; i < ns; i++) g->wdims[g->wd++] = w->dims[2 + i];
  return FSL_OK;
}

/* Whether node c casts lin's int32 output to float32 (the start of a
 * dequantizing epilogue: ConvInteger's scale, QDQ's requantize). */
static bool casts_to_f32(const fsl_node *c, const fsl_node *lin) {
  return c && c->op == FSL_OP_cast && c->n_in == 1 && c->in[0] == lin->out[0] && c->n_out == 1 && c->out[0] &&
         c->out[0]->dtype == FSL_DT_F32;
}

/* The descriptor dims and strides (rank *nd) of post-op entry pe over the
 * destination of geometry g: an eltwise or reshape entry needs none; a
 * binary one must have a constant operand (captured at create time), for
 * a conv broadcast over the destination's dims, for a matmul (one [b * M,
 * N] GEMM) per column or one value.  false: the entry is not taken. */
static bool q_post_view(const q_geom *g, bool conv, const post_entry *pe, int *nd, int64_t *bd, int64_t *bst) {
  *nd = 0;
  if (!pe->binary) return true;
  if (!pe->cdata || pe->full || pe->sum) return false;
  if (conv) {
    if (pe->sr != g->dd) return false;
    for (int i = 0; i < pe->sr; i++)
      if (pe->sd[i] != g->ddims[i]) return false;
    *nd = pe->sr;
    memcpy(bd, pe->bd, sizeof(int64_t) * (size_t)pe->sr);
  } else {
    if (pe->sr < 1 || pe->sd[pe->sr - 1] != g->ddims[1]) return false;
    for (int i = 0; i < pe->sr - 1; i++)
      if (pe->bd[i] != 1) return false;
    *nd = 2;
    bd[0] = 1, bd[1] = pe->bd[pe->sr - 1];
  }
  rm_strides(*nd, bd, bst);
  return true;
}

/* What the primitive computes after its s32 sums: the first ne entries
 * of e as post-ops, the destination in ddt, n_nodes epilogue nodes
 * absorbed (0: none, s32 out). */
typedef struct q_epi {
  int ne, n_nodes;
  dnnl_data_type_t ddt;
} q_epi;

/* The epilogue nodes that the cast to float32 (epi[0]) and post-op
 * entries e[0..k) compute. */
static int q_nodes(const post_entry *e, int k) { return k ? e[k - 1].node + 1 : 1; }

/* The epilogues to try, longest first (at most n_max): the cast to
 * float32 and the post-op entries e[0..ne) at each node boundary, the
 * longest one also with the exact cast to u8/s8 that follows it (QDQ's
 * QuantizeLinear), and last none. */
static int q_epilogues(const fsl_node *lin, fsl_node *const *epi, int n_epi, const post_entry *e, int ne, q_epi *t,
                       int n_max) {
  int n = 0;
  if (n_epi > 0 && casts_to_f32(epi[0], lin)) {
    int k = ne;
    dnnl_data_type_t dt;
    int nodes = q_nodes(e, k);
    if (nodes < n_epi && fsl_onednn_exact_int8_cast(epi[0]->out[0], epi, nodes, 1, &dt))
      t[n++] = (q_epi){k, nodes + 1, dt};
    while (n < n_max - 1) {
      t[n++] = (q_epi){k, q_nodes(e, k), dnnl_f32};
      if (k == 0) break;
      int node = e[k - 1].node;
      while (k > 0 && e[k - 1].node == node) k--;
    }
  }
  t[n++] = (q_epi){0, 0, dnnl_s32};
  return n;
}

/* The primitive descriptor of lin (geometry g, source sdt, zero point zp)
 * with epilogue ep over entries e: *mds receives the plain src and dst
 * descriptors and the binary operands' (post[i]). */
static dnnl_status_t q_pd(const fsl_node *lin, const q_geom *g, dnnl_data_type_t sdt, bool zp, const post_entry *e,
                          const q_epi *ep, md_arena *a, fsl_md *src, fsl_md *wei_user, fsl_md *dst, fsl_md *post,
                          dnnl_primitive_desc_t *pd) {
  bool conv = lin->op == FSL_OP_conv;
  int64_t sst[5], wst[6], dst_st[5];
  rm_strides(g->sd, g->sdims, sst);
  rm_strides(g->wd, g->wdims, wst);
  rm_strides(g->dd, g->ddims, dst_st);
  fsl_md src_any, wei_any, dst_any;
  dnnl_status_t s = md_make_dt(a, src, g->sd, g->sdims, sst, dnnl_format_tag_undef, sdt);
  if (s == dnnl_success) s = md_make_dt(a, wei_user, g->wd, g->wdims, wst, dnnl_format_tag_undef, dnnl_s8);
  if (s == dnnl_success) s = md_make_dt(a, dst, g->dd, g->ddims, dst_st, dnnl_format_tag_undef, ep->ddt);
  if (s == dnnl_success) s = md_make_dt(a, &wei_any, g->wd, g->wdims, NULL, dnnl_format_tag_any, dnnl_s8);
  /* a convolution picks its activation layouts (nhwc for int8), a matmul reads row-major */
  if (s == dnnl_success)
    s = conv ? md_make_dt(a, &src_any, g->sd, g->sdims, NULL, dnnl_format_tag_any, sdt) : md_copy(a, &src_any, FSL_MD(*src));
  if (s == dnnl_success)
    s = conv ? md_make_dt(a, &dst_any, g->dd, g->ddims, NULL, dnnl_format_tag_any, ep->ddt)
             : md_copy(a, &dst_any, FSL_MD(*dst));
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  if (s == dnnl_success) s = fsl_onednn_user_scratchpad_attr(&attr);
  if (s == dnnl_success && zp) s = attr_runtime_zero_point(attr, DNNL_ARG_SRC);
  if (s == dnnl_success && ep->ne > 0) s = dnnl_post_ops_create(&po);
  for (int i = 0; s == dnnl_success && i < ep->ne; i++) {
    int nd;
    int64_t bd[FSL_MAX_RANK], bst[FSL_MAX_RANK];
    if (e[i].reshape) continue;
    if (!q_post_view(g, conv, &e[i], &nd, bd, bst)) s = dnnl_unimplemented;
    else if (!e[i].binary) s = po_append_eltwise(po, e[i].alg, e[i].alpha, e[i].beta);
    else if ((s = md_make_dt(a, &post[i], nd, bd, bst, dnnl_format_tag_undef, dnnl_f32)) == dnnl_success)
      s = dnnl_post_ops_append_binary(po, e[i].alg, FSL_MD(post[i]));
  }
  if (s == dnnl_success && po) s = dnnl_primitive_attr_set_post_ops(attr, po);
  if (s == dnnl_success)
    s = conv ? pd_convolution(pd, fsl_onednn_engine, dnnl_convolution_direct, FSL_MD(src_any), FSL_MD(wei_any), NULL,
                              FSL_MD(dst_any), g->strides, g->dil, g->pl, g->pr, attr)
             : pd_matmul(pd, fsl_onednn_engine, FSL_MD(src_any), FSL_MD(wei_any), NULL, FSL_MD(dst_any), attr);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s == dnnl_success && fsl_onednn_impl_is_ref(*pd)) {
    dnnl_primitive_desc_destroy(*pd), *pd = NULL;
    s = dnnl_unimplemented;
  }
  return s;
}

static const char *dt_name(dnnl_data_type_t dt) {
  return dt == dnnl_u8 ? "u8" : dt == dnnl_s8 ? "s8" : dt == dnnl_f32 ? "f32" : "s32";
}

fsl_status fsl_onednn_int8_create(const fsl_node *lin, const fsl_onednn_int8 *q, fsl_node *const *epi, int n_epi,
                                  int n_threads, fsl_onednn_linear **out, int *n_absorbed) {
  *out = NULL;
  *n_absorbed = 0;
  q_geom g;
  FSL_TRY(q_geometry(lin, &g));
  FSL_TRY(fsl_onednn_engine_get());
  fsl_onednn_omp_init();
  dnnl_data_type_t sdt = q->src->dtype == FSL_DT_U8 ? dnnl_u8 : dnnl_s8;
  bool conv = lin->op == FSL_OP_conv, zp = q->zp_src || q->zp != 0;
  /* the epilogue as post-ops: not with split weights, whose two s32 sums combine after the primitive */
  post_entry *e = calloc(MAX_POST, sizeof *e);
  int ne = 0;
  if (!e) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  if (!q->split && n_epi > 0 && casts_to_f32(epi[0], lin) &&
      !fsl_onednn_epilogue(lin, epi, n_epi, 1, false, NULL, e, &ne)) {
    fsl_onednn_entries_free(e, ne);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  q_epi tries[MAX_POST + 2];
  int n_tries = q_epilogues(lin, epi, q->split ? 0 : n_epi, e, ne, tries, MAX_POST + 2);
  md_arena a = {0};
  fsl_md src, wei_user, dst, post[MAX_POST];
  dnnl_primitive_desc_t pd = NULL;
  dnnl_status_t s = dnnl_unimplemented;
  q_epi ep = tries[n_tries - 1];
  for (int t = 0; t < n_tries && !pd; t++) {
    md_arena_free(&a);
    ep = tries[t];
    /* only what leaves nothing but the last value to materialise */
    if (!fsl_linear_chain_closed(lin, epi, ep.n_nodes)) continue;
    s = q_pd(lin, &g, sdt, zp, e, &ep, &a, &src, &wei_user, &dst, post, &pd);
    if (s != dnnl_success) pd = NULL;
  }
  if (!pd) {
    fsl_onednn_entries_free(e, ne);
    md_arena_free(&a);
    return q_fail(lin, s, "primitive descriptor");
  }
  for (int i = ep.ne; i < ne; i++) free(e[i].cdata), e[i].cdata = NULL;
  fsl_status st = FSL_OK;
  fsl_onednn_linear *op = calloc(1, sizeof *op);
  int8_t *w8 = malloc((size_t)fsl_value_numel(q->wei));
  if (!op || !w8) {
    free(op), free(w8);
    fsl_onednn_entries_free(e, ne);
    dnnl_primitive_desc_destroy(pd);
    md_arena_free(&a);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  op->q8 = *q;
  op->bias_entry = -1;
  op->n_threads = n_threads;
  op->entries = e;
  op->n_entries = ep.ne;
  op->n_absorbed = ep.n_nodes;
  int64_t nw = fsl_value_numel(q->wei);
  for (int64_t i = 0; i < nw; i++) {
    int64_t w = fsl_load_i64(q->wei->dtype, q->wei->data, i) - q->wzp;
    w8[i] = (int8_t)(q->split ? w >> 1 : w); /* split: w = 2 * (w >> 1) + (w & 1), both 7-bit */
  }
  s = dnnl_primitive_create(&op->prim, pd);
  fsl_cmd wmd = s == dnnl_success ? dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0) : NULL;
  fsl_cmd smd = wmd ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
  if (s == dnnl_success && !wmd) s = dnnl_runtime_error;
  if (s == dnnl_success && smd && dnnl_memory_desc_get_size(smd) > 0) {
    s = dnnl_memory_create(&op->scratch_mem, smd, fsl_onednn_engine, DNNL_MEMORY_NONE);
    op->scratch_bytes = dnnl_memory_desc_get_size(smd);
  }
  if (s == dnnl_success)
    s = fsl_onednn_act_memory(pd, dnnl_query_src_md, FSL_MD(src), true, &op->src_mem, &op->src_user_mem,
                              &op->src_buf, &op->src_reorder);
  if (s == dnnl_success)
    s = fsl_onednn_act_memory(pd, dnnl_query_dst_md, FSL_MD(dst), false, &op->dst_mem, &op->dst_user_mem,
                              &op->dst_buf, &op->dst_reorder);
  /* constant post-op operands, captured now */
  for (int i = 0; s == dnnl_success && i < ep.ne; i++)
    if (e[i].binary) s = dnnl_memory_create(&op->post_mem[i], FSL_MD(post[i]), fsl_onednn_engine, e[i].cdata);
  if (s == dnnl_success) { /* weights packed once */
    size_t sz = dnnl_memory_desc_get_size(wmd);
    op->wei_buf = aligned_alloc(64, (sz + 63) / 64 * 64);
    s = op->wei_buf ? fsl_onednn_run_reorder(FSL_MD(wei_user), w8, wmd, op->wei_buf) : dnnl_out_of_memory;
    if (s == dnnl_success) s = dnnl_memory_create(&op->wei_mem, wmd, fsl_onednn_engine, op->wei_buf);
    op->wei_const = true;
  }
  if (s == dnnl_success && q->split) { /* the low bits, and the s32 sums they make */
    for (int64_t i = 0; i < nw; i++) w8[i] = (int8_t)((fsl_load_i64(q->wei->dtype, q->wei->data, i) - q->wzp) & 1);
    size_t sz = dnnl_memory_desc_get_size(wmd);
    fsl_cmd dmd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    size_t dz = dmd ? dnnl_memory_desc_get_size(dmd) : 0;
    op->wei2_buf = aligned_alloc(64, (sz + 63) / 64 * 64);
    op->acc2_buf = dz ? aligned_alloc(64, (dz + 63) / 64 * 64) : NULL;
    s = op->wei2_buf && op->acc2_buf ? fsl_onednn_run_reorder(FSL_MD(wei_user), w8, wmd, op->wei2_buf)
                                     : dnnl_out_of_memory;
    if (s == dnnl_success) s = dnnl_memory_create(&op->wei2_mem, wmd, fsl_onednn_engine, op->wei2_buf);
    if (s == dnnl_success) s = dnnl_memory_create(&op->acc2_mem, dmd, fsl_onednn_engine, op->acc2_buf);
    op->acc2_n = dz / sizeof(int32_t);
  }
  if (s == dnnl_success && zp) {
    fsl_md zmd;
    int64_t one = 1;
    s = md_make_dt(&a, &zmd, 1, &one, NULL, dnnl_a, dnnl_s32);
    if (s == dnnl_success) s = dnnl_memory_create(&op->zp_mem, FSL_MD(zmd), fsl_onednn_engine, &op->zp_val);
  }
  if (s != dnnl_success) {
    st = q_fail(lin, s, "memory");
    goto fail;
  }
  {
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) impl = "?";
    snprintf(op->desc, sizeof op->desc, "%s %s %s:s8->%s%s%s%s %s", conv ? "convolution" : "matmul", impl,
             dt_name(sdt), dt_name(ep.ddt), zp ? " zero-point" : "", q->split ? " split-weights" : "",
             ep.ne ? " post-ops" : "", op->src_reorder ? "reordered" : "plain");
    op->desc_len = strlen(op->desc);
  }
  free(w8);
  dnnl_primitive_desc_destroy(pd);
  md_arena_free(&a);
  *out = op;
  *n_absorbed = op->n_absorbed;
  return FSL_OK;
fail:
  free(w8);
  dnnl_primitive_desc_destroy(pd);
  md_arena_free(&a);
  fsl_onednn_linear_free(op);
  return st;
}
