/* bench_json.c — `fissile bench --json FILE`: the table's numbers and every
 * timed run as JSON (read by bench/bench.py). */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* Writes s as a JSON string literal. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, double v, bool have) {
  if (have && isfinite(v)) fprintf(f, "%.9g", v);
  else fputs("null", f);
}

int write_bench_json(const options *o, const char *backend, const bench_row *rows, int n) {
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "fissile: error: cannot write '%s': %s\n", o->json, strerror(errno));
    return EXIT_MODEL;
  }
  const char *device = "";
  int prims = -1;
  for (int i = 0; i < n; i++)
    if (rows[i].have_info) {
      device = rows[i].info.device;
      prims = rows[i].info.n_primitives;
    }
  fprintf(f, "{\n  \"model\": ");
  json_str(f, o->model);
  fprintf(f, ",\n  \"backend\": ");
  json_str(f, backend);
  fprintf(f, ",\n  \"threads\": %d,\n  \"repeats\": %d,\n  \"warmup\": %d,\n  \"seed\": %" PRIu64 ",\n  \"device\": ",
          o->threads, o->repeats, o->warmup, o->seed);
  json_str(f, device);
  fprintf(f, ",\n  \"primitives\": %d,\n  \"strategies\": [", prims);
  for (int i = 0; i < n; i++) {
    const bench_row *r = &rows[i];
    const fsl_plan_info *pi = &r->info;
    bool ok = r->rc == EXIT_OK;
    fprintf(f, "%s\n    {\"strategy\": ", i ? "," : "");
    json_str(f, fsl_strategy_name(r->strategy));
    fprintf(f, ", \"status\": \"%s\", \"error\": ", ok ? "ok" : "error");
    json_str(f, r->error);
    if (r->have_info) {
      fprintf(f, ",\n     \"kernels\": %d, \"by_kind\": {", pi->n_kernels);
      for (int k = 0; k < FSL_PLAN_KINDS; k++) fprintf(f, "%s\"%s\": %d", k ? ", " : "", k_kind_names[k], pi->n_by_kind[k]);
      fprintf(f, "}, \"recomputed\": %d, \"optimal\": %s,\n     \"native\": %d, \"fallback\": %d, \"opaque\": %d, "
              "\"fallback_why\": ", pi->n_recomputed, pi->optimal ? "true" : "false", pi->n_native, pi->n_fallback,
              pi->n_opaque);
      json_str(f, pi->fallback_why);
      fprintf(f, ",\n     \"predicted_s\": ");
      json_num(f, pi->predicted_s, true);
      fprintf(f, ", \"orchestrate_s\": ");
      json_num(f, pi->orchestrate_s, true);
      fprintf(f, ", \"backend_compile_s\": ");
      json_num(f, pi->backend_s, true);
      fprintf(f, ", \"compile_s\": ");
      json_num(f, r->compile_s, true);
      fprintf(f, ",\n     \"peak_bytes\": %" PRId64 ", \"total_bytes\": %" PRId64, pi->peak_bytes, pi->total_bytes);
      fprintf(f, ",\n     \"profiled\": %s, \"costs_cached\": %d, \"costs_measured\": %d, \"costs_analytic\": %d, "
              "\"plan_kernels_measured\": %d, \"profile_s\": ", pi->profiled ? "true" : "false", pi->n_cost_cached,
              pi->n_cost_measured, pi->n_cost_analytic, pi->n_plan_measured);
      json_num(f, pi->profile_s, true);
    }
    fprintf(f, ",\n     \"median_s\": ");
    json_num(f, r->median_s, ok);
    fprintf(f, ", \"min_s\": ");
    json_num(f, r->min_s, ok);
    fprintf(f, ", \"mean_s\": ");
    json_num(f, r->mean_s, ok);
    fprintf(f, ", \"times_s\": [");
    for (int t = 0; ok && t < r->n_times; t++) fprintf(f, "%s%.9g", t ? ", " : "", r->times[t]);
    fprintf(f, "]}");
  }
  fprintf(f, "\n  ]\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "fissile: error: cannot write '%s': %s\n", o->json, strerror(errno));
    return EXIT_MODEL;
  }
  return EXIT_OK;
}
