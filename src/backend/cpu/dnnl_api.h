/*
 * dnnl_api.h — the oneDNN C API calls of the CPU backend spelled once for
 * oneDNN 2.x (Debian 12's 2.6.3) and 3.x (PyPI's onednn-cpu-gomp 3.2).
 *
 * What changed between them (oneDNN developer guide, "Transition from
 * oneDNN v2.x to v3.x"): a memory descriptor is a struct held by value in
 * 2.x and an opaque handle (dnnl_memory_desc_create_*, _clone, _destroy,
 * fields read through dnnl_memory_desc_query) in 3.x; 2.x builds an
 * operation descriptor and then its primitive descriptor, 3.x creates the
 * primitive descriptor directly; post-op sum and eltwise lost their scale
 * argument; the "no ISA limit" value is dnnl_cpu_isa_all / _default.
 *
 * fsl_md is a memory descriptor the caller owns (a 2.x struct; a 3.x
 * handle registered in an md_arena, destroyed by md_arena_free), fsl_cmd
 * one it borrows (a pointer to a 2.x struct; a 3.x const handle), and
 * FSL_MD(x) the fsl_cmd of an fsl_md x.  Every md_* that makes a
 * descriptor returns dnnl_out_of_memory when the arena is full.
 */
#ifndef FSL_BACKEND_CPU_DNNL_API_H
#define FSL_BACKEND_CPU_DNNL_API_H

#include <stdbool.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#if DNNL_VERSION_MAJOR >= 3
#define FSL_DNNL3 1
typedef dnnl_memory_desc_t fsl_md;
typedef const_dnnl_memory_desc_t fsl_cmd;
#define FSL_MD(x) (x)
#define FSL_CPU_ISA_ALL dnnl_cpu_isa_default
#else
#define FSL_DNNL3 0
typedef dnnl_memory_desc_t fsl_md;
typedef const dnnl_memory_desc_t *fsl_cmd;
#define FSL_MD(x) (&(x))
#define FSL_CPU_ISA_ALL dnnl_cpu_isa_all
#endif

#define MD_ARENA_CAP 256

/* The 3.x descriptors one primitive-descriptor search made (unused on 2.x). */
typedef struct md_arena {
  int n;
#if FSL_DNNL3
  dnnl_memory_desc_t h[MD_ARENA_CAP];
#endif
} md_arena;

static inline void md_arena_free(md_arena *a) {
#if FSL_DNNL3
  for (int i = 0; i < a->n; i++) dnnl_memory_desc_destroy(a->h[i]);
#endif
  a->n = 0;
}

#if FSL_DNNL3
static inline dnnl_status_t md_keep(md_arena *a, dnnl_status_t s, dnnl_memory_desc_t *h, fsl_md *md) {
  if (s != dnnl_success) return s;
  if (a->n >= MD_ARENA_CAP) {
    dnnl_memory_desc_destroy(*h);
    return dnnl_out_of_memory;
  }
  a->h[a->n++] = *h;
  *md = *h;
  return dnnl_success;
}
#endif

/* *md = dims (rank nd) of data type dt with strides st (in elements), or,
 * when st is NULL, in format tag (dnnl_format_tag_any: the primitive
 * chooses). */
static inline dnnl_status_t md_make_dt(md_arena *a, fsl_md *md, int nd, const int64_t *dims, const int64_t *st,
                                       dnnl_format_tag_t tag, dnnl_data_type_t dt) {
  dnnl_dims_t d, s;
  for (int i = 0; i < nd; i++) d[i] = dims[i], s[i] = st ? st[i] : 0;
#if FSL_DNNL3
  dnnl_memory_desc_t h = NULL;
  dnnl_status_t r = st ? dnnl_memory_desc_create_with_strides(&h, nd, d, dt, s)
                       : dnnl_memory_desc_create_with_tag(&h, nd, d, dt, tag);
  return md_keep(a, r, &h, md);
#else
  (void)a;
  return st ? dnnl_memory_desc_init_by_strides(md, nd, d, dt, s) : dnnl_memory_desc_init_by_tag(md, nd, d, dt, tag);
#endif
}

