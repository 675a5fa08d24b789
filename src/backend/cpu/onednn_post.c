/*
 * onednn_post.c — the epilogue of a linear op as oneDNN post-ops
 * (onednn_impl.h, post_entry).  Each epi node combines the chain value
 * (the previous node's output) with nothing (unary), itself, a scalar
 * constant, or an outside operand that is a broadcast of some source value
 * through reshape/expand views.  Broadcast operands become binary post-ops
 * whose memory descriptor has the destination's rank with 1 on broadcast
 * dims and the source's strides on the others; constant operands are
 * copied (and shrunk to the dims along which they actually vary) at create
 * time.  Semantics: "Primitive Attributes: Post-ops" in the oneDNN
 * developer guide.
 */
#include "backend/cpu/onednn_impl.h"

#include <math.h>

void fsl_onednn_entries_free(post_entry *e, int n) {
  if (!e) return;
  for (int i = 0; i < n; i++) free(e[i].cdata);
  free(e);
}

/*
 * Describes operand v, whose shape is the destination shape (rank r), as a
 * view of a source value reached by walking back through reshape/expand
 * producers.  On return *src is the source; bd/bst give, per destination
 * dim, the extent (the dst dim or 1 where broadcast) and the source's
 * element stride.  A reshape is walked through only when it keeps the
 * sequence of non-1 dims (it only inserts or drops 1s).
 */
void fsl_onednn_operand_view(const fsl_value *v, int r, const fsl_value **src, int64_t *bd, int64_t *bst) {
  int map[FSL_MAX_RANK];
  for (int j = 0; j < r; j++) map[j] = v->dims[j] != 1 ? j : -1;
  const fsl_value *cur = v;
  for (;;) {
    const fsl_node *p = cur->producer;
    if (!p || p->n_in < 1 || !p->in[0] || (p->op != FSL_OP_reshape && p->op != FSL_OP_expand)) break;
    const fsl_value *u = p->in[0];
    if (u->rank < 0 || u->rank > FSL_MAX_RANK) break;
    int umap[FSL_MAX_RANK];
    if (p->op == FSL_OP_expand) {
      if (u->rank != cur->rank) break;
      for (int j = 0; j < u->rank; j++) umap[j] = u->dims[j] == 1 ? -1 : map[j];
    } else {
      int nu[FSL_MAX_RANK], nv[FSL_MAX_RANK], cu = 0, cv = 0;
      for (int j = 0; j < u->rank; j++)
        if (u->dims[j] != 1) nu[cu++] = j;
      for (int j = 0; j < cur->rank; j++)
        if (cur->dims[j] != 1) nv[cv++] = j;
      bool ok = cu == cv;
      for (int t = 0; ok && t < cu; t++) ok = u->dims[nu[t]] == cur->dims[nv[t]];
      if (!ok) break;
      for (int j = 0; j < u->rank; j++) umap[j] = -1;
      for (int t = 0; t < cu; t++) umap[nu[t]] = map[nv[t]];
    }
    memcpy(map, umap, sizeof(int) * (size_t)u->rank);
    cur = u;
  }
  int64_t ust[FSL_MAX_RANK];
  rm_strides(cur->rank, cur->dims, ust);
  for (int i = 0; i < r; i++) bd[i] = 1, bst[i] = 0;
  for (int j = 0; j < cur->rank; j++)
    if (cur->dims[j] != 1 && map[j] >= 0) bd[map[j]] = cur->dims[j], bst[map[j]] = ust[j];
  *src = cur;
}

/* Gathers a constant f32 operand into a compact row-major buffer over bd,
 * then drops every dim along which it does not vary (bd[i] -> 1).  The
 * result is in e->cdata / e->bd / e->bst.  false on OOM. */
