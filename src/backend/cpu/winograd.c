/*
 * winograd.c — F(2x2, 3x3) Winograd convolution over nChw8c activations
 * (winograd.h): weight transform at create time, input transform, one
 * batched oneDNN matmul, output transform with the epilogue.
 *
 * Transforms (Lavin and Gray 2016, section 4.1):
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
 *   A^T = [1 1 1 0; 0 1 -1 -1]
 * Tile t = (image, tile row, tile column) in row-major order covers output
 * rows 2*ty, 2*ty+1 and columns 2*tx, 2*tx+1; its input patch starts at row
 * 2*ty - pad_t, column 2*tx - pad_l, and reads zeros outside the image.
 * V[xi][t][c] and M[xi][t][k] (xi = 4*i + j, the transform-domain
 * position) are row-major, so that M[xi] = V[xi] U[xi] is one matmul batch.
 *
 * The loops work on 8 channels at a time (one nChw8c block, one AVX2
 * register): GCC/Clang vector extensions compiled for AVX2 + FMA
 * (FSL_WINO_TARGET), used only where the CPU has them and oneDNN's ISA
 * limit allows them (FSL_CPU_ISA).  Threads: the transforms split the
 * tiles over the team of the OpenMP runtime that oneDNN links (libgomp's
 * GOMP_parallel, looked up at run time, as onednn.c looks up
 * omp_set_num_threads: libfissile itself is not built with OpenMP), so
 * they use the threads oneDNN's matmul uses, at the same count.
 */
#include "backend/cpu/winograd.h"

#include "backend/cpu/onednn.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define FSL_WINO_X86 1
#define FSL_WINO_TARGET __attribute__((target("avx2,fma")))
#else
#define FSL_WINO_X86 0
#define FSL_WINO_TARGET
#endif

#define MAX_WINO_POST 16

typedef float v8 __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef unsigned v8u __attribute__((vector_size(32)));

struct fsl_wino {
  fsl_wino_geom g;
  int64_t th, tw, tiles;       /* tile rows and columns per image; tiles = n * th * tw */
  float *bias;                 /* k floats (owned), or NULL */
  fsl_wino_post post[MAX_WINO_POST];
  int n_post;
  dnnl_primitive_t mm;         /* [16, tiles, c] x [16, c, k] -> [16, tiles, k] */
  dnnl_memory_t v_mem, u_mem, m_mem, s_mem;
  void *u_buf;                 /* packed transformed weights (owned) */
  size_t v_bytes, m_bytes, s_bytes;
  char desc[96];
};

/* ---- the OpenMP team, through libgomp's ABI ---- */

typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned n_threads, unsigned flags);
typedef int (*omp_int_fn)(void);
static gomp_parallel_fn g_par;
static omp_int_fn g_team_size, g_team_id;
static pthread_once_t g_team_once = PTHREAD_ONCE_INIT;

static void team_init(void) {
  void *h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) h = dlopen(NULL, RTLD_LAZY);
  if (!h) return;
  g_par = (gomp_parallel_fn)dlsym(h, "GOMP_parallel");
  g_team_size = (omp_int_fn)dlsym(h, "omp_get_num_threads");
  g_team_id = (omp_int_fn)dlsym(h, "omp_get_thread_num");
  if (!g_par || !g_team_size || !g_team_id) g_par = NULL;
}

typedef struct job {
  const fsl_wino *wi;
  const float *src;
  float *dst;
  float *v, *m;
  bool output;                 /* the output transform, else the input one */
} job;

/* ---- transforms ---- */

FSL_WINO_TARGET static inline v8 load8(const float *p) {
  v8 r;
  memcpy(&r, p, sizeof r);
  return r;
}

FSL_WINO_TARGET static inline void store8(float *p, v8 x) { memcpy(p, &x, sizeof x); }

FSL_WINO_TARGET static inline v8 splat8(float x) { return (v8){x, x, x, x, x, x, x, x}; }

/* a where m (all ones), else b */
FSL_WINO_TARGET static inline v8 select8(v8i m, v8 a, v8 b) { return (v8)(((v8i)a & m) | ((v8i)b & ~m)); }

/* e^x on every lane: prelude.h's fsl_expf (the generated code's exp: the
 * same reduction, minimax polynomial and end selects), on vectors. */
