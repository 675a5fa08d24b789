/* report_html.c — the page of `fissile report`: one self-contained HTML
 * document (inline CSS and SVG, no script), every model-derived string
 * escaped (html.c). */
#include "html.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHART_W 980
#define TOP_KERNELS 15   /* kernels in the breakdown's chart and table */
#define TOP_OPS 30       /* ops per histogram chart */
#define MAX_ORIGINS 6    /* ONNX nodes listed per kernel */

static const char *const k_kind_colors[FSL_PLAN_KINDS] = {"#4e79a7", "#59a14f", "#e15759", "#bab0ac"};
static const char *const k_color_pred = "#a0cbe8", *const k_color_meas = "#4e79a7", *const k_color_peer = "#f28e2b";

static const char *k_style =
    "body{font-family:sans-serif;margin:24px auto;max-width:1040px;color:#222;line-height:1.4}"
    "h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:13px;margin:8px 0}"
    "th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}"
    "th{background:#f4f4f4;white-space:nowrap}td{white-space:nowrap}td.l,th.l{text-align:left}"
    "td.nodes{white-space:normal;overflow-wrap:anywhere;min-width:260px;font-size:12px}"
    "td.wrap{white-space:normal;overflow-wrap:anywhere}"
    ".meta{font-size:13px;color:#444}.note{background:#fff8e1;border-left:4px solid #f2c14e;padding:6px 10px;font-size:13px}"
    ".err{color:#b00}.graph{overflow:auto;max-height:900px;border:1px solid #ddd;margin-top:8px}"
    ".graph svg{max-width:none}code{font-size:12px}";

