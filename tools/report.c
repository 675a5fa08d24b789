/* report.c — `fissile report MODEL -o report.html`: measures every strategy
 * with bench.c's machinery, gathers the op histograms, the per-kernel
 * breakdown of the optimal plan (each kernel timed now by the backend) and
 * the plan drawn by Graphviz `dot` when it is installed, then writes one
 * self-contained HTML page (report_html.c) and, with --json, the numbers
 * it shows (report_json.c).  docs/cli.md, "report". */
#define _GNU_SOURCE /* mkdtemp, kill */
#include "report.h"
#include "html.h"
#include "core/core.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FSL_CLI_VERSION
#define FSL_CLI_VERSION "unknown"
#endif

extern char **environ;

/* Plans of more primitives than this are not drawn (dot takes minutes and
 * the picture is unreadable); nor is an SVG larger than MAX_SVG_BYTES. */
#define MAX_DRAWN_PRIMITIVES 1500
#define MAX_SVG_BYTES (8 << 20)
#define DOT_TIMEOUT_S 60
#define MAX_PEER_BYTES (16 << 20)

void report_usage(FILE *f, const char *bind_help, const char *backends, const char *exit_codes) {
  fprintf(f,
          "usage: fissile report MODEL -o REPORT.html [--strategies a,b,...] [--repeats N] [--warmup N]\n"
          "                      [--threads N] [--backend B] [--seed N] [--profile]\n"
          "                      [--peer PEER.json] [--json FILE] [--shape NAME=DIMS]... [--dim PARAM=N]...\n\n"
          "Measures every strategy as `fissile bench` does (compile, --warmup runs, then\n"
          "--repeats timed runs on fresh random inputs) and writes one self-contained HTML\n"
          "page (inline SVG, no JavaScript): the ONNX op and primitive histograms, kernels\n"
          "by kind, predicted and measured latency per strategy (median, p10-p90) next to\n"
          "the peer's (--peer), the per-kernel time breakdown of the optimal plan (each\n"
          "kernel timed now by the backend, with the ONNX nodes it came from) and the plan\n"
          "drawn by Graphviz `dot` when it is on PATH.  Files are written through a\n"
          "temporary file and a rename: a failure leaves nothing half-written.\n\n"
          "Options:\n%s"
          "  -o, --output FILE     the HTML page (required)\n"
          "  --peer FILE           the peer's latency (e.g. ONNX Runtime) as JSON:\n"
          "                        {\"name\": \"onnxruntime 1.22\", \"median_s\": 0.0012,\n"
          "                         \"p10_s\": ..., \"p90_s\": ..., \"min_s\": ..., \"times_s\": [...]}\n"
          "                        (only median_s is required; a bench/bench.py row, whose\n"
          "                        \"ort\" object has these keys, is accepted too)\n"
          "  --json FILE           also write the numbers the page shows as JSON\n"
          "  --strategies LIST     comma-separated strategies (default all four)\n"
          "  --repeats N           timed runs per strategy (default 20)\n"
          "  --warmup N            untimed runs first (default 3)\n"
          "  --threads N           threads for generated kernels and oneDNN (default: all)\n"
          "  --backend B           one of %s (default: the first after ref)\n"
          "  --seed N              seed of the first random inputs (default 0)\n"
          "  --profile             plans from measured kernel costs (profile cache)\n"
          "  -h, --help            this help\n\n%s",
          bind_help, backends, exit_codes);
}

/* ---- the peer (--peer FILE.json) ---- */
static int peer_error(const char *path, const char *what) {
  fprintf(stderr, "fissile: error: --peer '%s': %s\n", path, what);
  return EXIT_MODEL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A number member `key` of obj: NaN when absent; false when present but
 * not a finite number >= 0. */
static bool peer_num(const cJSON *obj, const char *key, double *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NAN;
  if (!it || cJSON_IsNull(it)) return true;
  if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0) return false;
  *out = it->valuedouble;
  return true;
}

/* p10/p90 from "times_s" when they were not given. */
static void peer_spread(const cJSON *obj, report_peer *p) {
  const cJSON *times = cJSON_GetObjectItemCaseSensitive(obj, "times_s");
  int n = cJSON_IsArray(times) ? cJSON_GetArraySize(times) : 0;
  if (n < 1 || (!isnan(p->p10_s) && !isnan(p->p90_s))) return;
  double *v = malloc(sizeof *v * (size_t)n);
  if (!v) return;
  int k = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, times) if (cJSON_IsNumber(t) && isfinite(t->valuedouble)) v[k++] = t->valuedouble;
  if (k == n) {
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    double lo = 0.1 * (k - 1), hi = 0.9 * (k - 1);
    int a = (int)lo, b = (int)hi;
    if (isnan(p->p10_s)) p->p10_s = a + 1 < k ? v[a] + (lo - a) * (v[a + 1] - v[a]) : v[a];
    if (isnan(p->p90_s)) p->p90_s = b + 1 < k ? v[b] + (hi - b) * (v[b + 1] - v[b]) : v[b];
    if (isnan(p->min_s)) p->min_s = v[0];
  }
  free(v);
}

