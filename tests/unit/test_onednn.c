/* test_onednn.c — matmul / conv through oneDNN (src/backend/cpu/onednn.c),
 * with epilogue post-ops, against the reference interpreter (fsl_ref_run)
 * on small graphs built with the builder, and the shape/layout rules
 * (fsl_onednn_linear_describe): batch folding, conv as matmul, what a conv
 * or deconvolution does not absorb.  Also reports sgemm throughput of
 * a 1024^3 matmul. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <time.h>
#include <cmocka.h>

#include "backend/cpu/isa.h"
#include "backend/cpu/onednn.h"
#include "eval/eval.h"
#include "fission/builder.h"

/* ---- a small graph under test ---- */

#define MAX_IN 8
#define MAX_EPI 16

typedef struct tgraph {
  fsl_builder b;
  int n_in;
  float *in_data[MAX_IN];
  fsl_node *lin;
  int n_epi;
  fsl_node *epi[MAX_EPI];
  uint32_t seed;
} tgraph;

static void tg_init(tgraph *t, bool fold) {
  memset(t, 0, sizeof *t);
  t->b.g = fsl_graph_new();
  assert_non_null(t->b.g);
  t->b.fold = fold;
  t->seed = 12345;
}

static float rnd(tgraph *t) {
  t->seed = t->seed * 1664525u + 1013904223u;
  return (float)((t->seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *rnd_buf(tgraph *t, int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++) p[i] = rnd(t);
  return p;
}

/* A graph input of random data. */
static fsl_value *tg_input(tgraph *t, int rank, const int64_t *dims) {
  fsl_value *v = fsl_graph_add_value(t->b.g, NULL);
  assert_non_null(v);
  v->dtype = FSL_DT_F32;
  assert_true(fsl_value_set_shape(v, rank, dims));
  assert_int_equal(fsl_graph_add_input(t->b.g, v), FSL_OK);
  assert_true(t->n_in < MAX_IN);
  t->in_data[t->n_in++] = rnd_buf(t, fsl_numel(rank, dims));
  return v;
}

/* A constant of random data. */
static fsl_value *tg_const(tgraph *t, int rank, const int64_t *dims) {
  float *d = rnd_buf(t, fsl_numel(rank, dims));
  fsl_value *v = fsl_b_const(&t->b, FSL_DT_F32, rank, dims, d);
  free(d);
  assert_non_null(v);
  return v;
}

/* Records the node producing v as the linear op (first call) or the next
 * epilogue node. */
static fsl_value *tg_mark(tgraph *t, fsl_value *v) {
  if (t->b.st) fprintf(stderr, "builder: %s\n", fsl_last_error());
  assert_int_equal(t->b.st, FSL_OK);
  assert_non_null(v);
  assert_non_null(v->producer);
  if (!t->lin) t->lin = v->producer;
  else t->epi[t->n_epi++] = v->producer;
  return v;
}

/* Marks the result of fsl_b_matmul: the matmul node, and the reshape after
 * it when the builder folded the batch dims into M (rank-2 weights). */
static fsl_value *tg_mark_matmul(tgraph *t, fsl_value *v) {
  assert_non_null(v);
  assert_non_null(v->producer);
  fsl_node *p = v->producer;
  if (p->op == FSL_OP_reshape && p->in[0]->producer && p->in[0]->producer->op == FSL_OP_matmul) {
    tg_mark(t, p->in[0]);
    return tg_mark(t, v);
  }
  assert_int_equal(p->op, FSL_OP_matmul);
  return tg_mark(t, v);
}

static void tg_free(tgraph *t) {
  for (int i = 0; i < t->n_in; i++) free(t->in_data[i]);
  fsl_graph_free(t->b.g);
}

/* Data of a value the primitive reads: a graph input or a constant, or a
 * reshape of one (same row-major data); NULL for a broadcast (expand) view,
 * which has no data of its own (the primitive must have captured its
 * constant source). */
static const void *value_data(tgraph *t, const fsl_value *v) {
  if (!v) return NULL;
  while (!v->data && v->producer && v->producer->op == FSL_OP_reshape) v = v->producer->in[0];
  if (v->data) return v->data;
  if (v->producer && v->producer->op == FSL_OP_expand) return NULL;
  for (int i = 0; i < t->b.g->n_inputs; i++)
    if (t->b.g->inputs[i] == v) return t->in_data[i];
  fail_msg("value %s is neither an input nor a constant", v->name ? v->name : "?");
  return NULL;
}

/* fsl_onednn_linear_describe of the primitive of the last check_chain:
 * "KIND IMPL SRC:WEIGHTS:DST LAYOUT". */
static char g_desc[256];

/*
 * Asserts what the primitive does, not which of oneDNN's ISA-specific
 * implementations runs it (brg:avx512_core on one machine, gemm:jit on an
 * AVX2 one): `want` is matched against the description with the IMPL word
 * removed, e.g. "matmul 16x32:32x24:16x24 plain" (a matmul of that folded
 * shape on plain data, no reorder).  The implementation must not be one of
 * oneDNN's reference ("ref") loops.
 */
static void want_desc(const char *want) {
  char kind[64] = "", impl[96] = "";
  int used = 0;
  if (sscanf(g_desc, "%63s %95s %n", kind, impl, &used) < 2 || used <= 0)
    fail_msg("cannot read oneDNN's description '%s'", g_desc);
  char what[256];
  snprintf(what, sizeof what, "%s %s", kind, g_desc + used);
  if (!strstr(what, want)) fail_msg("oneDNN runs '%s' (%s), expected '%s' in it", what, impl, want);
  if (strstr(impl, "ref")) fail_msg("oneDNN runs '%s' with its reference implementation '%s'", what, impl);
}

/*
 * Asserts that the primitive is one [M, K] x [K, N] GEMM on the caller's
 * plain memory with constant weights: oneDNN's matmul ("matmul MxK:KxN:MxN
 * plain"), or, where that would run on oneDNN's gemm path and M >= 8
 * (mm_conv_pays in onednn.c), its 1x1 convolution over an nhwc image of M
 * pixels ("convolution 1xKx1xM:NxKx1x1:1xNx1xM plain").
 */
static void want_gemm(int64_t M, int64_t K, int64_t N) {
  char mm[128], cv[128];
  snprintf(mm, sizeof mm, "matmul %lldx%lld:%lldx%lld:%lldx%lld plain", (long long)M, (long long)K, (long long)K,
           (long long)N, (long long)M, (long long)N);
  snprintf(cv, sizeof cv, "convolution 1x%lldx1x%lld:%lldx%lldx1x1:1x%lldx1x%lld plain", (long long)K, (long long)M,
           (long long)N, (long long)K, (long long)N, (long long)M);
  want_desc(strncmp(g_desc, "convolution", 11) == 0 ? cv : mm);
}

/*
 * Runs the chain (t->lin, t->epi) through oneDNN and the reference
 * interpreter and compares the output of the last absorbed node; checks
 * that at least `want_absorbed` epilogue nodes were absorbed (exactly, when
 * exact).  Returns the number absorbed.
 */
static int check_chain(tgraph *t, int want_absorbed, bool exact) {
  fsl_graph *g = t->b.g;
  /* created before the chain values become graph outputs (a graph output is
   * materialised, so it ends every prefix oneDNN may absorb) */
  fsl_onednn_linear *op = NULL;
  int na = -1;
  fsl_status st = fsl_onednn_linear_create(t->lin, t->epi, t->n_epi, 0, &op, &na);
  if (st) fprintf(stderr, "create: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  /* every chain value is a graph output, so any absorbed prefix can be checked */
  assert_int_equal(fsl_graph_add_output(g, t->lin->out[0]), FSL_OK);
  for (int i = 0; i < t->n_epi; i++) assert_int_equal(fsl_graph_add_output(g, t->epi[i]->out[0]), FSL_OK);
  st = fsl_graph_verify(g);
  if (st) fprintf(stderr, "verify: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  void *outs[1 + MAX_EPI] = {0};
  st = fsl_ref_run(g, (const void *const *)t->in_data, outs);
  if (st) fprintf(stderr, "ref: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  if (exact) assert_int_equal(na, want_absorbed);
  else assert_true(na >= want_absorbed);
  const fsl_value *res = na ? t->epi[na - 1]->out[0] : t->lin->out[0];
  int64_t n = fsl_value_numel(res);
  const void *post[MAX_EPI] = {0};
  for (int i = 0; i < na; i++) post[i] = value_data(t, fsl_onednn_linear_post_value(op, i));
  float *y = malloc(sizeof(float) * (size_t)n);
  assert_non_null(y);
  for (int64_t i = 0; i < n; i++) y[i] = NAN;
  for (int rep = 0; rep < 2; rep++) { /* twice: state must not leak between runs */
    st = fsl_onednn_linear_run(op, value_data(t, t->lin->in[0]), value_data(t, t->lin->in[1]), post, y);
    if (st) fprintf(stderr, "run: %s\n", fsl_last_error());
    assert_int_equal(st, FSL_OK);
  }
  const float *want = outs[na];
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float d = fabsf(y[i] - want[i]);
    if (!(d <= 1e-4f * (1.0f + fabsf(want[i])))) {
      if (bad++ < 5) fprintf(stderr, "element %lld: got %.7g want %.7g\n", (long long)i, y[i], want[i]);
    }
  }
  assert_int_equal(bad, 0);
  free(y);
  for (int i = 0; i <= t->n_epi; i++) free(outs[i]);
  snprintf(g_desc, sizeof g_desc, "%s", fsl_onednn_linear_describe(op));
  fsl_onednn_linear_free(op);
  return na;
}

/* ---- matmul ---- */

static void test_matmul_2d(void **state) {
  (void)state;
  for (int wconst = 0; wconst < 2; wconst++) {
    tgraph t;
    tg_init(&t, true);
    int64_t da[] = {5, 7}, db[] = {7, 3};
    fsl_value *a = tg_input(&t, 2, da);
    fsl_value *w = wconst ? tg_const(&t, 2, db) : tg_input(&t, 2, db);
    tg_mark(&t, fsl_b_matmul(&t.b, a, w));
    check_chain(&t, 0, true);
    tg_free(&t);
  }
}

static void test_matmul_batched(void **state) {
  (void)state;
  /* rank 4, run-time weights */
  tgraph t;
  tg_init(&t, true);
  int64_t da[] = {2, 3, 4, 5}, db[] = {2, 3, 5, 6};
  tg_mark(&t, fsl_b_matmul(&t.b, tg_input(&t, 4, da), tg_input(&t, 4, db)));
  check_chain(&t, 0, true);
  tg_free(&t);
  /* rank 3 x constant 2-D weights broadcast over the batch (views kept) */
  for (int fold = 0; fold < 2; fold++) {
    tg_init(&t, fold);
    int64_t dx[] = {3, 4, 16}, dw[] = {16, 8};
    tg_mark_matmul(&t, fsl_b_matmul(&t.b, tg_input(&t, 3, dx), tg_const(&t, 2, dw)));
    check_chain(&t, 1, true); /* the reshape [12, 8] -> [3, 4, 8] is absorbed */
    tg_free(&t);
  }
}

/* A batched matmul whose weights are the same for every batch (a constant
 * [K, N] broadcast through views, as in nn.MultiheadAttention's [L, 1, E]
 * input projection) runs as one GEMM with the batch dims folded into M; a
 * bias and a full-size run-time residual are re-expressed over the folded
 * shape.  An operand that varies per batch but is broadcast along m cannot
 * be, and keeps the matmul batched. */
static void test_matmul_batch_fold(void **state) {
  (void)state;
  static const struct {
    int64_t m;
    bool per_batch;
    const char *want; /* NULL: one folded GEMM of B * m rows (want_gemm) */
  } cases[] = {
      {1, false, NULL},
      {3, false, NULL},
      {3, true, "16x3x32:1x32x24:16x3x24"},
  };
  for (size_t c = 0; c < FSL_ARRAY_LEN(cases); c++) {
    tgraph t;
    tg_init(&t, false); /* keep the broadcast of the weights a view */
    int64_t B = 16, m = cases[c].m, K = 32, N = 24;
    int64_t dx[] = {B, m, K}, dw[] = {K, N}, dw3[] = {1, K, N}, dwb[] = {B, K, N}, db[] = {N};
    int64_t dr[] = {B, cases[c].per_batch ? 1 : m, N};
    fsl_value *w = fsl_b_broadcast_to(&t.b, fsl_b_reshape(&t.b, tg_const(&t, 2, dw), 3, dw3), 3, dwb);
    fsl_value *in[2] = {tg_input(&t, 3, dx), w};
    fsl_value *y = tg_mark(&t, fsl_b_prim(&t.b, FSL_OP_matmul, in, 2, NULL, 0));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_const(&t, 1, db)));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_input(&t, 3, dr)));
    tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_tanh, y));
    check_chain(&t, 3, true);
    if (cases[c].want) want_desc(cases[c].want);
    else want_gemm(B * m, K, N);
    tg_free(&t);
  }
}