/* ---- small pieces ---- */
static void text_tag(FILE *f, const char *tag, const char *cls, const char *s) {
  fprintf(f, "<%s%s%s%s>", tag, cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
  html_text(f, s);
  fprintf(f, "</%s>", tag);
}

static void cell_time(FILE *f, double s) {
  char b[32];
  text_tag(f, "td", NULL, fmt_time(s, b, sizeof b));
}

static void cell_int(FILE *f, long long v) { fprintf(f, "<td>%lld</td>", v); }

/* The time the breakdown shows for kernel k, and where it came from. */
static double kernel_time(const report_data *d, const report_kernel *k, const char **source) {
  if (d->kernels_timed && isfinite(k->time_s)) {
    *source = "measured";
    return k->time_s;
  }
  *source = k->info.cost_measured ? "profiled" : "roofline";
  return k->info.cost_s;
}

/* ---- header ---- */
static const char *device_of(const report_data *d) {
  for (int i = 0; i < d->n_rows; i++)
    if (d->rows[i].have_info) return d->rows[i].info.device;
  return "unknown";
}

static void write_header(FILE *f, const report_data *d) {
  const options *o = d->o;
  fputs("<h1>fissile report: ", f);
  html_text(f, o->model);
  fputs("</h1>\n<p class=\"meta\">device: ", f);
  html_text(f, device_of(d));
  fputs("<br>backend: ", f);
  html_text(f, d->backend);
  fputs(", threads: ", f);
  html_text(f, d->threads);
  fprintf(f, ", %d timed rounds after %d warm-up rounds, strategies interleaved (each round runs every strategy "
          "once on the same inputs; fresh random data each round, seed %llu)", o->repeats, o->warmup,
          (unsigned long long)o->seed);
  fputs("<br>fissile ", f);
  html_text(f, d->version);
  fputs(", measured ", f);
  html_text(f, d->date);
  fputs(". Every number on this page was measured or computed in that run", f);
  if (d->o->peer) {
    fputs(", except the peer's, read from ", f);
    html_text(f, d->o->peer);
    fputs(" (measured outside this run: compare it with the strategies only as far as the machine's load "
          "was the same)", f);
  }
  fputs(".</p>\n", f);
}

/* ---- strategies ---- */
static void write_strategy_table(FILE *f, const report_data *d) {
  fputs("<table><tr><th class=\"l\">strategy</th><th>kernels</th><th>loop / reduce / linear / opaque</th>"
        "<th>recomputed</th><th>predicted</th><th>median</th><th>p10 &#8211; p90</th><th>min</th>"
        "<th>arena</th><th>orchestration</th><th class=\"l\">status</th></tr>\n",
        f);
  for (int i = 0; i < d->n_rows; i++) {
    const bench_row *r = &d->rows[i];
    const fsl_plan_info *pi = &r->info;
    bool ok = r->rc == EXIT_OK;
    char b1[32], b2[32], b3[80];
    fputs("<tr>", f);
    text_tag(f, "td", "l", r->name);
    if (r->have_info) {
      cell_int(f, pi->n_kernels);
      fprintf(f, "<td>%d / %d / %d / %d</td>", pi->n_by_kind[0], pi->n_by_kind[1], pi->n_by_kind[2], pi->n_by_kind[3]);
      cell_int(f, pi->n_recomputed);
      cell_time(f, pi->predicted_s);
    } else {
      fputs("<td>-</td><td>-</td><td>-</td><td>-</td>", f);
    }
    cell_time(f, ok ? r->median_s : NAN);
    snprintf(b3, sizeof b3, "%s \xe2\x80\x93 %s", fmt_time(ok ? r->p10_s : NAN, b1, sizeof b1),
             fmt_time(ok ? r->p90_s : NAN, b2, sizeof b2));
    text_tag(f, "td", NULL, ok ? b3 : "-");
    cell_time(f, ok ? r->min_s : NAN);
    text_tag(f, "td", NULL, r->have_info ? fmt_bytes((double)pi->peak_bytes, b1, sizeof b1) : "-");
    if (r->have_info) snprintf(b2, sizeof b2, "%.3f s", pi->orchestrate_s);
    text_tag(f, "td", NULL, r->have_info ? b2 : "-");
    if (ok) {
      fputs("<td class=\"l\">ok", f);
      if (r->have_info && pi->n_fallback) fprintf(f, " (%d kernels through the reference fallback)", pi->n_fallback);
      fputs("</td>", f);
    } else {
      fputs("<td class=\"l err wrap\">error: ", f);
      html_text(f, r->error);
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  if (d->peer.have) {
    const report_peer *p = &d->peer;
    char b1[32], b2[32], b3[80];
    fputs("<tr>", f);
    text_tag(f, "td", "l", p->name);
    fputs("<td>-</td><td>-</td><td>-</td><td>-</td>", f);
    cell_time(f, p->median_s);
    snprintf(b3, sizeof b3, "%s \xe2\x80\x93 %s", fmt_time(p->p10_s, b1, sizeof b1), fmt_time(p->p90_s, b2, sizeof b2));
    text_tag(f, "td", NULL, isnan(p->p10_s) && isnan(p->p90_s) ? "-" : b3);
    cell_time(f, p->min_s);
    const char *base = strrchr(d->o->peer, '/');
    fputs("<td>-</td><td>-</td><td class=\"l\">peer: ", f);
    html_text(f, base ? base + 1 : d->o->peer);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static void write_latency_chart(FILE *f, const report_data *d) {
  int cap = 2 * d->n_rows + 1, n = 0;
  svg_bar *bars = calloc((size_t)cap, sizeof *bars);
  char (*texts)[48] = calloc((size_t)cap, sizeof *texts);
  if (!bars || !texts) {
    free(bars);
    free(texts);
    return;
  }
  for (int i = 0; i < d->n_rows; i++) {
    const bench_row *r = &d->rows[i];
    bool ok = r->rc == EXIT_OK;
    bars[n] = (svg_bar){r->name, "predicted", r->have_info ? r->info.predicted_s : NAN,
                        NAN, NAN, k_color_pred, NULL};
    bars[n].text = fmt_time(bars[n].value, texts[n], sizeof texts[n]);
    n++;
    bars[n] = (svg_bar){"", "measured", ok ? r->median_s : NAN, ok ? r->p10_s : NAN, ok ? r->p90_s : NAN,
                        k_color_meas, NULL};
    bars[n].text = fmt_time(bars[n].value, texts[n], sizeof texts[n]);
    n++;
  }
  if (d->peer.have) {
    bars[n] = (svg_bar){d->peer.name, "measured", d->peer.median_s, d->peer.p10_s, d->peer.p90_s, k_color_peer, NULL};
    bars[n].text = fmt_time(bars[n].value, texts[n], sizeof texts[n]);
    n++;
  }
  svg_bar_chart(f, "Latency per strategy: predicted, and measured median with p10-p90", bars, n, CHART_W);
  free(bars);
  free(texts);
}

static void write_kinds_chart(FILE *f, const report_data *d) {
  svg_stack rows[FSL_STRATEGY_COUNT * 4];
  double vals[FSL_STRATEGY_COUNT * 4][FSL_PLAN_KINDS];
  int n = 0;
  for (int i = 0; i < d->n_rows; i++) {
    if (!d->rows[i].have_info) continue;
    for (int k = 0; k < FSL_PLAN_KINDS; k++) vals[n][k] = d->rows[i].info.n_by_kind[k];
    rows[n] = (svg_stack){d->rows[i].name, vals[n]};
    n++;
  }
  if (n) svg_stacked_chart(f, "Kernels by kind", rows, n, k_kind_names, k_kind_colors, FSL_PLAN_KINDS, CHART_W);
}

/* ---- the per-kernel breakdown ---- */
typedef struct ranked { int k; double t; } ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? 1 : -1;
  return x->k - y->k;
}

static void write_origins(FILE *f, const report_kernel *k) {
  for (int j = 0; j < k->n_origins && j < MAX_ORIGINS; j++) {
    if (j) fputs(", ", f);
    html_text(f, k->origin_op[j]);
    fputs(" <code>", f);
    html_text(f, *k->origin_name[j] ? k->origin_name[j] : "(unnamed)");
    fputs("</code>", f);
  }
  if (k->n_origins > MAX_ORIGINS) fprintf(f, ", and %d more", k->n_origins - MAX_ORIGINS);
}

static void write_breakdown(FILE *f, const report_data *d) {
  fputs("<h2>Per-kernel time", f);
  if (d->breakdown_strategy >= 0) {
    fputs(": ", f);
    html_text(f, fsl_strategy_name((fsl_strategy)d->breakdown_strategy));
    fputs(" plan", f);
  }
  fputs("</h2>\n", f);
  if (d->breakdown_strategy < 0 || d->n_kernels == 0) {
    fputs("<p class=\"note\">No plan to break down: the strategy failed before its plan was measured.</p>\n", f);
    return;
  }
  ranked *rk = calloc((size_t)d->n_kernels, sizeof *rk);
  if (!rk) return;
  double total = 0;
  int n_measured = 0;
  for (int k = 0; k < d->n_kernels; k++) {
    const char *src;
    rk[k] = (ranked){k, kernel_time(d, &d->kernels[k], &src)};
    if (isfinite(rk[k].t)) total += rk[k].t;
    n_measured += !strcmp(src, "measured");
  }
  qsort(rk, (size_t)d->n_kernels, sizeof *rk, cmp_ranked);
  char b1[32], b2[32];
  fputs("<p>", f);
  if (d->kernels_timed) {
    fprintf(f, "<b>Measured</b>: each of the %d kernels was timed now, standalone, as the %s backend runs it "
            "(warm-up, then the median of at least 5 runs on fresh random inputs). ",
            d->n_kernels, d->backend);
    if (n_measured < d->n_kernels)
      fprintf(f, "%d could not be measured (opaque or reference-fallback kernels) and show the plan's cost. ",
              d->n_kernels - n_measured);
  }
  else
    fprintf(f, "<b>Predicted</b>: the plan's cost of each of the %d kernels (the roofline model, or a measured "
            "time where the plan was profiled). ", d->n_kernels);
  fprintf(f, "Sum over kernels: %s; the whole model's measured median: ", fmt_time(total, b1, sizeof b1));
  const bench_row *row = NULL;
  for (int i = 0; i < d->n_rows; i++)
    if ((int)d->rows[i].strategy == d->breakdown_strategy && d->rows[i].have_info) row = &d->rows[i];
  fprintf(f, "%s.</p>\n", fmt_time(row && row->rc == EXIT_OK ? row->median_s : NAN, b2, sizeof b2));
  if (!d->kernels_timed && d->kernels_note[0]) text_tag(f, "p", "note", d->kernels_note);

  int top = d->n_kernels < TOP_KERNELS ? d->n_kernels : TOP_KERNELS;
  svg_bar bars[TOP_KERNELS];
  char labels[TOP_KERNELS][48], texts[TOP_KERNELS][64];
  for (int i = 0; i < top; i++) {
    const report_kernel *k = &d->kernels[rk[i].k];
    const char *src;
    double t = kernel_time(d, k, &src);
    snprintf(labels[i], sizeof labels[i], "k%d %s", k->info.index, k->info.kind_name);
    snprintf(texts[i], sizeof texts[i], "%s (%.1f%%)", fmt_time(t, b1, sizeof b1),
             total > 0 && isfinite(t) ? 100.0 * t / total : 0.0);
    bars[i] = (svg_bar){labels[i], NULL, t, NAN, NAN, k_kind_colors[k->info.kind & 3], texts[i]};
  }
  char title[96];
  snprintf(title, sizeof title, "Top %d of %d kernels by time", top, d->n_kernels);
  svg_bar_chart(f, title, bars, top, CHART_W);

  fputs("<table><tr><th>#</th><th class=\"l\">kernel</th><th class=\"l\">kind</th><th>primitives</th>"
        "<th>time</th><th class=\"l\">source</th><th>share</th><th>roofline</th><th>FLOP</th><th>bytes</th>"
        "<th class=\"l\">ONNX nodes</th></tr>\n",
        f);
  for (int i = 0; i < top; i++) {
    const report_kernel *k = &d->kernels[rk[i].k];
    const char *src;
    double t = kernel_time(d, k, &src);
    fprintf(f, "<tr><td>%d</td><td class=\"l\">k%d</td>", i + 1, k->info.index);
    text_tag(f, "td", "l", k->info.kind_name);
    cell_int(f, k->info.n_primitives);
    cell_time(f, t);
    text_tag(f, "td", "l", src);
    fprintf(f, "<td>%.1f%%</td>", total > 0 && isfinite(t) ? 100.0 * t / total : 0.0);
    cell_time(f, k->info.roofline_s);
    text_tag(f, "td", NULL, fmt_count(k->info.flops, b1, sizeof b1));
    text_tag(f, "td", NULL, fmt_bytes(k->info.bytes, b2, sizeof b2));
    fputs("<td class=\"l nodes\">", f);
    write_origins(f, k);
    fputs("</td></tr>\n", f);
  }
  fputs("</table>\n", f);
  if (d->n_kernels > top) fprintf(f, "<p class=\"meta\">%d more kernels not listed.</p>\n", d->n_kernels - top);
  free(rk);
}

/* ---- histograms ---- */
static int cmp_op(const void *a, const void *b) {
  const report_op *x = a, *y = b;
  if (x->count != y->count) return y->count - x->count;
  return strcmp(x->op, y->op);
}

static void write_histogram(FILE *f, const report_hist *h, const char *what) {
  if (!h->ok || h->n == 0) {
    fputs("<p class=\"note\">No ", f);
    html_text(f, what);
    fputs(" histogram: the model did not compile.</p>\n", f);
    return;
  }
  report_op *ops = malloc(sizeof *ops * (size_t)h->n);
  int top = h->n < TOP_OPS ? h->n : TOP_OPS;
  svg_bar *bars = calloc((size_t)top, sizeof *bars);
  char (*labels)[96] = calloc((size_t)top, sizeof *labels);
  char (*texts)[24] = calloc((size_t)top, sizeof *texts);
  if (ops && bars && labels && texts) {
    memcpy(ops, h->ops, sizeof *ops * (size_t)h->n);
    qsort(ops, (size_t)h->n, sizeof *ops, cmp_op);
    for (int i = 0; i < top; i++) {
      snprintf(labels[i], sizeof labels[i], "%.60s (%.24s)", ops[i].op, ops[i].kind);
      snprintf(texts[i], sizeof texts[i], "%d", ops[i].count);
      bars[i] = (svg_bar){labels[i], NULL, ops[i].count, NAN, NAN, "#76b7b2", texts[i]};
    }
    char title[160];
    snprintf(title, sizeof title, "%s: %d nodes, %d distinct ops%s", what, h->total, h->n,
             h->n > top ? " (the most frequent shown)" : "");
    svg_bar_chart(f, title, bars, top, CHART_W);
  }
  free(ops);
  free(bars);
  free(labels);
  free(texts);
}

/* ---- the page ---- */
void report_write_html(FILE *f, const report_data *d) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>fissile report: ", f);
  html_text(f, d->o->model);
  fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n", k_style);
  write_header(f, d);
  fputs("<h2>Strategies</h2>\n", f);
  write_strategy_table(f, d);
  if (!d->peer.have)
    fputs("<p class=\"meta\">No peer latency given (<code>--peer FILE.json</code>, e.g. ONNX Runtime's).</p>\n", f);
  write_latency_chart(f, d);
  write_kinds_chart(f, d);
  write_breakdown(f, d);
  fputs("<h2>Plan graph</h2>\n", f);
  if (d->plan_svg) {
    fputs("<p class=\"meta\">Each kernel is a cluster labelled with its index, kind and cost in the plan; drawn by "
          "Graphviz dot.</p>\n<div class=\"graph\">\n",
          f);
    fputs(d->plan_svg, f); /* from dot: labels escaped by Graphviz, checked for active content (report.c) */
    fputs("\n</div>\n", f);
  } else {
    text_tag(f, "p", "note", d->plan_note[0] ? d->plan_note : "No plan to draw.");
    fputc('\n', f);
  }
  fputs("<h2>Model</h2>\n", f);
  write_histogram(f, &d->onnx_hist, "ONNX ops");
  write_histogram(f, &d->prim_hist, "Primitives after fission");
  fputs("<p class=\"meta\">Written by <code>fissile report</code>: one self-contained page, no script.</p>\n"
        "</body>\n</html>\n",
        f);
}
