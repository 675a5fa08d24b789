/* test_profile.c — measured kernel costs: the SQLite profile cache
 * (src/orchestrate/profcache.c: hit after miss, no partial batch, corrupt
 * file, read-only folder, another device), plans built with a profiler
 * (src/orchestrate/plan.c: measured costs decide the plan, a second build
 * measures nothing, a failure mid-way keeps earlier batches, a broken cache
 * falls back to analytic costs with a warning) and the CPU backend's
 * profiler (src/backend/cpu/profile.c: real kernels timed, plan still
 * computes what the graph computes). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <math.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/calibrate.h"
#include "backend/cpu/profile.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "test_graph.h"
#include "orchestrate/orchestrate.h"
#include "orchestrate/profcache.h"

/* ---- helpers ---- */


/* y = softmax(gelu(x @ W1 + b1) @ W2, axis 1) (erf GELU), x: [4, 16], W1:
 * [16, 32], W2: [32, 8]: linear, loop and reduce kernels. */
static fsl_graph *mlp_graph(void) {
  fsl_graph *g = fsl_graph_new();
  assert_non_null(g);
  fsl_builder b = {.g = g, .fold = true};
  int64_t dx[] = {4, 16}, dw1[] = {16, 32}, db1[] = {32}, dw2[] = {32, 8}, axis = 1;
  fsl_value *x = input(g, "x", 2, dx);
  fsl_value *w1 = const_f32(&b, 2, dw1, 1), *b1 = const_f32(&b, 1, db1, 2), *w2 = const_f32(&b, 2, dw2, 3);
  set_origin(&b, 1, "mm1", "MatMul");
  fsl_value *h = fsl_b_matmul(&b, x, w1);
  set_origin(&b, 2, "bias", "Add");
  h = fsl_b_binary(&b, FSL_OP_add, h, b1);
  set_origin(&b, 3, "gelu", "Gelu");
  fsl_value *t = fsl_b_unary(&b, FSL_OP_erf, fsl_b_binary_scalar(&b, FSL_OP_mul, h, 1.0 / sqrt(2.0)));
  t = fsl_b_binary_scalar(&b, FSL_OP_add, t, 1.0);
  h = fsl_b_binary(&b, FSL_OP_mul, fsl_b_binary_scalar(&b, FSL_OP_mul, h, 0.5), t);
  set_origin(&b, 4, "mm2", "MatMul");
  fsl_value *y = fsl_b_matmul(&b, h, w2);
  set_origin(&b, 5, "softmax", "Softmax");
  fsl_value *m = fsl_b_reduce(&b, FSL_OP_reduce_max, y, &axis, 1, true);
  fsl_value *e = fsl_b_unary(&b, FSL_OP_exp, fsl_b_binary(&b, FSL_OP_sub, y, m));
  fsl_value *s = fsl_b_reduce(&b, FSL_OP_reduce_sum, e, &axis, 1, true);
  y = fsl_b_binary(&b, FSL_OP_div, e, s);
  if (b.st != FSL_OK) fprintf(stderr, "builder: %s\n", fsl_last_error());
  assert_int_equal(b.st, FSL_OK);
  assert_int_equal(fsl_graph_add_output(g, y), FSL_OK);
  assert_int_equal(fsl_graph_verify(g), FSL_OK);
  return g;
}

/* Sets environment variable name to value and returns its old value
 * (malloc'd, NULL when it was unset) for env_restore. */
static char *env_set(const char *name, const char *value) {
  const char *old = getenv(name);
  char *saved = old ? strdup(old) : NULL;
  setenv(name, value, 1);
  return saved;
}

/* Puts back what env_set returned and frees it. */
static void env_restore(const char *name, char *saved) {
  if (saved) setenv(name, saved, 1);
  else unsetenv(name);
  free(saved);
}

/* A fresh folder under /tmp (removed by rm_tree). */
static void temp_dir(char *buf, size_t len) {
  snprintf(buf, len, "/tmp/fsl_test_profile_XXXXXX");
  assert_non_null(mkdtemp(buf));
}

static void rm_tree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Runs fn(arg) with stderr captured into buf (NUL-terminated). */
static void capture_stderr(void (*fn)(void *), void *arg, char *buf, size_t len) {
  char path[] = "/tmp/fsl_test_profile_err_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(fd, 2) >= 0);
  fn(arg);
  fflush(stderr);
  assert_true(dup2(saved, 2) >= 0);
  close(saved);
  ssize_t n = pread(fd, buf, len - 1, 0);
  buf[n > 0 ? n : 0] = 0;
  close(fd);
  unlink(path);
  fputs(buf, stderr); /* still visible in the test log */
}

/* ---- a fake profiler: time = a + b * nodes^2 seconds ---- */

typedef struct fake {
  double a, b;
  int calls, kernels;
  int fail_call;        /* this call (1-based) fails; 0: none */
} fake;

static fsl_status fake_measure(void *ctx, const fsl_graph *g, fsl_kernel *const *ks, int n, double *secs) {
  fake *f = ctx;
  (void)g;
  f->calls++;
  if (f->calls == f->fail_call) return fsl_errorf(FSL_ERR_RUNTIME, "simulated failure in batch %d", f->calls);
  for (int i = 0; i < n; i++) secs[i] = f->a + f->b * ks[i]->n_nodes * ks[i]->n_nodes;
  f->kernels += n;
  return FSL_OK;
}

static void fake_profiler(fsl_profiler *p, fake *f, const char *db, uint64_t device) {
  memset(p, 0, sizeof *p);
  p->measure = fake_measure;
  p->ctx = f;
  p->device = device;
  snprintf(p->device_name, sizeof p->device_name, "fake device %llx", (unsigned long long)device);
  p->batch = 4;
  p->cache_path = db;
}