static void test_matmul_bias_relu(void **state) {
  (void)state;
  for (int fold = 0; fold < 2; fold++) {
    tgraph t;
    tg_init(&t, fold);
    int64_t dx[] = {2, 6, 16}, dw[] = {16, 10}, db[] = {10};
    fsl_value *y = tg_mark_matmul(&t, fsl_b_matmul(&t.b, tg_input(&t, 3, dx), tg_const(&t, 2, dw)));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_const(&t, 1, db)));
    tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
    check_chain(&t, 3, true);
    want_desc("plain, bias"); /* the constant per-column add is the matmul's own bias argument */
    tg_free(&t);
  }
}

/* A constant-weight GEMM with a bias, an activation and a run-time
 * residual absorbed: the whole chain on the caller's plain memory, whether
 * it runs as oneDNN's matmul or as its 1x1 convolution (mm_conv_pays), with
 * the weights given row-major [K, N] or transposed ([N, K] read through a
 * permute, as Gemm's transB).  Fewer than 8 rows stay a matmul. */
static void test_matmul_as_conv(void **state) {
  (void)state;
  static const struct {
    int64_t m, k, n;
    bool trans_b;
  } cases[] = {{128, 64, 96, false}, {128, 64, 96, true}, {8, 48, 40, false}, {4, 48, 40, false}};
  for (size_t c = 0; c < FSL_ARRAY_LEN(cases); c++) {
    tgraph t;
    tg_init(&t, true);
    int64_t M = cases[c].m, K = cases[c].k, N = cases[c].n;
    int64_t dx[] = {M, K}, dw[] = {K, N}, dwt[] = {N, K}, db[] = {N}, dr[] = {M, N}, perm[] = {1, 0};
    fsl_value *w = cases[c].trans_b ? fsl_b_permute(&t.b, tg_const(&t, 2, dwt), perm) : tg_const(&t, 2, dw);
    fsl_value *y = tg_mark(&t, fsl_b_matmul(&t.b, tg_input(&t, 2, dx), w));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_const(&t, 1, db)));
    y = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_sigmoid, y));
    tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_input(&t, 2, dr)));
    check_chain(&t, 3, true);
    if (M < 8) want_desc("matmul 4x48:48x40:4x40 plain");
    else want_gemm(M, K, N);
    want_desc("plain, bias"); /* the bias argument of the matmul or of its 1x1 convolution */
    tg_free(&t);
  }
}