static bool const_operand(post_entry *e, int r, const float *data) {
  int64_t n = fsl_numel(r, e->bd);
  float *c = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  if (!c) return false;
  int64_t idx[FSL_MAX_RANK] = {0};
  for (int64_t f = 0; f < n; f++) {
    int64_t off = 0;
    for (int i = 0; i < r; i++) off += idx[i] * e->bst[i];
    c[f] = data[off];
    for (int i = r - 1; i >= 0; i--) {
      if (++idx[i] < e->bd[i]) break;
      idx[i] = 0;
    }
  }
  /* shrink: a dim along which every slice equals slice 0 (dropping one
   * such dim keeps the others uniform, so the mask of the full buffer holds) */
  unsigned uni = fsl_uniform_dims(c, sizeof(float), r, e->bd);
  for (int d = 0; d < r; d++) {
    if (e->bd[d] <= 1 || !(uni & (1u << d))) continue;
    int64_t inner = 1, outer = 1;
    for (int i = d + 1; i < r; i++) inner *= e->bd[i];
    for (int i = 0; i < d; i++) outer *= e->bd[i];
    int64_t ext = e->bd[d];
    for (int64_t o = 0; o < outer; o++) memmove(c + o * inner, c + o * ext * inner, sizeof(float) * (size_t)inner);
    e->bd[d] = 1;
  }
  rm_strides(r, e->bd, e->bst);
  e->cdata = c;
  return true;
}

static bool is_f32_like(const fsl_value *v, const fsl_value *like) {
  if (!v || v->dtype != FSL_DT_F32 || v->rank != like->rank) return false;
  for (int i = 0; i < v->rank; i++)
    if (v->dims[i] != like->dims[i]) return false;
  return true;
}

static void add_eltwise(post_entry *e, int *n, int node, dnnl_alg_kind_t alg, float alpha, float beta) {
  post_entry *p = &e[(*n)++];
  memset(p, 0, sizeof *p);
  p->alg = alg, p->alpha = alpha, p->beta = beta, p->node = node;
}

/* The constant scalar c of the binary node nd = `op`(x, c) (or op(c, x)
 * when `x_first_only` is false), reached through reshape/expand views: a
 * constant of one element, or one whose elements all equal c. */
static bool scalar_operand(const fsl_node *nd, fsl_op op, const fsl_value *x, bool x_first_only, float *c) {
  if (nd->op != op || nd->n_in != 2 || nd->n_out != 1 || !nd->in[0] || !nd->in[1] || !is_f32_like(nd->out[0], x))
    return false;
  int xi = nd->in[0] == x ? 0 : nd->in[1] == x && !x_first_only ? 1 : -1;
  if (xi < 0 || nd->in[1 - xi] == x || nd->in[1 - xi]->rank > FSL_MAX_RANK || nd->in[1 - xi]->rank < 0) return false;
  const fsl_value *src = NULL;
  int64_t bd[FSL_MAX_RANK], bst[FSL_MAX_RANK];
  fsl_onednn_operand_view(nd->in[1 - xi], nd->in[1 - xi]->rank, &src, bd, bst);
  if (!src || !src->data || src->dtype != FSL_DT_F32) return false;
  /* one element, or a folded broadcast of one: every element equal */
  const float *d = src->data;
  for (int64_t k = 1, n = fsl_value_numel(src); k < n; k++)
    if (memcmp(&d[k], &d[0], sizeof *d)) return false;
  *c = d[0];
  return true;
}

static bool near(float a, double b) { return fabs((double)a - b) <= 1e-6 * fabs(b); }

/* HardSwish over the chain value h, as the ONNX HardSwish fission writes it,
 * h * max(0, min(1, h * (1/6) + 0.5)), or as exporters write it before
 * opset 14, h * clip(h + 3, 0, 6) / 6: an affine map of h (mul or div by a
 * scalar, then add one), a clamp (min and max, either order), optionally a
 * scale, and the product with h.  Returns the number of nodes (0: none). */