static int peer_from_json(const char *path, const cJSON *doc, report_peer *p) {
  const cJSON *obj = doc;
  const char *default_name = "peer";
  if (cJSON_IsObject(doc) && !cJSON_GetObjectItemCaseSensitive(doc, "median_s") &&
      cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "ort"))) {
    obj = cJSON_GetObjectItemCaseSensitive(doc, "ort"); /* a bench/bench.py row */
    default_name = "onnxruntime";
  }
  if (!cJSON_IsObject(obj))
    return peer_error(path, "expected a JSON object such as {\"name\": \"onnxruntime 1.22\", \"median_s\": 0.0012}");
  const cJSON *med = cJSON_GetObjectItemCaseSensitive(obj, "median_s");
  if (!cJSON_IsNumber(med) || !isfinite(med->valuedouble) || med->valuedouble <= 0)
    return peer_error(path, "\"median_s\" (the peer's median latency in seconds, > 0) is missing or not a positive number");
  p->median_s = med->valuedouble;
  const char *keys[] = {"p10_s", "p90_s", "min_s"};
  double *dst[] = {&p->p10_s, &p->p90_s, &p->min_s};
  for (int i = 0; i < 3; i++)
    if (!peer_num(obj, keys[i], dst[i])) {
      char msg[96];
      snprintf(msg, sizeof msg, "\"%s\" must be a number of seconds >= 0", keys[i]);
      return peer_error(path, msg);
    }
  peer_spread(obj, p);
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
  if (name && !cJSON_IsString(name)) return peer_error(path, "\"name\" must be a string");
  snprintf(p->name, sizeof p->name, "%s", name && *name->valuestring ? name->valuestring : default_name);
  p->have = true;
  return EXIT_OK;
}

static int read_peer(const char *path, report_peer *p) {
  FILE *f = fopen(path, "rb");
  if (!f) return peer_error(path, strerror(errno));
  char *buf = malloc(MAX_PEER_BYTES + 1);
  size_t n = buf ? fread(buf, 1, MAX_PEER_BYTES + 1, f) : 0;
  bool bad = ferror(f);
  fclose(f);
  if (!buf) return peer_error(path, "out of memory");
  if (bad || n > MAX_PEER_BYTES) {
    free(buf);
    return peer_error(path, bad ? "cannot read the file" : "larger than 16 MiB: not a peer latency file");
  }
  buf[n] = 0;
  const char *end = NULL;
  cJSON *doc = cJSON_ParseWithOpts(buf, &end, true);
  int rc;
  if (!doc) {
    char msg[96];
    snprintf(msg, sizeof msg, "not valid JSON (at byte %ld)", end ? (long)(end - buf) : 0L);
    rc = peer_error(path, msg);
  } else {
    rc = peer_from_json(path, doc, p);
  }
  cJSON_Delete(doc);
  free(buf);
  return rc;
}

/* ---- histograms ---- */
static void hist_add(void *ctx, const char *op, const char *kind, int count) {
  report_hist *h = ctx;
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 32;
    report_op *ops = realloc(h->ops, sizeof *ops * (size_t)cap);
    if (!ops) return;
    h->ops = ops;
    h->cap = cap;
  }
  report_op *e = &h->ops[h->n];
  e->op = strdup(op ? op : "");
  e->kind = strdup(kind ? kind : "");
  if (!e->op || !e->kind) {
    free(e->op);
    free(e->kind);
    return;
  }
  e->count = count;
  h->total += count;
  h->n++;
}

static void hist_collect(const fsl_model *m, fsl_stage stage, report_hist *h) {
  h->ok = fsl_model_op_histogram(m, stage, hist_add, h) == FSL_OK;
  if (!h->ok) fsl_error_clear();
}

static void hist_free(report_hist *h) {
  for (int i = 0; i < h->n; i++) {
    free(h->ops[i].op);
    free(h->ops[i].kind);
  }
  free(h->ops);
}