/* Run-time operands through views: bias [N] (an input), a scale and a
 * residual of full shape; then a row scale broadcast over some batch dims
 * ([B1, 1, M, 1]), which oneDNN 2.6's matmul implements only in its
 * reference version, so it need not be absorbed, but the result must be
 * right. */
static void test_matmul_runtime_operands(void **state) {
  (void)state;
  for (int partial = 0; partial < 2; partial++) {
    tgraph t;
    tg_init(&t, true);
    int64_t dx[] = {2, 3, 4, 8}, dw[] = {2, 3, 8, 5}, db[] = {5}, ds[] = {2, 3, 4, 5}, dr[] = {2, 3, 4, 5};
    int64_t dp[] = {2, 1, 4, 1};
    fsl_value *y = tg_mark_matmul(&t, fsl_b_matmul(&t.b, tg_input(&t, 4, dx), tg_input(&t, 4, dw)));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, tg_input(&t, 1, db), y));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_mul, y, tg_input(&t, 4, ds)));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_sub, tg_input(&t, 4, dr), y));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_max, y, tg_input(&t, 1, db)));
    if (partial) y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_div, y, tg_input(&t, 4, dp)));
    check_chain(&t, 4, !partial);
    tg_free(&t);
  }
}

/* Unary post-ops, scalar constants, swish, and a stop at erf. */
static void test_epilogue_kinds(void **state) {
  (void)state;
  tgraph t;
  tg_init(&t, true);
  int64_t dx[] = {6, 9}, dw[] = {9, 7};
  fsl_value *y = tg_mark(&t, fsl_b_matmul(&t.b, tg_input(&t, 2, dx), tg_const(&t, 2, dw)));
  y = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_mul, y, 0.5));
  y = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_tanh, y));
  y = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_add, y, 1.25));
  y = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_sqrt, y));
  fsl_value *s = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_sigmoid, y));
  y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_mul, y, s));                      /* swish */
  y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_sub, fsl_b_scalar(&t.b, FSL_DT_F32, 3.0), y));
  y = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_div, y, 3.0));
  y = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_min, y, 0.75));
  y = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_exp, y));
  y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_mul, y, y));                      /* square */
  y = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_erf, y));                          /* stops here */
  tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_abs, y));
  check_chain(&t, 11, true);
  tg_free(&t);
}

