/* report.h — `fissile report`: every strategy measured (bench.c's
 * machinery), the plan's kernels, histograms and the plan graph gathered
 * (report.c), rendered as one self-contained HTML page (report_html.c)
 * and, with --json, as JSON (report_json.c). */
#ifndef FSL_TOOLS_REPORT_H
#define FSL_TOOLS_REPORT_H

#include "bench.h"

/** One op of a histogram (fsl_model_op_histogram), strings owned. */
typedef struct report_op {
  char *op, *kind;
  int count;
} report_op;

typedef struct report_hist {
  report_op *ops;  /* in the order the library gives them */
  int n, cap;
  int total;
  bool ok;         /* false: not available (e.g. compile failed) */
} report_hist;

/** One kernel of the broken-down plan. */
typedef struct report_kernel {
  fsl_kernel_info info;   /* kind_name is static; the rest plain numbers */
  double time_s;          /* measured now (fsl_model_time_kernels), NaN when not */
  int n_origins;
  char **origin_name, **origin_op;  /* the ONNX nodes, owned */
} report_kernel;

/** The peer's latency (--peer FILE.json). */
typedef struct report_peer {
  bool have;
  char name[128];
  double median_s, p10_s, p90_s, min_s;  /* NaN when not given (median_s always is) */
} report_peer;

/** Everything the page shows. */
typedef struct report_data {
  const options *o;
  const char *backend;
  char version[64];        /* fissile's version (git revision at configure time) */
  char date[64];           /* when the measurement ran (UTC) */
  char threads[32];        /* "2" or "default (N CPUs)" */
  bench_row rows[FSL_STRATEGY_COUNT * 4];
  int n_rows;
  report_hist onnx_hist, prim_hist;
  /* the per-kernel breakdown: of the optimal plan, else of the last
   * strategy measured (breakdown_strategy says which; -1: none) */
  int breakdown_strategy;
  report_kernel *kernels;
  int n_kernels;
  bool kernels_timed;      /* time_s measured now; else the plan's costs (cost_measured says which) */
  char kernels_note[512];  /* why not timed, when not */
  /* the plan graph of that strategy */
  char *plan_svg;          /* the <svg> element from Graphviz, NULL when not drawn */
  char plan_note[512];     /* why not drawn, when not */
  report_peer peer;
} report_data;

/** `fissile report`: measures, writes the page to o->plan_out (-o) and
 *  the numbers to o->json; an exit code. */
int cmd_report(options *o);
/** The help text of `fissile report` (fissile.c's pieces passed in). */
void report_usage(FILE *f, const char *bind_help, const char *backends, const char *exit_codes);

/** Writes the page for d to f (report_html.c). */
void report_write_html(FILE *f, const report_data *d);
/** The JSON document of the page's numbers, as malloc'd text; NULL when
 *  out of memory (report_json.c). */
char *report_json_text(const report_data *d);

/** Writes path atomically (fsl_write_file_atomic, src/core/core.h: a
 *  temporary file beside it and a rename, so that a failure leaves no
 *  half-written file); writer(f, ctx) writes the content and returns 0 or
 *  an errno value.  Prints the error naming path; returns an exit code. */
int report_write_file(const char *path, int (*writer)(FILE *f, const void *ctx), const void *ctx);

#endif