static int match_hardswish(fsl_node *const *epi, int n_epi, int i, const fsl_value *h) {
  const fsl_value *t = h;
  float a = 1, b = 0, lo = -INFINITY, hi = INFINITY, scale = 1, c;
  int j = i;
  if (j < n_epi && scalar_operand(epi[j], FSL_OP_mul, t, false, &c)) a = c, t = epi[j++]->out[0];
  else if (j < n_epi && scalar_operand(epi[j], FSL_OP_div, t, true, &c) && c != 0) a = 1 / c, t = epi[j++]->out[0];
  if (j < n_epi && scalar_operand(epi[j], FSL_OP_add, t, false, &c)) b = c, t = epi[j++]->out[0];
  for (int k = 0; k < 2 && j < n_epi; k++) {
    if (scalar_operand(epi[j], FSL_OP_min, t, false, &c) && hi == INFINITY) hi = c, t = epi[j++]->out[0];
    else if (scalar_operand(epi[j], FSL_OP_max, t, false, &c) && lo == -INFINITY) lo = c, t = epi[j++]->out[0];
  }
  if (j < n_epi && scalar_operand(epi[j], FSL_OP_mul, t, false, &c)) scale = c, t = epi[j++]->out[0];
  else if (j < n_epi && scalar_operand(epi[j], FSL_OP_div, t, true, &c) && c != 0) scale = 1 / c, t = epi[j++]->out[0];
  if (j >= n_epi || j == i) return 0;
  const fsl_node *m = epi[j];
  if (m->op != FSL_OP_mul || m->n_in != 2 || m->n_out != 1 || !is_f32_like(m->out[0], h) ||
      !((m->in[0] == h && m->in[1] == t) || (m->in[1] == h && m->in[0] == t)))
    return 0;
  /* h * scale * clamp(a h + b, 0, hi) = h * clamp(h / 6 + 1/2, 0, 1) */
  if (lo != 0 || !(hi > 0) || hi == INFINITY || !near(a / hi, 1.0 / 6) || !near(b / hi, 0.5) || !near(scale * hi, 1))
    return 0;
  return j + 1 - i;
}

/*
 * Translates epi[i] (whose chain operand is `prev`) into post-op entries
 * appended at e[*n]; returns the number of epi nodes it consumed (0: stop,
 * -1: out of memory).
 */
