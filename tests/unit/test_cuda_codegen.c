/*
 * test_cuda_codegen.c — the CUDA C of plans (src/backend/cuda/emit.h)
 * through NVRTC, without a GPU: every kernel of the optimal plans of
 * Debian's ONNX node tests, and of the real models when `make models` has
 * fetched them, is generated in the CUDA dialect (LOOP, REDUCE, and LINEAR
 * as prologue + matmul/conv + epilogue) and compiled by NVRTC to CUBINs
 * for sm_90 (H100) and sm_80 (A100) with no warning and no register
 * spills; ptxas's resource report is checked on kernels whose resources
 * are known.  Kernels the
 * dialect refuses (f16/bf16, multi-pass reductions: counted) are not
 * compiled; a kernel NVRTC rejects or warns about fails the test with its
 * log.  Running the kernels is the CUDA runtime's job (issue 11).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include "backend/cuda/dialect_cuda.h"
#include "backend/cuda/emit.h"
#include "fission/fission.h"
#include "onnx/onnx_import.h"
#include "orchestrate/orchestrate.h"
#include "passes/passes.h"

#define DEBIAN_NODE "/usr/share/libonnx-testdata/data/node"
#define BATCH_KERNELS 400   /* kernels per NVRTC compile */

static const char *const k_archs[] = {"sm_90", "sm_80"};

typedef struct tally {
  fsl_cuda_emitter e;  /* functions not compiled yet */
  int compiled, refused, models, skipped, kernels;
} tally;

/* Compiles what e holds for every arch: no error, no warning, and ptxas
 * reports every generated function. */
static void flush(tally *t) {
  for (size_t a = 0; t->e.n_fn > 0 && a < FSL_ARRAY_LEN(k_archs); a++) {
    fsl_cuda_build b;
    fsl_status st = fsl_cuda_compile(t->e.src.p, k_archs[a], &b);
    if (st != FSL_OK) fail_msg("%s", fsl_last_error());
    assert_true(b.cubin_bytes > 4 && !memcmp(b.cubin, "\177ELF", 4));
    for (int i = 0; i < t->e.n_fn; i++) {
      char name[32];
      snprintf(name, sizeof name, "fsl_k%d", t->e.fn[i].id);
      const fsl_cuda_usage *u = fsl_cuda_build_find(&b, name);
      if (!u || u->registers <= 0 || u->const_bytes <= 0) fail_msg("%s: no resource report for %s", k_archs[a], name);
      /* loops in a thread unroll 4 times at most (dialect_cuda.c): nothing spills */
      if (u->spill_store_bytes != 0) fail_msg("%s: %s spills %lld bytes", k_archs[a], name, (long long)u->spill_store_bytes);
    }
    fsl_cuda_build_free(&b);
  }
  t->compiled += t->e.n_fn;
  t->refused += t->e.n_refused;
  t->kernels += t->e.n_kernels;
  fsl_cuda_emitter_free(&t->e);
}

/* Plans model `path` (optimal, default device) and adds its kernels; a
 * model the front end cannot take with static shapes is skipped. */
static void add_model(tally *t, const char *path) {
  void *buf = NULL;
  size_t len = 0;
  fsl_graph *onnx = NULL, *g = NULL;
  if (fsl_read_file(path, (size_t)1 << 30, &buf, &len) != FSL_OK || fsl_onnx_import(buf, len, NULL, &onnx) != FSL_OK ||
      fsl_fission(onnx, &g) != FSL_OK || fsl_pass_cse(g) != FSL_OK || fsl_pass_dce(g) != FSL_OK ||
      fsl_graph_verify(g) != FSL_OK) {
    fsl_error_clear();
    t->skipped++;
    free(buf);
    fsl_graph_free(onnx);
    fsl_graph_free(g);
    return;
  }
  fsl_device dev;
  fsl_device_default(&dev);
  fsl_plan p;
  if (fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, &dev, &p) != FSL_OK) {
    fsl_error_clear();
    t->skipped++;
  } else {
    t->models++;
    fsl_status st = fsl_cuda_emit_plan(&t->e, &p);
    if (st != FSL_OK) fail_msg("%s: %s", path, fsl_last_error());
    if (t->e.n_fn >= BATCH_KERNELS) flush(t);
    fsl_plan_free(&p);
  }
  free(buf);
  fsl_graph_free(onnx);
  fsl_graph_free(g);
}

/* A small source first: a clear message when NVRTC itself is broken;
 * then the errors: a rejected source, a warning, a virtual arch. */