/* ---- the plan graph (Graphviz dot) ---- */
/* The executable `name` in a folder of $PATH, into buf; false if none. */
static bool find_on_path(const char *name, char *buf, size_t len) {
  const char *path = getenv("PATH");
  while (path && *path) {
    const char *colon = strchr(path, ':');
    size_t n = colon ? (size_t)(colon - path) : strlen(path);
    if (n > 0 && (size_t)snprintf(buf, len, "%.*s/%s", (int)n, path, name) < len && access(buf, X_OK) == 0) {
      struct stat sb;
      if (stat(buf, &sb) == 0 && S_ISREG(sb.st_mode)) return true;
    }
    path = colon ? colon + 1 : NULL;
  }
  return false;
}

/* Runs `dot -Tsvg -o svg dotfile` (no shell), stderr to errfile; waits at
 * most DOT_TIMEOUT_S.  Returns "" on success, else why. */
static const char *run_dot(const char *dot, const char *dotfile, const char *svg, const char *errfile) {
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) return "cannot start dot";
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  char *argv[] = {(char *)"dot", (char *)"-Tsvg", (char *)"-o", (char *)svg, (char *)dotfile, NULL};
  pid_t pid;
  int err = posix_spawn(&pid, dot, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return "cannot start dot";
  int status = 0;
  double t0 = fsl_now_s();
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return "lost the dot process";
    if (fsl_now_s() - t0 > DOT_TIMEOUT_S) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return "dot took longer than 60 s";
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : "dot failed";
}

/* Reads at most MAX_SVG_BYTES of path; NULL when larger or unreadable. */
static char *read_small(const char *path, bool *too_large) {
  *too_large = false;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(MAX_SVG_BYTES + 1);
  size_t n = buf ? fread(buf, 1, MAX_SVG_BYTES + 1, f) : 0;
  fclose(f);
  if (buf && n > MAX_SVG_BYTES) {
    *too_large = true;
    free(buf);
    return NULL;
  }
  if (buf) buf[n] = 0;
  return buf;
}

/* The <svg ...>...</svg> element of dot's output (XML prologue, doctype and
 * comments before it dropped), in place; NULL when there is none or it
 * holds active content. */
static char *svg_element(char *text) {
  char *start = strstr(text, "<svg");
  char *end = NULL;
  for (char *p = start; p && (p = strstr(p, "</svg>")); p += 6) end = p;
  if (!start || !end) return NULL;
  end[6] = 0;
  for (char *p = start; *p; p++) /* graphviz escapes labels; refuse anything active anyway */
    if (!strncasecmp(p, "<script", 7) || !strncasecmp(p, "<foreignobject", 14) || !strncasecmp(p, "javascript:", 11))
      return NULL;
  return start;
}

static void draw_plan(fsl_model *m, const fsl_plan_info *pi, report_data *d) {
  char dot[4096];
  if (!find_on_path("dot", dot, sizeof dot)) {
    snprintf(d->plan_note, sizeof d->plan_note,
             "Graphviz `dot` was not found on PATH, so the plan is not drawn (install graphviz, or render "
             "the DOT of `fissile explain` elsewhere).");
    return;
  }
  if (pi->n_primitives > MAX_DRAWN_PRIMITIVES) {
    snprintf(d->plan_note, sizeof d->plan_note,
             "The plan has %d primitives, more than the %d drawn here: render `fissile explain` with dot instead.",
             pi->n_primitives, MAX_DRAWN_PRIMITIVES);
    return;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/fissile_report_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    snprintf(d->plan_note, sizeof d->plan_note, "The plan is not drawn: no temporary folder (%s).", strerror(errno));
    return;
  }
  char dotfile[4200], svg[4200], errfile[4200];
  snprintf(dotfile, sizeof dotfile, "%s/plan.dot", dir);
  snprintf(svg, sizeof svg, "%s/plan.svg", dir);
  snprintf(errfile, sizeof errfile, "%s/dot.err", dir);
  const char *why = "cannot write the DOT file";
  FILE *f = fopen(dotfile, "w");
  if (f) {
    fsl_status st = fsl_model_write_plan_dot(m, f);
    if (fclose(f) == 0 && st == FSL_OK) why = run_dot(dot, dotfile, svg, errfile);
    fsl_error_clear();
  }
  bool too_large = false;
  char *text = *why ? NULL : read_small(svg, &too_large);
  char *el = text ? svg_element(text) : NULL;
  if (el) {
    d->plan_svg = strdup(el);
  } else if (!*why) {
    why = too_large ? "its SVG is larger than 8 MiB" : "dot wrote no usable SVG";
  }
  free(text);
  if (!d->plan_svg)
    snprintf(d->plan_note, sizeof d->plan_note, "The plan is not drawn: %s%s.", why,
             !strcmp(why, "dot failed") ? " (its messages went to a temporary file, now removed)" : "");
  unlink(dotfile);
  unlink(svg);
  unlink(errfile);
  rmdir(dir);
}