static int translate(const fsl_value *lin_out, fsl_node *const *epi, int n_epi, int i, const fsl_value *prev,
                     const avail_fn *avail, post_entry *e, int *n) {
  const fsl_node *nd = epi[i];
  if (*n + 2 > MAX_POST || nd->n_out != 1 || !is_f32_like(nd->out[0], prev)) return 0;
  for (int j = 0; j < nd->n_in; j++)
    if (!nd->in[j]) return 0;
  if (nd->n_in == 1) {
    if (nd->in[0] != prev) return 0;
    switch (nd->op) {
      case FSL_OP_tanh: add_eltwise(e, n, i, dnnl_eltwise_tanh, 0, 0); return 1;
      case FSL_OP_exp: add_eltwise(e, n, i, dnnl_eltwise_exp, 0, 0); return 1;
      case FSL_OP_log: add_eltwise(e, n, i, dnnl_eltwise_log, 0, 0); return 1;
      case FSL_OP_sqrt: add_eltwise(e, n, i, dnnl_eltwise_sqrt, 0, 0); return 1;
      case FSL_OP_abs: add_eltwise(e, n, i, dnnl_eltwise_abs, 0, 0); return 1;
      case FSL_OP_neg: add_eltwise(e, n, i, dnnl_eltwise_linear, -1.0f, 0); return 1;
      /* ONNX Round and oneDNN's round both go half to even */
      case FSL_OP_round: add_eltwise(e, n, i, dnnl_eltwise_round, 0, 0); return 1;
      case FSL_OP_sigmoid:
        /* sigmoid(x) followed by x * sigmoid(x) is swish */
        if (i + 1 < n_epi && epi[i + 1]->op == FSL_OP_mul && epi[i + 1]->n_in == 2 && epi[i + 1]->n_out == 1 &&
            is_f32_like(epi[i + 1]->out[0], prev) &&
            ((epi[i + 1]->in[0] == prev && epi[i + 1]->in[1] == nd->out[0]) ||
             (epi[i + 1]->in[1] == prev && epi[i + 1]->in[0] == nd->out[0]))) {
          add_eltwise(e, n, i, dnnl_eltwise_swish, 1.0f, 0);
          e[*n - 1].node = i + 1;
          return 2;
        }
        add_eltwise(e, n, i, dnnl_eltwise_logistic, 0, 0);
        return 1;
      default: return 0;
    }
  }
  if (nd->n_in != 2) return 0;
  int hs = match_hardswish(epi, n_epi, i, prev);
  if (hs > 0) {
    /* oneDNN 2.6: d = s * ReLU6(s + 3) / 6; 3.x: s * max(0, min(1, alpha s + beta)) */
    add_eltwise(e, n, i, dnnl_eltwise_hardswish, 1.0f / 6, 0.5f);
    e[*n - 1].node = i + hs - 1;
    return hs;
  }
  fsl_op op = nd->op;
  if (op != FSL_OP_add && op != FSL_OP_sub && op != FSL_OP_mul && op != FSL_OP_div && op != FSL_OP_max &&
      op != FSL_OP_min)
    return 0;
  int ci = nd->in[0] == prev ? 0 : nd->in[1] == prev ? 1 : -1;
  if (ci < 0) return 0;
  const fsl_value *other = nd->in[1 - ci];
  if (other == prev) { /* x op x */
    if (op == FSL_OP_mul) { add_eltwise(e, n, i, dnnl_eltwise_square, 0, 0); return 1; }
    if (op == FSL_OP_add) { add_eltwise(e, n, i, dnnl_eltwise_linear, 2.0f, 0); return 1; }
    return 0;
  }
  if (!is_f32_like(other, prev)) return 0;
  int r = prev->rank;
  post_entry pe;
  memset(&pe, 0, sizeof pe);
  pe.binary = true;
  pe.node = i;
  pe.sr = r;
  memcpy(pe.sd, prev->dims, sizeof(int64_t) * (size_t)r);
  fsl_onednn_operand_view(other, r, &pe.src, pe.bd, pe.bst);
  /* the operand must not be computed by the linear op or the chain itself */
  if (pe.src == lin_out) return 0;
  for (int j = 0; j <= i; j++)
    if (pe.src == epi[j]->out[0]) return 0;
  if (pe.src->dtype != FSL_DT_F32) return 0;
  /* A full-size run-time operand of a conv (a residual add): in plain nchw,
   * while the conv writes oneDNN's blocked layout, oneDNN 2.6 takes a path
   * ~20x slower than the conv itself (resnet18: 37 ms for one 3x3 conv);
   * in the destination's own layout its jit kernels keep their speed.  So
   * such an operand is given in that layout (make_pd), reordered from
   * row-major at run time unless its producer writes it so (chained).
   * Only a whole operand qualifies (the same dims, row-major); any other
   * view of one stays with the generated epilogue. */
  if (lin_out->producer && lin_out->producer->op == FSL_OP_conv && !pe.src->data &&
      fsl_value_numel(pe.src) == fsl_value_numel(prev)) {
    /* Only where oneDNN has no AVX-512: there its brgemm 1x1 convolutions
     * refuse the binary post-op (their jit_1x1 fallback is 1.2-1.4x slower
     * than brgconv_1x1 plus the generated add), and with the sum post-op
     * ResNet-18 took 13.17 -> 13.45 ms and mobilenet_v3_small 1.49 -> 1.55
     * ms (FSL_CPU_PROFILE, 8 interleaved rounds): the Winograd
     * convolutions' nChw16c results break the nhwc chains around them, and
     * the residual is copied into the destination first. */
    if (fsl_onednn_has_avx512()) return 0;
    int64_t rs[FSL_MAX_RANK];
    rm_strides(r, prev->dims, rs);
    for (int d = 0; d < r; d++)
      if (pe.bd[d] != prev->dims[d] || (prev->dims[d] != 1 && pe.bst[d] != rs[d])) return 0;
    pe.full = true;
    /* the same bytes: the operand itself where it is materialised and the
     * source it reshapes is not (ResNet's MaxPool output, a reshape of a
     * value inside the pool's kernel) */
    if (avail && avail->fn && !avail->fn(avail->ctx, pe.src) && avail->fn(avail->ctx, other)) pe.src = other;
    /* an add is oneDNN's sum post-op (one per primitive): its jit kernels
     * start the accumulation from the destination, which costs less in them
     * than a binary post-op over the whole tensor */
    pe.sum = op == FSL_OP_add;
    for (int j = 0; j < *n; j++) pe.sum = pe.sum && !e[j].sum;
  }
  if (pe.src->data) {
    if (!const_operand(&pe, r, pe.src->data)) return -1;
    pe.src = NULL;
  }
  bool scalar = true;
  for (int d = 0; d < r; d++)
    if (pe.bd[d] != 1) scalar = false;
  /* max with a scalar 0 is relu; other scalars stay binary post-ops with a
   * one-element operand (exact, and free of eltwise parameters: see
   * same_params) */
  if (scalar && pe.cdata && op == FSL_OP_max && pe.cdata[0] == 0.0f) {
    free(pe.cdata);
    add_eltwise(e, n, i, dnnl_eltwise_relu, 0, 0);
    return 1;
  }
  /* binary post-op: chain value op operand (operand first only for sub/div
   * with the chain on the right: sub becomes -x + operand, div stops) */
  dnnl_alg_kind_t alg;
  switch (op) {
    case FSL_OP_add: alg = dnnl_binary_add; break;
    case FSL_OP_mul: alg = dnnl_binary_mul; break;
    case FSL_OP_max: alg = dnnl_binary_max; break;
    case FSL_OP_min: alg = dnnl_binary_min; break;
    case FSL_OP_sub: alg = ci == 0 ? dnnl_binary_sub : dnnl_binary_add; break;
    default: /* div */
      if (ci != 0) {
        free(pe.cdata);
        return 0;
      }
      alg = dnnl_binary_div;
      break;
  }
  if (op == FSL_OP_sub && ci == 1) add_eltwise(e, n, i, dnnl_eltwise_linear, -1.0f, 0);
  pe.alg = alg;
  e[(*n)++] = pe;
  return 1;
}