static void build(const fsl_graph *g, const fsl_profiler *pr, fsl_plan *p) {
  fsl_plan_options opt = {.profiler = pr};
  fsl_status st = fsl_plan_build_opt(g, FSL_STRATEGY_OPTIMAL, NULL, &opt, p);
  if (st != FSL_OK) fprintf(stderr, "plan: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  assert_int_equal(fsl_plan_verify(p), FSL_OK);
}

/* ---- the cache itself ---- */

static void test_cache_hit_after_miss(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  fsl_profcache *pc = NULL;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  assert_string_equal(fsl_profcache_file(pc), db);
  bool found = true;
  double s = 0;
  assert_int_equal(fsl_profcache_get(pc, 7, 0xabcdef0123456789ULL, &found, &s), FSL_OK);
  assert_false(found);
  uint64_t k[3] = {0xabcdef0123456789ULL, 2, 3};
  double t[3] = {1.5e-5, 2.5e-3, NAN};
  assert_int_equal(fsl_profcache_put(pc, 7, "dev seven", 3, k, t), FSL_OK);
  fsl_profcache_close(pc);
  /* a new connection sees the committed batch */
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  assert_int_equal(fsl_profcache_count(pc, 7), 3);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(fsl_profcache_get(pc, 7, k[i], &found, &s), FSL_OK);
    assert_true(found);
    assert_true(s == t[i]);
  }
  assert_int_equal(fsl_profcache_get(pc, 7, 3, &found, &s), FSL_OK);
  assert_true(found);          /* recorded as not measurable */
  assert_true(isnan(s));
  /* another device fingerprint: a miss */
  assert_int_equal(fsl_profcache_get(pc, 8, k[0], &found, &s), FSL_OK);
  assert_false(found);
  assert_int_equal(fsl_profcache_count(pc, 8), 0);
  fsl_profcache_close(pc);
  rm_tree(dir);
}

/* A value the table's CHECK rejects in the middle of a batch rolls the
 * whole batch back; the earlier batch stays. */
static void test_cache_no_partial_batch(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  fsl_profcache *pc = NULL;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  uint64_t k1[2] = {10, 11};
  double t1[2] = {1e-6, 2e-6};
  assert_int_equal(fsl_profcache_put(pc, 1, NULL, 2, k1, t1), FSL_OK);
  uint64_t k2[4] = {20, 21, 22, 23};
  double t2[4] = {1e-6, 2e-6, -1.0, 4e-6};
  fsl_status st = fsl_profcache_put(pc, 1, NULL, 4, k2, t2);
  assert_int_equal(st, FSL_ERR_IO);
  assert_non_null(strstr(fsl_last_error(), db));
  fsl_error_clear();
  assert_int_equal(fsl_profcache_count(pc, 1), 2);
  bool found = true;
  double s;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(fsl_profcache_get(pc, 1, k2[i], &found, &s), FSL_OK);
    assert_false(found);
  }
  assert_int_equal(fsl_profcache_get(pc, 1, 11, &found, &s), FSL_OK);
  assert_true(found && s == 2e-6);
  /* the connection is still usable after the rollback */
  t2[2] = 3e-6;
  assert_int_equal(fsl_profcache_put(pc, 1, NULL, 4, k2, t2), FSL_OK);
  assert_int_equal(fsl_profcache_count(pc, 1), 6);
  fsl_profcache_close(pc);
  rm_tree(dir);
}

/* Plan times (the measured plan choice, api_tune.c): slots round-trip,
 * a NaN slot is not stored, a second put replaces the whole choice, a bad
 * time rolls the transaction back, other devices and choices miss. */
static void test_cache_plan_times(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  fsl_profcache *pc = NULL;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  double got[4];
  bool found = true;
  assert_int_equal(fsl_profcache_get_plans(pc, 5, 99, 4, got, &found), FSL_OK);
  assert_false(found);
  for (int i = 0; i < 4; i++) assert_true(isnan(got[i]));
  double t[4] = {3e-3, NAN, 2e-3, 4e-3};
  assert_int_equal(fsl_profcache_put_plans(pc, 5, "dev five", 99, 4, t), FSL_OK);
  fsl_profcache_close(pc);
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  assert_int_equal(fsl_profcache_get_plans(pc, 5, 99, 4, got, &found), FSL_OK);
  assert_true(found);
  assert_true(got[0] == t[0] && isnan(got[1]) && got[2] == t[2] && got[3] == t[3]);
  /* fewer slots asked: the others are ignored */
  assert_int_equal(fsl_profcache_get_plans(pc, 5, 99, 2, got, &found), FSL_OK);
  assert_true(found && got[0] == t[0] && isnan(got[1]));
  /* another device or choice: a miss */
  assert_int_equal(fsl_profcache_get_plans(pc, 6, 99, 4, got, &found), FSL_OK);
  assert_false(found);
  assert_int_equal(fsl_profcache_get_plans(pc, 5, 98, 4, got, &found), FSL_OK);
  assert_false(found);
  /* a bad time rolls back: the earlier choice stays whole */
  double bad[4] = {1e-3, 1e-3, -1.0, 1e-3};
  assert_int_equal(fsl_profcache_put_plans(pc, 5, NULL, 99, 4, bad), FSL_ERR_IO);
  assert_non_null(strstr(fsl_last_error(), db));
  fsl_error_clear();
  assert_int_equal(fsl_profcache_get_plans(pc, 5, 99, 4, got, &found), FSL_OK);
  assert_true(got[0] == t[0] && isnan(got[1]) && got[2] == t[2] && got[3] == t[3]);
  /* a put replaces the whole choice (no slot of the old one is left) */
  double t2[4] = {NAN, 1e-3, NAN, NAN};
  assert_int_equal(fsl_profcache_put_plans(pc, 5, NULL, 99, 4, t2), FSL_OK);
  assert_int_equal(fsl_profcache_get_plans(pc, 5, 99, 4, got, &found), FSL_OK);
  assert_true(found && isnan(got[0]) && got[1] == 1e-3 && isnan(got[2]) && isnan(got[3]));
  /* plan times are not kernel times */
  assert_int_equal(fsl_profcache_count(pc, 5), 0);
  fsl_profcache_close(pc);
  rm_tree(dir);
}

