/* bench_json.c — `fissile bench --json FILE`: the table's numbers and every
 * timed run as JSON (read by bench/bench.py), written with cJSON. */
#include "bench.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* cJSON returns NULL from an add that cannot allocate and goes on; a
 * malloc that remembers a failure tells the document is incomplete. */
static bool json_oom;

static void *json_malloc(size_t n) {
  void *p = malloc(n);
  if (!p) json_oom = true;
  return p;
}

/* v, or null when there is no value (!have) or it is not finite. */
static cJSON *num_or_null(double v, bool have) {
  return have && isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static void add_num(cJSON *obj, const char *key, double v, bool have) {
  cJSON *item = num_or_null(v, have);
  if (!cJSON_AddItemToObject(obj, key, item)) cJSON_Delete(item);
}

/* The plan's numbers (when the strategy got as far as a plan). */
static void add_plan_info(cJSON *s, const bench_row *r) {
  const fsl_plan_info *pi = &r->info;
  cJSON_AddNumberToObject(s, "kernels", pi->n_kernels);
  char hash[24];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)pi->plan_hash);
  cJSON_AddStringToObject(s, "plan_hash", hash);
  cJSON *kinds = cJSON_AddObjectToObject(s, "by_kind");
  for (int k = 0; kinds && k < FSL_PLAN_KINDS; k++) cJSON_AddNumberToObject(kinds, k_kind_names[k], pi->n_by_kind[k]);
  cJSON_AddNumberToObject(s, "recomputed", pi->n_recomputed);
  cJSON_AddBoolToObject(s, "optimal", pi->optimal);
  cJSON_AddNumberToObject(s, "native", pi->n_native);
  cJSON_AddNumberToObject(s, "fallback", pi->n_fallback);
  cJSON_AddNumberToObject(s, "opaque", pi->n_opaque);
  cJSON_AddStringToObject(s, "fallback_why", pi->fallback_why);
  add_num(s, "predicted_s", pi->predicted_s, true);
  add_num(s, "orchestrate_s", pi->orchestrate_s, true);
  add_num(s, "backend_compile_s", pi->backend_s, true);
  add_num(s, "compile_s", r->compile_s, true);
  cJSON_AddNumberToObject(s, "peak_bytes", (double)pi->peak_bytes);
  cJSON_AddNumberToObject(s, "total_bytes", (double)pi->total_bytes);
  cJSON_AddBoolToObject(s, "profiled", pi->profiled);
  cJSON_AddNumberToObject(s, "costs_cached", pi->n_cost_cached);
  cJSON_AddNumberToObject(s, "costs_measured", pi->n_cost_measured);
  cJSON_AddNumberToObject(s, "costs_analytic", pi->n_cost_analytic);
  cJSON_AddNumberToObject(s, "plan_kernels_measured", pi->n_plan_measured);
  add_num(s, "profile_s", pi->profile_s, true);
  if (!pi->tuned) return;
  /* the measured plan choice (--autotune): which plan was kept, and why */
  cJSON *t = cJSON_AddObjectToObject(s, "autotune");
  if (!t) return;
  cJSON_AddStringToObject(t, "kept", fsl_strategy_name(pi->strategy));
  cJSON_AddBoolToObject(t, "cached", pi->tune_cached);
  cJSON_AddNumberToObject(t, "candidates", pi->tune_candidates);
  cJSON_AddNumberToObject(t, "rounds", pi->tune_rounds);
  add_num(t, "seconds", pi->tune_s, true);
  cJSON *med = cJSON_AddObjectToObject(t, "median_s"), *same = cJSON_AddObjectToObject(t, "same_as");
  for (int k = 0; med && same && k < FSL_STRATEGY_COUNT; k++) {
    const char *name = fsl_strategy_name((fsl_strategy)k);
    add_num(med, name, pi->tune_median_s[k], true);
    if (pi->tune_same_as[k] >= 0) cJSON_AddStringToObject(same, name, fsl_strategy_name((fsl_strategy)pi->tune_same_as[k]));
  }
}

