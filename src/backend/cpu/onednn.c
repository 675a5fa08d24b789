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
 *     (mm_conv_pays).
 *   conv x [N, C, s...] w [M, C/g, k...] (1-3 spatial dims): dnnl
 *     convolution forward (Winograd first where wino_pays, else direct,
 *     which without AVX-512 runs as fissile's F(2x2,3x3) Winograd where
 *     that takes the conv and its post-ops: wino_try, winograd.h;
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
 *     direct convolution runs on nhwc, direct_in_permutation).
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

#include "backend/cpu/isa.h"
#include "backend/cpu/winograd.h"
#include "codegen/linsplit.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "backend/cpu/dnnl_api.h"

#define MAX_POST 64  /* post-op entries per primitive */

/* ---- process-wide engine and stream ---- */

static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;
static dnnl_status_t g_init_status = dnnl_success;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_engine(void) {
  g_init_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0);
  if (g_init_status == dnnl_success) g_init_status = dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags);
}

static fsl_status engine_get(void) {
  FSL_TRY(fsl_cpu_isa_get(NULL)); /* the ISA limit precedes oneDNN's first primitive */
  pthread_once(&g_once, init_engine);
  if (g_init_status != dnnl_success)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "oneDNN: creating the CPU engine/stream failed: %s",
                      dnnl_status2str(g_init_status));
  return FSL_OK;
}

/* OpenMP thread count of the calling thread, through the libgomp oneDNN is
 * linked with (found at run time: libfissile itself is not built with
 * -fopenmp). */
typedef void (*omp_set_fn)(int);
typedef int (*omp_get_fn)(void);
static omp_set_fn g_omp_set;
static omp_get_fn g_omp_get;
static pthread_once_t g_omp_once = PTHREAD_ONCE_INIT;

static void init_omp(void) {
  void *self = dlopen(NULL, RTLD_LAZY);
  if (!self) return;
  g_omp_set = (omp_set_fn)dlsym(self, "omp_set_num_threads");
  g_omp_get = (omp_get_fn)dlsym(self, "omp_get_max_threads");
  if (!g_omp_set || !g_omp_get) g_omp_set = NULL, g_omp_get = NULL;
}

/* Scratchpads.  In oneDNN's default ("library") scratchpad mode a primitive
 * shares a per-thread global scratchpad made for the thread that created
 * it, so it must run on that thread and not concurrently with another
 * primitive there (oneDNN developer guide, "Primitive Attributes:
 * Scratchpad").  A host may compile a model on one thread and run it on
 * another, and run two models at once (the Python package does both), so
 * every primitive kept for run time uses the "user" mode, with the
 * scratchpad of the thread that runs it (thread_scratch), and a run-time
 * reorder must need none. */
dnnl_status_t fsl_onednn_user_scratchpad_attr(dnnl_primitive_attr_t *attr) {
  dnnl_status_t s = dnnl_primitive_attr_create(attr);
  if (s == dnnl_success && (s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user)) !=
                               dnnl_success) {
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
  }
  return s;
}

/* The scratchpad of the calling thread: one buffer per thread that runs
 * linear ops, grown to the largest any of them needs and freed when the
 * thread ends.  A thread runs one primitive at a time, and a scratchpad
 * holds nothing between runs, so every op shares it: Winograd convolutions
 * need up to 10 MiB each (F(4x4,3x3), 128 channels over 28x28), which one
 * buffer per op multiplied by every such conv of a model (resnet18: 12). */
typedef struct scratch_buf {
  void *p;
  size_t n;
} scratch_buf;

static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static bool g_scratch_key_ok;

static void scratch_free(void *b) {
  scratch_buf *s = b;
  free(s->p);
  free(s);
}

static void scratch_init(void) { g_scratch_key_ok = pthread_key_create(&g_scratch_key, scratch_free) == 0; }

/* At least n bytes (64-byte aligned) for the calling thread; NULL when out
 * of memory. */
static void *thread_scratch(size_t n) {
  pthread_once(&g_scratch_once, scratch_init);
  if (!g_scratch_key_ok) return NULL;
  scratch_buf *s = pthread_getspecific(g_scratch_key);
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return NULL;
    if (pthread_setspecific(g_scratch_key, s) != 0) {
      free(s);
      return NULL;
    }
  }
  if (s->n < n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) return NULL;
    free(s->p);
    s->p = p, s->n = n;
  }
  return s->p;
}

/* A reorder primitive from -> to that needs no scratchpad (dnnl_unimplemented
 * if it would need one; see user_scratchpad_attr). */
static dnnl_status_t reorder_create(dnnl_primitive_t *r, fsl_cmd from, fsl_cmd to) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_status_t s = fsl_onednn_user_scratchpad_attr(&attr);
  if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&rpd, from, g_engine, to, g_engine, attr);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return s;
  fsl_cmd smd = dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0);
  s = smd && dnnl_memory_desc_get_size(smd) > 0 ? dnnl_unimplemented : dnnl_primitive_create(r, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return s;
}

/* Runs reorder r from `from` (its data handle set to from_data) into `to`. */
static dnnl_status_t exec_reorder(dnnl_primitive_t r, dnnl_memory_t from, const void *from_data, dnnl_memory_t to) {
  dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  dnnl_status_t s = dnnl_memory_set_data_handle(from, (void *)from_data);
  return s != dnnl_success ? s : dnnl_primitive_execute(r, g_stream, 2, ra);
}

/* Whether oneDNN may use AVX-512 (its effective ISA: the machine's, or the
 * FSL_CPU_ISA limit isa.c sets before the first primitive). */