/* Targeting AVX2 (FSL_CPU_ISA=avx2), where oneDNN 2.6's direct
 * convolutions take a full-size binary post-op in their own layout. */
static bool targets_avx2(void) {
  fsl_cpu_isa isa;
  return fsl_cpu_isa_get(&isa) == FSL_OK && strcmp(isa.name, "avx2") == 0;
}

/* HardSwish as the ONNX fission writes it (h * max(0, min(1, h/6 + 1/2)))
 * and as older exporters do (h * clip(h + 3, 0, 6) / 6) becomes one
 * eltwise post-op; near misses do not: y * hardsigmoid(h), another alpha.
 * The product reads h a second time, so a prefix that stops inside the
 * pattern would need h materialised: only the bias add is absorbed then. */
static void test_hardswish(void **state) {
  (void)state;
  for (int form = 0; form < 4; form++) {
    tgraph t;
    tg_init(&t, true);
    int64_t dx[] = {1, 8, 9, 9}, dw[] = {16, 8, 3, 3}, db[] = {16}, dc[] = {1, 16, 1, 1};
    int64_t one[] = {1, 1}, pads[] = {1, 1, 1, 1};
    fsl_value *y = tg_mark(&t, fsl_b_conv(&t.b, tg_input(&t, 4, dx), tg_const(&t, 4, dw), one, one, pads, 1, NULL));
    fsl_value *h = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, fsl_b_reshape(&t.b, tg_const(&t, 1, db), 4, dc)));
    fsl_value *u = h;
    if (form == 1) { /* clip(h + 3, 0, 6) / 6 */
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_add, u, 3.0));
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, u, 0.0));
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_min, u, 6.0));
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_div, u, 6.0));
    } else {
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_mul, u, form == 3 ? 0.2 : 1.0 / 6.0));
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_add, u, 0.5));
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_min, u, 1.0));
      u = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, u, 0.0));
    }
    fsl_value *other = form == 2 ? tg_input(&t, 4, (int64_t[]){1, 16, 9, 9}) : h; /* x * hardsigmoid(y) */
    tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_mul, u, other));
    /* form 2 has no second read of h: its nodes are ordinary post-ops, the
     * product with a full-size run-time operand too where the conv's
     * kernel takes it (test_conv_residual) */
    if (form == 2) {
      int na = check_chain(&t, 5, false);
      if (targets_avx2()) assert_int_equal(na, 6);
    } else {
      check_chain(&t, form < 2 ? 6 : 1, true);
    }
    tg_free(&t);
  }
}

