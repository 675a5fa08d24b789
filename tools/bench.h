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
} bench_row;

/** `fissile bench`: runs the strategies, prints the table, writes --json;
 * returns the first failure's exit code. */
int cmd_bench(options *o);

/** Writes the rows to o->json; an exit code. */
int write_bench_json(const options *o, const char *backend, const bench_row *rows, int n);

#endif