static void test_nvrtc_smoke(void **state) {
  (void)state;
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_cuda, &src);
  fsl_sbuf_puts(&src, "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = fsl_expf(fsl_maxf(y[0], 1.0f)); }\n");
  fsl_cuda_build b;
  for (size_t a = 0; a < FSL_ARRAY_LEN(k_archs); a++) {
    if (fsl_cuda_compile(src.p, k_archs[a], &b) != FSL_OK) fail_msg("%s", fsl_last_error());
    assert_int_equal(b.n, 1);
    assert_non_null(fsl_cuda_build_find(&b, "k"));
    assert_null(fsl_cuda_build_find(&b, "fsl_k0"));
    fsl_cuda_build_free(&b);
  }
  fsl_sbuf_free(&src);
  /* a source NVRTC rejects: an error with its log, not a crash */
  assert_int_equal(fsl_cuda_compile("__global__ void k( {", "sm_90", &b), FSL_ERR_RUNTIME);
  assert_null(b.cubin);
  assert_non_null(strstr(fsl_last_error(), "NVRTC (sm_90) rejected"));
  /* a warning (a missing return) is an error too, with the log */
  assert_int_equal(fsl_cuda_compile("__device__ int f(int x) { if (x) return 1; }\n"
                                    "extern \"C\" __global__ void k(int *y) { y[0] = f(y[1]); }", "sm_80", &b),
                   FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "warnings are errors"));
  assert_non_null(strstr(fsl_last_error(), "missing return"));
  fsl_cuda_build_free(&b);
  /* only real architectures: a CUBIN needs ptxas */
  assert_int_equal(fsl_cuda_compile("", "compute_90", &b), FSL_ERR_ARG);
  assert_int_equal(fsl_cuda_compile("", "sm_90;rm -rf", &b), FSL_ERR_ARG);
  fsl_error_clear();
}

/* ptxas's report, read per kernel: behaviour, not exact numbers. */
static void test_resources(void **state) {
  (void)state;
  const char *src =
      "extern \"C\" __global__ void plain(const float *x, float *y) { int i = blockIdx.x * blockDim.x + threadIdx.x; "
      "y[i] = x[i] * 2.0f; }\n"
      /* a large array indexed at run time lives in local memory (the stack frame) */
      "extern \"C\" __global__ void local(const float *x, float *y, int n) { float a[1024]; "
      "for (int i = 0; i < 1024; i++) a[i] = x[i * n]; y[threadIdx.x] = a[n & 1023] + a[(n * 7) & 1023]; }\n"
      "extern \"C\" __global__ void shared(float *y) { __shared__ float s[256]; s[threadIdx.x] = y[threadIdx.x]; "
      "__syncthreads(); y[threadIdx.x] = s[255 - threadIdx.x]; }\n";
  for (size_t a = 0; a < FSL_ARRAY_LEN(k_archs); a++) {
    fsl_cuda_build b;
    if (fsl_cuda_compile(src, k_archs[a], &b) != FSL_OK) fail_msg("%s", fsl_last_error());
    assert_int_equal(b.n, 3);
    const fsl_cuda_usage *p = fsl_cuda_build_find(&b, "plain"), *l = fsl_cuda_build_find(&b, "local"),
                         *s = fsl_cuda_build_find(&b, "shared");
    assert_true(p && l && s);
    assert_true(p->registers > 0 && p->registers < 64);
    assert_int_equal(p->stack_bytes, 0);
    assert_int_equal(p->spill_store_bytes, 0);
    assert_int_equal(p->shared_bytes, 0);
    assert_true(p->const_bytes >= 16); /* two pointer parameters, at least */
    assert_true(l->stack_bytes >= 4096);
    assert_true(l->spill_store_bytes >= 0 && l->spill_load_bytes >= 0);
    assert_true(s->shared_bytes >= 1024);
    assert_true(s->barriers >= 1);
    fsl_cuda_build_free(&b);
  }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_node_tests_compile(void **state) {
  (void)state;
  DIR *d = opendir(DEBIAN_NODE);
  if (!d) skip();
  char **names = NULL;
  int n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "test_", 5)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 1024;
      names = realloc(names, sizeof *names * (size_t)cap);
      assert_non_null(names);
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  tally t = {0};
  for (int i = 0; i < n; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", DEBIAN_NODE, names[i]);
    add_model(&t, path);
    free(names[i]);
  }
  free(names);
  /* the real models, when fetched (make models) */
  const char *models[] = {"minilm_l3", "resnet18", "mobilenet_v3_small", "segformer_b0", "yolox_nano",
                          "efficientvit_b1", "transformer_encoder", "style_transfer_small"};
  for (size_t i = 0; i < FSL_ARRAY_LEN(models); i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/models/%s.onnx", FSL_SOURCE_DIR, models[i]);
    struct stat st;
    if (stat(path, &st) == 0) add_model(&t, path);
  }
  flush(&t);
  fprintf(stderr,
          "cuda codegen: %d models planned (%d skipped), %d plan kernels: %d functions compiled by NVRTC for sm_90 and "
          "sm_80, %d kernels refused\n",
          t.models, t.skipped, t.kernels, t.compiled, t.refused);
  assert_true(t.models > 500);
  assert_true(t.compiled > 10 * t.refused);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvrtc_smoke),
      cmocka_unit_test(test_resources),
      cmocka_unit_test(test_node_tests_compile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