/* x * sigmoid(x) is absorbed as swish only when nothing else reads x: a
 * third reader outside the chain keeps the prefix at the bias. */
static void test_swish_closed_prefix(void **state) {
  (void)state;
  for (int extra = 0; extra < 2; extra++) {
    tgraph t;
    tg_init(&t, true);
    int64_t dx[] = {5, 12}, dw[] = {12, 8}, db[] = {8};
    fsl_value *y = tg_mark(&t, fsl_b_matmul(&t.b, tg_input(&t, 2, dx), tg_const(&t, 2, dw)));
    fsl_value *h = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_const(&t, 1, db)));
    fsl_value *sg = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_sigmoid, h));
    tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_mul, h, sg));
    if (extra) assert_non_null(fsl_b_unary(&t.b, FSL_OP_tanh, h)); /* not in the chain */
    check_chain(&t, extra ? 1 : 3, true);
    tg_free(&t);
  }
}

/* ---- conv ---- */

/* conv of x [dims] with weights [M, C/group, k...], then optional bias and relu. */
static void run_conv(int rank, const int64_t *xd, int64_t M, int64_t group, const int64_t *k,
                     const int64_t *strides, const int64_t *dil, const int64_t *pads, const int64_t *lhs,
                     bool wconst, bool bias_relu, bool fold) {
  tgraph t;
  tg_init(&t, fold);
  int ns = rank - 2;
  int64_t wd[5] = {M, xd[1] / group};
  for (int i = 0; i < ns; i++) wd[2 + i] = k[i];
  fsl_value *x = tg_input(&t, rank, xd);
  fsl_value *w = wconst ? tg_const(&t, rank, wd) : tg_input(&t, rank, wd);
  fsl_value *y = tg_mark(&t, fsl_b_conv(&t.b, x, w, strides, dil, pads, group, lhs));
  if (bias_relu) {
    int64_t bd[] = {M}, cd[5] = {1, M, 1, 1, 1};
    /* bias [M] -> [1, M, 1...] -> expand, as Conv's fission does */
    fsl_value *b = fsl_b_reshape(&t.b, tg_const(&t, 1, bd), rank, cd);
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, b));
    tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
  }
  check_chain(&t, bias_relu && !lhs ? 2 : 0, true); /* a deconvolution absorbs nothing */
  tg_free(&t);
}

static void test_conv2d(void **state) {
  (void)state;
  int64_t xd[] = {2, 4, 9, 11}, k[] = {3, 3}, one[] = {1, 1};
  int64_t s2[] = {2, 1}, d2[] = {2, 1}, pads[] = {1, 0, 2, 1}, nopad[] = {0, 0, 0, 0};
  run_conv(4, xd, 6, 1, k, one, one, nopad, NULL, true, false, true);
  run_conv(4, xd, 6, 1, k, s2, one, pads, NULL, true, false, true);
  run_conv(4, xd, 6, 1, k, one, d2, pads, NULL, false, false, true);
  run_conv(4, xd, 6, 2, k, s2, d2, pads, NULL, true, false, true);    /* groups */
  run_conv(4, xd, 8, 4, k, one, one, pads, NULL, true, false, true);  /* depthwise, multiplier 2 */
  run_conv(4, xd, 4, 4, k, s2, one, pads, NULL, false, false, true);  /* depthwise, run-time weights */
}

