/*
 * external.c — ONNX external data (TensorProto.data_location == EXTERNAL):
 * parsing the key/value entries and opening the file safely.
 *
 * The location is untrusted: it must be a relative path that stays inside
 * the model's folder (https://onnx.ai/onnx/repo-docs/ExternalData.html).
 * We refuse absolute paths and ".." components up front, then compare
 * real paths so that a symlink pointing out of the folder is refused too.
 */
#include "onnx/onnx_internal.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>

/* Parses a non-negative decimal integer that fits int64; false otherwise. */
static bool parse_i64(const char *s, int64_t *out) {
  if (!s || !*s) return false;
  int64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return false;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v))
      return false;
  }
  *out = v;
  return true;
}

fsl_status fsl_onnx_extref_parse(const Onnx__TensorProto *tp, const char *what,
                                 fsl_onnx_extref *ref) {
  ref->location = NULL;
  ref->offset = 0;
  ref->length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
    if (!strcmp(k, "location")) {
      ref->location = v;
    } else if (!strcmp(k, "offset")) {
      if (!parse_i64(v, &ref->offset))
        return fsl_errorf(FSL_ERR_INVALID, "%s: external data offset '%s' is not a non-negative integer",
                          what, v);
    } else if (!strcmp(k, "length")) {
      if (!parse_i64(v, &ref->length))
        return fsl_errorf(FSL_ERR_INVALID, "%s: external data length '%s' is not a non-negative integer",
                          what, v);
    } /* "checksum" and unknown keys are ignored */
  }
  if (!ref->location || !*ref->location)
    return fsl_errorf(FSL_ERR_INVALID, "%s: external data has no 'location'", what);
  return FSL_OK;
}

/* true if `loc` is relative and has no ".." component ('/' or '\\' separated). */
static bool location_is_safe(const char *loc) {
  if (loc[0] == '/' || loc[0] == '\\') return false;
  const char *p = loc;
  while (*p) {
    size_t n = strcspn(p, "/\\");
    if (n == 2 && p[0] == '.' && p[1] == '.') return false;
    p += n;
    if (*p) p++;
  }
  return true;
}

/* true if real path `path` lies strictly inside real folder `dir`. */
static bool path_is_inside(const char *dir, const char *path) {
  size_t n = strlen(dir);
  if (n > 0 && dir[n - 1] == '/') return strncmp(path, dir, n) == 0 && path[n] != 0;
  return strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] != 0;
}

fsl_status fsl_onnx_extfile_open(const char *dir, const char *location, const char *what,
                                 FILE **f, int64_t *size) {
  *f = NULL;
  if (!dir)
    return fsl_errorf(FSL_ERR_INVALID,
                      "%s: external data '%s' but no model folder to resolve it against "
                      "(model loaded from memory)", what, location);
  if (!location_is_safe(location))
    return fsl_errorf(FSL_ERR_INVALID,
                      "%s: external data location '%s' must be a relative path without '..'",
                      what, location);
  char joined[PATH_MAX], rdir[PATH_MAX], rpath[PATH_MAX];
  int w = snprintf(joined, sizeof joined, "%s/%s", dir, location);
  if (w < 0 || (size_t)w >= sizeof joined)
    return fsl_errorf(FSL_ERR_INVALID, "%s: external data path '%s' is too long", what, location);
  if (!realpath(dir, rdir))
    return fsl_errorf(FSL_ERR_IO, "%s: cannot resolve model folder '%s': %s", what, dir,
                      strerror(errno));
  if (!realpath(joined, rpath))
    return fsl_errorf(FSL_ERR_IO, "%s: cannot open external data file '%s': %s", what, joined,
                      strerror(errno));
  if (!path_is_inside(rdir, rpath))
    return fsl_errorf(FSL_ERR_INVALID,
                      "%s: external data location '%s' resolves to '%s', outside the model folder '%s'",
                      what, location, rpath, rdir);
  FILE *fp = fopen(rpath, "rb");
  if (!fp)
    return fsl_errorf(FSL_ERR_IO, "%s: cannot open external data file '%s': %s", what, rpath,
                      strerror(errno));
  struct stat st;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(fp);
    return fsl_errorf(FSL_ERR_INVALID, "%s: external data '%s' is not a regular file", what, rpath);
  }
  *f = fp;
  *size = (int64_t)st.st_size;
  return FSL_OK;
}