/* oneDNN 2.6's jit post-op injectors (seen with the brgemm matmul) apply
 * the parameters of the first eltwise post-op of an algorithm to every
 * later one of the same algorithm.  So a chain may hold several eltwise
 * post-ops of one algorithm only if their parameters agree: true when the
 * entries e[0..n) satisfy that. */
static bool same_params(const post_entry *e, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (!e[i].binary && !e[j].binary && e[i].alg == e[j].alg && (e[i].alpha != e[j].alpha || e[i].beta != e[j].beta))
        return false;
  return true;
}

/* A reshape in the chain that oneDNN absorbs: of a 2-D matmul's output
 * (possibly reshaped already), keeping the last dim N (it splits or merges
 * M, which becomes batch dims of the matmul with broadcast weights). */
static bool reshape_ok(const fsl_node *lin, const fsl_node *nd, const fsl_value *prev) {
  if (nd->op != FSL_OP_reshape || lin->op != FSL_OP_matmul || lin->in[0]->rank != 2 || nd->n_in != 1 ||
      nd->in[0] != prev || nd->n_out != 1)
    return false;
  const fsl_value *y = nd->out[0];
  return y && y->dtype == FSL_DT_F32 && y->rank >= 2 && y->dims[y->rank - 1] == lin->out[0]->dims[1] &&
         fsl_value_numel(y) == fsl_value_numel(prev);
}