static void test_conv_bias_relu(void **state) {
  (void)state;
  int64_t xd[] = {1, 8, 10, 10}, k[] = {3, 3}, one[] = {1, 1}, pads[] = {1, 1, 1, 1};
  run_conv(4, xd, 16, 1, k, one, one, pads, NULL, true, true, true);
  run_conv(4, xd, 16, 1, k, one, one, pads, NULL, true, true, false);
  int64_t big[] = {1, 32, 20, 20};                                  /* bias stays an expand view */
  run_conv(4, big, 48, 1, k, one, one, pads, NULL, true, true, true);
  run_conv(4, big, 32, 32, k, one, one, pads, NULL, true, true, true);
}

static void test_conv1d_3d(void **state) {
  (void)state;
  int64_t x1[] = {2, 3, 17}, k1[] = {4}, s1[] = {2}, d1[] = {1}, p1[] = {1, 2};
  run_conv(3, x1, 5, 1, k1, s1, d1, p1, NULL, true, true, true);
  int64_t x3[] = {1, 4, 5, 6, 7}, k3[] = {2, 3, 3}, s3[] = {1, 2, 1}, dd3[] = {1, 1, 2}, p3[] = {0, 1, 1, 1, 0, 2};
  run_conv(5, x3, 4, 2, k3, s3, dd3, p3, NULL, true, true, true);
}

/* conv over an lhs-dilated input (ConvTranspose), through deconvolution. */
static void test_conv_lhs_dilation(void **state) {
  (void)state;
  int64_t xd[] = {1, 4, 5, 6}, k[] = {3, 3}, one[] = {1, 1}, lhs[] = {2, 2}, pads[] = {2, 2, 2, 2};
  int64_t pads2[] = {1, 2, 2, 1}, d2[] = {1, 2};
  run_conv(4, xd, 6, 1, k, one, one, pads, lhs, true, true, true);
  run_conv(4, xd, 6, 2, k, one, d2, pads2, lhs, false, false, true);
  int64_t x1[] = {2, 3, 7}, k1[] = {4}, o1[] = {1}, l1[] = {3}, p1[] = {3, 2};
  run_conv(3, x1, 2, 1, k1, o1, o1, p1, l1, true, false, true);
}

/* A conv absorbs a full-size run-time operand (a residual add) as oneDNN's
 * sum post-op (or a binary one given in its destination's layout),
 * reordered from row-major here (nothing chains it), where oneDNN has no
 * AVX-512 (targeting AVX2: always): bias, residual and relu all absorbed,
 * never on the gemm path (in plain nchw, oneDNN 2.6 took a ~20x slower
 * one: resnet18, commit 86b1801), and the result matches the reference.
 * With AVX-512 (measured slower there) the chain stops after the bias.
 * 16 and 8 channels (a whole and a partial AVX-512 block), the residual
 * another input or the conv's own source (conv(x) + x). */
static void test_conv_residual(void **state) {
  (void)state;
  for (int v = 0; v < 3; v++) {
    tgraph t;
    tg_init(&t, true);
    int64_t c = v == 1 ? 8 : 16;
    int64_t xd[] = {1, c, 8, 8}, wd[] = {c, c, 3, 3}, bd[] = {c}, cd[] = {1, c, 1, 1};
    int64_t one[] = {1, 1}, pads[] = {1, 1, 1, 1};
    fsl_value *x = tg_input(&t, 4, xd);
    fsl_value *y = tg_mark(&t, fsl_b_conv(&t.b, x, tg_const(&t, 4, wd), one, one, pads, 1, NULL));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, fsl_b_reshape(&t.b, tg_const(&t, 1, bd), 4, cd)));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, v == 2 ? x : tg_input(&t, 4, xd)));
    tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
    int na = check_chain(&t, 1, false);
    want_desc("convolution");
    if (targets_avx2() || na != 1) assert_int_equal(na, 3);
    if (strstr(g_desc, "gemm")) fail_msg("oneDNN runs the residual conv on its gemm path: '%s'", g_desc);
    tg_free(&t);
  }
}

/* Dense 3x3 stride-1 convolutions large enough for oneDNN's Winograd
 * kernels (AVX-512; the direct convolution elsewhere): whichever runs, the
 * bias (the Winograd kernels' own bias argument) and relu are absorbed and
 * match the reference; a swish (which the Winograd kernels refuse) leaves
 * at least the bias absorbed; the residual add stops the chain after the
 * bias, or (targeting AVX2: test_conv_residual) is absorbed with the relu.
 * Bias as a folded constant and as an expand view. */
