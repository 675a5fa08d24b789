/* bench.h — `fissile bench`: every strategy's plan, predicted and measured
 * time (bench.c), as a table and as JSON (bench_json.c). */
#ifndef FSL_TOOLS_BENCH_H
#define FSL_TOOLS_BENCH_H

#include "cli.h"

/* One strategy's results. */
typedef struct bench_row {
  fsl_strategy strategy;
  int rc;                /* EXIT_OK when measured */
  char error[512];
  fsl_plan_info info;
  bool have_info;
  double compile_s;      /* fsl_model_compile: fission + plan + backend */
  double *times;         /* seconds per timed run */
  int n_times;
  double median_s, min_s, mean_s;
  double p10_s, p90_s;   /* 10th and 90th percentile of the timed runs (the spread) */
} bench_row;

/** Called by bench_measure after a strategy was measured, while m still
 *  holds that strategy's plan; returns an exit code (not EXIT_OK: the
 *  strategy counts as failed, row->error should say why). */
typedef int (*bench_hook)(void *ctx, fsl_model *m, bench_row *row);

/** `fissile bench`: runs the strategies, prints the table, writes --json;
 * returns the first failure's exit code. */
int cmd_bench(options *o);

/** Parses --strategies (or --strategy; default every strategy) into list
 *  (room for FSL_STRATEGY_COUNT * 4); the count, or -1 for a bad list. */
int bench_strategies(const options *o, fsl_strategy *list);

/** The backend of --backend, else the build's preferred one (cpu when built). */
const char *bench_backend(const options *o);

/**
 * Measures rows[0..n) (their .strategy set, the rest zero) one strategy
 * after the other on m (loaded and bound): compile with `backend`,
 * o->warmup untimed runs, then o->repeats timed runs of fsl_model_run on
 * fresh random inputs (seeded o->seed, o->seed + 1, ...); fills each row
 * (times, median, min, mean, p10, p90 in seconds; plan info) and calls
 * hook (may be NULL) after each measured strategy.  A failing strategy
 * gets its error in its row and the others still run.  Returns the first
 * failure's exit code.  The caller frees rows[i].times.
 */
int bench_measure(const options *o, fsl_model *m, const char *backend, bench_row *rows, int n, bench_hook hook,
                  void *ctx);

/** Writes the rows to o->json; an exit code. */
int write_bench_json(const options *o, const char *backend, const bench_row *rows, int n);

#endif
