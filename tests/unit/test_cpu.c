/* test_cpu.c — the CPU backend's core (src/backend/cpu): the backend
 * table and what the backend supports, the compile cache of generated
 * objects (compile.c), the checks of an object before it is trusted
 * (objcheck.c) and the progress of a compile.  The kernels it generates
 * are tested in test_cpu_kernels.c, test_cpu_linear.c, test_cpu_layout.c
 * and test_cpu_numerics.c (helpers: cpu_test_util.h). */
#include "cpu_test_util.h"

#include <elf.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/objcheck.h"

/* ---- tests ---- */

/* One table of backends: the names users type are the vtables' names, the
 * whole-graph interpreter "ref" is registered first and is the one that
 * needs no plan, the host device is the CPU backend's, and the users'
 * default is the CPU backend. */
static void test_registry(void **state) {
  (void)state;
  assert_ptr_equal(fsl_backend_find("cpu"), &fsl_backend_cpu);
  assert_ptr_equal(fsl_backend_find("plan-ref"), &fsl_backend_ref);
  const fsl_backend *interp = fsl_backend_find("ref");
  assert_ptr_equal(interp, fsl_backend_at(0));
  assert_true(interp->no_plan);
  assert_false(fsl_backend_cpu.no_plan);
  assert_false(fsl_backend_ref.no_plan);
  assert_null(fsl_backend_find("gpu"));
  assert_ptr_equal(fsl_backend_host(), &fsl_backend_cpu);
  assert_ptr_equal(fsl_backend_best(), &fsl_backend_cpu);
  assert_string_equal(fsl_backend_default(), "cpu");
  const char *const *sum = NULL;
  const char *const *names = fsl_backend_names(&sum);
  assert_string_equal(names[0], "ref");
  int n = 0;
  for (; names[n]; n++) {
    assert_ptr_equal(fsl_backend_find(names[n]), fsl_backend_at(n));
    assert_string_equal(sum[n], fsl_backend_at(n)->summary);
  }
  assert_int_equal(n, fsl_backend_count());
  assert_null(fsl_backend_at(fsl_backend_count()));

  /* supports: a float32, float16 or bfloat16 elementwise kernel is the CPU
   * backend's own (half types stored as such, computed in float); a
   * scatter would fall back to the reference interpreter */
  for (int t = 0; t < 4; t++) {
    fsl_graph *g = fsl_graph_new();
    fsl_builder b = B_INIT(g);
    int64_t d[] = {3, 5}, d1[] = {1, 5}, idx[] = {2, 0, 1, 2, 0};
    const fsl_dtype dts[] = {FSL_DT_F32, FSL_DT_F16, FSL_DT_BF16};
    fsl_value *y;
    if (t < 3) {
      y = fsl_b_unary(&b, FSL_OP_tanh, input_dt(g, dts[t], 2, d));
    } else {
      fsl_value *in[3] = {input_dt(g, FSL_DT_F32, 2, d), fsl_b_const(&b, FSL_DT_I64, 2, d1, idx),
                          input_dt(g, FSL_DT_F32, 2, d1)};
      fsl_attr a = fsl_attr_make_int("axis", 0);
      y = fsl_b_prim(&b, FSL_OP_scatter_elements, in, 3, &a, 1);
    }
    assert_int_equal(b.st, FSL_OK);
    fsl_graph_add_output(g, y);
    int *topo = fsl_graph_topo_index(g);
    fsl_kernel *k = NULL;
    assert_int_equal(fsl_kernel_make(g, topo, g->nodes, g->n_nodes, &k, NULL), FSL_OK);
    assert_non_null(k);
    assert_int_equal(fsl_backend_cpu.supports(g, k), t < 3);
    fsl_kernel_free(k);
    free(topo);
    fsl_graph_free(g);
  }
}

/* fsl_k0(NULL, NULL) of a loaded object. */
static int call_k0(const fsl_cpu_so *so) {
  int (*f)(const void *const *, void *const *);
  void *p = fsl_cpu_so_kernel(so, 0);
  assert_non_null(p);
  memcpy(&f, &p, sizeof p);
  return f(NULL, NULL);
}

/* Into src: a kernel fsl_k0 returning `ret`, its source made unique by the
 * time and the process (a fresh cache entry). */
static void unique_k0(char *src, size_t cap, int ret) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(src, cap, "/* %lld.%ld %ld */ int fsl_k0(const void *const *in, void *const *out) { (void)in; "
           "(void)out; return %d; }\n", (long long)ts.tv_sec, ts.tv_nsec, (long)getpid(), ret);
}

static void test_compile_cache(void **state) {
  (void)state;
  const char *src = "int fsl_k0(const void *const *in, void *const *out) { (void)in; (void)out; return 7; }\n";
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_int_equal(call_k0(&so), 7);
  char path[1024];
  snprintf(path, sizeof path, "%s", so.path);
  fsl_cpu_so_close(&so);
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_true(so.cache_hit);
  assert_string_equal(so.path, path);
  fsl_cpu_so_close(&so);
  /* a failing compile: an error with the compiler's message, no entry */
  const char *bad = "int fsl_k0(void) { return syntax error; }\n";
  assert_int_equal(fsl_cpu_so_load(bad, NULL, &so), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "error"));
  assert_int_equal(access(so.path, F_OK), -1);
}