/* A database of an earlier version (kernel times, no plan_time table)
 * gets the table on a writable open, keeps its kernel times, and still
 * serves them when it cannot be written. */
static void test_cache_earlier_schema(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  sqlite3 *raw = NULL;
  assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw,
                                "CREATE TABLE device(fingerprint TEXT PRIMARY KEY NOT NULL, description TEXT);"
                                "CREATE TABLE kernel_time(device TEXT NOT NULL, kernel TEXT NOT NULL, seconds REAL,"
                                " measured_at INTEGER, PRIMARY KEY(device, kernel)) WITHOUT ROWID;"
                                "INSERT INTO kernel_time VALUES('0000000000000007', '0000000000000002', 0.5, 0);",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(raw);
  /* read-only: the kernel time is served, plan lookups fail (an error) */
  assert_int_equal(chmod(db, 0444), 0);
  fsl_profcache *pc = NULL;
  bool found = false;
  double s = 0, got[2];
  if (geteuid() != 0) {
    assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
    assert_int_equal(fsl_profcache_get(pc, 7, 2, &found, &s), FSL_OK);
    assert_true(found && s == 0.5);
    assert_int_equal(fsl_profcache_get_plans(pc, 7, 1, 2, got, &found), FSL_ERR_IO);
    fsl_error_clear();
    fsl_profcache_close(pc);
  }
  /* writable: the table is added, the kernel time kept */
  assert_int_equal(chmod(db, 0644), 0);
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  assert_int_equal(fsl_profcache_get(pc, 7, 2, &found, &s), FSL_OK);
  assert_true(found && s == 0.5);
  double t[2] = {1e-3, 2e-3};
  assert_int_equal(fsl_profcache_put_plans(pc, 7, NULL, 1, 2, t), FSL_OK);
  assert_int_equal(fsl_profcache_get_plans(pc, 7, 1, 2, got, &found), FSL_OK);
  assert_true(found && got[0] == t[0] && got[1] == t[1]);
  fsl_profcache_close(pc);
  rm_tree(dir);
}

static const char k_garbage[] = "this is not an SQLite database, just some bytes in the cache folder\n";

/* A corrupt file is reported (FSL_ERR_IO naming it) and left untouched. */
static void test_cache_corrupt(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  FILE *f = fopen(db, "w");
  assert_non_null(f);
  for (int i = 0; i < 64; i++) fputs(k_garbage, f);
  fclose(f);
  fsl_profcache *pc = (fsl_profcache *)1;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_ERR_IO);
  assert_null(pc);
  assert_non_null(strstr(fsl_last_error(), db));
  fsl_error_clear();
  f = fopen(db, "r");
  assert_non_null(f);
  char line[256];
  for (int i = 0; i < 64; i++) {
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, k_garbage);
  }
  assert_null(fgets(line, sizeof line, f));
  fclose(f);
  rm_tree(dir);
}

/* A folder where no file can be created: chmod 0555 (as root, which
 * ignores permissions, /proc, which takes no new files). */
static void readonly_db(char *dir, size_t dlen, char *db, size_t len) {
  if (geteuid() != 0) {
    temp_dir(dir, dlen);
    assert_int_equal(chmod(dir, 0555), 0);
    snprintf(db, len, "%s/profile.sqlite", dir);
  } else {
    dir[0] = 0;
    snprintf(db, len, "/proc/self/profile.sqlite");
  }
}

static void test_cache_readonly_folder(void **state) {
  (void)state;
  char dir[64], db[128];
  readonly_db(dir, sizeof dir, db, sizeof db);
  fsl_profcache *pc = NULL;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_ERR_IO);
  assert_null(pc);
  fsl_error_clear();
  if (dir[0]) {
    chmod(dir, 0755);
    rm_tree(dir);
  }
}

/* The default path honours FSL_CACHE_DIR and creates the folder. */
static void test_cache_default_path(void **state) {
  (void)state;
  char dir[64], sub[128], path[256], want[300];
  temp_dir(dir, sizeof dir);
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  char *saved = env_set("FSL_CACHE_DIR", sub);
  assert_int_equal(fsl_profcache_default_path(path, sizeof path), FSL_OK);
  snprintf(want, sizeof want, "%s/profile.sqlite", sub);
  assert_string_equal(path, want);
  struct stat sb;
  assert_int_equal(stat(sub, &sb), 0);
  assert_true(S_ISDIR(sb.st_mode));
  env_restore("FSL_CACHE_DIR", saved);
  rm_tree(dir);
}

/* ---- plans with a profiler ---- */

/* Measured costs decide the plan: when a kernel's time grows with the
 * square of its size, every node runs alone; when every kernel costs the
 * same, the plan fuses.  A second build reads every time from the cache. */
