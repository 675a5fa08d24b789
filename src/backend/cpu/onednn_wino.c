/*
 * onednn_wino.c — Winograd convolutions of the oneDNN path: when to ask
 * oneDNN for its own (fsl_onednn_wino_pays; AVX-512 only in oneDNN 2.6.3),
 * and where oneDNN runs a direct kernel instead, fissile's F(2x2,3x3)
 * Winograd (winograd.h) in its place (fsl_onednn_wino_try).
 */
#include "backend/cpu/onednn_impl.h"

/* Whether conv lin (geometry g) asks oneDNN for its Winograd convolution
 * first: a dense 3x3, stride 1, undilated 2-D convolution with constant
 * weights, at least 16 input and output channels and 24 MFLOP.  oneDNN
 * 2.6.3 has f32 Winograd kernels for AVX-512 only (F(2x2,3x3) and
 * F(4x4,3x3), blocked nChw16c activations, weights transformed once at
 * create time); elsewhere, and where its post-ops are more than a bias,
 * eltwise and sum ones (swish among them), the primitive is refused and the
 * caller falls back to the direct convolution.  Measured with oneDNN
 * alone, 2 threads, AMD EPYC Zen 4, bias + relu (direct / Winograd, ms):
 * 64->64 56x56 0.97 / 0.50, 128->128 28x28 (+ sum) 0.95 / 0.33, 256->256
 * 14x14 0.90 / 0.47, 512->512 7x7 0.83 / 0.64, 16->32 56x56 0.128 /
 * 0.085, 32->32 80x80 (direct + swish) 0.57 / 0.31; but 64->64 14x14
 * (14 MFLOP) 0.065 / 0.087, 8->16 160x160 0.26 / 0.40 and 3->16 224x224
 * 0.21 / 0.72, hence the bounds. */
bool fsl_onednn_wino_pays(const geom *g, const fsl_node *lin) {
  if (!g->conv || g->deconv || g->mm != CONV_DIRECT || g->group != 1 || g->ns != 2 || !g->wdata) return false;
  const fsl_value *x = lin->in[0], *w = lin->in[1], *y = lin->out[0];
  for (int i = 0; i < 2; i++)
    if (w->dims[2 + i] != 3 || g->strides[i] != 1 || g->dil[i] != 0) return false;
  double flop = 2.0 * (double)fsl_value_numel(y) * (double)x->dims[1] * 9.0;
  return x->dims[1] >= 16 && y->dims[1] >= 16 && flop >= FSL_WINOGRAD_MIN_FLOP;
}

/* The epilogue entries e[0..n) of op (a direct convolution) as the steps
 * of fissile's Winograd convolution, its bias in *bias: false when one is
 * not a step it takes (a reshape, a run-time operand other than the sum, an
 * operand that varies along more than the output channels). */
static bool wino_posts(const fsl_onednn_linear *op, const fsl_value *y, fsl_wino_post *p, int *np,
                       const float **bias) {
  *np = 0;
  *bias = NULL;
  for (int i = 0; i < op->n_entries; i++) {
    const post_entry *pe = &op->entries[i];
    if (pe->reshape) return false;
    if (i == op->bias_entry) {
      *bias = pe->cdata;
      continue;
    }
    fsl_wino_post q;
    memset(&q, 0, sizeof q);
    q.alg = pe->alg, q.alpha = pe->alpha, q.beta = pe->beta;
    if (!pe->binary) {
      q.kind = FSL_WINO_ELTWISE;
    } else if (pe->sum) {
      q.kind = FSL_WINO_SUM;
    } else {
      if (!pe->cdata || pe->sr != 4) return false;
      for (int d = 0; d < 4; d++)
        if (pe->sd[d] != y->dims[d] || (pe->bd[d] != 1 && d != 1)) return false;
      q.kind = FSL_WINO_BINARY, q.c = pe->cdata, q.per_channel = pe->bd[1] != 1;
    }
    if (!fsl_wino_post_ok(&q)) return false;
    p[(*np)++] = q;
  }
  return true;
}

/* A convolution that pays as Winograd (fsl_onednn_wino_pays) but that oneDNN runs as
 * its direct kernel (it has no Winograd without AVX-512) over nChw8c
 * activations: the same convolution, post-ops and layouts as fissile's
 * F(2x2,3x3) Winograd (winograd.c), which then runs instead of the direct
 * primitive, where it takes the geometry and every absorbed post-op.
 * Measured with oneDNN 2.6.3 (bench/results/winograd-avx2-zen4.md). */
fsl_status fsl_onednn_wino_try(fsl_onednn_linear *op, const fsl_node *lin, const geom *g,
                               const_dnnl_primitive_desc_t pd) {
  const fsl_value *x = lin->in[0], *y = lin->out[0];
  if (g->wnd != 4 || x->rank != 4 || y->rank != 4 || x->dims[1] % 8 || y->dims[1] % 8) return FSL_OK;
  /* with few channels the transforms cost more than the direct kernel saves
   * (FSL_WINOGRAD_MIN_CHANNELS, orchestrate.h; the cost model uses the same) */
  int64_t c = x->dims[1], k = y->dims[1];
  if (c < FSL_WINOGRAD_MIN_CHANNELS || k < FSL_WINOGRAD_MIN_CHANNELS || c * k < FSL_WINOGRAD_MIN_CK) return FSL_OK;
  md_arena a = {0};
  fsl_md xb, yb;
  bool blocked = md_make_tag(&a, &xb, 4, x->dims, dnnl_nChw8c) == dnnl_success &&
                 md_make_tag(&a, &yb, 4, y->dims, dnnl_nChw8c) == dnnl_success &&
                 dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), FSL_MD(xb)) &&
                 dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), FSL_MD(yb));
  md_arena_free(&a);
  fsl_wino_post post[MAX_POST];
  int np = 0;
  const float *bias = NULL;
  if (!blocked || !wino_posts(op, y, post, &np, &bias)) return FSL_OK;
  fsl_wino_geom wg = {x->dims[0], x->dims[1], x->dims[2], x->dims[3], y->dims[1], y->dims[2], y->dims[3],
                      g->pl[0], g->pl[1]};
  fsl_status st = fsl_wino_create(&wg, g->wdata, g->wstr, bias, post, np, fsl_onednn_engine, &op->wino);
  if (st == FSL_ERR_NOMEM) return st;
  if (st != FSL_OK) {
    fsl_error_clear();
    return FSL_OK;
  }
  if (op->scratch_mem) dnnl_memory_destroy(op->scratch_mem); /* the direct primitive's: it no longer runs */
  op->scratch_mem = NULL, op->scratch_bytes = 0;
  /* "convolution <impl> <dims>..." -> "convolution <winograd impl> <dims>..." */
  char old[sizeof op->desc];
  memcpy(old, op->desc, sizeof old);
  const char *impl = strchr(old, ' '), *dims = impl ? strchr(impl + 1, ' ') : NULL;
  size_t l = (size_t)snprintf(op->desc, sizeof op->desc, "convolution %s", fsl_wino_describe(op->wino));
  if (dims && l < sizeof op->desc) memcpy(op->desc + l, dims, strnlen(dims, sizeof op->desc - l - 1) + 1);
  op->desc[sizeof op->desc - 1] = 0;
  op->desc_len = strlen(op->desc);
  return FSL_OK;
}