static bool onednn_has_avx512(void) {
  return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

/* ---- post-op entries ---- */

typedef struct post_entry {
  bool binary;
  bool reshape;               /* no post-op: the chain value is reshaped to (sr, sd) */
  dnnl_alg_kind_t alg;
  float alpha, beta;          /* eltwise parameters */
  int node;                   /* index of the epi node it comes from */
  /* binary: operand as a view over the destination's (unflattened) shape */
  int64_t bd[FSL_MAX_RANK];   /* dims: dst dim or 1 */
  int64_t bst[FSL_MAX_RANK];  /* element strides into the operand's data */
  int sr;                     /* binary, reshape: the chain value's shape (bd/bst's space) */
  int64_t sd[FSL_MAX_RANK];
  float *cdata;               /* constant operand, compact over bd (owned), or NULL */
  const fsl_value *src;       /* run-time operand (data from the caller), or NULL */
  bool full;                  /* src is a full-size operand of a direct convolution (a residual),
                                 given to oneDNN in the destination's layout (make_pd) */
  bool sum;                   /* full, an add: oneDNN's sum post-op (dst += result), the
                                 destination filled with the operand before the primitive runs */
} post_entry;

struct fsl_onednn_linear {
  dnnl_primitive_t prim;
  dnnl_memory_t src_mem, wei_mem, dst_mem;  /* in the primitive's layouts */
  /* activations in a layout other than plain: reorders and buffers */
  dnnl_primitive_t src_reorder, dst_reorder;
  dnnl_memory_t src_user_mem, dst_user_mem;
  void *src_buf, *dst_buf;
  bool src_chained, dst_chained; /* fsl_onednn_linear_chain_src/_dst: in the primitive layout */
  size_t desc_len;            /* desc up to "plain"/"reordered", before the chaining note */
  /* run-time weights reorder (non-constant weights whose chosen layout is not plain) */
  dnnl_primitive_t wei_reorder;
  dnnl_memory_t wei_user_mem;
  void *wei_buf;              /* weights in the chosen layout (owned), or NULL */
  bool wei_const;             /* weights packed at create time; `wei` ignored at run */
  const float *src_const;     /* CONV_MM_WX: oneDNN's src is the constant conv weights,
                                 its weights are the run-time `src` */
  bool flip;                  /* deconvolution: run-time weights need flipping */
  float *flip_buf;            /* flipped run-time weights (owned) */
  int64_t flip_outer, flip_inner[3], flip_k;  /* flip geometry: outer x spatial dims */
  int n_spatial;
  int n_absorbed;
  int n_entries;
  post_entry *entries;        /* n_entries; cdata owned */
  int bias_entry;             /* the entry that is the conv's or matmul's own bias argument, not a
                                 post-op (bias_entry), or -1 */
  dnnl_memory_t post_mem[MAX_POST];
  const fsl_value *post_val[MAX_POST];  /* per absorbed epi node: run-time operand value */
  /* a full-size operand (post_entry.full) whose layout is not plain: reorder
   * from the caller's row-major data into post_buf, unless chained (its
   * producer writes it in this layout, fsl_onednn_linear_chain_post) */
  dnnl_primitive_t post_reorder[MAX_POST];
  dnnl_primitive_t post_copy[MAX_POST];  /* a sum operand in the primitive layout into the destination */
  dnnl_memory_t post_user_mem[MAX_POST];
  void *post_buf[MAX_POST];
  bool post_chained[MAX_POST];
  dnnl_memory_t scratch_mem;  /* the primitive's scratchpad (data: thread_scratch at run), or NULL */
  size_t scratch_bytes;
  int n_threads;
  fsl_wino *wino;             /* fissile's Winograd convolution runs instead of `prim` (wino_try), or NULL */
  char desc[192];             /* fsl_onednn_linear_describe */
};

static void entries_free(post_entry *e, int n) {
  if (!e) return;
  for (int i = 0; i < n; i++) free(e[i].cdata);
  free(e);
}

/* Row-major strides of a shape, in elements. */
static void rm_strides(int rank, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= dims[i] > 0 ? dims[i] : 1;
  }
}

/*
 * Describes operand v, whose shape is the destination shape (rank r), as a
 * view of a source value reached by walking back through reshape/expand
 * producers.  On return *src is the source; bd/bst give, per destination
 * dim, the extent (the dst dim or 1 where broadcast) and the source's
 * element stride.  A reshape is walked through only when it keeps the
 * sequence of non-1 dims (it only inserts or drops 1s).
 */
static void operand_view(const fsl_value *v, int r, const fsl_value **src, int64_t *bd, int64_t *bst) {
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
  operand_view(nd->in[1 - xi], nd->in[1 - xi]->rank, &src, bd, bst);
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

/* Which values are materialised when the linear op runs (fsl_onednn_linear_create_avail). */
typedef struct avail_fn {
  bool (*fn)(const void *ctx, const fsl_value *v);
  const void *ctx;
} avail_fn;

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
  operand_view(other, r, &pe.src, pe.bd, pe.bst);
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
    if (onednn_has_avx512()) return 0;
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

/* ---- geometry of the linear op ---- */

/* How a conv runs (conv_mm_rule). */
typedef enum {
  CONV_DIRECT,  /* dnnl convolution / deconvolution on blocked activations */
  CONV_MM_FC,   /* 1x1 kernel over 1x1 spatial: x [N, C] times w^T [C, M] */
  CONV_MM_WX,   /* 1x1 kernel, stride 1, no pad, batch 1: w [M, C] times x [C, HW] */
} conv_mm;

typedef struct geom {
  bool conv, deconv;
  int r;                      /* dst rank as in the graph */
  /* matmul */
  int64_t M, K, N;
  /* conv */
  int ns;                     /* spatial dims */
  int64_t group;
  dnnl_dims_t strides, dil, pl, pr;
  /* weights: plain user layout in the primitive's weights space */
  int wnd;
  dnnl_dims_t wdims, wstr;
  const float *wdata;         /* constant weights (graph-owned), or NULL */
  conv_mm mm;                 /* conv run as a matmul (conv_mm_rule) */
  bool wino;                  /* ask for oneDNN's Winograd convolution (wino_pays) */
  const float *src_const;     /* CONV_MM_WX: the constant conv weights, oneDNN's src */
  bool mm_conv;               /* a 2-D GEMM with constant weights run as a 1x1 convolution (mm_conv_pays) */
} geom;

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
  if (k1 && strided && g->group == 1 && C >= 16 && !onednn_has_avx512()) return false;
  return (g->group == C && w->dims[0] == C) || k1 || (g->group == 1 && C < 16);
}

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
static bool wino_pays(const geom *g, const fsl_node *lin) {
  if (!g->conv || g->deconv || g->mm != CONV_DIRECT || g->group != 1 || g->ns != 2 || !g->wdata) return false;
  const fsl_value *x = lin->in[0], *w = lin->in[1], *y = lin->out[0];
  for (int i = 0; i < 2; i++)
    if (w->dims[2 + i] != 3 || g->strides[i] != 1 || g->dil[i] != 0) return false;
  double flop = 2.0 * (double)fsl_value_numel(y) * (double)x->dims[1] * 9.0;
  return x->dims[1] >= 16 && y->dims[1] >= 16 && flop >= FSL_WINOGRAD_MIN_FLOP;
}