void bench_json_add_row(cJSON *list, const bench_row *r) {
  bool ok = r->rc == EXIT_OK;
  cJSON *s = cJSON_CreateObject();
  if (!s || !cJSON_AddItemToArray(list, s)) {
    cJSON_Delete(s);
    json_oom = true;
    return;
  }
  cJSON_AddStringToObject(s, "strategy", fsl_strategy_name(r->strategy));
  cJSON_AddStringToObject(s, "name", r->name);
  cJSON_AddStringToObject(s, "rewrite", fsl_rewrite_mode_name(r->rewrite));
  cJSON_AddStringToObject(s, "status", ok ? "ok" : "error");
  cJSON_AddStringToObject(s, "error", r->error);
  if (r->have_info) add_plan_info(s, r);
  add_num(s, "median_s", r->median_s, ok);
  add_num(s, "min_s", r->min_s, ok);
  add_num(s, "mean_s", r->mean_s, ok);
  add_num(s, "p10_s", r->p10_s, ok);
  add_num(s, "p90_s", r->p90_s, ok);
  cJSON *times = cJSON_AddArrayToObject(s, "times_s");
  for (int t = 0; times && ok && t < r->n_times; t++) {
    cJSON *item = num_or_null(r->times[t], true);
    if (!cJSON_AddItemToArray(times, item)) cJSON_Delete(item);
  }
}

static cJSON *bench_document(const options *o, const char *backend, const bench_row *rows, int n) {
  const char *device = "";
  int prims = -1;
  for (int i = 0; i < n; i++)
    if (rows[i].have_info) {
      device = rows[i].info.device;
      prims = rows[i].info.n_primitives;
    }
  cJSON *doc = cJSON_CreateObject();
  if (!doc) return NULL;
  cJSON_AddStringToObject(doc, "model", o->model);
  cJSON_AddStringToObject(doc, "backend", backend);
  cJSON_AddNumberToObject(doc, "threads", o->threads);
  cJSON_AddNumberToObject(doc, "repeats", o->repeats);
  cJSON_AddNumberToObject(doc, "warmup", o->warmup);
  char seed[32];  /* a uint64 may not fit a double: written as its digits */
  snprintf(seed, sizeof seed, "%" PRIu64, o->seed);
  cJSON_AddRawToObject(doc, "seed", seed);
  cJSON_AddStringToObject(doc, "device", device);
  cJSON_AddNumberToObject(doc, "primitives", prims);
  cJSON *list = cJSON_AddArrayToObject(doc, "strategies");
  for (int i = 0; list && i < n; i++) bench_json_add_row(list, &rows[i]);
  return doc;
}

int write_bench_json(const options *o, const char *backend, const bench_row *rows, int n) {
  cJSON_Hooks hooks = {.malloc_fn = json_malloc, .free_fn = free};
  cJSON_InitHooks(&hooks);
  json_oom = false;
  cJSON *doc = bench_document(o, backend, rows, n);
  char *text = doc && !json_oom ? cJSON_Print(doc) : NULL;
  cJSON_Delete(doc);
  if (!text) {
    fprintf(stderr, "fissile: error: cannot write '%s': out of memory\n", o->json);
    return EXIT_RUNTIME;
  }
  FILE *f = fopen(o->json, "w");
  if (!f) {
    fprintf(stderr, "fissile: error: cannot write '%s': %s\n", o->json, strerror(errno));
    free(text);
    return EXIT_MODEL;
  }
  fprintf(f, "%s\n", text);
  free(text);
  if (fclose(f) != 0) {
    fprintf(stderr, "fissile: error: cannot write '%s': %s\n", o->json, strerror(errno));
    return EXIT_MODEL;
  }
  return EXIT_OK;
}