static void test_plan_measured_and_cached(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  fsl_graph *g = mlp_graph();
  fake f = {.a = 0, .b = 1e-4};
  fsl_profiler pr;
  fake_profiler(&pr, &f, db, 1);
  fsl_plan p;
  build(g, &pr, &p);
  assert_true(p.profiled);
  assert_true(f.calls >= 2);        /* batches of 4 */
  assert_true(p.n_cost_measured == f.kernels && f.kernels > 0);
  assert_int_equal(p.n_cost_cached, 0);
  assert_int_equal(p.n_plan_measured, p.kernels.n);
  assert_int_equal(p.kernels.n, g->n_nodes);
  double sum = 0;
  for (int i = 0; i < p.kernels.n; i++) {
    assert_true(fabs(p.kernels.k[i]->cost_s - 1e-4) < 1e-12); /* measured, not the roofline */
    sum += p.kernels.k[i]->cost_s;
  }
  assert_true(fabs(sum - p.predicted_s) < 1e-12);
  int measured = p.n_cost_measured, n_kernels = p.kernels.n;
  fsl_plan_free(&p);

  /* second build: nothing measured, same plan */
  f.calls = f.kernels = 0;
  build(g, &pr, &p);
  assert_int_equal(f.calls, 0);
  assert_int_equal(p.n_cost_measured, 0);
  assert_int_equal(p.n_cost_cached, measured);
  assert_int_equal(p.kernels.n, n_kernels);
  fsl_plan_free(&p);

  /* another device: a miss again, and its times make the plan fuse */
  fake f2 = {.a = 1e-3, .b = 0};
  fsl_profiler pr2;
  fake_profiler(&pr2, &f2, db, 2);
  build(g, &pr2, &p);
  assert_int_equal(p.n_cost_cached, 0);
  assert_int_equal(p.n_cost_measured, measured);
  assert_true(p.kernels.n < g->n_nodes);
  fsl_plan_free(&p);
  /* and without a profiler the roofline is used */
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, NULL, &p), FSL_OK);
  assert_false(p.profiled);
  assert_int_equal(p.n_cost_measured + p.n_cost_cached + p.n_plan_measured, 0);
  fsl_plan_free(&p);
  fsl_graph_free(g);
  rm_tree(dir);
}

typedef struct build_args {
  const fsl_graph *g;
  const fsl_profiler *pr;
  fsl_plan *p;
} build_args;

static void build_cb(void *arg) {
  build_args *a = arg;
  build(a->g, a->pr, a->p);
}

/* The second batch fails: a warning, the first batch stays cached, nothing
 * of the failed batch is, the plan is built; the next build measures the
 * rest. */
static void test_plan_failure_mid_way(void **state) {
  (void)state;
  char dir[64], db[128], err[4096];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  fsl_graph *g = mlp_graph();
  fake f = {.a = 1e-5, .b = 1e-6, .fail_call = 2};
  fsl_profiler pr;
  fake_profiler(&pr, &f, db, 3);
  fsl_plan p;
  build_args a = {g, &pr, &p};
  capture_stderr(build_cb, &a, err, sizeof err);
  assert_non_null(strstr(err, "warning"));
  assert_non_null(strstr(err, "simulated failure in batch 2"));
  assert_int_equal(f.calls, 2);     /* no batch after the failure */
  assert_int_equal(p.n_cost_measured, 4);
  assert_true(p.n_cost_analytic > 0);
  int total = p.n_cost_measured + p.n_cost_analytic;
  fsl_plan_free(&p);
  fsl_profcache *pc = NULL;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  assert_int_equal(fsl_profcache_count(pc, 3), 4);
  fsl_profcache_close(pc);

  f.calls = f.kernels = 0;
  f.fail_call = 0;
  build(g, &pr, &p);
  assert_int_equal(p.n_cost_cached, 4);
  assert_int_equal(p.n_cost_cached + p.n_cost_measured + p.n_cost_analytic, total);
  assert_int_equal(p.n_plan_measured, p.kernels.n);
  fsl_plan_free(&p);
  fsl_graph_free(g);
  rm_tree(dir);
}

/* A corrupt database or a read-only folder: a warning naming the file, no
 * measuring, and the analytic plan. */
static void check_fallback(const char *db) {
  fsl_graph *g = mlp_graph();
  fake f = {.a = 0, .b = 1e-4};
  fsl_profiler pr;
  fake_profiler(&pr, &f, db, 4);
  fsl_plan p, ref;
  build_args a = {g, &pr, &p};
  char err[4096];
  capture_stderr(build_cb, &a, err, sizeof err);
  assert_non_null(strstr(err, "warning"));
  assert_non_null(strstr(err, db));
  assert_non_null(strstr(err, "analytic"));
  assert_int_equal(f.calls, 0);
  assert_false(p.profiled);
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, NULL, &ref), FSL_OK);
  assert_int_equal(p.kernels.n, ref.kernels.n);
  assert_true(p.predicted_s == ref.predicted_s);
  fsl_plan_free(&p);
  fsl_plan_free(&ref);
  fsl_graph_free(g);
}

static void test_plan_corrupt_cache(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  FILE *f = fopen(db, "w");
  assert_non_null(f);
  for (int i = 0; i < 64; i++) fputs(k_garbage, f);
  fclose(f);
  check_fallback(db);
  rm_tree(dir);
}

static void test_plan_readonly_cache(void **state) {
  (void)state;
  char dir[64], db[128];
  readonly_db(dir, sizeof dir, db, sizeof db);
  check_fallback(db);
  if (dir[0]) {
    chmod(dir, 0755);
    rm_tree(dir);
  }
}

/* ---- the CPU backend's profiler ---- */