bool fsl_onednn_epilogue(const fsl_node *lin, fsl_node *const *epi, int n_epi, int first, bool deconv,
                         const avail_fn *avail, post_entry *e, int *ne) {
  const fsl_value *prev = first > 0 ? epi[first - 1]->out[0] : lin->out[0];
  /* A deconvolution absorbs no post-op: oneDNN 2.6 runs it as a backward-
   * data convolution and then applies post-ops element by element in a
   * reference loop.  Measured on [1, 24, 40, 64] -> [1, 24, 80, 128], k 2,
   * stride 2 (ppocr_det), 1 thread: 0.15 ms bare, 13 ms with a relu, 20-45
   * ms with one per-channel add, 100 ms with add, mul, add, relu (and 1 ms
   * even with a native bias).  The generated epilogue does them in one
   * pass instead. */
  for (int i = first; i < n_epi && i < MAX_POST - 1 && !deconv;) {
    if (!epi[i]) break;
    if (reshape_ok(lin, epi[i], prev) && *ne < MAX_POST) {
      post_entry *p = &e[(*ne)++];
      memset(p, 0, sizeof *p);
      p->reshape = true, p->node = i, p->sr = epi[i]->out[0]->rank;
      memcpy(p->sd, epi[i]->out[0]->dims, sizeof(int64_t) * (size_t)p->sr);
      prev = epi[i++]->out[0];
      continue;
    }
    int used = translate(lin->out[0], epi, n_epi, i, prev, avail, e, ne);
    if (used < 0) return false;
    if (used > 0 && !same_params(e, *ne)) {
      /* drop this node's entries and stop */
      while (*ne > 0 && e[*ne - 1].node >= i) free(e[--*ne].cdata);
      used = 0;
    }
    if (used == 0) break;
    i += used;
    prev = epi[i - 1]->out[0];
  }
  return true;
}

/* Whether c is the scalar constant operand of the binary node nd = op(x, c)
 * (op(c, x) too for a commutative op) and an integer. */
static bool integer_scalar(const fsl_node *nd, fsl_op op, const fsl_value *x, float *c) {
  return scalar_operand(nd, op, x, op == FSL_OP_sub, c) && isfinite(*c) && *c == nearbyintf(*c);
}

bool fsl_onednn_exact_int8_cast(const fsl_value *from, fsl_node *const *epi, int i, int first, dnnl_data_type_t *dt) {
  if (i < first || !epi[i]) return false;
  const fsl_node *c = epi[i];
  const fsl_value *prev = i > first ? epi[i - 1]->out[0] : from;
  if (c->op != FSL_OP_cast || c->n_in != 1 || c->in[0] != prev || c->n_out != 1 || !c->out[0] ||
      (c->out[0]->dtype != FSL_DT_U8 && c->out[0]->dtype != FSL_DT_I8) || prev->dtype != FSL_DT_F32)
    return false;
  int r = i - 1;
  while (r >= first && epi[r]->op != FSL_OP_round) r--;
  if (r < first) return false;
  /* the range of the chain value after the round: integers within [lo, hi] */
  double lo = -INFINITY, hi = INFINITY;
  const fsl_value *x = epi[r]->out[0];
  for (int j = r + 1; j < i; j++) {
    const fsl_node *nd = epi[j];
    float k;
    if (integer_scalar(nd, FSL_OP_add, x, &k)) lo += k, hi += k;
    else if (integer_scalar(nd, FSL_OP_sub, x, &k)) lo -= k, hi -= k;
    else if (integer_scalar(nd, FSL_OP_max, x, &k)) lo = fmax(lo, k), hi = fmax(hi, k);
    else if (integer_scalar(nd, FSL_OP_min, x, &k)) lo = fmin(lo, k), hi = fmin(hi, k);
    else return false;
    x = nd->out[0];
  }
  bool u8 = c->out[0]->dtype == FSL_DT_U8;
  if (x != prev || lo < (u8 ? 0 : -128) || hi > (u8 ? 255 : 127)) return false;
  *dt = u8 ? dnnl_u8 : dnnl_s8;
  return true;
}