/* The same in float32. */
static inline dnnl_status_t md_make(md_arena *a, fsl_md *md, int nd, const int64_t *dims, const int64_t *st,
                                    dnnl_format_tag_t tag) {
  return md_make_dt(a, md, nd, dims, st, tag, dnnl_f32);
}

/* One zero point for the whole tensor of argument `arg` (DNNL_ARG_SRC),
 * given at run time as an s32 memory of one element under
 * DNNL_ARG_ATTR_ZERO_POINTS | arg ("Quantization" in the oneDNN developer
 * guide). */
static inline dnnl_status_t attr_runtime_zero_point(dnnl_primitive_attr_t attr, int arg) {
#if FSL_DNNL3
  return dnnl_primitive_attr_set_zero_points_mask(attr, arg, 0);
#else
  const int32_t rt = DNNL_RUNTIME_S32_VAL;
  return dnnl_primitive_attr_set_zero_points(attr, arg, 1, 0, &rt);
#endif
}

static inline dnnl_status_t md_make_strides(md_arena *a, fsl_md *md, int nd, const int64_t *dims,
                                            const int64_t *st) {
  return md_make(a, md, nd, dims, st, dnnl_format_tag_undef);
}

static inline dnnl_status_t md_make_tag(md_arena *a, fsl_md *md, int nd, const int64_t *dims, dnnl_format_tag_t tag) {
  return md_make(a, md, nd, dims, NULL, tag);
}

/* *md = a copy of from (which may belong to a primitive descriptor about
 * to be destroyed). */
static inline dnnl_status_t md_copy(md_arena *a, fsl_md *md, fsl_cmd from) {
  if (!from) return dnnl_invalid_arguments;
#if FSL_DNNL3
  dnnl_memory_desc_t h = NULL;
  dnnl_status_t r = dnnl_memory_desc_clone(&h, from);
  return md_keep(a, r, &h, md);
#else
  (void)a;
  *md = *from;
  return dnnl_success;
#endif
}

static inline int md_ndims(fsl_cmd md) {
  if (!md) return 0;
#if FSL_DNNL3
  int n = 0;
  return dnnl_memory_desc_query(md, dnnl_query_ndims_s32, &n) == dnnl_success ? n : 0;
#else
  return md->ndims;
#endif
}

typedef enum { MD_DIMS, MD_PADDED_DIMS, MD_STRIDES } md_field;

/* out[0, md_ndims(md)) = md's dims, padded dims, or strides (of the outer
 * blocks; elements).  false when md is NULL or has no such field (strides:
 * a non-blocked format). */
static inline bool md_query_dims(fsl_cmd md, md_field what, int64_t *out) {
  int n = md_ndims(md);
  if (!md || n <= 0) return false;
#if FSL_DNNL3
  if (what == MD_STRIDES) {
    int fk = 0;
    if (dnnl_memory_desc_query(md, dnnl_query_format_kind, &fk) != dnnl_success || fk != dnnl_blocked) return false;
  }
  const dnnl_dims_t *d = NULL;
  dnnl_query_t q = what == MD_DIMS ? dnnl_query_dims : what == MD_PADDED_DIMS ? dnnl_query_padded_dims
                                                                              : dnnl_query_strides;
  if (dnnl_memory_desc_query(md, q, &d) != dnnl_success || !d) return false;
  for (int i = 0; i < n; i++) out[i] = (*d)[i];
#else
  if (what == MD_STRIDES && md->format_kind != dnnl_blocked) return false;
  const int64_t *d = what == MD_DIMS ? md->dims : what == MD_PADDED_DIMS ? md->padded_dims
                                                                        : md->format_desc.blocking.strides;
  for (int i = 0; i < n; i++) out[i] = d[i];
#endif
  return true;
}