/* Whether post-op entry e (the first of linear op g with output y that is
 * not a reshape: bias_entry) is a constant add that the op takes as its own
 * bias: per output channel for a direct or Winograd convolution, per column
 * for a matmul (and for a GEMM run as a 1x1 convolution, mm_conv_pays).
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
static int bias_entry(const geom *g, const fsl_value *y, const post_entry *e, int n) {
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

static bool impl_is_ref(const_dnnl_primitive_desc_t pd);
static bool impl_has(const_dnnl_primitive_desc_t pd, const char *word);

/* The primitive descriptor of direct convolution g over the given
 * activation and weight descriptors (a format_tag_any one lets oneDNN
 * choose). */
static dnnl_status_t conv_pd(const geom *g, fsl_cmd src, fsl_cmd wei, fsl_cmd bias, fsl_cmd dst,
                             const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd) {
  dnnl_alg_kind_t alg = g->wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
  return pd_convolution(pd, g_engine, alg, src, wei, bias, dst, g->strides, g->dil, g->pl, g->pr, attr);
}

/* conv_pd of x -> dst over the activation descriptors *src and *dst (the
 * channels-last ones when chan_last: channels_last_pays), and where oneDNN
 * has only its reference code for those, over the layouts it chooses
 * (*src and *dst become format_tag_any ones). */