FSL_WINO_TARGET static inline v8 exp8(v8 x) {
  v8 z = (x * 1.44269504088896341f - 0.5f) + 12582912.0f, n = z - 12582912.0f;
  v8 r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  v8 p = splat8(0x1.007672p-9f);
  p = p * r + 0x1.fda20ep-8f;
  p = p * r + 0x1.57778ep-5f;
  p = p * r + 0x1.553568p-3f;
  p = p * r + 0x1.0000dcp-1f;
  p = p * r + 0x1.fffff8p-1f;
  p = p * r + 1.0f;
  v8 y = p * (v8)(((v8u)z << 23) + (127u << 23));
  y = select8(x < -87.3365479f, splat8(0.0f), y);
  return select8(x > 88.7228317f, splat8(__builtin_inff()), y);
}

/* sigmoid(x) on every lane, as helpers.h's fsl_sigmoidf: e^-|x| never
 * overflows. */
FSL_WINO_TARGET static inline v8 sigmoid8(v8 x) {
  v8 t = exp8((v8)((v8i)x | (v8i)splat8(-0.0f))); /* e^-|x| */
  v8 s = 1.0f / (1.0f + t);
  return select8(x >= 0.0f, s, t * s);
}

/* The tiles [t0, t1) of the input transform, every channel block. */
FSL_WINO_TARGET static void input_tiles(const fsl_wino *wi, const float *src, float *v, int64_t t0, int64_t t1) {
  const fsl_wino_geom *g = &wi->g;
  int64_t per_image = wi->th * wi->tw, cb_n = g->c / 8, plane = g->h * g->w * 8;
  for (int64_t t = t0; t < t1; t++) {
    int64_t n = t / per_image, ty = t % per_image / wi->tw, tx = t % wi->tw;
    int64_t y0 = 2 * ty - g->pad_t, x0 = 2 * tx - g->pad_l;
    bool inside = y0 >= 0 && x0 >= 0 && y0 + 4 <= g->h && x0 + 4 <= g->w;
    for (int64_t cb = 0; cb < cb_n; cb++) {
      const float *img = src + (n * cb_n + cb) * plane;
      v8 d[4][4];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
          int64_t y = y0 + i, x = x0 + j;
          d[i][j] = inside || (y >= 0 && y < g->h && x >= 0 && x < g->w) ? load8(img + (y * g->w + x) * 8)
                                                                          : splat8(0.0f);
        }
      v8 r[4][4]; /* B^T d */
      for (int j = 0; j < 4; j++) {
        r[0][j] = d[0][j] - d[2][j];
        r[1][j] = d[1][j] + d[2][j];
        r[2][j] = d[2][j] - d[1][j];
        r[3][j] = d[1][j] - d[3][j];
      }
      for (int i = 0; i < 4; i++) { /* (B^T d) B */
        v8 q[4] = {r[i][0] - r[i][2], r[i][1] + r[i][2], r[i][2] - r[i][1], r[i][1] - r[i][3]};
        for (int j = 0; j < 4; j++) store8(v + ((4 * i + j) * wi->tiles + t) * g->c + cb * 8, q[j]);
      }
    }
  }
}

/* The epilogue on 8 channels (block kb) of one output element; `old` is
 * the element's previous value in the destination (the sum operand). */
FSL_WINO_TARGET static inline v8 epilogue(const fsl_wino *wi, v8 y, int64_t kb, const float *old) {
  if (wi->bias) y += load8(wi->bias + kb * 8);
  for (int p = 0; p < wi->n_post; p++) {
    const fsl_wino_post *e = &wi->post[p];
    if (e->kind == FSL_WINO_SUM) {
      y += load8(old);
      continue;
    }
    if (e->kind == FSL_WINO_ELTWISE) {
      v8 a = splat8(e->alpha), b = splat8(e->beta), zero = splat8(0.0f), one = splat8(1.0f);
      switch (e->alg) {
        case dnnl_eltwise_relu: y = select8(y > zero, y, a * y); break; /* NaN: a * NaN */
        case dnnl_eltwise_linear: y = a * y + b; break;
        case dnnl_eltwise_swish: y = y * sigmoid8(a * y); break;
        case dnnl_eltwise_logistic: y = sigmoid8(y); break;
        case dnnl_eltwise_clip:
        case dnnl_eltwise_clip_v2: /* min(max(y, a), b), NaN kept */
          y = select8(y < a, a, y);
          y = select8(y > b, b, y);
          break;
        default: { /* hardswish: y * min(max(a * y + b, 0), 1) */
          v8 s = a * y + b;
          s = select8(s < zero, zero, s);
          s = select8(s > one, one, s);
          y = y * s;
          break;
        }
      }
      continue;
    }
    v8 c = e->per_channel ? load8(e->c + kb * 8) : splat8(e->c[0]);
    switch (e->alg) {
      case dnnl_binary_add: y = y + c; break;
      case dnnl_binary_sub: y = y - c; break;
      case dnnl_binary_mul: y = y * c; break;
      case dnnl_binary_div: y = y / c; break;
      case dnnl_binary_max: y = select8(y < c, c, y); break;
      default: y = select8(y > c, c, y); break; /* min */
    }
  }
  return y;
}

