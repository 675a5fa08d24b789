/* progress.c — draws progress on stderr for the fissile tool: the
 * library's events (fsl_set_progress: the C compiler building a plan's
 * kernels, kernels being measured) and the tool's own (bench).  On a
 * terminal, one line redrawn in place with the count, the elapsed time and
 * an estimate of what is left; otherwise plain lines (a task's start, each
 * counted step, its end). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool g_tty;
static bool g_line_open; /* a redrawn line is on screen without its newline */

/* "12 s" / "1.5 s" / "3 min 5 s" */
static void fmt_secs(double s, char *buf, size_t len) {
  if (s < 10) snprintf(buf, len, "%.1f s", s);
  else if (s < 120) snprintf(buf, len, "%.0f s", s);
  else snprintf(buf, len, "%d min %d s", (int)(s / 60), (int)s % 60);
}

void cli_progress(const char *task, const char *detail, int done, int total, double elapsed_s, bool finished) {
  char line[512], el[32], left[48] = "";
  fmt_secs(elapsed_s, el, sizeof el);
  bool compile = !strcmp(task, "compile");
  if (compile && finished)
    snprintf(line, sizeof line, "fissile: compiled %s in %s (first build of this plan; the kernel cache serves "
             "the next run)", detail, el);
  else if (compile)
    snprintf(line, sizeof line, "fissile: compiling %s (first build of this plan) ... %s", detail, el);
  else {
    if (total > 0 && done > 0 && done < total) {
      char est[32];
      fmt_secs(elapsed_s / done * (total - done), est, sizeof est);
      snprintf(left, sizeof left, ", about %s left", est);
    }
    if (total > 0)
      snprintf(line, sizeof line, "%s: %d/%d %s, %s%s%s", task, done, total, detail, el, left,
               finished ? ", done" : "");
    else /* not countable in advance: how far it got */
      snprintf(line, sizeof line, "%s: %d %s, %s%s", task, done, detail, el, finished ? ", done" : "");
  }
  if (g_tty) {
    fprintf(stderr, "\r\033[K%s%s", line, finished ? "\n" : "");
    g_line_open = !finished;
  } else {
    /* plain lines: of the compiler's once-a-second ticks, only the first */
    static bool compile_announced;
    if (compile && !finished && compile_announced) return;
    compile_announced = compile && !finished;
    fprintf(stderr, "%s\n", line);
  }
  fflush(stderr);
}

static void library_progress(const fsl_progress *ev, void *ctx) {
  (void)ctx;
  cli_progress(ev->task, ev->detail, ev->done, ev->total, ev->elapsed_s, ev->finished);
}

void cli_progress_install(void) {
  g_tty = isatty(STDERR_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb") != 0;
  fsl_set_progress(library_progress, NULL);
}

void cli_progress_end_line(void) {
  if (g_line_open) fputc('\n', stderr);
  g_line_open = false;
}
