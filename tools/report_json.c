/* report_json.c — `fissile report --json FILE`: the numbers the page shows,
 * as JSON (cJSON; seconds as plain numbers, NaN as null). */
#include "report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

static void add_num(cJSON *obj, const char *key, double v) {
  cJSON *item = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
  if (!cJSON_AddItemToObject(obj, key, item)) cJSON_Delete(item);
}

/* bandwidth: the plan's device copy bandwidth (bytes/s), for the fraction
 * of it a measured kernel reaches */
static void add_kernel(cJSON *list, const report_kernel *k, double bandwidth) {
  cJSON *o = cJSON_CreateObject();
  if (!o || !cJSON_AddItemToArray(list, o)) {
    cJSON_Delete(o);
    return;
  }
  cJSON_AddNumberToObject(o, "index", k->info.index);
  cJSON_AddStringToObject(o, "kind", k->info.kind_name);
  cJSON_AddNumberToObject(o, "primitives", k->info.n_primitives);
  add_num(o, "time_s", k->time_s);
  add_num(o, "cost_s", k->info.cost_s);
  cJSON_AddBoolToObject(o, "cost_measured", k->info.cost_measured);
  add_num(o, "roofline_s", k->info.roofline_s);
  add_num(o, "flops", k->info.flops);
  add_num(o, "bytes", k->info.bytes);
  add_num(o, "bandwidth_fraction", k->time_s > 0 && k->info.bytes > 0 && bandwidth > 0
                                       ? k->info.bytes / k->time_s / bandwidth : NAN);
  cJSON *nodes = cJSON_AddArrayToObject(o, "onnx_nodes");
  for (int j = 0; nodes && j < k->n_origins; j++) {
    cJSON *n = cJSON_CreateObject();
    if (!n || !cJSON_AddItemToArray(nodes, n)) {
      cJSON_Delete(n);
      return;
    }
    cJSON_AddStringToObject(n, "name", k->origin_name[j]);
    cJSON_AddStringToObject(n, "op_type", k->origin_op[j]);
  }
}

static void add_hist(cJSON *doc, const char *key, const report_hist *h) {
  if (!h->ok) {
    cJSON_AddNullToObject(doc, key);
    return;
  }
  cJSON *list = cJSON_AddArrayToObject(doc, key);
  for (int i = 0; list && i < h->n; i++) {
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddItemToArray(list, e)) {
      cJSON_Delete(e);
      return;
    }
    cJSON_AddStringToObject(e, "op", h->ops[i].op);
    cJSON_AddStringToObject(e, "kind", h->ops[i].kind);
    cJSON_AddNumberToObject(e, "count", h->ops[i].count);
  }
}

static cJSON *report_document(const report_data *d) {
  cJSON *doc = cJSON_CreateObject();
  if (!doc) return NULL;
  const options *o = d->o;
  cJSON_AddStringToObject(doc, "model", o->model);
  cJSON_AddStringToObject(doc, "fissile", d->version);
  cJSON_AddStringToObject(doc, "date", d->date);
  cJSON_AddStringToObject(doc, "backend", d->backend);
  cJSON_AddStringToObject(doc, "threads", d->threads);
  cJSON_AddNumberToObject(doc, "repeats", o->repeats);
  cJSON_AddNumberToObject(doc, "warmup", o->warmup);
  const char *device = "";
  double bandwidth = NAN, peak = NAN, launch = NAN;
  for (int i = 0; i < d->n_rows; i++)
    if (d->rows[i].have_info) {
      device = d->rows[i].info.device;
      bandwidth = d->rows[i].info.device_bandwidth;
      peak = d->rows[i].info.device_peak_flops;
      launch = d->rows[i].info.device_launch_s;
    }
  cJSON_AddStringToObject(doc, "device", device);
  add_num(doc, "device_bandwidth", bandwidth);
  add_num(doc, "device_peak_flops", peak);
  add_num(doc, "device_launch_s", launch);
  cJSON *list = cJSON_AddArrayToObject(doc, "strategies");
  for (int i = 0; list && i < d->n_rows; i++) bench_json_add_row(list, &d->rows[i]);
  if (d->peer.have) {
    cJSON *p = cJSON_AddObjectToObject(doc, "peer");
    if (p) {
      cJSON_AddStringToObject(p, "name", d->peer.name);
      add_num(p, "median_s", d->peer.median_s);
      add_num(p, "p10_s", d->peer.p10_s);
      add_num(p, "p90_s", d->peer.p90_s);
      add_num(p, "min_s", d->peer.min_s);
    }
  } else {
    cJSON_AddNullToObject(doc, "peer");
  }
  cJSON *b = cJSON_AddObjectToObject(doc, "breakdown");
  if (b) {
    if (d->breakdown_strategy >= 0)
      cJSON_AddStringToObject(b, "strategy", fsl_strategy_name((fsl_strategy)d->breakdown_strategy));
    else
      cJSON_AddNullToObject(b, "strategy");
    cJSON_AddStringToObject(b, "source", d->kernels_timed ? "measured" : "plan cost");
    cJSON_AddStringToObject(b, "note", d->kernels_note);
    cJSON *ks = cJSON_AddArrayToObject(b, "kernels");
    for (int k = 0; ks && k < d->n_kernels; k++) add_kernel(ks, &d->kernels[k], bandwidth);
  }
  cJSON_AddBoolToObject(doc, "plan_graph", d->plan_svg != NULL);
  cJSON_AddStringToObject(doc, "plan_note", d->plan_note);
  add_hist(doc, "onnx_ops", &d->onnx_hist);
  add_hist(doc, "primitives", &d->prim_hist);
  return doc;
}

/* cJSON returns NULL from an add that cannot allocate and goes on; a
 * malloc that remembers a failure tells the document is incomplete. */
static bool json_oom;

static void *json_malloc(size_t n) {
  void *p = malloc(n);
  if (!p) json_oom = true;
  return p;
}

char *report_json_text(const report_data *d) {
  cJSON_Hooks hooks = {.malloc_fn = json_malloc, .free_fn = free};
  cJSON_InitHooks(&hooks);
  json_oom = false;
  cJSON *doc = report_document(d);
  char *text = doc && !json_oom ? cJSON_Print(doc) : NULL;
  cJSON_Delete(doc);
  if (json_oom) {
    free(text);
    text = NULL;
  }
  return text;
}