static dnnl_status_t direct_conv_pd(md_arena *a, const geom *g, const fsl_value *x, const fsl_value *y, fsl_md *src,
                                    fsl_cmd wei, fsl_cmd bias, fsl_md *dst, bool chan_last,
                                    const_dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd) {
  dnnl_status_t s = conv_pd(g, FSL_MD(*src), wei, bias, FSL_MD(*dst), attr, pd);
  if (!chan_last || (s == dnnl_success && !impl_is_ref(*pd))) return s;
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

typedef struct pd_mds {
  fsl_md src, wei_user, dst;
  fsl_md post[MAX_POST];  /* binary entries' operands */
  bool no_sum;            /* a post_entry.sum runs as a binary add post-op (make_pd) */
  md_arena arena;         /* the descriptors above and make_pd's own (oneDNN 3.x; pd_mds_free) */
} pd_mds;

static void pd_mds_free(pd_mds *m) { md_arena_free(&m->arena); }

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
  int bi = bias_entry(g, dst, e, n);
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
    /* the 2-D GEMM as a 1x1 convolution over M pixels (mm_conv_pays) */
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
    s = pd_convolution(pd, g_engine, dnnl_convolution_direct, FSL_MD(m->src), FSL_MD(wei_any), bias_md,
                       FSL_MD(m->dst), one, zero, zero, zero, attr);
  } else if (!g->conv || g->mm != CONV_DIRECT) {
    s = pd_matmul(pd, g_engine, FSL_MD(m->src), FSL_MD(wei_any), bias_md, FSL_MD(m->dst), attr);
  } else if (!g->deconv) {
    s = direct_conv_pd(A, g, x, dst, &src_any, FSL_MD(wei_any), bias_md, &dst_any, chan_last, attr, pd);
  } else {
    s = pd_deconvolution(pd, g_engine, FSL_MD(src_any), FSL_MD(wei_any), NULL, FSL_MD(dst_any), g->strides, g->dil,
                         g->pl, g->pr, attr);
  }
  /* a full-size operand only where the kernel that runs the convolution
   * without post-ops takes it: oneDNN 2.6's brgemm 1x1 convolutions
   * (AVX-512) refuse it and hand it to the older jit_1x1 ones, 1.2-1.4x
   * slower than brgconv_1x1 plus the generated add (mobilenet_v3_small's
   * projections; FSL_CPU_PROFILE); a plain operand would take the gemm path */
  const char *impl = NULL;
  if (s == dnnl_success && full &&
      (impl_is_ref(*pd) || impl_has(*pd, "gemm") ||
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
static fsl_status lin_geom(const fsl_node *lin, geom *g, bool allow_mm_wx) {
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
    operand_view(w, r, &ws, bd, bst);
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

/* Whether primitive descriptor pp (with caller-side descriptor pu) holds
 * value v as a dense permutation of its row-major layout; *lay receives
 * the axes in memory order. */
static bool perm_layout(fsl_cmd pp, fsl_cmd pu, const fsl_value *v, fsl_cg_layout *lay) {
  if (!pp || !pu || v->rank < 1 || v->rank > FSL_MAX_RANK || v->rank > DNNL_MAX_NDIMS || !md_plain_strided(pp) ||
      md_ndims(pp) != v->rank || md_ndims(pu) != v->rank)
    return false;
  int64_t pdm[DNNL_MAX_NDIMS], ppad[DNNL_MAX_NDIMS], udm[DNNL_MAX_NDIMS], st[DNNL_MAX_NDIMS];
  if (!md_query_dims(pp, MD_DIMS, pdm) || !md_query_dims(pp, MD_PADDED_DIMS, ppad) ||
      !md_query_dims(pu, MD_DIMS, udm) || !md_query_dims(pp, MD_STRIDES, st))
    return false;
  for (int i = 0; i < v->rank; i++)
    if (pdm[i] != v->dims[i] || ppad[i] != v->dims[i] || udm[i] != v->dims[i]) return false;
  /* axes by decreasing stride (a stable sort: size-1 axes keep their order) */
  lay->rank = v->rank;
  for (int i = 0; i < v->rank; i++) lay->order[i] = i;
  for (int i = 1; i < v->rank; i++)
    for (int j = i; j > 0 && st[lay->order[j]] > st[lay->order[j - 1]]; j--) {
      int t = lay->order[j];
      lay->order[j] = lay->order[j - 1];
      lay->order[j - 1] = t;
    }
  /* dense: each stride the product of the dims inside it */
  int64_t want = 1;
  for (int k = v->rank - 1; k >= 0; k--) {
    int a = lay->order[k];
    if (v->dims[a] != 1 && st[a] != want) return false;
    want *= v->dims[a];
  }
  return true;
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
static bool direct_in_permutation(const fsl_node *lin, const geom *g) {
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
    pd_mds_free(&m);
    return false;
  }
  fsl_cg_layout ls, ld;
  bool perm = perm_layout(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), FSL_MD(m.src), lin->in[0], &ls) &&
              perm_layout(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), FSL_MD(m.dst), lin->out[0], &ld) &&
              !row_major(&ls) && !row_major(&ld);
  dnnl_primitive_desc_destroy(pd);
  pd_mds_free(&m);
  return perm;
}

static fsl_status dnnl_fail(const fsl_node *lin, dnnl_status_t s, const char *what) {
  return fsl_node_errorf(lin, s == dnnl_out_of_memory ? FSL_ERR_NOMEM : FSL_ERR_UNSUPPORTED, "oneDNN %s: %s", what,
                         dnnl_status2str(s));
}

/* Flips weights along the spatial axes: src is [outer, k...] row-major. */
static void flip_weights(const float *src, float *dst, int64_t outer, int ns, const int64_t *k) {
  int64_t kn = 1;
  for (int i = 0; i < ns; i++) kn *= k[i];
  for (int64_t o = 0; o < outer; o++) {
    const float *s = src + o * kn;
    float *d = dst + o * kn;
    int64_t idx[3] = {0, 0, 0};
    for (int64_t f = 0; f < kn; f++) {
      int64_t off = 0;
      for (int i = 0; i < ns; i++) off = off * k[i] + (k[i] - 1 - idx[i]);
      d[off] = s[f];
      for (int i = ns - 1; i >= 0; i--) {
        if (++idx[i] < k[i]) break;
        idx[i] = 0;
      }
    }
  }
}

dnnl_status_t fsl_onednn_run_reorder(fsl_cmd from, void *from_data, fsl_cmd to, void *to_data) {
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t rp = NULL;
  dnnl_memory_t a = NULL, b = NULL;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&rpd, from, g_engine, to, g_engine, NULL);
  if (s == dnnl_success) s = dnnl_primitive_create(&rp, rpd);
  if (s == dnnl_success) s = dnnl_memory_create(&a, from, g_engine, from_data);
  if (s == dnnl_success) s = dnnl_memory_create(&b, to, g_engine, to_data);
  if (s == dnnl_success) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    s = dnnl_primitive_execute(rp, g_stream, 2, args);
    if (s == dnnl_success) s = dnnl_stream_wait(g_stream);
  }
  if (a) dnnl_memory_destroy(a);
  if (b) dnnl_memory_destroy(b);
  if (rp) dnnl_primitive_destroy(rp);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  return s;
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

/* Memory for an activation (src or dst) of pd whose caller-side layout is
 * `plain`: *mem in the primitive's layout; when that is not plain, also a
 * buffer, a plain *user mem and the reorder between them (plain -> prim for
 * the input, prim -> plain for the output). */
