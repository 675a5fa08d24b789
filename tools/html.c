/* html.c — escaping, numbers with units and SVG bar charts for
 * `fissile report` (html.h). */
#include "html.h"

#include <math.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at p (1 to 4 bytes), 0 when it
 * is not one (stray continuation, overlong form, surrogate, beyond
 * U+10FFFF, cut short: model strings are untrusted, and cut at a byte
 * count when shortened). */
static int utf8_len(const unsigned char *p) {
  if (p[0] < 0x80) return 1;
  int n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
  for (int i = 1; i < n; i++) /* stops at the terminating NUL */
    if ((p[i] & 0xc0) != 0x80) return 0;
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
      (p[0] == 0xf4 && p[1] >= 0x90))
    return 0;
  return n;
}

void html_text(FILE *f, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
    if (*p >= 0x80) {
      int n = utf8_len(p);
      if (n == 0) fputs("\xef\xbf\xbd", f);
      else fwrite(p, 1, (size_t)n, f);
      if (n > 1) p += n - 1;
      continue;
    }
    switch (*p) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default:
      /* XML 1.0 forbids most control characters even as references */
      if ((*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7f) fputs("\xef\xbf\xbd", f);
      else fputc(*p, f);
    }
  }
}

char *fmt_time(double s, char *buf, size_t len) {
  if (!isfinite(s)) snprintf(buf, len, "-");
  else if (fabs(s) >= 1) snprintf(buf, len, "%.3f s", s);
  else if (fabs(s) >= 1e-3) snprintf(buf, len, "%.3f ms", s * 1e3);
  else snprintf(buf, len, "%.2f \xc2\xb5s", s * 1e6);
  return buf;
}

char *fmt_bytes(double b, char *buf, size_t len) {
  if (!isfinite(b)) snprintf(buf, len, "-");
  else if (b < 1024) snprintf(buf, len, "%.0f B", b);
  else if (b < 1024.0 * 1024) snprintf(buf, len, "%.2f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) snprintf(buf, len, "%.2f MiB", b / (1024.0 * 1024));
  else snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

char *fmt_count(double v, char *buf, size_t len) {
  if (!isfinite(v)) snprintf(buf, len, "-");
  else if (v < 1e3) snprintf(buf, len, "%.0f", v);
  else if (v < 1e6) snprintf(buf, len, "%.1f k", v / 1e3);
  else if (v < 1e9) snprintf(buf, len, "%.2f M", v / 1e6);
  else snprintf(buf, len, "%.2f G", v / 1e9);
  return buf;
}

enum { LABEL_W = 190, VALUE_W = 150, ROW_H = 22, TITLE_H = 26 };

static void svg_open(FILE *f, int width, int height, const char *title) {
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n<title>",
          width, height, width, height);
  html_text(f, title);
  fputs("</title>\n<text x=\"0\" y=\"16\" font-weight=\"bold\" font-size=\"13\">", f);
  html_text(f, title);
  fputs("</text>\n", f);
}

/* Writes "text" at (x, y) anchored `anchor`. */
static void svg_label(FILE *f, double x, double y, const char *anchor, const char *text) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
  html_text(f, text);
  fputs("</text>\n", f);
}