/* ---- the breakdown of one plan ---- */
static int collect_kernels(fsl_model *m, report_data *d) {
  int n = fsl_model_num_kernels(m);
  d->kernels = calloc((size_t)n + 1, sizeof *d->kernels);
  if (!d->kernels) return EXIT_RUNTIME;
  for (int k = 0; k < n; k++) {
    report_kernel *rk = &d->kernels[d->n_kernels];
    if (fsl_model_kernel_info(m, k, &rk->info) != FSL_OK) return EXIT_RUNTIME;
    d->n_kernels++;
    rk->time_s = NAN;
    int no = rk->info.n_onnx_nodes;
    rk->origin_name = calloc((size_t)no + 1, sizeof(char *));
    rk->origin_op = calloc((size_t)no + 1, sizeof(char *));
    if (!rk->origin_name || !rk->origin_op) return EXIT_RUNTIME;
    for (int j = 0; j < no; j++) {
      const char *name, *op;
      if (fsl_model_kernel_origin(m, k, j, &name, &op) != FSL_OK) return EXIT_RUNTIME;
      rk->origin_name[j] = strdup(name);
      rk->origin_op[j] = strdup(op);
      rk->n_origins = j + 1;
      if (!rk->origin_name[j] || !rk->origin_op[j]) return EXIT_RUNTIME;
    }
  }
  return EXIT_OK;
}

static void time_kernels(fsl_model *m, report_data *d) {
  if (strcmp(d->backend, "cpu")) {
    snprintf(d->kernels_note, sizeof d->kernels_note,
             "Kernels are not timed one by one with the %s backend: the times are the plan's costs.", d->backend);
    return;
  }
  double *secs = calloc((size_t)d->n_kernels + 1, sizeof *secs);
  fsl_status st = secs ? fsl_model_time_kernels(m, secs, d->n_kernels) : FSL_ERR_NOMEM;
  if (st == FSL_OK) {
    for (int k = 0; k < d->n_kernels; k++) d->kernels[k].time_s = secs[k];
    d->kernels_timed = true;
  } else {
    snprintf(d->kernels_note, sizeof d->kernels_note, "Timing the kernels failed (%s): the times are the plan's costs.",
             st == FSL_ERR_NOMEM ? "out of memory" : fsl_last_error());
    fsl_error_clear();
  }
  free(secs);
}

typedef struct hook_ctx {
  report_data *d;
  int breakdown_row;  /* index into d->rows of the strategy to break down */
} hook_ctx;

static int report_hook(void *ctx, fsl_model *m, bench_row *row) {
  hook_ctx *h = ctx;
  report_data *d = h->d;
  if (!d->prim_hist.ok) hist_collect(m, FSL_STAGE_FISSION, &d->prim_hist);
  if (row - d->rows != h->breakdown_row) return EXIT_OK;
  fprintf(stderr, "fissile: report: timing the %d kernels of the %s plan ...\n", fsl_model_num_kernels(m),
          row->name);
  d->breakdown_strategy = (int)row->strategy;
  if (collect_kernels(m, d) != EXIT_OK) {
    snprintf(row->error, sizeof row->error, "out of memory listing the plan's kernels");
    return EXIT_RUNTIME;
  }
  time_kernels(m, d);
  draw_plan(m, &row->info, d);
  return EXIT_OK;
}

/* ---- files ---- */
static int file_error(const char *path, int err) {
  fprintf(stderr, "fissile: error: cannot write '%s': %s\n", path, strerror(err));
  return EXIT_MODEL;
}

/* Whether path can be written: a temporary file beside it can be made and
 * path is not a folder.  Checked before measuring (which takes a while). */
static int check_writable(const char *path) {
  struct stat sb;
  if (!*path || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))) return file_error(path, EISDIR);
  char tmp[4200];
  int fd = fsl_temp_beside(path, tmp, sizeof tmp);
  if (fd < 0) return file_error(path, errno);
  close(fd);
  unlink(tmp);
  return EXIT_OK;
}

int report_write_file(const char *path, int (*writer)(FILE *f, const void *ctx), const void *ctx) {
  if (fsl_write_file_atomic(path, writer, ctx) == FSL_OK) return EXIT_OK;
  fprintf(stderr, "fissile: error: %s\n", fsl_last_error());
  return EXIT_MODEL;
}