/* Whether md is a strided layout with no inner blocks and no offset (each
 * dim one stride: nchw, nhwc or any permutation or view of them). */
static inline bool md_plain_strided(fsl_cmd md) {
  if (!md) return false;
#if FSL_DNNL3
  int fk = 0, nb = -1;
  int64_t off = -1;
  return dnnl_memory_desc_query(md, dnnl_query_format_kind, &fk) == dnnl_success && fk == dnnl_blocked &&
         dnnl_memory_desc_query(md, dnnl_query_inner_nblks_s32, &nb) == dnnl_success && nb == 0 &&
         dnnl_memory_desc_query(md, dnnl_query_submemory_offset_s64, &off) == dnnl_success && off == 0;
#else
  return md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 0 && md->offset0 == 0;
#endif
}

/* Forward-inference convolution (alg: dnnl_convolution_direct or
 * _winograd); dil in oneDNN's convention (0 = dense). */
static inline dnnl_status_t pd_convolution(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, dnnl_alg_kind_t alg,
                                           fsl_cmd src, fsl_cmd wei, fsl_cmd bias, fsl_cmd dst,
                                           const dnnl_dims_t strides, const dnnl_dims_t dil, const dnnl_dims_t pl,
                                           const dnnl_dims_t pr, const_dnnl_primitive_attr_t attr) {
#if FSL_DNNL3
  return dnnl_convolution_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, alg, src, wei, bias, dst,
                                                        strides, dil, pl, pr, attr);
#else
  dnnl_convolution_desc_t d;
  dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, alg, src, wei, bias, dst,
                                                               strides, dil, pl, pr);
  return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &d, attr, eng, NULL);
#endif
}

/* Forward-inference direct deconvolution (ConvTranspose). */
static inline dnnl_status_t pd_deconvolution(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, fsl_cmd src, fsl_cmd wei,
                                             fsl_cmd bias, fsl_cmd dst, const dnnl_dims_t strides,
                                             const dnnl_dims_t dil, const dnnl_dims_t pl, const dnnl_dims_t pr,
                                             const_dnnl_primitive_attr_t attr) {
#if FSL_DNNL3
  return dnnl_deconvolution_forward_primitive_desc_create(pd, eng, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                          src, wei, bias, dst, strides, dil, pl, pr, attr);
#else
  dnnl_deconvolution_desc_t d;
  dnnl_status_t s = dnnl_dilated_deconvolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                                 src, wei, bias, dst, strides, dil, pl, pr);
  return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &d, attr, eng, NULL);
#endif
}

static inline dnnl_status_t pd_matmul(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, fsl_cmd src, fsl_cmd wei,
                                      fsl_cmd bias, fsl_cmd dst, const_dnnl_primitive_attr_t attr) {
#if FSL_DNNL3
  return dnnl_matmul_primitive_desc_create(pd, eng, src, wei, bias, dst, attr);
#else
  dnnl_matmul_desc_t d;
  dnnl_status_t s = dnnl_matmul_desc_init(&d, src, wei, bias, dst);
  return s != dnnl_success ? s : dnnl_primitive_desc_create(pd, &d, attr, eng, NULL);
#endif
}

/* dst += (the previous value of dst), scale 1. */
static inline dnnl_status_t po_append_sum(dnnl_post_ops_t po) {
#if FSL_DNNL3
  return dnnl_post_ops_append_sum(po, 1.0f, 0, dnnl_data_type_undef);
#else
  return dnnl_post_ops_append_sum(po, 1.0f);
#endif
}

static inline dnnl_status_t po_append_eltwise(dnnl_post_ops_t po, dnnl_alg_kind_t alg, float alpha, float beta) {
#if FSL_DNNL3
  return dnnl_post_ops_append_eltwise(po, alg, alpha, beta);
#else
  return dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta);
#endif
}

#endif