static dnnl_status_t act_memory(const_dnnl_primitive_desc_t pd, dnnl_query_t what, fsl_cmd plain, bool input,
                                dnnl_memory_t *mem, dnnl_memory_t *user, void **buf, dnnl_primitive_t *reorder) {
  fsl_cmd md = dnnl_primitive_desc_query_md(pd, what, 0);
  if (!md) return dnnl_runtime_error;
  if (dnnl_memory_desc_equal(md, plain)) return dnnl_memory_create(mem, plain, g_engine, DNNL_MEMORY_NONE);
  size_t sz = dnnl_memory_desc_get_size(md);
  *buf = aligned_alloc(64, (sz + 63) / 64 * 64);
  if (!*buf) return dnnl_out_of_memory;
  dnnl_status_t s = dnnl_memory_create(mem, md, g_engine, *buf);
  if (s == dnnl_success) s = dnnl_memory_create(user, plain, g_engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success) s = input ? reorder_create(reorder, plain, md) : reorder_create(reorder, md, plain);
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

/* A convolution that pays as Winograd (wino_pays) but that oneDNN runs as
 * its direct kernel (it has no Winograd without AVX-512) over nChw8c
 * activations: the same convolution, post-ops and layouts as fissile's
 * F(2x2,3x3) Winograd (winograd.c), which then runs instead of the direct
 * primitive, where it takes the geometry and every absorbed post-op.
 * Measured with oneDNN 2.6.3 (bench/results/winograd-avx2-zen4.md). */
static fsl_status wino_try(fsl_onednn_linear *op, const fsl_node *lin, const geom *g, const_dnnl_primitive_desc_t pd) {
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
  fsl_status st = fsl_wino_create(&wg, g->wdata, g->wstr, bias, post, np, g_engine, &op->wino);
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

/* Whether what one primitive writes (pu: its row-major user memory, pp:
 * its primitive memory) is exactly what another reads (cu, cp): the same
 * descriptors on both sides, the primitive layout within `capacity` bytes. */
static bool same_layouts(const_dnnl_memory_t pu_mem, const_dnnl_memory_t pp_mem, const_dnnl_memory_t cu_mem,
                         const_dnnl_memory_t cp_mem, size_t capacity) {
  fsl_cmd pu = NULL, pp = NULL, cu = NULL, cp = NULL;
  if (dnnl_memory_get_memory_desc(pu_mem, &pu) != dnnl_success || dnnl_memory_get_memory_desc(pp_mem, &pp) != dnnl_success ||
      dnnl_memory_get_memory_desc(cu_mem, &cu) != dnnl_success || dnnl_memory_get_memory_desc(cp_mem, &cp) != dnnl_success ||
      !pu || !pp || !cu || !cp)
    return false;
  return dnnl_memory_desc_equal(pu, cu) && dnnl_memory_desc_equal(pp, cp) && dnnl_memory_desc_get_size(pp) <= capacity;
}

bool fsl_onednn_linear_chainable(const fsl_onednn_linear *prod, const fsl_onednn_linear *cons, size_t capacity) {
  if (!prod || !cons || prod == cons || !prod->dst_reorder || !cons->src_reorder || cons->src_const) return false;
  return same_layouts(prod->dst_user_mem, prod->dst_mem, cons->src_user_mem, cons->src_mem, capacity);
}

bool fsl_onednn_linear_dst_layout(const fsl_onednn_linear *op, const fsl_value *v, fsl_cg_layout *lay) {
  fsl_cmd pp = NULL, pu = NULL;
  return op && v && lay && op->dst_reorder && dnnl_memory_get_memory_desc(op->dst_mem, &pp) == dnnl_success &&
         dnnl_memory_get_memory_desc(op->dst_user_mem, &pu) == dnnl_success && perm_layout(pp, pu, v, lay);
}

bool fsl_onednn_linear_src_layout(const fsl_onednn_linear *op, const fsl_value *v, size_t capacity,
                                  fsl_cg_layout *lay) {
  fsl_cmd pp = NULL, pu = NULL;
  return op && v && lay && op->src_reorder && !op->src_const && !op->src_chained &&
         dnnl_memory_get_memory_desc(op->src_mem, &pp) == dnnl_success &&
         dnnl_memory_get_memory_desc(op->src_user_mem, &pu) == dnnl_success && perm_layout(pp, pu, v, lay) &&
         dnnl_memory_desc_get_size(pp) <= capacity;
}

/* Appends to the description which activations are chained. */
static void describe_chain(fsl_onednn_linear *op) {
  bool post = false;
  for (int i = 0; i < MAX_POST; i++) post = post || op->post_chained[i];
  const char *part[3] = {op->src_chained ? "src" : NULL, op->dst_chained ? "dst" : NULL, post ? "residual" : NULL};
  size_t l = op->desc_len;
  op->desc[l] = 0;
  for (int i = 0, k = 0; i < 3; i++)
    if (part[i] && l < sizeof op->desc) {
      snprintf(op->desc + l, sizeof op->desc - l, "%s%s", k++ ? "+" : ", chained ", part[i]);
      l += strlen(op->desc + l);
    }
}

/* The entry of cons's full-size operand for absorbed epi node `node` that
 * is reordered from row-major at run time, or -1. */
static int full_entry(const fsl_onednn_linear *cons, int node) {
  for (int i = 0; cons && i < cons->n_entries; i++)
    if (cons->entries[i].binary && cons->entries[i].full && cons->entries[i].node == node && cons->post_reorder[i])
      return i;
  return -1;
}

bool fsl_onednn_linear_post_chainable(const fsl_onednn_linear *prod, const fsl_onednn_linear *cons, int node,
                                      size_t capacity) {
  int i = full_entry(cons, node);
  if (!prod || prod == cons || !prod->dst_reorder || i < 0 || cons->post_chained[i]) return false;
  return same_layouts(prod->dst_user_mem, prod->dst_mem, cons->post_user_mem[i], cons->post_mem[i], capacity);
}

bool fsl_onednn_linear_post_layout(const fsl_onednn_linear *op, int node, const fsl_value *v, size_t capacity,
                                   fsl_cg_layout *lay) {
  int i = full_entry(op, node);
  fsl_cmd pp = NULL, pu = NULL;
  return i >= 0 && v && lay && !op->post_chained[i] &&
         dnnl_memory_get_memory_desc(op->post_mem[i], &pp) == dnnl_success &&
         dnnl_memory_get_memory_desc(op->post_user_mem[i], &pu) == dnnl_success && perm_layout(pp, pu, v, lay) &&
         dnnl_memory_desc_get_size(pp) <= capacity;
}

void fsl_onednn_linear_chain_post(fsl_onednn_linear *cons, int node) {
  int i = full_entry(cons, node);
  if (i < 0) return;
  cons->post_chained[i] = true;
  /* the operand memory now points at the caller's buffer on every run */
  free(cons->post_buf[i]), cons->post_buf[i] = NULL;
  describe_chain(cons);
}

void fsl_onednn_linear_chain_dst(fsl_onednn_linear *prod) {
  if (!prod) return;
  prod->dst_chained = true;
  /* the primitive memory now points at the caller's buffer on every run */
  free(prod->dst_buf), prod->dst_buf = NULL;
  describe_chain(prod);
}

void fsl_onednn_linear_chain_src(fsl_onednn_linear *cons) {
  if (!cons) return;
  cons->src_chained = true;
  free(cons->src_buf), cons->src_buf = NULL;
  describe_chain(cons);
}


bool fsl_onednn_linear_reorders_both(const fsl_onednn_linear *op) {
  if (!op || !op->src_reorder || op->src_chained || op->src_const || !op->dst_reorder || op->dst_chained) return false;
  for (int i = 0; i < MAX_POST; i++)
    if (op->post_chained[i]) return false;
  return true;
}

bool fsl_onednn_linear_plain(const fsl_onednn_linear *op) {
  if (!op || op->src_reorder || op->src_chained || op->src_const || op->dst_reorder || op->dst_chained) return false;
  for (int i = 0; i < MAX_POST; i++)
    if (op->post_chained[i] || op->post_reorder[i]) return false;
  return true;
}

const char *fsl_onednn_linear_describe(const fsl_onednn_linear *op) { return op ? op->desc : ""; }

bool fsl_onednn_linear_winograd(const fsl_onednn_linear *op) { return op && op->wino; }

/* Whether oneDNN's implementation name for pd contains word. */
static bool impl_has(const_dnnl_primitive_desc_t pd, const char *word) {
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
  return strstr(impl, word) != NULL;
}

static bool impl_is_ref(const_dnnl_primitive_desc_t pd) { return impl_has(pd, "ref"); }

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
static bool mm_conv_pays(const geom *g, const_dnnl_primitive_desc_t pd) {
  if (!g->wdata || (g->conv && g->mm != CONV_MM_FC) || !impl_has(pd, "gemm")) return false;
  fsl_cmd src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  int64_t d[DNNL_MAX_NDIMS];
  return md_ndims(src) == 2 && md_query_dims(src, MD_DIMS, d) && d[0] >= 8;
}

/* The primitive descriptor for the longest prefix of e[0..ne) (at node
 * boundaries, over a closed chain) that oneDNN implements with geometry g,
 * an optimized implementation preferred over the reference one; its
 * descriptors in *m and its length in *n_used.  NULL when none (*last:
 * the last status). */
static dnnl_primitive_desc_t best_prefix(const fsl_node *lin, const geom *g, fsl_node *const *epi,
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
      pd_mds_free(&cm);
      continue;
    }
    if (!impl_is_ref(cand)) {
      if (fallback) dnnl_primitive_desc_destroy(fallback), pd_mds_free(&fb_m);
      *m = cm, *n_used = L;
      return cand;
    }
    if (!fallback) {
      fallback = cand, fb_m = cm, fb_used = L;
    } else {
      dnnl_primitive_desc_destroy(cand);
      pd_mds_free(&cm);
    }
  }
  if (fallback) *m = fb_m, *n_used = fb_used;
  return fallback;
}