static void test_conv_winograd_shapes(void **state) {
  (void)state;
  for (int tail = 0; tail < 3; tail++)
    for (int fold = 0; fold < 2; fold++) {
      tgraph t;
      tg_init(&t, fold);
      int64_t xd[] = {1, 32, 40, 40}, wd[] = {48, 32, 3, 3}, bd[] = {48}, cd[] = {1, 48, 1, 1};
      int64_t yd[] = {1, 48, 40, 40}, one[] = {1, 1}, pads[] = {1, 1, 1, 1};
      fsl_value *x = tg_input(&t, 4, xd);
      fsl_value *y = tg_mark(&t, fsl_b_conv(&t.b, x, tg_const(&t, 4, wd), one, one, pads, 1, NULL));
      y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, fsl_b_reshape(&t.b, tg_const(&t, 1, bd), 4, cd)));
      if (tail == 0) {
        tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
      } else if (tail == 1) {
        fsl_value *sg = tg_mark(&t, fsl_b_unary(&t.b, FSL_OP_sigmoid, y));
        tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_mul, y, sg));
      } else {
        y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, tg_input(&t, 4, yd)));
        tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
      }
      int na = check_chain(&t, tail == 1 ? 1 : tail == 0 ? 2 : 1, tail == 0);
      want_desc("convolution 1x32x40x40:48x32x3x3:1x48x40x40");
      if (tail == 2 && (targets_avx2() || na != 1)) assert_int_equal(na, 3);
      tg_free(&t);
    }
}

/* A deconvolution absorbs no post-op (oneDNN 2.6 applies them in a
 * reference loop, 100x the deconvolution itself), and one to fewer than 8
 * channels runs on the plain layout. */
static void test_deconv_rules(void **state) {
  (void)state;
  for (int64_t M = 1; M <= 16; M += 15) {
    tgraph t;
    tg_init(&t, true);
    int64_t xd[] = {1, 6, 5, 7}, wd[] = {M, 6, 2, 2}, bd[] = {M}, cd[] = {1, M, 1, 1};
    int64_t one[] = {1, 1}, lhs[] = {2, 2}, pads[] = {1, 1, 1, 1};
    fsl_value *y = tg_mark(&t, fsl_b_conv(&t.b, tg_input(&t, 4, xd), tg_const(&t, 4, wd), one, one, pads, 1, lhs));
    y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, fsl_b_reshape(&t.b, tg_const(&t, 1, bd), 4, cd)));
    tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
    check_chain(&t, 0, true);
    want_desc("deconvolution");
    want_desc(M < 8 ? " plain" : " reordered");
    tg_free(&t);
  }
}

/* 1x1 convs as matmuls over the plain layout (conv_mm_rule in onednn.c):
 * over 1x1 spatial as x [N, C] w^T, with the per-channel bias and relu
 * absorbed (constant and run-time weights); over >= 128 pixels, batch 1, as
 * w [M, C] x [C, HW], where a per-channel bias is left to the epilogue but
 * scalar operands are absorbed, unless oneDNN runs the direct convolution
 * on nhwc (direct_in_permutation); over 7x7 as a convolution. */
static void test_conv_1x1_as_matmul(void **state) {
  (void)state;
  static const struct {
    int64_t n, c, m, hw;
    bool wconst, bias;
    int absorbed;
    const char *want;
  } cases[] = {
      {2, 12, 10, 1, true, true, 3, "matmul 2x12:12x10:2x10 plain"},
      {2, 12, 10, 1, false, true, 3, "matmul 2x12:12x10:2x10 plain"},
      {1, 8, 6, 12, true, true, 0, "matmul 6x8:8x144:6x144 plain"},
      {1, 8, 6, 12, true, false, 2, "matmul 6x8:8x144:6x144 plain"},
      {1, 8, 6, 7, true, true, 3, "convolution"},
  };
  for (size_t c = 0; c < FSL_ARRAY_LEN(cases); c++) {
    tgraph t;
    tg_init(&t, true);
    int64_t C = cases[c].c, M = cases[c].m, hw = cases[c].hw;
    int64_t xd[] = {cases[c].n, C, hw, hw}, wd[] = {M, C, 1, 1}, bd[] = {M}, cd[] = {1, M, 1, 1};
    int64_t one[] = {1, 1}, nopad[] = {0, 0, 0, 0};
    fsl_value *x = tg_input(&t, 4, xd);
    fsl_value *w = cases[c].wconst ? tg_const(&t, 4, wd) : tg_input(&t, 4, wd);
    fsl_value *y = tg_mark(&t, fsl_b_conv(&t.b, x, w, one, one, nopad, 1, NULL));
    if (cases[c].bias)
      y = tg_mark(&t, fsl_b_binary(&t.b, FSL_OP_add, y, fsl_b_reshape(&t.b, tg_const(&t, 1, bd), 4, cd)));
    y = tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_mul, y, 0.5));
    tg_mark(&t, fsl_b_binary_scalar(&t.b, FSL_OP_max, y, 0.0));
    if (cases[c].hw == 12) {
      /* >= 128 pixels: the plain matmul, or, where oneDNN runs the direct
       * convolution on a permuted layout (nhwc) that layout chaining can
       * keep, the convolution absorbing the whole chain */
      int na = check_chain(&t, 0, false);
      if (strncmp(g_desc, "matmul", 6) == 0) {
        assert_int_equal(na, cases[c].absorbed);
        want_desc(cases[c].want);
      } else {
        assert_int_equal(na, cases[c].bias ? 3 : 2);
        want_desc("convolution");
        want_desc("1x8x12x12:6x8x1x1:1x6x12x12 reordered");
      }
    } else {
      check_chain(&t, cases[c].absorbed, true);
      want_desc(cases[c].want);
    }
    tg_free(&t);
  }
}