/* The tiles [t0, t1) of the output transform, every channel block. */
FSL_WINO_TARGET static void output_tiles(const fsl_wino *wi, const float *m, float *dst, int64_t t0, int64_t t1) {
  const fsl_wino_geom *g = &wi->g;
  int64_t per_image = wi->th * wi->tw, kb_n = g->k / 8, plane = g->oh * g->ow * 8;
  for (int64_t t = t0; t < t1; t++) {
    int64_t n = t / per_image, ty = t % per_image / wi->tw, tx = t % wi->tw;
    for (int64_t kb = 0; kb < kb_n; kb++) {
      v8 s[2][4]; /* A^T M */
      for (int j = 0; j < 4; j++) {
        v8 m0 = load8(m + ((0 + j) * wi->tiles + t) * g->k + kb * 8);
        v8 m1 = load8(m + ((4 + j) * wi->tiles + t) * g->k + kb * 8);
        v8 m2 = load8(m + ((8 + j) * wi->tiles + t) * g->k + kb * 8);
        v8 m3 = load8(m + ((12 + j) * wi->tiles + t) * g->k + kb * 8);
        s[0][j] = m0 + m1 + m2;
        s[1][j] = m1 - m2 - m3;
      }
      float *img = dst + (n * kb_n + kb) * plane;
      for (int a = 0; a < 2; a++) { /* (A^T M) A */
        int64_t y = 2 * ty + a;
        if (y >= g->oh) break;
        v8 o[2] = {s[a][0] + s[a][1] + s[a][2], s[a][1] - s[a][2] - s[a][3]};
        for (int b = 0; b < 2; b++) {
          int64_t x = 2 * tx + b;
          if (x >= g->ow) break;
          float *p = img + (y * g->ow + x) * 8;
          store8(p, epilogue(wi, o[b], kb, p));
        }
      }
    }
  }
}

static void job_run(void *arg) {
  const job *j = arg;
  int64_t n = g_par ? g_team_size() : 1, id = g_par ? g_team_id() : 0, tiles = j->wi->tiles;
  int64_t per = (tiles + n - 1) / n, t0 = id * per, t1 = t0 + per < tiles ? t0 + per : tiles;
  if (t0 >= t1) return;
  if (j->output)
    output_tiles(j->wi, j->m, j->dst, t0, t1);
  else
    input_tiles(j->wi, j->src, j->v, t0, t1);
}

static void team_run(job *j) {
  if (g_par)
    g_par(job_run, j, 0, 0);
  else
    job_run(j);
}

/* ---- create / run ---- */

bool fsl_wino_post_ok(const fsl_wino_post *p) {
  if (!p) return false;
  switch (p->kind) {
    case FSL_WINO_SUM: return true;
    case FSL_WINO_ELTWISE:
      return p->alg == dnnl_eltwise_relu || p->alg == dnnl_eltwise_linear || p->alg == dnnl_eltwise_clip ||
             p->alg == dnnl_eltwise_clip_v2 || p->alg == dnnl_eltwise_hardswish || p->alg == dnnl_eltwise_swish ||
             p->alg == dnnl_eltwise_logistic;
    case FSL_WINO_BINARY:
      return p->c && (p->alg == dnnl_binary_add || p->alg == dnnl_binary_sub || p->alg == dnnl_binary_mul ||
                      p->alg == dnnl_binary_div || p->alg == dnnl_binary_max || p->alg == dnnl_binary_min);
  }
  return false;
}