static void test_cpu_fingerprint(void **state) {
  (void)state;
  fsl_profiler a, b, c;
  fsl_cpu_profiler_init(&a, 1);
  fsl_cpu_profiler_init(&b, 2);
  fsl_cpu_profiler_init(&c, 1);
  assert_ptr_equal(a.measure, fsl_cpu_profile_measure);
  assert_true(a.device != b.device);
  assert_true(a.device == c.device);
  assert_non_null(strstr(a.device_name, "1 threads"));
  assert_non_null(strstr(b.device_name, "2 threads"));
  assert_non_null(strstr(a.device_name, "oneDNN"));
}

/* Real kernels: every candidate of the graph is timed (positive, finite);
 * the measured optimal plan computes what the graph computes; a second
 * build measures nothing. */
static void test_cpu_measure(void **state) {
  (void)state;
  char dir[64], db[128];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  char *saved = env_set("FSL_CACHE_DIR", dir);  /* the shared objects too */
  fsl_graph *g = mlp_graph();
  fsl_kernel_set cands = {.g = g};
  fsl_candidate_options copt = {.max_nodes = 24, .max_per_seed = 64};
  assert_int_equal(fsl_candidates(g, &copt, &cands), FSL_OK);
  double *secs = calloc((size_t)cands.n, sizeof *secs);
  assert_non_null(secs);
  fsl_status st = fsl_cpu_profile_measure(NULL, g, cands.k, cands.n, secs);
  if (st != FSL_OK) fprintf(stderr, "measure: %s\n", fsl_last_error());
  assert_int_equal(st, FSL_OK);
  int kinds[FSL_KERNEL_KIND_COUNT] = {0};
  for (int i = 0; i < cands.n; i++) {
    if (!(secs[i] > 0 && secs[i] < 1.0))
      fprintf(stderr, "candidate %d (kind %d, %d nodes): %g s\n", i, cands.k[i]->kind, cands.k[i]->n_nodes, secs[i]);
    assert_true(secs[i] > 0 && secs[i] < 1.0);
    kinds[cands.k[i]->kind]++;
  }
  assert_true(kinds[FSL_KERNEL_LOOP] > 0 && kinds[FSL_KERNEL_REDUCE] > 0 && kinds[FSL_KERNEL_LINEAR] > 0);
  free(secs);
  fsl_kernel_set_free(&cands);

  fsl_profiler pr;
  fsl_cpu_profiler_init(&pr, 0);
  pr.cache_path = db;
  fsl_plan p;
  build(g, &pr, &p);
  assert_true(p.profiled);
  assert_true(p.n_cost_measured > 0);
  assert_int_equal(p.n_cost_analytic, 0);
  assert_int_equal(p.n_plan_measured, p.kernels.n);
  assert_true(p.profile_s > 0);
  /* the plan runs on the CPU backend and matches the reference interpreter */
  int64_t n = fsl_value_numel(g->inputs[0]);
  float *x = malloc(sizeof(float) * (size_t)n);
  assert_non_null(x);
  fill(x, n, 42);
  const void *in[1] = {x};
  void *want[1] = {NULL}, *got[1] = {NULL}, *exe = NULL;
  assert_int_equal(fsl_ref_run(g, in, want), FSL_OK);
  assert_int_equal(fsl_backend_cpu.compile(&p, NULL, &exe), FSL_OK);
  assert_int_equal(fsl_backend_cpu.run(exe, in, got), FSL_OK);
  int64_t m = fsl_value_numel(g->outputs[0]);
  double num = 0, den = 0;
  for (int64_t i = 0; i < m; i++) {
    double d = (double)((float *)got[0])[i] - (double)((float *)want[0])[i];
    num += d * d;
    den += (double)((float *)want[0])[i] * (double)((float *)want[0])[i];
  }
  assert_true(sqrt(num / (den > 0 ? den : 1)) <= 1e-4);
  fsl_backend_cpu.free_exe(exe);
  free(x);
  free(want[0]);
  free(got[0]);
  int measured = p.n_cost_measured;
  fsl_plan_free(&p);
  build(g, &pr, &p);
  assert_int_equal(p.n_cost_measured, 0);
  assert_int_equal(p.n_cost_cached, measured);
  fsl_plan_free(&p);
  fsl_graph_free(g);
  env_restore("FSL_CACHE_DIR", saved);
  rm_tree(dir);
}

/* A compiler that fails everything: measure reports it, and a plan built
 * with the profiler warns, stays analytic and caches nothing. */
static void test_cpu_broken_compiler(void **state) {
  (void)state;
  char dir[64], db[128], err[4096];
  temp_dir(dir, sizeof dir);
  snprintf(db, sizeof db, "%s/profile.sqlite", dir);
  char *saved = env_set("FSL_CACHE_DIR", dir), *saved_cc = env_set("FSL_CC", "false");
  fsl_graph *g = mlp_graph();
  fsl_kernel_set cands = {.g = g};
  fsl_candidate_options copt = {.max_nodes = 24, .max_per_seed = 64};
  assert_int_equal(fsl_candidates(g, &copt, &cands), FSL_OK);
  double *secs = calloc((size_t)cands.n, sizeof *secs);
  assert_non_null(secs);
  assert_int_equal(fsl_cpu_profile_measure(NULL, g, cands.k, cands.n, secs), FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "compiler"));
  fsl_error_clear();
  free(secs);
  fsl_kernel_set_free(&cands);
  fsl_profiler pr;
  fsl_cpu_profiler_init(&pr, 1);
  pr.cache_path = db;
  fsl_plan p, ref;
  build_args a = {g, &pr, &p};
  capture_stderr(build_cb, &a, err, sizeof err);
  assert_non_null(strstr(err, "warning"));
  assert_non_null(strstr(err, "analytic"));
  assert_true(p.profiled);
  assert_int_equal(p.n_cost_measured + p.n_cost_cached + p.n_plan_measured, 0);
  assert_int_equal(fsl_plan_build(g, FSL_STRATEGY_OPTIMAL, NULL, &ref), FSL_OK);
  assert_true(p.predicted_s == ref.predicted_s);
  fsl_plan_free(&p);
  fsl_plan_free(&ref);
  fsl_profcache *pc = NULL;
  assert_int_equal(fsl_profcache_open(db, &pc), FSL_OK);
  assert_int_equal(fsl_profcache_count(pc, pr.device), 0);
  fsl_profcache_close(pc);
  fsl_graph_free(g);
  env_restore("FSL_CACHE_DIR", saved);
  env_restore("FSL_CC", saved_cc);
  rm_tree(dir);
}

