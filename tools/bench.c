/* bench.c — `fissile bench`: compiles the model with each strategy, times
 * fsl_model_run on fresh random inputs, prints a table (and, with --json,
 * writes the numbers: bench_json.c). */
#include "bench.h"

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
  fprintf(stderr, "fissile: bench: %s: error: %s\n", fsl_strategy_name(row->strategy), row->error);
  row->rc = exit_code(st);
  if (row->rc == EXIT_USAGE) row->rc = EXIT_RUNTIME;
  return row->rc;
}

/* One timed run with fresh random inputs (seeded by `seed`); *secs is the
 * time of fsl_model_run alone. */
static fsl_status bench_run_once(fsl_model *m, uint64_t seed, double *secs) {
  int n_in = fsl_model_num_inputs(m), n_out = fsl_model_num_outputs(m);
  fsl_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
  fsl_tensor *out = calloc((size_t)n_out + 1, sizeof *out);
  fsl_status st = FSL_OK;
  if (!in || !out) {
    st = FSL_ERR_NOMEM;
    goto done;
  }
  for (int i = 0; i < n_in && st == FSL_OK; i++) {
    st = fsl_model_input_info(m, i, &in[i]);
    if (st == FSL_OK && !fill_random(m, &in[i], seed, i)) st = FSL_ERR_NOMEM;
  }
  if (st != FSL_OK) goto done;
  double t0 = now_s();
  st = fsl_model_run(m, in, n_in, out, n_out);
  *secs = now_s() - t0;
done:
  for (int i = 0; in && i < n_in; i++) fsl_tensor_free(&in[i]);
  for (int i = 0; out && i < n_out; i++) fsl_tensor_free(&out[i]);
  free(in);
  free(out);
  return st;
}

static int bench_strategy(const options *o, fsl_model *m, const char *backend, bench_row *row) {
  fsl_status st = fsl_model_set_strategy(m, (int)row->strategy);
  if (st == FSL_OK) st = fsl_model_set_backend(m, backend);
  if (st == FSL_OK) st = fsl_model_set_profile(m, o->profile);
  if (st != FSL_OK) return bench_error(row, st);
  double t0 = now_s();
  st = fsl_model_compile(m);
  row->compile_s = now_s() - t0;
  if (st != FSL_OK) return bench_error(row, st);
  if ((st = fsl_model_plan_info(m, &row->info)) != FSL_OK) return bench_error(row, st);
  row->have_info = true;
  row->times = calloc((size_t)o->repeats + 1, sizeof *row->times);
  if (!row->times) return bench_error(row, FSL_ERR_NOMEM);
  uint64_t seed = o->seed;
  for (int r = 0; r < o->warmup + o->repeats; r++) {
    double secs = 0;
    st = bench_run_once(m, seed++, &secs);
    if (st != FSL_OK) return bench_error(row, st);
    if (r >= o->warmup) row->times[row->n_times++] = secs;
  }
  double *sorted = malloc(sizeof *sorted * (size_t)row->n_times);
  if (!sorted) return bench_error(row, FSL_ERR_NOMEM);
  memcpy(sorted, row->times, sizeof *sorted * (size_t)row->n_times);
  qsort(sorted, (size_t)row->n_times, sizeof *sorted, cmp_double);
  int n = row->n_times;
  row->median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  row->min_s = sorted[0];
  row->p10_s = quantile(sorted, n, 0.10);
  row->p90_s = quantile(sorted, n, 0.90);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += sorted[i];
  row->mean_s = sum / n;
  free(sorted);
  row->rc = EXIT_OK;
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
  printf("backend: %s, threads: %s, %d timed runs after %d warm-up runs (fresh random inputs each)\n", backend, th,
         o->repeats, o->warmup);
  printf("device: %s\n", device);
  printf("%-9s %8s %20s %7s %8s %13s %11s %11s %10s %8s %9s  %s\n", "strategy", "kernels", "loop/red/lin/opq", "recomp",
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
    printf("%-9s %8s %20s %7s %8s %13s %11s %11s %10s %8s %9s  %s%s%.120s\n", fsl_strategy_name(r->strategy), kern,
           kinds, rec, fb, pred, med, mn, mem, orch, comp, r->rc == EXIT_OK ? "ok" : "error",
           r->rc == EXIT_OK ? "" : ": ", r->rc == EXIT_OK ? "" : r->error);
  }
  for (int i = 0; i < n; i++)
    if (rows[i].have_info && rows[i].info.n_fallback)
      printf("fallback %s: %d kernels through the reference interpreter, first %s\n", fsl_strategy_name(rows[i].strategy),
             rows[i].info.n_fallback, rows[i].info.fallback_why);
  for (int i = 0; o->profile && i < n; i++) {
    char costs[320];
    if (!rows[i].have_info) continue;
    cost_source(&rows[i].info, costs, sizeof costs);
    printf("costs %s: %s\n", fsl_strategy_name(rows[i].strategy), costs);
  }
}

int bench_strategies(const options *o, fsl_strategy *list) {
  if (!o->strategies) {
    if (o->strategy >= 0) {
      list[0] = (fsl_strategy)o->strategy;
      return 1;
    }
    for (int s = 0; s < FSL_STRATEGY_COUNT; s++) list[s] = (fsl_strategy)s;
    return FSL_STRATEGY_COUNT;
  }
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", o->strategies);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    fsl_strategy s;
    if (n >= FSL_STRATEGY_COUNT * 4 || fsl_strategy_from_name(tok, &s) != FSL_OK) return -1;
    list[n++] = s;
  }
  return n > 0 ? n : -1;
}

const char *bench_backend(const options *o) {
  return o->backend ? o->backend : fsl_backend_default();
}

int bench_measure(const options *o, fsl_model *m, const char *backend, bench_row *rows, int n, bench_hook hook,
                  void *ctx) {
  int first_rc = EXIT_OK;
  for (int i = 0; i < n; i++) {
    fprintf(stderr, "fissile: %s: %s ...\n", o->cmd, fsl_strategy_name(rows[i].strategy));
    int r = bench_strategy(o, m, backend, &rows[i]);
    if (r == EXIT_OK && hook) r = hook(ctx, m, &rows[i]);
    if (r != EXIT_OK && first_rc == EXIT_OK) first_rc = r;
  }
  return first_rc;
}

int cmd_bench(options *o) {
  fsl_strategy list[FSL_STRATEGY_COUNT * 4];
  int n = bench_strategies(o, list);
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
  bench_row rows[FSL_STRATEGY_COUNT * 4];
  memset(rows, 0, sizeof rows);
  for (int i = 0; i < n; i++) rows[i].strategy = list[i];
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