static bool isa_ok(void) {
#if FSL_WINO_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2;
#else
  return false;
#endif
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

/* U[xi][c][k] = (G g G^T)[i][j] of the 3x3 kernel g = w[k][c]. */
static void weight_transform(const fsl_wino_geom *g, const float *w, const int64_t wst[4], float *u) {
  static const float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  for (int64_t k = 0; k < g->k; k++)
    for (int64_t c = 0; c < g->c; c++) {
      const float *wk = w + k * wst[0] + c * wst[1];
      float gg[4][3];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
          gg[i][j] = G[i][0] * wk[0 * wst[2] + j * wst[3]] + G[i][1] * wk[1 * wst[2] + j * wst[3]] +
                     G[i][2] * wk[2 * wst[2] + j * wst[3]];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
          u[((4 * i + j) * g->c + c) * g->k + k] = gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
    }
}

fsl_status fsl_wino_create(const fsl_wino_geom *g, const float *w, const int64_t wst[4], const float *bias,
                           const fsl_wino_post *post, int n_post, dnnl_engine_t eng, fsl_wino **out) {
  if (!g || !w || !wst || !out || (n_post > 0 && !post) || n_post < 0)
    return fsl_errorf(FSL_ERR_ARG, "fsl_wino_create: NULL argument");
  *out = NULL;
  if (g->n < 1 || g->c < 8 || g->k < 8 || g->c % 8 || g->k % 8 || g->h < 1 || g->w < 1 || g->pad_t < 0 ||
      g->pad_t > 2 || g->pad_l < 0 || g->pad_l > 2 || g->oh < 1 || g->ow < 1 || g->oh > g->h + 2 * g->pad_t ||
      g->ow > g->w + 2 * g->pad_l)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "winograd: geometry not taken");
  /* V and M (16 x tiles x channels floats each) must be addressable: a
   * geometry this large is refused (the direct kernel runs it) */
  double tiles = (double)g->n * (double)((g->oh + 1) / 2) * (double)((g->ow + 1) / 2);
  if (64.0 * tiles * (double)(g->c + g->k) > 1e12 || 64.0 * (double)g->c * (double)g->k > 1e12)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "winograd: too large");
  if (n_post > MAX_WINO_POST) return fsl_errorf(FSL_ERR_UNSUPPORTED, "winograd: %d epilogue steps", n_post);
  for (int i = 0; i < n_post; i++)
    if (!fsl_wino_post_ok(&post[i])) return fsl_errorf(FSL_ERR_UNSUPPORTED, "winograd: epilogue step %d not taken", i);
  if (!isa_ok()) return fsl_errorf(FSL_ERR_UNSUPPORTED, "winograd: needs AVX2 and FMA");
  pthread_once(&g_team_once, team_init);

  fsl_wino *wi = calloc(1, sizeof *wi);
  if (!wi) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  wi->g = *g;
  wi->th = (g->oh + 1) / 2, wi->tw = (g->ow + 1) / 2, wi->tiles = g->n * wi->th * wi->tw;
  wi->n_post = n_post;
  if (n_post) memcpy(wi->post, post, sizeof *post * (size_t)n_post);
  fsl_status st = FSL_OK;
  float *u = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  md_arena a = {0};
  if (bias) {
    if (!(wi->bias = aligned_alloc(64, round64(sizeof(float) * (size_t)g->k)))) goto nomem;
    memcpy(wi->bias, bias, sizeof(float) * (size_t)g->k);
  }
  int64_t vd[3] = {16, wi->tiles, g->c}, ud[3] = {16, g->c, g->k}, md[3] = {16, wi->tiles, g->k};
  fsl_md vmd, umd, uany, mmd;
  dnnl_status_t s = md_make_tag(&a, &vmd, 3, vd, dnnl_abc);
  if (s == dnnl_success) s = md_make_tag(&a, &umd, 3, ud, dnnl_abc);
  if (s == dnnl_success) s = md_make_tag(&a, &uany, 3, ud, dnnl_format_tag_any);
  if (s == dnnl_success) s = md_make_tag(&a, &mmd, 3, md, dnnl_abc);
  if (s == dnnl_success) s = fsl_onednn_user_scratchpad_attr(&attr);
  if (s == dnnl_success) s = pd_matmul(&pd, eng, FSL_MD(vmd), FSL_MD(uany), NULL, FSL_MD(mmd), attr);
  if (s == dnnl_success) s = dnnl_primitive_create(&wi->mm, pd);
  fsl_cmd wq = s == dnnl_success ? dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0) : NULL;
  fsl_cmd sq = s == dnnl_success ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
  if (s == dnnl_success && !wq) s = dnnl_runtime_error;
  if (s != dnnl_success) {
    st = fsl_errorf(FSL_ERR_UNSUPPORTED, "winograd: oneDNN matmul: %s", dnnl_status2str(s));
    goto fail;
  }
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) impl = "?";
  snprintf(wi->desc, sizeof wi->desc, "winograd F(2x2,3x3) + matmul %s", impl);
  wi->s_bytes = sq ? dnnl_memory_desc_get_size(sq) : 0;
  wi->v_bytes = round64(sizeof(float) * 16 * (size_t)wi->tiles * (size_t)g->c);
  wi->m_bytes = round64(sizeof(float) * 16 * (size_t)wi->tiles * (size_t)g->k);
  /* the weights: transformed, then packed as the matmul wants them */
  size_t u_bytes = sizeof(float) * 16 * (size_t)g->c * (size_t)g->k;
  if (!(u = malloc(u_bytes)) || !(wi->u_buf = aligned_alloc(64, round64(dnnl_memory_desc_get_size(wq))))) goto nomem;
  weight_transform(g, w, wst, u);
  s = fsl_onednn_run_reorder(FSL_MD(umd), u, wq, wi->u_buf);
  if (s == dnnl_success) s = dnnl_memory_create(&wi->u_mem, wq, eng, wi->u_buf);
  if (s == dnnl_success) s = dnnl_memory_create(&wi->v_mem, FSL_MD(vmd), eng, DNNL_MEMORY_NONE);
  if (s == dnnl_success) s = dnnl_memory_create(&wi->m_mem, FSL_MD(mmd), eng, DNNL_MEMORY_NONE);
  if (s == dnnl_success && wi->s_bytes) s = dnnl_memory_create(&wi->s_mem, sq, eng, DNNL_MEMORY_NONE);
  if (s != dnnl_success) {
    st = fsl_errorf(FSL_ERR_RUNTIME, "winograd: oneDNN: %s", dnnl_status2str(s));
    goto fail;
  }
  free(u);
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  md_arena_free(&a);
  *out = wi;
  return FSL_OK;
