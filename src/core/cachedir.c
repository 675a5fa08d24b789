/* cachedir.c — the one lookup of fissile's cache folders (core.h). */
#include "core.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p; false with errno set on failure. */
static bool make_dirs(char *dir) {
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    bool ok = mkdir(dir, 0755) == 0 || errno == EEXIST;
    *p = '/';
    if (!ok) return false;
  }
  return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

fsl_status fsl_cache_folder(const char *sub, char *buf, size_t cap) {
  if (!buf || cap == 0) return fsl_errorf(FSL_ERR_ARG, "fsl_cache_folder: NULL argument");
  const char *d = getenv("FSL_CACHE_DIR");
  const char *s = sub && *sub ? "/" : "";
  if (!sub) sub = "";
  int n;
  if (d && *d) n = snprintf(buf, cap, "%s", d);
  else if ((d = getenv("XDG_CACHE_HOME")) && *d) n = snprintf(buf, cap, "%s/fissile%s%s", d, s, sub);
  else if ((d = getenv("HOME")) && *d) n = snprintf(buf, cap, "%s/.cache/fissile%s%s", d, s, sub);
  else n = snprintf(buf, cap, "/tmp/fissile-%ld%s%s", (long)getuid(), s, sub);
  if (n < 0 || (size_t)n >= cap) return fsl_errorf(FSL_ERR_RUNTIME, "cache folder path too long (set FSL_CACHE_DIR)");
  if (!make_dirs(buf))
    return fsl_errorf(FSL_ERR_RUNTIME, "cannot create the cache folder '%s': %s (set FSL_CACHE_DIR)", buf,
                      strerror(errno));
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return fsl_errorf(FSL_ERR_RUNTIME, "cache folder '%s' is not a folder (set FSL_CACHE_DIR)", buf);
  return FSL_OK;
}
