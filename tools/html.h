/* html.h — what `fissile report` writes its page with (html.c): HTML/XML
 * escaping, number formatting with units, and horizontal bar charts as
 * inline SVG (well-formed XML, no script, colours as attributes). */
#ifndef FSL_TOOLS_HTML_H
#define FSL_TOOLS_HTML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/** Writes s with &, <, >, " and ' escaped (valid in HTML text, HTML
 *  attribute values and XML), and control characters other than tab and
 *  newline, and bytes that are not well-formed UTF-8, as U+FFFD; NULL
 *  writes nothing. */
void html_text(FILE *f, const char *s);

/** A duration in seconds with its unit: "1.234 s", "12.345 ms", "56.78 µs"
 *  (three decimals in s and ms, two in µs; "-" when not finite).  Returns buf. */
char *fmt_time(double s, char *buf, size_t len);
/** Bytes with a binary unit: "512 B", "1.50 KiB", "3.25 MiB", "1.20 GiB". */
char *fmt_bytes(double b, char *buf, size_t len);
/** A count with a decimal prefix: "950", "12.3 k", "4.56 M", "7.89 G". */
char *fmt_count(double v, char *buf, size_t len);

/** One bar of svg_bar_chart. */
typedef struct svg_bar {
  const char *label;     /* left of the bar ("" or NULL: none, e.g. a second bar of a group) */
  const char *series;    /* small text before the value, e.g. "measured" (may be NULL) */
  double value;          /* bar length, in the chart's unit; NaN: no bar, text "-" */
  double lo, hi;         /* a whisker from lo to hi (NaN: none), e.g. p10..p90 */
  const char *color;     /* fill, e.g. "#4e79a7" */
  const char *text;      /* the value as shown right of the bar (NULL: none) */
} svg_bar;

/** Writes a horizontal bar chart of n bars as one <svg> element, `width`
 *  pixels wide, scaled so the largest value and whisker fit (a whisker
 *  beyond twice the largest value is cut at the edge, drawn as an arrow);
 *  title is the chart's caption (escaped). */
void svg_bar_chart(FILE *f, const char *title, const svg_bar *bars, int n, int width);

/** One row of svg_stacked_chart: n_seg values (counts) stacked left to right. */
typedef struct svg_stack {
  const char *label;
  const double *values;
} svg_stack;

/** Writes stacked horizontal bars (one per row, segments coloured by
 *  colors[s] and named by seg_names[s] in a legend), the total at the end. */
void svg_stacked_chart(FILE *f, const char *title, const svg_stack *rows, int n, const char *const *seg_names,
                       const char *const *colors, int n_seg, int width);

#endif
