/*
 * onednn_impl.h — what the files of the CPU backend's oneDNN path share
 * (onednn.h is their public face; nothing else includes this header):
 *   onednn.c         creating and freeing a linear op, its description
 *   onednn_engine.c  engine and stream, thread count, scratchpad mode, reorders
 *   onednn_post.c    the epilogue as post-op entries
 *   onednn_pd.c      geometry and primitive descriptors
 *   onednn_wino.c    Winograd convolutions (oneDNN's and fissile's)
 *   onednn_layout.c  activation layouts and layout chaining
 *   onednn_run.c     running a linear op
 *   onednn_int8.c    integer matmuls and convolutions as int8 primitives
 */
#ifndef FSL_CPU_ONEDNN_IMPL_H
#define FSL_CPU_ONEDNN_IMPL_H

#include "backend/cpu/onednn.h"
#include "backend/cpu/winograd.h"

#define MAX_POST 64  /* post-op entries per primitive */

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
  fsl_onednn_int8 q8;         /* an int8 primitive (onednn_int8.c): what it reads; its post-ops have
                                 constant operands only, and it has no bias argument */
  dnnl_memory_t zp_mem;       /* the source's zero point (s32, one element, data zp_val), or NULL */
  int32_t zp_val;
  dnnl_memory_t wei2_mem, acc2_mem; /* split int8 weights (q8.split): the low bits, their s32 sums */
  void *wei2_buf, *acc2_buf;
  size_t acc2_n;                    /* s32 elements of acc2 (the destination's layout, padding included) */
  char desc[192];             /* fsl_onednn_linear_describe */
};

/* Row-major strides of a shape, in elements. */
static inline void rm_strides(int rank, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= dims[i] > 0 ? dims[i] : 1;
  }
}


/* Which values are materialised when the linear op runs (fsl_onednn_linear_create_avail). */
typedef struct avail_fn {
  bool (*fn)(const void *ctx, const fsl_value *v);
  const void *ctx;
} avail_fn;

/* How a conv runs (conv_mm_rule, onednn_pd.c). */
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

typedef struct pd_mds {
  fsl_md src, wei_user, dst;
  fsl_md post[MAX_POST];  /* binary entries' operands */
  bool no_sum;            /* a post_entry.sum runs as a binary add post-op (make_pd) */
  md_arena arena;         /* the descriptors above and make_pd's own (oneDNN 3.x; pd_mds_free) */
} pd_mds;

/* ---- onednn_engine.c ---- */
/* The process-wide engine and stream (valid after fsl_onednn_engine_get). */
extern dnnl_engine_t fsl_onednn_engine;
extern dnnl_stream_t fsl_onednn_stream;
/* Creates them once (after the FSL_CPU_ISA limit); FSL_ERR_UNSUPPORTED when oneDNN cannot. */
fsl_status fsl_onednn_engine_get(void);
/* Finds the OpenMP runtime oneDNN runs on, once. */
void fsl_onednn_omp_init(void);
/* Sets the calling thread's OpenMP thread count to n > 0; returns the count
 * before, or 0 when nothing was set (n <= 0, no runtime found). */
int fsl_onednn_threads_set(int n);
/* Restores the count fsl_onednn_threads_set returned (0: nothing). */
void fsl_onednn_threads_restore(int old);
dnnl_status_t fsl_onednn_reorder_create(dnnl_primitive_t *r, fsl_cmd from, fsl_cmd to);
bool fsl_onednn_has_avx512(void);
/* Whether oneDNN's ISA (after the FSL_CPU_ISA limit) has VNNI (AVX512-VNNI or AVX-VNNI): int8 products
 * accumulate exactly (onednn_int8.c). */
bool fsl_onednn_has_vnni(void);
bool fsl_onednn_impl_has(const_dnnl_primitive_desc_t pd, const char *word);
bool fsl_onednn_impl_is_ref(const_dnnl_primitive_desc_t pd);

/* ---- onednn.c ---- */
/* Memory for an activation (src or dst) of pd whose caller-side layout is
 * `plain`: *mem in the primitive's layout; when that is not plain, also a
 * buffer, a plain *user mem and the reorder between them (plain -> prim for
 * the input, prim -> plain for the output). */
dnnl_status_t fsl_onednn_act_memory(const_dnnl_primitive_desc_t pd, dnnl_query_t what, fsl_cmd plain, bool input,
                                    dnnl_memory_t *mem, dnnl_memory_t *user, void **buf, dnnl_primitive_t *reorder);

/* ---- onednn_post.c ---- */
void fsl_onednn_entries_free(post_entry *e, int n);
void fsl_onednn_operand_view(const fsl_value *v, int r, const fsl_value **src, int64_t *bd, int64_t *bst);
/* Appends to e[0..*ne) (MAX_POST entries) the post-op entries of the
 * longest prefix of epi[first..n_epi) (a chain from lin's output, or from
 * epi[first - 1]'s) that oneDNN post-ops express; a deconvolution (deconv)
 * absorbs none.  false when out of
 * memory (e[0..*ne) then still to be freed). */
bool fsl_onednn_epilogue(const fsl_node *lin, fsl_node *const *epi, int n_epi, int first, bool deconv,
                         const avail_fn *avail, post_entry *e, int *ne);
/* Whether epi[i] casts the float32 chain value (epi[i - 1]'s output, or
 * `from` when i == first) to uint8/int8 exactly as oneDNN's conversion to
 * a u8/s8 destination does: the chain rounds it (a round node at or after
 * epi[first]) and then only adds or subtracts integer scalars and clamps
 * it with integer scalar min/max into the type's range, as QuantizeLinear's
 * saturate(round(x / s) + zp) does (fission/quant.c).  The conversion,
 * which rounds to nearest even and saturates, is then the identity on the
 * value.  *dt receives the destination type (dnnl_u8 or dnnl_s8). */
bool fsl_onednn_exact_int8_cast(const fsl_value *from, fsl_node *const *epi, int i, int first, dnnl_data_type_t *dt);

/* ---- onednn_pd.c ---- */
fsl_status fsl_onednn_lin_geom(const fsl_node *lin, geom *g, bool allow_mm_wx);
void fsl_onednn_pd_mds_free(pd_mds *m);
int fsl_onednn_bias_entry(const geom *g, const fsl_value *y, const post_entry *e, int n);
bool fsl_onednn_direct_in_permutation(const fsl_node *lin, const geom *g);
bool fsl_onednn_mm_conv_pays(const geom *g, const_dnnl_primitive_desc_t pd);
dnnl_primitive_desc_t fsl_onednn_best_prefix(const fsl_node *lin, const geom *g, fsl_node *const *epi,
                                             const post_entry *e, int ne, pd_mds *m, int *n_used,
                                             dnnl_status_t *last);

/* ---- onednn_wino.c ---- */
bool fsl_onednn_wino_pays(const geom *g, const fsl_node *lin);
fsl_status fsl_onednn_wino_try(fsl_onednn_linear *op, const fsl_node *lin, const geom *g,
                               const_dnnl_primitive_desc_t pd);

/* ---- onednn_layout.c ---- */
bool fsl_onednn_perm_layout(fsl_cmd pp, fsl_cmd pu, const fsl_value *v, fsl_cg_layout *lay);
int fsl_onednn_full_entry(const fsl_onednn_linear *cons, int node);

/* ---- onednn_run.c ---- */
void fsl_onednn_flip_weights(const float *src, float *dst, int64_t outer, int ns, const int64_t *k);

#endif