static fsl_status linear_create(const fsl_node *lin, fsl_node *const *epi, int n_epi, int n_threads,
                                const avail_fn *avail, fsl_onednn_linear **out, int *n_absorbed) {
  if (!lin || !out || !n_absorbed || (n_epi > 0 && !epi) || n_epi < 0)
    return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_create: NULL argument");
  *out = NULL;
  *n_absorbed = 0;
  geom g;
  FSL_TRY(lin_geom(lin, &g, true));
  FSL_TRY(engine_get());
  geom gd;
  if (g.mm == CONV_MM_WX && lin_geom(lin, &gd, false) == FSL_OK && direct_in_permutation(lin, &gd)) g = gd;
  fsl_error_clear();
  pthread_once(&g_omp_once, init_omp);

  /* epilogue -> post-op entries (longest expressible prefix) */
  post_entry *e = calloc(MAX_POST, sizeof *e);
  fsl_onednn_linear *op = calloc(1, sizeof *op);
  if (!e || !op) {
    free(e), free(op);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  int ne = 0;
  const fsl_value *prev = lin->out[0];
  /* A deconvolution absorbs no post-op: oneDNN 2.6 runs it as a backward-
   * data convolution and then applies post-ops element by element in a
   * reference loop.  Measured on [1, 24, 40, 64] -> [1, 24, 80, 128], k 2,
   * stride 2 (ppocr_det), 1 thread: 0.15 ms bare, 13 ms with a relu, 20-45
   * ms with one per-channel add, 100 ms with add, mul, add, relu (and 1 ms
   * even with a native bias).  The generated epilogue does them in one
   * pass instead. */
  for (int i = 0; i < n_epi && i < MAX_POST - 1 && !g.deconv;) {
    if (!epi[i]) break;
    if (reshape_ok(lin, epi[i], prev) && ne < MAX_POST) {
      post_entry *p = &e[ne++];
      memset(p, 0, sizeof *p);
      p->reshape = true, p->node = i, p->sr = epi[i]->out[0]->rank;
      memcpy(p->sd, epi[i]->out[0]->dims, sizeof(int64_t) * (size_t)p->sr);
      prev = epi[i++]->out[0];
      continue;
    }
    int used = translate(lin->out[0], epi, n_epi, i, prev, avail, e, &ne);
    if (used < 0) {
      entries_free(e, ne);
      free(op);
      return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    }
    if (used > 0 && !same_params(e, ne)) {
      /* drop this node's entries and stop */
      while (ne > 0 && e[ne - 1].node >= i) free(e[--ne].cdata);
      used = 0;
    }
    if (used == 0) break;
    i += used;
    prev = epi[i - 1]->out[0];
  }

  /* the longest prefix (at node boundaries) that oneDNN implements, preferring
   * an optimized implementation over the reference one; Winograd first
   * where it pays (wino_pays), with whatever prefix it takes */
  dnnl_primitive_desc_t pd = NULL;
  pd_mds m;
  memset(&m, 0, sizeof m);
  int n_used = -1;
  dnnl_status_t last = dnnl_unimplemented;
  bool wino_wanted = wino_pays(&g, lin);
  g.wino = wino_wanted;
  if (g.wino && !(pd = best_prefix(lin, &g, epi, e, ne, &m, &n_used, &last))) g.wino = false;
  if (!pd) pd = best_prefix(lin, &g, epi, e, ne, &m, &n_used, &last);
  if (pd && mm_conv_pays(&g, pd)) {
    geom gc = g;
    gc.mm_conv = true;
    pd_mds mc;
    memset(&mc, 0, sizeof mc);
    int nc = -1;
    dnnl_status_t lc;
    dnnl_primitive_desc_t pc = best_prefix(lin, &gc, epi, e, ne, &mc, &nc, &lc);
    if (pc && nc >= n_used && !impl_is_ref(pc) && !impl_has(pc, "gemm")) {
      dnnl_primitive_desc_destroy(pd);
      pd_mds_free(&m);
      pd = pc, m = mc, n_used = nc, g = gc;
    } else if (pc) {
      dnnl_primitive_desc_destroy(pc);
      pd_mds_free(&mc);
    }
  }
  if (!pd) {
    entries_free(e, ne);
    free(op);
    return dnnl_fail(lin, last, "primitive descriptor");
  }
  for (int i = n_used; i < ne; i++) free(e[i].cdata), e[i].cdata = NULL;
  for (int i = 0; i < n_used && m.no_sum; i++) e[i].sum = false;
  op->entries = e;
  op->n_entries = n_used;
  op->n_absorbed = n_used ? e[n_used - 1].node + 1 : 0;
  op->bias_entry = bias_entry(&g, lin->out[0], e, n_used);
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
      (s = dnnl_memory_create(&op->scratch_mem, smd, g_engine, DNNL_MEMORY_NONE)) != dnnl_success) {
    st = dnnl_fail(lin, s, "scratchpad");
    goto fail;
  }
  if (op->scratch_mem) op->scratch_bytes = dnnl_memory_desc_get_size(smd);
  if ((s = act_memory(pd, dnnl_query_src_md, FSL_MD(m.src), true, &op->src_mem, &op->src_user_mem, &op->src_buf,
                      &op->src_reorder)) != dnnl_success ||
      (s = act_memory(pd, dnnl_query_dst_md, FSL_MD(m.dst), false, &op->dst_mem, &op->dst_user_mem, &op->dst_buf,
                      &op->dst_reorder)) != dnnl_success) {
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
      flip_weights(g.wdata, flipped, op->flip_outer, g.ns, op->flip_inner);
      wsrc = flipped;
    }
    size_t sz = dnnl_memory_desc_get_size(wmd);
    op->wei_buf = aligned_alloc(64, (sz + 63) / 64 * 64);
    if (!op->wei_buf) { free(flipped); st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
    s = fsl_onednn_run_reorder(FSL_MD(m.wei_user), (void *)wsrc, wmd, op->wei_buf);
    free(flipped);
    if (s == dnnl_success) s = dnnl_memory_create(&op->wei_mem, wmd, g_engine, op->wei_buf);
  } else if (plain && !op->flip) {
    s = dnnl_memory_create(&op->wei_mem, wmd, g_engine, DNNL_MEMORY_NONE);
  } else {
    if (op->flip) {
      op->flip_buf = malloc(sizeof(float) * (size_t)fsl_value_numel(lin->in[1]));
      if (!op->flip_buf) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
    }
    size_t sz = dnnl_memory_desc_get_size(wmd);
    op->wei_buf = aligned_alloc(64, (sz + 63) / 64 * 64);
    if (!op->wei_buf) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto fail; }
    s = dnnl_memory_create(&op->wei_mem, wmd, g_engine, op->wei_buf);
    if (s == dnnl_success) s = dnnl_memory_create(&op->wei_user_mem, FSL_MD(m.wei_user), g_engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = reorder_create(&op->wei_reorder, FSL_MD(m.wei_user), wmd);
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
      s = e[i].sum || h ? dnnl_memory_create(&op->post_user_mem[i], FSL_MD(m.dst), g_engine, DNNL_MEMORY_NONE)
                        : dnnl_out_of_memory;
      if (s == dnnl_success) s = reorder_create(&op->post_reorder[i], FSL_MD(m.dst), FSL_MD(m.post[i]));
    }
    if (s == dnnl_success) s = dnnl_memory_create(&op->post_mem[i], FSL_MD(m.post[i]), g_engine, h);
    /* a parallel copy (oneDNN's reorder), not memcpy */
    if (s == dnnl_success && e[i].sum) s = reorder_create(&op->post_copy[i], FSL_MD(m.post[i]), FSL_MD(m.post[i]));
    if (s != dnnl_success) {
      st = dnnl_fail(lin, s, "post-op operand");
      goto fail;
    }
    if (!e[i].cdata) op->post_val[e[i].node] = e[i].src;
  }
  describe(op, pd);
  if (wino_wanted && !g.wino && (st = wino_try(op, lin, &g, pd)) != FSL_OK) goto fail;
  dnnl_primitive_desc_destroy(pd);
  pd_mds_free(&m);
  *out = op;
  *n_absorbed = op->n_absorbed;
  return FSL_OK;
