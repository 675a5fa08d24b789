/* bench.c — `fissile bench`: compiles the model with each strategy, times
 * fsl_model_run on fresh random inputs, prints a table (and, with --json,
 * writes the numbers: bench_json.c). */
#include "bench.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of sorted[0..n) (n >= 1), interpolated linearly between
 * order statistics (numpy's default, "linear"). */
static double quantile(const double *sorted, int n, double q) {
  double pos = q * (n - 1);
  int i = (int)pos;
  if (i >= n - 1) return sorted[n - 1];
  return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

static int bench_error(bench_row *row, fsl_status st) {
  const char *msg = st == FSL_ERR_NOMEM ? "out of memory" : fsl_last_error();
  snprintf(row->error, sizeof row->error, "%s", msg && *msg ? msg : fsl_status_name(st));
  fprintf(stderr, "fissile: bench: %s: error: %s\n", row->name, row->error);
  row->rc = exit_code(st);
  if (row->rc == EXIT_USAGE) row->rc = EXIT_RUNTIME;
  return row->rc;
}

/* One timed run of m: the given inputs (--input, by name) and fresh random
 * data seeded by `seed` for the others; *secs is the time of fsl_model_run
 * alone. */
static fsl_status bench_run_once(fsl_model *m, const fsl_tensor *given, int n_given, uint64_t seed, double *secs) {
  int n_in = fsl_model_num_inputs(m), n_out = fsl_model_num_outputs(m);
  fsl_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
  bool *owned = calloc((size_t)n_in + 1, sizeof *owned);
  fsl_tensor *out = calloc((size_t)n_out + 1, sizeof *out);
  fsl_status st = FSL_OK;
  if (!in || !out || !owned) {
    st = FSL_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_in && st == FSL_OK; i++) {
    st = fsl_model_input_info(m, i, &in[i]);
    const fsl_tensor *g = NULL;
    for (int k = 0; k < n_given && st == FSL_OK && !g; k++)
      if (!strcmp(given[k].name, in[i].name)) g = &given[k];
    if (g) in[i] = *g;
    else if (st == FSL_OK && (st = fsl_model_random_input(m, i, seed, &in[i])) == FSL_OK) owned[i] = true;
  }
  if (st != FSL_OK) goto done;
  double t0 = fsl_now_s();
  st = fsl_model_run(m, in, n_in, out, n_out);
  *secs = fsl_now_s() - t0;
done:
  for (int i = 0; in && owned && i < n_in; i++)
    if (owned[i]) fsl_tensor_free(&in[i]);
  for (int i = 0; out && i < n_out; i++) fsl_tensor_free(&out[i]);
  free(in);
  free(owned);
  free(out);
  return st;
}

/* Compiles m with row->strategy and `backend`; fills the row's plan info. */
static int bench_compile(const options *o, fsl_model *m, const char *backend, bench_row *row) {
  fsl_status st = fsl_model_set_strategy(m, (int)row->strategy);
  if (st == FSL_OK) st = fsl_model_set_rewrite(m, row->rewrite);
  if (st == FSL_OK) st = fsl_model_set_backend(m, backend);
  if (st == FSL_OK) st = fsl_model_set_profile(m, o->profile);
  if (st == FSL_OK) st = fsl_model_set_autotune(m, o->autotune);
  if (st != FSL_OK) return bench_error(row, st);
  double t0 = fsl_now_s();
  st = fsl_model_compile(m);
  row->compile_s = fsl_now_s() - t0;
  if (st != FSL_OK) return bench_error(row, st);
  if ((st = fsl_model_plan_info(m, &row->info)) != FSL_OK) return bench_error(row, st);
  row->have_info = true;
  row->times = calloc((size_t)o->repeats + 1, sizeof *row->times);
  if (!row->times) return bench_error(row, FSL_ERR_NOMEM);
  row->rc = EXIT_OK;
  return EXIT_OK;
}

/* Median, min, mean and the 10th/90th percentiles of the row's times. */
static int bench_stats(bench_row *row) {
  int n = row->n_times;
  double *sorted = malloc(sizeof *sorted * (size_t)(n > 0 ? n : 1));
  if (!sorted) return bench_error(row, FSL_ERR_NOMEM);
  memcpy(sorted, row->times, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  row->median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  row->min_s = sorted[0];
  row->p10_s = quantile(sorted, n, 0.10);
  row->p90_s = quantile(sorted, n, 0.90);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += sorted[i];
  row->mean_s = sum / n;
  free(sorted);
  return EXIT_OK;
}

static void print_bench_table(const options *o, const char *backend, const bench_row *rows, int n) {
  const char *device = "";
  for (int i = 0; i < n; i++)
    if (rows[i].have_info) device = rows[i].info.device;
  printf("model: %s\n", o->model);
  char th[32];
  if (o->threads > 0) snprintf(th, sizeof th, "%d", o->threads);
  else snprintf(th, sizeof th, "default");
  printf("backend: %s, threads: %s, %d timed rounds after %d warm-up rounds, strategies interleaved (the same "
         "inputs for every strategy in a round: %s)\n", backend, th, o->repeats, o->warmup,
         o->n_inputs ? "the --input files, fresh random data for the rest" : "fresh random data each round");
  printf("device: %s\n", device);
  printf("%-17s %8s %20s %7s %8s %13s %11s %11s %10s %8s %9s  %s\n", "strategy", "kernels", "loop/red/lin/opq", "recomp",
         "fallback", "predicted ms", "median ms", "min ms", "arena MiB", "orch s", "compile s", "status");
  for (int i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    const fsl_plan_info *pi = &r->info;
    char kinds[64] = "-", kern[16] = "-", rec[16] = "-", pred[32] = "-", med[32] = "-", mn[32] = "-", mem[32] = "-",
         orch[32] = "-", comp[32] = "-", fb[16] = "-";
    if (r->have_info) {
      snprintf(kern, sizeof kern, "%d", pi->n_kernels);
      snprintf(fb, sizeof fb, "%d", pi->n_fallback);
      snprintf(kinds, sizeof kinds, "%d/%d/%d/%d", pi->n_by_kind[0], pi->n_by_kind[1], pi->n_by_kind[2], pi->n_by_kind[3]);
      snprintf(rec, sizeof rec, "%d", pi->n_recomputed);
      snprintf(pred, sizeof pred, "%.4f", pi->predicted_s * 1e3);
      snprintf(mem, sizeof mem, "%.2f", mib(pi->peak_bytes));
      snprintf(orch, sizeof orch, "%.3f", pi->orchestrate_s);
      snprintf(comp, sizeof comp, "%.3f", r->compile_s);
    }
    if (r->rc == EXIT_OK) {
      snprintf(med, sizeof med, "%.4f", r->median_s * 1e3);
      snprintf(mn, sizeof mn, "%.4f", r->min_s * 1e3);
    }
    printf("%-17s %8s %20s %7s %8s %13s %11s %11s %10s %8s %9s  %s%s%.120s\n", r->name, kern,
           kinds, rec, fb, pred, med, mn, mem, orch, comp, r->rc == EXIT_OK ? "ok" : "error",
           r->rc == EXIT_OK ? "" : ": ", r->rc == EXIT_OK ? "" : r->error);
  }
  for (int i = 0; i < n; i++)
    if (rows[i].have_info && rows[i].info.n_fallback)
      printf("fallback %s: %d kernels through the reference interpreter, first %s\n", rows[i].name,
             rows[i].info.n_fallback, rows[i].info.fallback_why);
  for (int i = 0; i < n; i++)
    if (rows[i].have_info && rows[i].info.tuned) {
      printf("%s ", rows[i].name);
      print_autotune(&rows[i].info);
    }
  for (int i = 0; o->profile && i < n; i++) {
    char costs[320];
    if (!rows[i].have_info) continue;
    cost_source(&rows[i].info, costs, sizeof costs);
    printf("costs %s: %s\n", rows[i].name, costs);
  }
}

static void set_row(bench_row *r, fsl_strategy s, fsl_rewrite_mode mode, bool named) {
  memset(r, 0, sizeof *r);
  r->strategy = s;
  r->rewrite = mode;
  snprintf(r->name, sizeof r->name, "%s%s", fsl_strategy_name(s), named ? "-norewrite" : "");
}

int bench_strategies(const options *o, bench_row *rows) {
  fsl_rewrite_mode mode = o->rewrite >= 0 ? (fsl_rewrite_mode)o->rewrite : FSL_REWRITE_RULES;
  if (!o->strategies) {
    if (o->strategy >= 0) {
      set_row(&rows[0], (fsl_strategy)o->strategy, mode, false);
      return 1;
    }
    int n = 0;
    for (int s = 0; s < FSL_STRATEGY_COUNT; s++) set_row(&rows[n++], (fsl_strategy)s, mode, false);
    /* the contribution of the rewrites, told apart from fission's */
    if (mode != FSL_REWRITE_OFF) set_row(&rows[n++], FSL_STRATEGY_OPTIMAL, FSL_REWRITE_OFF, true);
    return n;
  }
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", o->strategies);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    fsl_strategy s;
    char *suffix = strstr(tok, "-norewrite");
    bool off = suffix && !suffix[strlen("-norewrite")];
    if (off) *suffix = 0;
    if (n >= FSL_STRATEGY_COUNT * 4 || fsl_strategy_from_name(tok, &s) != FSL_OK) return -1;
    set_row(&rows[n++], s, off ? FSL_REWRITE_OFF : mode, off);
  }
  return n > 0 ? n : -1;
}

const char *bench_backend(const options *o) {
  return o->backend ? o->backend : fsl_backend_default();
}

/* Frees the --input tensors (load_input_files) and their array. */
static void free_given(fsl_tensor *given, int n) {
  for (int k = 0; given && k < n; k++) fsl_tensor_free(&given[k]);
  free(given);
}

/* A second model for another strategy: loaded and bound like m. */
static int load_copy(const options *o, const fsl_tensor *given, int n_given, fsl_model **out) {
  int rc = load_model(o, out);
  if (rc == EXIT_OK) rc = bind_options(o, *out);
  for (int k = 0; k < n_given && rc == EXIT_OK; k++) {
    fsl_status st = fsl_model_bind_shape(*out, given[k].name, given[k].rank, given[k].dims);
    if (st != FSL_OK) rc = exit_code(st);
  }
  return rc;
}

/* Whether a strategy compiled and has not failed a run. */
static bool runnable(const bench_row *row) { return row->rc == EXIT_OK && row->have_info; }

static bool any_runnable(const bench_row *rows, int n) {
  for (int i = 0; i < n; i++)
    if (runnable(&rows[i])) return true;
  return false;
}

int bench_measure(const options *o, fsl_model *m, const char *backend, bench_row *rows, int n, bench_hook hook,
                  void *ctx) {
  fsl_model **models = calloc((size_t)n + 1, sizeof *models);
  fsl_tensor *given = NULL;
  int first_rc = models ? load_input_files(o, m, &given) : exit_code(FSL_ERR_NOMEM);
  if (first_rc != EXIT_OK) {
    free_given(given, o->n_inputs);
    free(models);
    return first_rc;
  }
  /* every strategy compiled first, each in a model of its own */
  double t0 = fsl_now_s();
  for (int i = 0; i < n; i++) {
    cli_progress(o->cmd, "strategies compiled", i, n, fsl_now_s() - t0, false);
    int r = EXIT_OK;
    if (i == 0) models[i] = m;
    else if ((r = load_copy(o, given, o->n_inputs, &models[i])) != EXIT_OK) bench_error(&rows[i], FSL_ERR_RUNTIME);
    if (r == EXIT_OK) r = bench_compile(o, models[i], backend, &rows[i]);
    if (r != EXIT_OK && first_rc == EXIT_OK) first_rc = r;
  }
  cli_progress(o->cmd, "strategies compiled", n, n, fsl_now_s() - t0, true);
  /* then interleaved: each round runs every strategy once on the same
   * inputs, starting with a different strategy each round, while any
   * strategy is left that compiled and has not failed */
  int rounds = o->warmup + o->repeats, r = 0;
  t0 = fsl_now_s();
  for (; r < rounds && any_runnable(rows, n); r++) {
    cli_progress(o->cmd, "rounds of runs", r, rounds, fsl_now_s() - t0, false);
    for (int j = 0; j < n; j++) {
      bench_row *row = &rows[(j + r) % n];
      if (!runnable(row)) continue;
      double secs = 0;
      fsl_status st = bench_run_once(models[(j + r) % n], given, o->n_inputs, o->seed + (uint64_t)r, &secs);
      if (st != FSL_OK) {
        int e = bench_error(row, st);
        if (first_rc == EXIT_OK) first_rc = e;
      } else if (r >= o->warmup) {
        row->times[row->n_times++] = secs;
      }
    }
  }
  if (r > 0) cli_progress(o->cmd, "rounds of runs", r, rounds, fsl_now_s() - t0, true);
  for (int i = 0; i < n; i++) {
    if (!runnable(&rows[i])) continue;
    int rc = bench_stats(&rows[i]);
    if (rc == EXIT_OK && hook) rc = hook(ctx, models[i], &rows[i]);
    if (rc != EXIT_OK && first_rc == EXIT_OK) first_rc = rc;
  }
  for (int i = 1; i < n; i++) fsl_model_free(models[i]);
  free_given(given, o->n_inputs);
  free(models);
  return first_rc;
}

int cmd_bench(options *o) {
  bench_row rows[FSL_STRATEGY_COUNT * 4];
  int n = bench_strategies(o, rows);
  if (n < 0) return usage_error("--strategies expects a comma-separated list of unfused, opfuse, greedy, optimal; got '%s'",
                                o->strategies);
  const char *backend = bench_backend(o);
  if (o->threads > 0) fsl_set_num_threads(o->threads);
  fsl_model *m = NULL;
  int rc = load_model(o, &m);
  if (rc == EXIT_OK) rc = bind_options(o, m);
  if (rc != EXIT_OK) {
    fsl_model_free(m);
    return rc;
  }
  int first_rc = bench_measure(o, m, backend, rows, n, NULL, NULL);
  print_bench_table(o, backend, rows, n);
  if (o->json) {
    int r = write_bench_json(o, backend, rows, n);
    if (r != EXIT_OK && first_rc == EXIT_OK) first_rc = r;
  }
  for (int i = 0; i < n; i++) free(rows[i].times);
  fsl_model_free(m);
  return first_rc;
}