/* Reads a whole file; *len its size in bytes. */
static unsigned char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static void write_all(const char *path, const unsigned char *b, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

/* An object cut short is never trusted (objcheck.h): not the bytes of a
 * compiled model file, not a cache entry.  The cut that matters is the one
 * GNU ld left under a file-size limit: everything up to the section header
 * table, which dlopen does not read.  A cut-short or corrupt cache entry
 * is rebuilt, and is whole afterwards. */
static void test_object_check(void **state) {
  (void)state;
  char src[200];
  unique_k0(src, sizeof src, 11);
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_false(so.cache_hit);
  char path[1024];
  snprintf(path, sizeof path, "%s", so.path);
  fsl_cpu_so_close(&so);
  size_t len;
  unsigned char *obj = read_all(path, &len);
  assert_int_equal(fsl_cpu_elf_check(obj, len, "test"), FSL_OK);
  assert_int_equal(fsl_cpu_elf_check_file(path), FSL_OK);
  Elf64_Ehdr eh;
  memcpy(&eh, obj, sizeof eh);
  assert_true(eh.e_shoff > 0 && eh.e_shoff < len);
  /* cuts: inside the section header table (ld's), at its start, inside the
   * sections, inside the program headers and the ELF header, nothing */
  const size_t cuts[] = {len - 1, (size_t)eh.e_shoff + 1, (size_t)eh.e_shoff, len / 2, 100, 10, 0};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    assert_int_equal(fsl_cpu_elf_check(obj, cuts[i], "test"), FSL_ERR_RUNTIME);
    assert_non_null(strstr(fsl_last_error(), "cut short"));
    assert_int_equal(fsl_cpu_so_load_object(obj, cuts[i], &so), FSL_ERR_RUNTIME);
    assert_null(so.handle);
  }
  /* header fields: magic, class, machine, a section's size past the end */
  unsigned char *bad = malloc(len);
  assert_non_null(bad);
  const size_t field[] = {1, EI_CLASS, offsetof(Elf64_Ehdr, e_machine)};
  for (size_t i = 0; i < 3; i++) {
    memcpy(bad, obj, len);
    bad[field[i]] ^= 0x5a;
    assert_int_equal(fsl_cpu_elf_check(bad, len, "test"), FSL_ERR_RUNTIME);
    assert_non_null(strstr(fsl_last_error(), "wrong"));
  }
  memcpy(bad, obj, len);
  Elf64_Shdr sh;
  for (unsigned k = 1; k < eh.e_shnum; k++) { /* the first section with file bytes grows past the end */
    memcpy(&sh, bad + eh.e_shoff + k * sizeof sh, sizeof sh);
    if (sh.sh_type == SHT_NOBITS) continue;
    sh.sh_size = len;
    memcpy(bad + eh.e_shoff + k * sizeof sh, &sh, sizeof sh);
    break;
  }
  assert_int_equal(fsl_cpu_elf_check(bad, len, "test"), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "section"));
  free(bad);
  /* the whole bytes load from memory and run */
  assert_int_equal(fsl_cpu_so_load_object(obj, len, &so), FSL_OK);
  assert_int_equal(call_k0(&so), 11);
  fsl_cpu_so_close(&so);
  /* a cache entry cut as ld cut it is not a hit: it is rebuilt, whole */
  write_all(path, obj, (size_t)eh.e_shoff + 1);
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_false(so.cache_hit);
  fsl_cpu_so_close(&so);
  size_t len2;
  unsigned char *again = read_all(path, &len2);
  assert_int_equal(fsl_cpu_elf_check(again, len2, "test"), FSL_OK);
  free(again);
  assert_int_equal(fsl_cpu_so_load(src, NULL, &so), FSL_OK);
  assert_true(so.cache_hit);
  fsl_cpu_so_close(&so);
  free(obj);
}

/* Progress: a compiler run (a cache miss) is reported as task "compile",
 * from its start to its end; a cache hit reports nothing. */
typedef struct progress_log { int n_events, n_finished; char detail[64]; } progress_log;

static void log_progress(const fsl_progress *ev, void *ctx) {
  progress_log *l = ctx;
  assert_string_equal(ev->task, "compile");
  assert_true(ev->elapsed_s >= 0);
  assert_int_equal(ev->total, 1);
  if (l->n_events++ == 0) assert_false(ev->finished);
  if (ev->finished) l->n_finished++;
  snprintf(l->detail, sizeof l->detail, "%s", ev->detail);
}

static void test_compile_progress(void **state) {
  (void)state;
  char src[200];
  unique_k0(src, sizeof src, 0);
  progress_log log = {0};
  fsl_set_progress(log_progress, &log);
  fsl_cpu_so so;
  assert_int_equal(fsl_cpu_so_load(src, "1 test kernel", &so), FSL_OK);
  assert_false(so.cache_hit);
  fsl_cpu_so_close(&so);
  assert_true(log.n_events >= 2);
  assert_int_equal(log.n_finished, 1);
  assert_string_equal(log.detail, "1 test kernel");
  int before = log.n_events;
  assert_int_equal(fsl_cpu_so_load(src, "1 test kernel", &so), FSL_OK);
  assert_true(so.cache_hit);
  fsl_cpu_so_close(&so);
  fsl_set_progress(NULL, NULL);
  assert_int_equal(log.n_events, before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_compile_cache),
      cmocka_unit_test(test_object_check),
      cmocka_unit_test(test_compile_progress),
  };
  return cmocka_run_group_tests(tests, cpu_test_setup, cpu_test_teardown);
}
