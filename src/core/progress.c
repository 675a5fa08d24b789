/* progress.c — the process-wide progress receiver (fsl_set_progress) and
 * the one way library code reports progress (core.h). */
#include "core.h"

static fsl_progress_fn g_fn;
static void *g_ctx;

void fsl_set_progress(fsl_progress_fn fn, void *ctx) {
  g_fn = fn;
  g_ctx = ctx;
}

bool fsl_progress_wanted(void) { return g_fn != NULL; }

void fsl_progress_emit(const char *task, const char *detail, int done, int total, double elapsed_s, bool finished) {
  if (!g_fn) return;
  fsl_progress ev = {.task = task, .detail = detail ? detail : "", .done = done, .total = total,
                     .elapsed_s = elapsed_s, .finished = finished};
  g_fn(&ev, g_ctx);
}