nomem:
  st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
fail:
  free(u);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  md_arena_free(&a);
  fsl_wino_free(wi);
  return st;
}

size_t fsl_wino_scratch_bytes(const fsl_wino *wi) { return wi ? wi->v_bytes + wi->m_bytes + round64(wi->s_bytes) : 0; }

dnnl_status_t fsl_wino_run(const fsl_wino *wi, const float *src, float *dst, void *scratch, dnnl_stream_t stream) {
  if (!wi || !src || !dst || !scratch) return dnnl_invalid_arguments;
  float *v = scratch, *m = (float *)((char *)scratch + wi->v_bytes);
  job j = {wi, src, dst, v, m, false};
  team_run(&j);
  dnnl_status_t s = dnnl_memory_set_data_handle(wi->v_mem, v);
  if (s == dnnl_success) s = dnnl_memory_set_data_handle(wi->m_mem, m);
  if (s == dnnl_success && wi->s_mem) s = dnnl_memory_set_data_handle(wi->s_mem, (char *)m + wi->m_bytes);
  if (s != dnnl_success) return s;
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, wi->v_mem}, {DNNL_ARG_WEIGHTS, wi->u_mem}, {DNNL_ARG_DST, wi->m_mem},
                             {DNNL_ARG_SCRATCHPAD, wi->s_mem}};
  s = dnnl_primitive_execute(wi->mm, stream, wi->s_mem ? 4 : 3, args);
  if (s == dnnl_success) s = dnnl_stream_wait(stream);
  if (s != dnnl_success) return s;
  j.output = true;
  team_run(&j);
  return dnnl_success;
}

const char *fsl_wino_describe(const fsl_wino *wi) { return wi ? wi->desc : ""; }

void fsl_wino_free(fsl_wino *wi) {
  if (!wi) return;
  if (wi->mm) dnnl_primitive_destroy(wi->mm);
  if (wi->v_mem) dnnl_memory_destroy(wi->v_mem);
  if (wi->u_mem) dnnl_memory_destroy(wi->u_mem);
  if (wi->m_mem) dnnl_memory_destroy(wi->m_mem);
  if (wi->s_mem) dnnl_memory_destroy(wi->s_mem);
  free(wi->u_buf);
  free(wi->bias);
  free(wi);
}
