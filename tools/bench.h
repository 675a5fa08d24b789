/* bench.h — `fissile bench`: every strategy's plan, predicted and measured
 * time (bench.c), as a table and as JSON (bench_json.c). */
#ifndef FSL_TOOLS_BENCH_H
#define FSL_TOOLS_BENCH_H

#include "cli.h"

#include <cjson/cJSON.h>

/* One strategy's results. */
typedef struct bench_row {
  fsl_strategy strategy;
  fsl_rewrite_mode rewrite;  /* the primitive graph's rewrites (fsl_model_set_rewrite) */
  char name[32];         /* the strategy's name, "-norewrite" appended when rewrites are off
                            while the others have them */
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

/** Parses --strategies (or --strategy; default every strategy, and
 *  optimal again without rewrites when rewrites are on) into rows'
 *  strategy, rewrite and name (rows has room for FSL_STRATEGY_COUNT * 4,
 *  the rest of each row is zeroed); a name may end in "-norewrite".  The
 *  count, or -1 for a bad list. */
int bench_strategies(const options *o, bench_row *rows);

/** The backend of --backend, else the build's preferred one (cpu when built). */
const char *bench_backend(const options *o);

/**
 * Measures rows[0..n) (their .strategy set, the rest zero): compiles each
 * strategy with `backend` in a model of its own (rows[0] in m, loaded and
 * bound; the others loaded and bound again from o), then runs them
 * interleaved: o->warmup untimed rounds, then o->repeats timed rounds, each
 * round running every strategy once (starting with a different one each
 * round) on the same inputs: the --input files, fresh random data (seeded
 * o->seed + round) for the rest.  Only fsl_model_run is timed.  Fills each
 * row (times, median, min, mean, p10, p90 in seconds; plan info) and then
 * calls hook (may be NULL) for each measured strategy with its model.  A
 * failing strategy gets its error in its row and the others still run.
 * Returns the first failure's exit code.  The caller frees rows[i].times.
 */
int bench_measure(const options *o, fsl_model *m, const char *backend, bench_row *rows, int n, bench_hook hook,
                  void *ctx);

/** Appends row r to the JSON array `list`: strategy, status, plan numbers, median,
 *  min, mean, p10, p90 and every timed run, in seconds (bench_json.c; the
 *  report's JSON uses it too). */
void bench_json_add_row(cJSON *list, const bench_row *r);

/** Writes the rows to o->json; an exit code. */
int write_bench_json(const options *o, const char *backend, const bench_row *rows, int n);

#endif
