/*
 * winograd.h — a dense 3x3, stride-1 2-D convolution as Winograd's minimal
 * filtering algorithm F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", CVPR 2016) over oneDNN's nChw8c
 * activations, for the CPUs where oneDNN has no Winograd kernel (2.6 and
 * 3.x ship f32 Winograd for AVX-512 only).  docs/cpu-backend.md,
 * "Winograd on AVX2".
 *
 * Per 2x2 output tile, the 4x4 input patch d becomes V = B^T d B, the
 * weights g become U = G g G^T (once, at create time), and the output is
 * Y = A^T (U . V) A: 16 GEMMs, one per position of the 4x4 transform
 * domain, over [tiles, C] x [C, K], which run as one batched oneDNN
 * matmul.  The input transform and the output transform (with the
 * convolution's epilogue: bias, sum, eltwise and per-channel binary
 * post-ops, in chain order) are this file's loops over channel blocks of
 * 8, in the threads of the OpenMP runtime oneDNN already uses.
 */
#ifndef FSL_BACKEND_CPU_WINOGRAD_H
#define FSL_BACKEND_CPU_WINOGRAD_H

#include "backend/cpu/dnnl_api.h"
#include "core/core.h"

typedef struct fsl_wino fsl_wino;

/** One step of the epilogue, applied to every output element in order. */
typedef struct fsl_wino_post {
  enum { FSL_WINO_SUM, FSL_WINO_ELTWISE, FSL_WINO_BINARY } kind;
  dnnl_alg_kind_t alg;   /* ELTWISE: relu, linear, clip, clip_v2, hardswish, swish, logistic; BINARY: add, sub, mul, div, max, min */
  float alpha, beta;     /* ELTWISE parameters as oneDNN defines them */
  const float *c;        /* BINARY: the constant operand, K floats (per output channel) or 1 (borrowed) */
  bool per_channel;
} fsl_wino_post;

/** The convolution: x [n, c, h, w] -> y [n, k, oh, ow], both nChw8c
 *  (c and k multiples of 8), padding pad_t rows on top and pad_l columns
 *  on the left (the rest implied by oh = h + pads - 2, ow likewise). */
typedef struct fsl_wino_geom {
  int64_t n, c, h, w, k, oh, ow, pad_t, pad_l;
} fsl_wino_geom;

/** Whether fsl_wino_create takes this epilogue step (an eltwise or binary
 *  algorithm it implements). */
bool fsl_wino_post_ok(const fsl_wino_post *p);

/**
 * Makes the convolution.  `w` is the constant weights, element (k, c, i, j)
 * at w[k*wst[0] + c*wst[1] + i*wst[2] + j*wst[3]]; `bias` K floats or NULL;
 * `post` n_post epilogue steps (fsl_wino_post_ok each; their constants are
 * borrowed and must outlive the object).  The 16 transformed weight
 * matrices are packed for oneDNN's matmul on `eng` at once.
 * Errors: FSL_ERR_UNSUPPORTED when the geometry or an epilogue step is not
 * one this implementation takes (c or k not a multiple of 8, pads outside
 * [0, 1], a post it lacks, no AVX2 + FMA on this CPU or in oneDNN's ISA
 * limit) or oneDNN refuses the matmul; FSL_ERR_NOMEM.
 */
fsl_status fsl_wino_create(const fsl_wino_geom *g, const float *w, const int64_t wst[4], const float *bias,
                           const fsl_wino_post *post, int n_post, dnnl_engine_t eng, fsl_wino **out);

/** Bytes of scratch memory fsl_wino_run needs (the transformed input and
 *  output, 16 x tiles x channels floats each, and the matmul's scratchpad). */
size_t fsl_wino_scratch_bytes(const fsl_wino *wi);

/**
 * Runs it: src and dst nChw8c as in the geometry (dst holds the sum
 * operand first where the epilogue has a FSL_WINO_SUM step), `scratch`
 * fsl_wino_scratch_bytes bytes, 64-byte aligned.  The transforms run in
 * the calling thread's OpenMP team size (omp_set_num_threads), the matmul
 * on `stream`.  Returns oneDNN's status.
 */
dnnl_status_t fsl_wino_run(const fsl_wino *wi, const float *src, float *dst, void *scratch, dnnl_stream_t stream);

/** "winograd F(2x2,3x3) + matmul <impl>" for a profile line. */
const char *fsl_wino_describe(const fsl_wino *wi);

void fsl_wino_free(fsl_wino *wi);

#endif