/* Non-float32 is refused (the caller falls back to generated code). */
static void test_unsupported(void **state) {
  (void)state;
  tgraph t;
  tg_init(&t, true);
  fsl_value *a = fsl_graph_add_value(t.b.g, NULL), *b = fsl_graph_add_value(t.b.g, NULL);
  int64_t d[] = {3, 3};
  a->dtype = b->dtype = FSL_DT_F64;
  fsl_value_set_shape(a, 2, d);
  fsl_value_set_shape(b, 2, d);
  fsl_value *y = fsl_b_matmul(&t.b, a, b);
  assert_non_null(y);
  fsl_onednn_linear *op = NULL;
  int na = -1;
  assert_int_equal(fsl_onednn_linear_create(y->producer, NULL, 0, 0, &op, &na), FSL_ERR_UNSUPPORTED);
  assert_null(op);
  tg_free(&t);
}

/* ---- throughput ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* sgemm-class throughput of a 1024^3 matmul (reported, sanity-checked only). */
static void test_sgemm_throughput(void **state) {
  (void)state;
  for (int wconst = 0; wconst < 2; wconst++) {
    tgraph t;
    tg_init(&t, true);
    int64_t d[] = {1024, 1024};
    fsl_value *a = tg_input(&t, 2, d);
    fsl_value *w = wconst ? tg_const(&t, 2, d) : tg_input(&t, 2, d);
    fsl_value *y = fsl_b_matmul(&t.b, a, w);
    fsl_onednn_linear *op = NULL;
    int na;
    assert_int_equal(fsl_onednn_linear_create(y->producer, NULL, 0, 0, &op, &na), FSL_OK);
    float *out = malloc(sizeof(float) * 1024 * 1024);
    assert_non_null(out);
    const void *wd = value_data(&t, w);
    assert_int_equal(fsl_onednn_linear_run(op, t.in_data[0], wd, NULL, out), FSL_OK); /* warm up */
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now_s();
      assert_int_equal(fsl_onednn_linear_run(op, t.in_data[0], wd, NULL, out), FSL_OK);
      double dt = now_s() - t0;
      if (dt < best) best = dt;
    }
    /* spot-check one element against a double dot product */
    const float *A = t.in_data[0], *B = wd;
    double ref = 0;
    for (int k = 0; k < 1024; k++) ref += (double)A[5 * 1024 + k] * B[k * 1024 + 7];
    assert_true(fabs(out[5 * 1024 + 7] - ref) <= 1e-3 * (1 + fabs(ref)));
    printf("onednn sgemm 1024^3 (%s weights): %.3f ms, %.1f GFLOP/s\n", wconst ? "constant" : "run-time",
           best * 1e3, 2.0 * 1024 * 1024 * 1024 / best * 1e-9);
    free(out);
    fsl_onednn_linear_free(op);
    tg_free(&t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_2d),          cmocka_unit_test(test_matmul_batched),
      cmocka_unit_test(test_matmul_bias_relu),   cmocka_unit_test(test_matmul_as_conv),
      cmocka_unit_test(test_matmul_runtime_operands),
      cmocka_unit_test(test_epilogue_kinds),     cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_conv_bias_relu),     cmocka_unit_test(test_conv1d_3d),
      cmocka_unit_test(test_conv_lhs_dilation),  cmocka_unit_test(test_unsupported),
      cmocka_unit_test(test_matmul_batch_fold),  cmocka_unit_test(test_conv_residual),
      cmocka_unit_test(test_conv_winograd_shapes),
      cmocka_unit_test(test_deconv_rules),       cmocka_unit_test(test_conv_1x1_as_matmul),
      cmocka_unit_test(test_hardswish),          cmocka_unit_test(test_swish_closed_prefix),
      cmocka_unit_test(test_sgemm_throughput),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