/* A private cache home for a real CPU calibration: XDG_CACHE_HOME a fresh
 * folder and FSL_CACHE_DIR unset, so the record and the kernel cache both
 * land under it. */
typedef struct xdg_home {
  char dir[32];
  char *saved, *saved_dir;
} xdg_home;

static void xdg_home_open(xdg_home *h) {
  snprintf(h->dir, sizeof h->dir, "/tmp/fsl_test_plan_XXXXXX");
  assert_non_null(mkdtemp(h->dir));
  h->saved = env_set("XDG_CACHE_HOME", h->dir);
  h->saved_dir = getenv("FSL_CACHE_DIR") ? strdup(getenv("FSL_CACHE_DIR")) : NULL;
  unsetenv("FSL_CACHE_DIR");
}

/* Removes the folder and puts both variables back. */
static void xdg_home_close(xdg_home *h) {
  rm_tree(h->dir);
  env_restore("FSL_CACHE_DIR", h->saved_dir);
  env_restore("XDG_CACHE_HOME", h->saved);
}

/* Calibration measures once, writes the cache atomically, then reads it;
 * its elementwise loop is compiled like a generated kernel (into the kernel
 * cache), and a C compiler that fails leaves the library's own build of it. */
static void test_calibrate(void **state) {
  (void)state;
  xdg_home h;
  xdg_home_open(&h); /* the kernel cache under XDG_CACHE_HOME too */
  const char *dir = h.dir;
  fsl_device a, b;
  assert_int_equal(fsl_cpu_calibrate(&a, 1, false), FSL_OK);
  assert_true(a.bandwidth > 0 && a.peak_flops > 0 && a.elem_flops > 0 && a.launch_s > 0);
  assert_non_null(strstr(a.name, "1 thread"));
  assert_true(a.busy >= 0 && a.busy <= 1 && a.measurements == 1);
  assert_int_equal(fsl_cpu_calibrate(&b, 1, false), FSL_OK);
  if (a.busy <= FSL_DEVICE_BUSY_MAX) { /* from the cache */
    assert_true(fabs(a.bandwidth - b.bandwidth) <= 1e-6 * a.bandwidth);
    assert_true(fabs(a.peak_flops - b.peak_flops) <= 1e-6 * a.peak_flops);
    assert_true(fabs(a.elem_flops - b.elem_flops) <= 1e-6 * a.elem_flops);
    assert_true(fabs(a.launch_s - b.launch_s) <= 1e-6 * a.launch_s);
    assert_int_equal(b.measurements, 1);
  } else { /* measured beside other work (a parallel test run): measured again, the better numbers kept */
    assert_true(b.bandwidth >= a.bandwidth * (1 - 1e-6) && b.peak_flops >= a.peak_flops * (1 - 1e-6));
    assert_true(b.elem_flops >= a.elem_flops * (1 - 1e-6) && b.launch_s <= a.launch_s * (1 + 1e-6));
    assert_int_equal(b.measurements, 2);
  }
  assert_string_equal(a.name, b.name);
  /* one cache file, no temporary left behind, and the compiled loop in the
   * kernel cache; clean up */
  char sub[256];
  snprintf(sub, sizeof sub, "%s/fissile", dir);
  DIR *dd = opendir(sub);
  assert_non_null(dd);
  int files = 0, kernels = 0;
  struct dirent *de;
  while ((de = readdir(dd))) {
    if (de->d_name[0] == '.') continue;
    if (!strcmp(de->d_name, "kernels")) { /* the compiled loop: one object */
      char kdir[600];
      snprintf(kdir, sizeof kdir, "%s/%s", sub, de->d_name);
      DIR *kd = opendir(kdir);
      assert_non_null(kd);
      for (struct dirent *ke; (ke = readdir(kd));) {
        size_t len = strlen(ke->d_name);
        kernels += len > 3 && !strcmp(ke->d_name + len - 3, ".so");
      }
      closedir(kd);
      continue;
    }
    files += strstr(de->d_name, ".lock") == NULL; /* the lock file stays */
    assert_non_null(strstr(de->d_name, "device-"));
    assert_null(strstr(de->d_name, ".tmp"));
  }
  closedir(dd);
  assert_int_equal(files, 1);
  assert_int_equal(kernels, 1);
  /* a compiler that fails: calibration still succeeds (forced, no cache) */
  char *saved_cc = env_set("FSL_CC", "false");
  fsl_device c;
  assert_int_equal(fsl_cpu_calibrate(&c, 1, true), FSL_OK);
  assert_true(c.elem_flops > 0);
  env_restore("FSL_CC", saved_cc);
  xdg_home_close(&h);
}

/* ---- fsl_device_calibrate: one measurement per machine at a time ---- */

