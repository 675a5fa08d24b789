/* error.c — status names and the thread-local error message. */
#include "core.h"

static _Thread_local char g_msg[4096];

static const char *const k_status_names[] = {
  "ok", "bad argument", "I/O error", "parse error", "invalid model",
  "unsupported", "shape error", "out of memory", "runtime error",
};
_Static_assert(FSL_ARRAY_LEN(k_status_names) == FSL_STATUS_COUNT,
               "status name table out of sync");

const char *fsl_status_name(fsl_status s) {
  return (unsigned)s < FSL_STATUS_COUNT ? k_status_names[s] : "unknown status";
}

const char *fsl_last_error(void) { return g_msg; }
void fsl_error_clear(void) { g_msg[0] = 0; }

fsl_status fsl_errorf(fsl_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_msg, sizeof g_msg, fmt, ap);
  va_end(ap);
  return s;
}

fsl_status fsl_error_context(fsl_status s, const char *fmt, ...) {
  char prefix[1024], old[sizeof g_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, g_msg, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof g_msg - 3) n = sizeof g_msg - 3;
  memcpy(g_msg, prefix, n);
  memcpy(g_msg + n, ": ", 2);
  size_t room = sizeof g_msg - n - 3, ol = strlen(old);
  if (ol > room) ol = room;
  memcpy(g_msg + n + 2, old, ol);
  g_msg[n + 2 + ol] = 0;
  return s;
}