void svg_bar_chart(FILE *f, const char *title, const svg_bar *bars, int n, int width) {
  /* the scale fits the bars and their whiskers, but a whisker longer than
   * twice the longest bar (one slow outlier run) is cut at the edge so
   * that it does not squash every bar */
  double vmax = 0, max = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(bars[i].value) && bars[i].value > vmax) vmax = bars[i].value;
  max = vmax;
  for (int i = 0; i < n; i++)
    if (isfinite(bars[i].hi) && bars[i].hi > max) max = vmax > 0 && bars[i].hi > 2 * vmax ? 2 * vmax : bars[i].hi;
  int plot_w = width - LABEL_W - VALUE_W;
  if (plot_w < 50) plot_w = 50;
  int height = TITLE_H + n * ROW_H + 8;
  svg_open(f, width, height, title);
  for (int i = 0; i < n; i++) {
    const svg_bar *b = &bars[i];
    double y = TITLE_H + i * ROW_H;
    if (b->label && *b->label) svg_label(f, LABEL_W - 8, y + 15, "end", b->label);
    double w = isfinite(b->value) && max > 0 ? b->value / max * plot_w : 0;
    if (w > 0) {
      fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"", LABEL_W, y + 3, w, ROW_H - 6);
      html_text(f, b->color ? b->color : "#4e79a7");
      fputs("\"/>\n", f);
    }
    double end = w;
    if (isfinite(b->lo) && isfinite(b->hi) && max > 0) {
      bool cut = b->hi > max;
      double x0 = LABEL_W + fmin(b->lo, max) / max * plot_w, x1 = LABEL_W + fmin(b->hi, max) / max * plot_w;
      double ym = y + ROW_H / 2.0;
      fprintf(f, "<path d=\"M%.1f %.1fH%.1fM%.1f %.1fV%.1f", x0, ym, x1, x0, ym - 5, ym + 5);
      if (cut) fprintf(f, "M%.1f %.1fL%.1f %.1fL%.1f %.1f", x1 - 5, ym - 4, x1, ym, x1 - 5, ym + 4); /* goes on */
      else fprintf(f, "M%.1f %.1fV%.1f", x1, ym - 5, ym + 5);
      fputs("\" stroke=\"#222\" stroke-width=\"1.2\" fill=\"none\"/>\n", f);
      if (x1 - LABEL_W > end) end = x1 - LABEL_W;
    }
    char txt[160];
    snprintf(txt, sizeof txt, "%s%s%s", b->series ? b->series : "", b->series && b->text ? " " : "",
             b->text ? b->text : isfinite(b->value) ? "" : "-");
    svg_label(f, LABEL_W + end + 6, y + 15, "start", txt);
  }
  fputs("</svg>\n", f);
}

void svg_stacked_chart(FILE *f, const char *title, const svg_stack *rows, int n, const char *const *seg_names,
                       const char *const *colors, int n_seg, int width) {
  double max = 0;
  for (int i = 0; i < n; i++) {
    double t = 0;
    for (int s = 0; s < n_seg; s++) t += rows[i].values[s] > 0 ? rows[i].values[s] : 0;
    if (t > max) max = t;
  }
  int plot_w = width - LABEL_W - VALUE_W;
  if (plot_w < 50) plot_w = 50;
  int legend_y = TITLE_H + n * ROW_H + 6;
  int height = legend_y + 22;
  svg_open(f, width, height, title);
  for (int i = 0; i < n; i++) {
    double y = TITLE_H + i * ROW_H, x = LABEL_W, total = 0;
    svg_label(f, LABEL_W - 8, y + 15, "end", rows[i].label);
    for (int s = 0; s < n_seg; s++) {
      double v = rows[i].values[s];
      if (!(v > 0)) continue;
      total += v;
      double w = max > 0 ? v / max * plot_w : 0;
      fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"", x, y + 3, w, ROW_H - 6);
      html_text(f, colors[s]);
      fputs("\"><title>", f);
      html_text(f, seg_names[s]);
      fprintf(f, ": %.0f</title></rect>\n", v);
      x += w;
    }
    char txt[64];
    snprintf(txt, sizeof txt, "%.0f", total);
    svg_label(f, x + 6, y + 15, "start", txt);
  }
  double x = LABEL_W;
  for (int s = 0; s < n_seg; s++) {
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"12\" height=\"12\" fill=\"", x, legend_y);
    html_text(f, colors[s]);
    fputs("\"/>\n", f);
    svg_label(f, x + 16, legend_y + 11, "start", seg_names[s]);
    x += 24 + 8.0 * (double)strlen(seg_names[s]);
  }
  fputs("</svg>\n", f);
}