typedef struct fake_cal {
  const char *log; /* one byte appended per measurement */
  double secs;     /* how long a measurement takes */
  double bandwidth;
  bool fail;
  double busy, launch_s; /* launch_s 0: not measured */
} fake_cal;

static fsl_status fake_device_measure(void *ctx, fsl_device *m) {
  const fake_cal *f = ctx;
  FILE *l = fopen(f->log, "a");
  if (l) {
    fputc('m', l);
    fclose(l);
  }
  struct timespec ts = {(time_t)f->secs, (long)((f->secs - (double)(time_t)f->secs) * 1e9)};
  nanosleep(&ts, NULL);
  if (f->fail) return fsl_errorf(FSL_ERR_RUNTIME, "fake device went away");
  snprintf(m->name, sizeof m->name, "fake device");
  m->bandwidth = f->bandwidth;
  m->busy = f->busy;
  if (f->launch_s > 0) m->launch_s = f->launch_s;
  return FSL_OK;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A cache folder of its own for fsl_device_calibrate: the measurement log,
 * the record `name` and its lock file in it. */
typedef struct cal_dir {
  char dir[32], log[256], rec[256], lock[256];
  char *saved;
} cal_dir;

static void cal_dir_open(cal_dir *c, const char *name) {
  snprintf(c->dir, sizeof c->dir, "/tmp/fsl_test_cal_XXXXXX");
  assert_non_null(mkdtemp(c->dir));
  c->saved = env_set("FSL_CACHE_DIR", c->dir);
  snprintf(c->log, sizeof c->log, "%s/measured.log", c->dir);
  snprintf(c->rec, sizeof c->rec, "%s/%s", c->dir, name);
  snprintf(c->lock, sizeof c->lock, "%s/%s.lock", c->dir, name);
}

/* Removes what cal_dir_open named; the folder must be empty then. */
static void cal_dir_close(cal_dir *c) {
  unlink(c->log);
  unlink(c->rec);
  unlink(c->lock);
  assert_int_equal(rmdir(c->dir), 0); /* nothing else was left behind */
  env_restore("FSL_CACHE_DIR", c->saved);
}

static void test_device_calibrate_once(void **state) {
  (void)state;
  cal_dir c;
  cal_dir_open(&c, "device-fake.txt");
  const char *log = c.log, *rec = c.rec;
  fake_cal f = {log, 0.3, 3e9, false, 0, 0};

  /* two processes start together: one measures, the other reads its record */
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      fsl_device d;
      fsl_status st = fsl_device_calibrate("device-fake.txt", "fake-v1", false, "fake", fake_device_measure, &f, &d);
      _exit(st == FSL_OK && d.bandwidth == 3e9 && !strcmp(d.name, "fake device") ? 0 : 1);
    }
  }
  for (int i = 0; i < 2; i++) {
    int ws = 0;
    assert_int_equal(waitpid(pids[i], &ws, 0), pids[i]);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  }
  assert_int_equal(file_size(log), 1);

  fsl_device d, dflt;
  fsl_device_default(&dflt);
  /* the record is read: no measurement; numbers not measured keep the default */
  assert_int_equal(fsl_device_calibrate("device-fake.txt", "fake-v1", false, "fake", fake_device_measure, &f, &d), FSL_OK);
  assert_int_equal(file_size(log), 1);
  assert_true(d.bandwidth == 3e9 && d.launch_s == dflt.launch_s);
  /* force, and a new version, measure again */
  f.secs = 0;
  f.bandwidth = 4e9;
  assert_int_equal(fsl_device_calibrate("device-fake.txt", "fake-v1", true, "fake", fake_device_measure, &f, &d), FSL_OK);
  assert_int_equal(file_size(log), 2);
  assert_true(d.bandwidth == 4e9);
  assert_int_equal(fsl_device_calibrate("device-fake.txt", "fake-v2", false, "fake", fake_device_measure, &f, &d), FSL_OK);
  assert_int_equal(file_size(log), 3);

  /* a failed or non-positive measurement is an error, leaves the default
   * device and the earlier record */
  f.fail = true;
  assert_int_equal(fsl_device_calibrate("device-fake.txt", "fake-v3", true, "fake", fake_device_measure, &f, &d),
                   FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "fake device went away"));
  assert_string_equal(d.name, dflt.name);
  f.fail = false;
  f.bandwidth = -1;
  assert_int_equal(fsl_device_calibrate("device-fake.txt", "fake-v3", true, "fake", fake_device_measure, &f, &d),
                   FSL_ERR_RUNTIME);
  assert_non_null(strstr(fsl_last_error(), "fake calibration gave a non-positive number"));
  assert_true(d.bandwidth == dflt.bandwidth);
  fsl_error_clear();
  assert_true(fsl_device_read(rec, "fake-v2", &d) && d.bandwidth == 4e9);
  assert_int_equal(fsl_device_calibrate(NULL, "v", false, "fake", fake_device_measure, &f, &d), FSL_ERR_ARG);
  fsl_error_clear();
  cal_dir_close(&c);
}

/* A calibration measured on a busy machine is provisional: later calls
 * measure again and keep the better numbers, until one measures a quiet
 * machine or the record holds FSL_DEVICE_MEASUREMENTS measurements. */