static int html_writer(FILE *f, const void *ctx) {
  report_write_html(f, ctx);
  return 0;
}

static int json_writer(FILE *f, const void *ctx) {
  char *text = report_json_text(ctx);
  if (!text) return ENOMEM;
  fprintf(f, "%s\n", text);
  free(text);
  return 0;
}

/* ---- the command ---- */
static void report_free(report_data *d) {
  for (int i = 0; i < d->n_rows; i++) free(d->rows[i].times);
  hist_free(&d->onnx_hist);
  hist_free(&d->prim_hist);
  for (int k = 0; k < d->n_kernels; k++) {
    for (int j = 0; j < d->kernels[k].n_origins; j++) {
      free(d->kernels[k].origin_name[j]);
      free(d->kernels[k].origin_op[j]);
    }
    free(d->kernels[k].origin_name);
    free(d->kernels[k].origin_op);
  }
  free(d->kernels);
  free(d->plan_svg);
}

static void describe_run(const options *o, report_data *d) {
  snprintf(d->version, sizeof d->version, "git %s (at configure time)", FSL_CLI_VERSION);
  time_t t = time(NULL);
  struct tm tm;
  if (gmtime_r(&t, &tm)) strftime(d->date, sizeof d->date, "%Y-%m-%d %H:%M UTC", &tm);
  if (o->threads > 0) snprintf(d->threads, sizeof d->threads, "%d", o->threads);
  else snprintf(d->threads, sizeof d->threads, "default (%ld CPUs)", sysconf(_SC_NPROCESSORS_ONLN));
}

static int report_model(const options *o, fsl_model *m, report_data *d) {
  hist_collect(m, FSL_STAGE_ONNX, &d->onnx_hist);
  int rc = bind_options(o, m);
  if (rc != EXIT_OK) return rc;
  hook_ctx h = {d, d->n_rows - 1};
  for (int i = d->n_rows - 1; i >= 0; i--)
    if (d->rows[i].strategy == FSL_STRATEGY_OPTIMAL && d->rows[i].rewrite == d->rows[0].rewrite) h.breakdown_row = i;
  return bench_measure(o, m, d->backend, d->rows, d->n_rows, report_hook, &h);
}

int cmd_report(options *o) {
  if (!o->plan_out) return usage_error("%s: missing -o FILE (the HTML page to write)", o->cmd);
  static report_data d; /* large: its rows hold error texts */
  memset(&d, 0, sizeof d);
  d.o = o;
  d.n_rows = bench_strategies(o, d.rows);
  if (d.n_rows < 0)
    return usage_error("--strategies expects a comma-separated list of unfused, opfuse, greedy, optimal; got '%s'",
                       o->strategies);
  d.backend = bench_backend(o);
  d.breakdown_strategy = -1;
  d.peer.median_s = d.peer.p10_s = d.peer.p90_s = d.peer.min_s = NAN;
  int rc = o->peer ? read_peer(o->peer, &d.peer) : EXIT_OK;
  if (rc == EXIT_OK) rc = check_writable(o->plan_out);
  if (rc == EXIT_OK && o->json) rc = check_writable(o->json);
  if (rc != EXIT_OK) return rc;
  describe_run(o, &d);
  if (o->threads > 0) fsl_set_num_threads(o->threads);
  fsl_model *m = NULL;
  rc = load_model(o, &m);
  if (rc == EXIT_OK) rc = report_model(o, m, &d);
  /* a strategy that failed is shown in the page; loading or binding failing is not a report */
  bool measured = false;
  for (int i = 0; i < d.n_rows; i++) measured = measured || d.rows[i].have_info;
  if (!measured && rc == EXIT_OK) rc = EXIT_RUNTIME;
  if (!measured && d.n_rows > 0 && (d.rows[0].error[0] || rc != EXIT_OK))
    fprintf(stderr, "fissile: error: no strategy could be measured: '%s' not written\n", o->plan_out);
  if (measured) {
    int w = report_write_file(o->plan_out, html_writer, &d);
    if (w == EXIT_OK && o->json) w = report_write_file(o->json, json_writer, &d);
    if (w != EXIT_OK) rc = w;
    else printf("report: %s\n", o->plan_out);
    for (int i = 0; i < d.n_rows; i++) {
      char med[32];
      const bench_row *r = &d.rows[i];
      printf("  %-17s %s\n", r->name,
             r->rc == EXIT_OK ? fmt_time(r->median_s, med, sizeof med) : "error");
    }
  }
  fsl_model_free(m);
  report_free(&d);
  return rc;
}