fail:
  dnnl_primitive_desc_destroy(pd);
  pd_mds_free(&m);
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

fsl_status fsl_onednn_linear_run(fsl_onednn_linear *op, const void *src, const void *wei, const void *const *post,
                                 void *dst) {
  if (op && op->src_const) { /* CONV_MM_WX: w [M, C] times x [C, HW] */
    wei = src;
    src = op->src_const;
  }
  if (!op || !src || !dst || (!op->wei_const && !wei))
    return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_run: NULL argument");
  dnnl_exec_arg_t args[4 + MAX_POST];
  int na = 0;
  dnnl_status_t s;
  /* chained (or plain) activations are the primitive's memory itself */
  dnnl_memory_t src_in = op->src_user_mem && !op->src_chained ? op->src_user_mem : op->src_mem;
  dnnl_memory_t dst_out = op->dst_user_mem && !op->dst_chained ? op->dst_user_mem : op->dst_mem;
  if ((s = dnnl_memory_set_data_handle(src_in, (void *)src)) != dnnl_success ||
      (s = dnnl_memory_set_data_handle(dst_out, dst)) != dnnl_success)
    goto fail;
  int old_threads = 0;
  if (op->n_threads > 0 && g_omp_set) {
    old_threads = g_omp_get();
    g_omp_set(op->n_threads);
  }
  if (!op->wei_const) {
    const void *w = wei;
    if (op->flip) {
      flip_weights(wei, op->flip_buf, op->flip_outer, op->n_spatial, op->flip_inner);
      w = op->flip_buf;
    }
    if (op->wei_reorder) {
      if ((s = dnnl_memory_set_data_handle(op->wei_user_mem, (void *)w)) != dnnl_success) goto restore;
      dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, op->wei_user_mem}, {DNNL_ARG_TO, op->wei_mem}};
      if ((s = dnnl_primitive_execute(op->wei_reorder, g_stream, 2, ra)) != dnnl_success) goto restore;
    } else if ((s = dnnl_memory_set_data_handle(op->wei_mem, (void *)w)) != dnnl_success) {
      goto restore;
    }
  }
  if (op->src_reorder && !op->src_chained) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, op->src_user_mem}, {DNNL_ARG_TO, op->src_mem}};
    if ((s = dnnl_primitive_execute(op->src_reorder, g_stream, 2, ra)) != dnnl_success) goto restore;
  }
  args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, op->src_mem};
  args[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, op->wei_mem};
  args[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, op->dst_mem};
  if (op->scratch_mem) {
    void *sp = thread_scratch(op->scratch_bytes);
    if (!sp) {
      if (old_threads) g_omp_set(old_threads);
      return fsl_errorf(FSL_ERR_NOMEM, "oneDNN scratchpad: out of memory (%zu bytes)", op->scratch_bytes);
    }
    if ((s = dnnl_memory_set_data_handle(op->scratch_mem, sp)) != dnnl_success) goto restore;
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, op->scratch_mem};
  }
  if (op->bias_entry >= 0) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, op->post_mem[op->bias_entry]};
  for (int i = 0, po = 0; i < op->n_entries; i++) {
    if (op->entries[i].reshape || i == op->bias_entry) continue;
    int po_index = po++;  /* index in the oneDNN post-op chain */
    if (!op->entries[i].binary) continue;
    if (!op->entries[i].cdata) {
      const void *p = post ? post[op->entries[i].node] : NULL;
      if (!p) {
        if (old_threads) g_omp_set(old_threads);
        return fsl_errorf(FSL_ERR_ARG, "fsl_onednn_linear_run: post-op operand %d is NULL", op->entries[i].node);
      }
      if (op->entries[i].sum) {
        /* the destination starts as the operand: reordered into it, or copied */
        void *d = NULL;
        if ((s = dnnl_memory_get_data_handle(op->dst_mem, &d)) != dnnl_success) goto restore;
        if (op->post_reorder[i] && !op->post_chained[i])
          s = exec_reorder(op->post_reorder[i], op->post_user_mem[i], p, op->dst_mem);
        else if (d != p)
          s = exec_reorder(op->post_copy[i], op->post_mem[i], p, op->dst_mem);
        if (s != dnnl_success) goto restore;
        continue;
      }
      s = op->post_reorder[i] && !op->post_chained[i]
              ? exec_reorder(op->post_reorder[i], op->post_user_mem[i], p, op->post_mem[i])
              : dnnl_memory_set_data_handle(op->post_mem[i], (void *)p);
      if (s != dnnl_success) goto restore;
    }
    args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(po_index) | DNNL_ARG_SRC_1, op->post_mem[i]};
  }
  if (op->wino) {
    void *x = NULL, *y = NULL, *sp = thread_scratch(fsl_wino_scratch_bytes(op->wino));
    if (!sp) {
      if (old_threads) g_omp_set(old_threads);
      return fsl_errorf(FSL_ERR_NOMEM, "Winograd scratch: out of memory (%zu bytes)", fsl_wino_scratch_bytes(op->wino));
    }
    s = dnnl_memory_get_data_handle(op->src_mem, &x);
    if (s == dnnl_success) s = dnnl_memory_get_data_handle(op->dst_mem, &y);
    if (s == dnnl_success) s = fsl_wino_run(op->wino, x, y, sp, g_stream);
  } else {
    s = dnnl_primitive_execute(op->prim, g_stream, na, args);
  }
  if (s == dnnl_success && op->dst_reorder && !op->dst_chained) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, op->dst_mem}, {DNNL_ARG_TO, op->dst_user_mem}};
    s = dnnl_primitive_execute(op->dst_reorder, g_stream, 2, ra);
  }
  if (s == dnnl_success) s = dnnl_stream_wait(g_stream);
restore:
  if (old_threads) g_omp_set(old_threads);
  if (s == dnnl_success) return FSL_OK;
fail:
  return fsl_errorf(FSL_ERR_RUNTIME, "oneDNN execute: %s", dnnl_status2str(s));
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
      if (pv && (!avail(ctx, pv) || (keep_residual && full_entry(*out, i) >= 0 && !keep_residual(ctx, *out, i, pv))))
        bad = i;
    }
    if (bad < 0) return FSL_OK;
    fsl_onednn_linear_free(*out);
    *out = NULL;
    n_epi = bad; /* the operand of epi[bad] is not materialised: stop before it */
  }
}

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
  for (int i = 0; i < MAX_POST; i++) {
    if (op->post_mem[i]) dnnl_memory_destroy(op->post_mem[i]);
    if (op->post_user_mem[i]) dnnl_memory_destroy(op->post_user_mem[i]);
    if (op->post_reorder[i]) dnnl_primitive_destroy(op->post_reorder[i]);
    if (op->post_copy[i]) dnnl_primitive_destroy(op->post_copy[i]);
    free(op->post_buf[i]);
  }
  entries_free(op->entries, op->n_entries);
  free(op->wei_buf);
  free(op->flip_buf);
  free(op);
}