static void test_device_calibrate_busy(void **state) {
  (void)state;
  cal_dir c;
  cal_dir_open(&c, "device-busy.txt");
  const char *log = c.log, *rec = c.rec;
  fake_cal f = {log, 0, 2e9, false, 0.6, 4e-6};
  fsl_device d, r;
#define CAL(v) assert_int_equal(fsl_device_calibrate("device-busy.txt", v, false, "fake", fake_device_measure, &f, &d), FSL_OK)
  CAL("busy-v1");
  assert_int_equal(file_size(log), 1);
  assert_true(d.bandwidth == 2e9 && d.busy == 0.6 && d.measurements == 1);
  assert_true(fsl_device_read(rec, "busy-v1", &r) && r.busy == 0.6 && r.measurements == 1);
  /* measured again: the higher bandwidth and the lower launch time, whichever run had them */
  f.bandwidth = 3e9, f.launch_s = 5e-6;
  CAL("busy-v1");
  assert_int_equal(file_size(log), 2);
  assert_true(d.bandwidth == 3e9 && d.launch_s == 4e-6 && d.measurements == 2);
  /* a failed second look keeps the record, and counts */
  f.fail = true;
  CAL("busy-v1");
  assert_int_equal(file_size(log), 3);
  assert_true(d.bandwidth == 3e9 && d.measurements == 3);
  f.fail = false, f.bandwidth = 1e9;
  CAL("busy-v1");
  assert_int_equal(file_size(log), 4);
  assert_true(d.bandwidth == 3e9 && d.measurements == FSL_DEVICE_MEASUREMENTS);
  /* enough looks: the record is final, however busy the machine was */
  CAL("busy-v1");
  assert_int_equal(file_size(log), 4);
  assert_true(fsl_device_read(rec, "busy-v1", &r) && r.measurements == FSL_DEVICE_MEASUREMENTS);
  /* a quiet look ends the provisional record at once */
  CAL("busy-v2");
  f.busy = 0, f.bandwidth = 5e9;
  CAL("busy-v2");
  assert_true(d.bandwidth == 5e9 && d.busy == 0 && d.measurements == 2);
  CAL("busy-v2");
  assert_int_equal(file_size(log), 6);
  /* a record without the keys (an older writer) is one final measurement */
  FILE *w = fopen(rec, "w");
  assert_non_null(w);
  fprintf(w, "# busy-v3\nname=old\nbandwidth=1e9\npeak_flops=1e9\nelem_flops=1e9\nlaunch_s=1e-6\n");
  fclose(w);
  CAL("busy-v3");
  assert_int_equal(file_size(log), 6);
  assert_true(d.bandwidth == 1e9 && d.busy == 0 && d.measurements == 1);
#undef CAL
  cal_dir_close(&c);
}

/* fsl_cpu_busy_share: other work's share of the calibration's CPUs */
static void test_cpu_busy_share(void **state) {
  (void)state;
  assert_true(fsl_cpu_busy_share(1, 2, 2, 2, 2) == 0);        /* all the busy time was ours */
  assert_true(fsl_cpu_busy_share(1, 2, 1, 2, 2) == 0.5);      /* a build on one of two CPUs */
  assert_true(fsl_cpu_busy_share(2, 2, 1, 2, 1) == 0);        /* ... on the CPU one thread leaves free */
  assert_true(fsl_cpu_busy_share(1, 3.5, 1, 4, 2) == 0.25);   /* 2.5 CPUs busy elsewhere, 2 of them free */
  assert_true(fsl_cpu_busy_share(1, 9, 0, 2, 2) == 1);        /* clamped */
  assert_true(fsl_cpu_busy_share(0, 2, 1, 2, 2) == 0);        /* no window */
  assert_true(fsl_cpu_busy_share(1, 2, 1, 0, 2) == 0);
}

/* The CPU calibration beside processes that keep every CPU busy says so. */
static void test_cpu_calibrate_beside_load(void **state) {
  (void)state;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1 || ncpu > 8) skip(); /* the spinners below would not fill a larger machine cheaply */
  xdg_home h;
  xdg_home_open(&h);
  pid_t spin[8];
  long n = 0;
  for (; n < ncpu; n++) {
    if ((spin[n] = fork()) < 0) break;
    if (spin[n] == 0) {
      volatile unsigned long x = 0;
      for (;;) x++;
    }
  }
  fsl_device d;
  fsl_status st = n == ncpu ? fsl_cpu_calibrate(&d, (int)ncpu, true) : FSL_OK;
  for (long i = 0; i < n; i++) { /* every spinner goes, even when a fork failed */
    kill(spin[i], SIGKILL);
    waitpid(spin[i], NULL, 0);
  }
  assert_int_equal(n, ncpu);
  assert_int_equal(st, FSL_OK);
  /* ncpu spinners against ncpu calibration threads: about half the CPUs */
  assert_true(d.busy > FSL_DEVICE_BUSY_MAX);
  xdg_home_close(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calibrate),
      cmocka_unit_test(test_device_calibrate_once),
      cmocka_unit_test(test_device_calibrate_busy),
      cmocka_unit_test(test_cpu_busy_share),
      cmocka_unit_test(test_cpu_calibrate_beside_load),
      cmocka_unit_test(test_cache_hit_after_miss),
      cmocka_unit_test(test_cache_no_partial_batch),
      cmocka_unit_test(test_cache_plan_times),
      cmocka_unit_test(test_cache_earlier_schema),
      cmocka_unit_test(test_cache_corrupt),
      cmocka_unit_test(test_cache_readonly_folder),
      cmocka_unit_test(test_cache_default_path),
      cmocka_unit_test(test_plan_measured_and_cached),
      cmocka_unit_test(test_plan_failure_mid_way),
      cmocka_unit_test(test_plan_corrupt_cache),
      cmocka_unit_test(test_plan_readonly_cache),
      cmocka_unit_test(test_cpu_fingerprint),
      cmocka_unit_test(test_cpu_measure),
      cmocka_unit_test(test_cpu_broken_compiler),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
