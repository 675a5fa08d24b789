/*
 * test_cuda_codegen.c — the CUDA C dialect (src/backend/cuda) through
 * NVRTC, without a GPU: every LOOP and REDUCE kernel (and plain matmul) of
 * the optimal plans of Debian's ONNX node tests, and of the real models
 * when `make models` has fetched them, is generated in the CUDA dialect and
 * compiled by NVRTC to PTX for sm_90 (the H100).  Kernels the dialect
 * refuses (f16/bf16, multi-pass reductions: counted) are not compiled; a
 * kernel NVRTC rejects fails the test with its log.  Running the kernels is
 * the CUDA runtime's job (issue 11).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include "backend/cuda/dialect_cuda.h"
#include "fission/fission.h"
#include "onnx/onnx_import.h"
#include "orchestrate/orchestrate.h"
#include "passes/passes.h"

#define DEBIAN_NODE "/usr/share/libonnx-testdata/data/node"
#define BATCH_KERNELS 400   /* kernels per NVRTC compile */

typedef struct tally {
  fsl_sbuf src;
  int in_src;        /* kernels in src */
  int next_id;
  int compiled, refused, models, skipped;
} tally;

static void flush(tally *t) {
  if (t->in_src == 0) {
    fsl_sbuf_free(&t->src);
    return;
  }
  char *ptx = NULL;
  size_t n = 0;
  fsl_status st = fsl_cuda_compile_ptx(t->src.p, "compute_90", &ptx, &n);
  if (st != FSL_OK) fail_msg("%s", fsl_last_error());
  assert_true(n > 0 && strstr(ptx, ".entry fsl_k") != NULL);
  free(ptx);
  t->compiled += t->in_src;
  t->in_src = 0;
  fsl_sbuf_free(&t->src);
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
    for (int i = 0; i < p.kernels.n; i++) {
      const fsl_kernel *k = p.kernels.k[i];
      if (t->src.len == 0) fsl_codegen_prelude(&fsl_dialect_cuda, &t->src);
      fsl_status st;
      if (k->kind == FSL_KERNEL_LINEAR && k->n_nodes == 1 && k->nodes[0]->op == FSL_OP_matmul) {
        st = fsl_codegen_matmul(&fsl_dialect_cuda, t->next_id, k->nodes[0], &t->src);
      } else if (k->kind == FSL_KERNEL_LOOP || k->kind == FSL_KERNEL_REDUCE) {
        fsl_cg_spec spec = {.g = g, .id = t->next_id, .n_nodes = k->n_nodes, .nodes = k->nodes, .n_in = k->n_in,
                            .in = k->in, .n_out = k->n_out, .out = k->out};
        st = fsl_codegen_kernel(&fsl_dialect_cuda, &spec, &t->src);
      } else {
        continue; /* linear with an epilogue, opaque: not this test's */
      }
      assert_false(t->src.oom);
      if (st == FSL_ERR_UNSUPPORTED) {
        fsl_error_clear();
        t->refused++;
        continue;
      }
      if (st != FSL_OK) fail_msg("%s kernel %d: %s", path, i, fsl_last_error());
      t->next_id++;
      if (++t->in_src == BATCH_KERNELS) flush(t);
    }
    fsl_plan_free(&p);
  }
  free(buf);
  fsl_graph_free(onnx);
  fsl_graph_free(g);
}

/* A small source first: a clear message when NVRTC itself is broken. */
static void test_nvrtc_smoke(void **state) {
  (void)state;
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_cuda, &src);
  fsl_sbuf_puts(&src, "extern \"C\" __global__ void k(float *y) { y[threadIdx.x] = fsl_expf(fsl_maxf(y[0], 1.0f)); }\n");
  char *ptx = NULL;
  size_t n = 0;
  fsl_status st = fsl_cuda_compile_ptx(src.p, "compute_90", &ptx, &n);
  if (st != FSL_OK) fail_msg("%s", fsl_last_error());
  assert_non_null(strstr(ptx, ".entry k"));
  free(ptx);
  /* a source NVRTC rejects: an error with its log, not a crash */
  assert_int_equal(fsl_cuda_compile_ptx("__global__ void k( {", "compute_90", &ptx, &n), FSL_ERR_RUNTIME);
  assert_null(ptx);
  assert_non_null(strstr(fsl_last_error(), "NVRTC"));
  fsl_sbuf_free(&src);
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
  fprintf(stderr, "cuda codegen: %d models planned (%d skipped), %d kernels compiled by NVRTC for compute_90, %d refused\n",
          t.models, t.skipped, t.compiled, t.refused);
  assert_true(t.models > 500);
  assert_true(t.compiled > 10 * t.refused);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvrtc_smoke),
      cmocka_unit_test(test_node_tests_compile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
