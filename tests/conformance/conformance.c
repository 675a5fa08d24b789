/*
 * conformance.c — runs ONNX backend node test cases through libfissile.
 *
 *   fsl_conformance [options] PATH...
 *
 * PATH is a test case folder (model.onnx + test_data_set_N/{input,output}_K.pb)
 * or a folder holding many test_* case folders.  Every data set of a case is
 * run through the public API only (load, bind shapes, compile, run) and its
 * outputs are compared with the expected ones using the tolerances of ONNX's
 * backend test runner (rtol 1e-3, atol 1e-7; NaN equals NaN; integers and
 * bools exact; dtype and shape must match).
 *
 * By default the model runs on the reference interpreter; --backend and
 * --strategy choose another backend ("plan-ref", "cpu", "opencl") and the strategy its
 * plan is built with (fsl_model_set_backend, fsl_model_set_strategy); --rewrite
 * the rewrite mode of the primitive graph (fsl_model_set_rewrite).
 *
 * Each case runs in its own forked child with a time limit, so a crash or a
 * hang is reported as a failure of that case.  With --list the run fails if
 * a case named in the list does not pass (a regression).
 *
 * On a plan backend every passing case also reports how many of its
 * kernels fell back to the host reference interpreter (fsl_plan_info's
 * n_fallback).  With --fallback-list the run fails if a passing case falls
 * back without being named in that list: a case the backend ran natively
 * that it no longer does is a regression too, even though it still passes.
 */
#include "fissile.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RTOL 1e-3
#define ATOL 1e-7
#define MAX_IO 64

/* ---- small helpers ---- */

typedef struct strbuf {
  char *s;
  size_t len, cap;
} strbuf;

static void sb_append(strbuf *b, const char *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) { perror("realloc"); exit(2); }
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->len, p, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void sb_printf(strbuf *b, const char *fmt, ...) {
  char tmp[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof tmp) n = (int)sizeof tmp - 1;
  sb_append(b, tmp, (size_t)n);
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dst = a + "/" + b; paths longer than cap are a usage error. */
static void join(char *dst, size_t cap, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la + 1 + lb + 1 > cap) {
    fprintf(stderr, "fsl_conformance: path too long: %s/%s\n", a, b);
    exit(2);
  }
  memcpy(dst, a, la);
  dst[la] = '/';
  memcpy(dst + la + 1, b, lb + 1);
}

/* Copies src into dst[cap], truncating. */
static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static bool dir_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *base_name(const char *path) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  static char buf[1024];
  size_t start = n;
  while (start > 0 && path[start - 1] != '/') start--;
  size_t len = n - start;
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, path + start, len);
  buf[len] = '\0';
  return buf;
}

/* One line of text: newlines become "; "; longer than cap-1 bytes ends "...". */
static void one_line(char *dst, size_t cap, const char *src) {
  size_t j = 0, i = 0;
  for (; src[i] && j + 2 < cap; i++) {
    if (src[i] == '\n') {
      if (src[i + 1] == '\0') break;
      dst[j++] = ';';
      dst[j++] = ' ';
    } else {
      dst[j++] = src[i];
    }
  }
  dst[j] = '\0';
  if (src[i] && src[i] != '\n' && cap > 4) strcpy(dst + (j > cap - 4 ? cap - 4 : j), "...");
}

/* ---- tensor comparison ---- */

static double half_to_double(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = ldexp((double)man, -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = ldexp((double)(man | 0x400), exp - 25);
  return sign ? -v : v;
}

static double bf16_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static bool is_float_dtype(fsl_dtype dt) {
  return dt == FSL_DT_F32 || dt == FSL_DT_F64 || dt == FSL_DT_F16 || dt == FSL_DT_BF16;
}

static double elem_as_double(const fsl_tensor *t, int64_t i) {
  switch (t->dtype) {
  case FSL_DT_F32: return ((const float *)t->data)[i];
  case FSL_DT_F64: return ((const double *)t->data)[i];
  case FSL_DT_F16: return half_to_double(((const uint16_t *)t->data)[i]);
  case FSL_DT_BF16: return bf16_to_double(((const uint16_t *)t->data)[i]);
  case FSL_DT_U8: return ((const uint8_t *)t->data)[i];
  case FSL_DT_I8: return ((const int8_t *)t->data)[i];
  case FSL_DT_U16: return ((const uint16_t *)t->data)[i];
  case FSL_DT_I16: return ((const int16_t *)t->data)[i];
  case FSL_DT_I32: return ((const int32_t *)t->data)[i];
  case FSL_DT_I64: return (double)((const int64_t *)t->data)[i];
  case FSL_DT_U32: return ((const uint32_t *)t->data)[i];
  case FSL_DT_U64: return (double)((const uint64_t *)t->data)[i];
  case FSL_DT_BOOL: return ((const uint8_t *)t->data)[i];
  default: return NAN;
  }
}

static void shape_str(const fsl_tensor *t, char *buf, size_t cap) {
  size_t j = 0;
  j += (size_t)snprintf(buf + j, cap - j, "[");
  for (int d = 0; d < t->rank && j < cap; d++)
    j += (size_t)snprintf(buf + j, cap - j, "%s%lld", d ? "," : "", (long long)t->dims[d]);
  if (j < cap) snprintf(buf + j, cap - j, "]");
}

/* Compares got against want; on mismatch writes a one-line reason to why
 * and returns false.  Details go to det. */
static bool compare(const fsl_tensor *got, const fsl_tensor *want_in, char *why, size_t whycap, strbuf *det) {
  char gs[256], ws[256];
  fsl_tensor want_bf16;
  const fsl_tensor *want = want_in;
  if (got->dtype == FSL_DT_BF16 && want_in->dtype == FSL_DT_U16) {
    /* bfloat16 stored as uint16 by older ONNX test data: same bits */
    want_bf16 = *want_in;
    want_bf16.dtype = FSL_DT_BF16;
    want = &want_bf16;
  }
  if (got->dtype != want->dtype) {
    snprintf(why, whycap, "dtype %s, expected %s", fsl_dtype_name(got->dtype), fsl_dtype_name(want->dtype));
    return false;
  }
  shape_str(got, gs, sizeof gs);
  shape_str(want, ws, sizeof ws);
  if (got->rank != want->rank || memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)want->rank) != 0) {
    snprintf(why, whycap, "shape %s, expected %s", gs, ws);
    return false;
  }
  int64_t n = fsl_tensor_numel(want);
  if (n == 0) return true;
  if (!got->data || !want->data) {
    snprintf(why, whycap, "missing data");
    return false;
  }
  int64_t bad = 0, first = -1;
  double max_abs = 0, max_rel = 0;
  if (is_float_dtype(want->dtype)) {
    for (int64_t i = 0; i < n; i++) {
      double a = elem_as_double(got, i), b = elem_as_double(want, i);
      bool ok;
      if (isnan(a) || isnan(b)) ok = isnan(a) && isnan(b);
      else if (isinf(a) || isinf(b)) ok = a == b;
      else {
        double d = fabs(a - b);
        ok = d <= ATOL + RTOL * fabs(b);
        if (d > max_abs) max_abs = d;
        if (b != 0 && d / fabs(b) > max_rel) max_rel = d / fabs(b);
      }
      if (!ok) {
        if (first < 0) first = i;
        bad++;
      }
    }
  } else {
    size_t es = fsl_dtype_size(want->dtype);
    if (es == 0) {
      snprintf(why, whycap, "cannot compare dtype %s", fsl_dtype_name(want->dtype));
      return false;
    }
    const unsigned char *pa = got->data, *pb = want->data;
    for (int64_t i = 0; i < n; i++) {
      bool ok;
      if (want->dtype == FSL_DT_BOOL) ok = (pa[i] != 0) == (pb[i] != 0);
      else ok = memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es) == 0;
      if (!ok) {
        if (first < 0) first = i;
        bad++;
      }
    }
  }
  if (bad == 0) return true;
  snprintf(why, whycap, "%lld of %lld values differ (first at %lld: got %.9g, expected %.9g; max abs diff %.3g)",
           (long long)bad, (long long)n, (long long)first, elem_as_double(got, first),
           elem_as_double(want, first), max_abs);
  if (det) {
    sb_printf(det, "    shape %s dtype %s, max abs diff %.6g, max rel diff %.6g\n", ws,
              fsl_dtype_name(want->dtype), max_abs, max_rel);
    int shown = 0;
    for (int64_t i = 0; i < n && shown < 8; i++) {
      double a = elem_as_double(got, i), b = elem_as_double(want, i);
      bool same = (isnan(a) && isnan(b)) || a == b ||
                  (is_float_dtype(want->dtype) && fabs(a - b) <= ATOL + RTOL * fabs(b));
      if (!same) {
        sb_printf(det, "    [%lld] got %.9g expected %.9g\n", (long long)i, a, b);
        shown++;
      }
    }
  }
  return false;
}

/* ---- one case ---- */

typedef enum {
  R_PASS = 0,
  R_PASS_FROZEN,
  R_FAIL,
  R_UNSUPPORTED,
} result_kind;

static const char *kind_tag[] = {"PASS", "PASSF", "FAIL", "UNSUP"};

typedef struct tensor_list {
  fsl_tensor t[MAX_IO];
  int n;
} tensor_list;

static void tl_free(tensor_list *l) {
  for (int i = 0; i < l->n; i++) fsl_tensor_free(&l->t[i]);
  l->n = 0;
}

/* Loads <dir>/<prefix>_K.pb for K = 0, 1, ... until one is missing. */
static fsl_status load_pbs(const char *dir, const char *prefix, tensor_list *l, char *why, size_t whycap) {
  l->n = 0;
  for (int k = 0; k < MAX_IO; k++) {
    char path[4096];
    char file[64];
    snprintf(file, sizeof file, "%.40s_%d.pb", prefix, k);
    join(path, sizeof path, dir, file);
    if (!file_exists(path)) break;
    memset(&l->t[k], 0, sizeof l->t[k]);
    fsl_status s = fsl_tensor_load_pb(path, &l->t[k]);
    if (s != FSL_OK) {
      snprintf(why, whycap, "loading %s_%d.pb: %s: %s", prefix, k, fsl_status_name(s), fsl_last_error());
      return s;
    }
    l->n = k + 1;
  }
  return FSL_OK;
}

typedef struct case_out {
  result_kind kind;
  char why[1024];
  int n_fallback;         /* kernels run by the reference fallback (most of any data set) */
  char fallback_why[256]; /* fsl_plan_info.fallback_why of that data set */
  strbuf det;
} case_out;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of entries of dir starting with prefix that are folders. */
static int list_subdirs(const char *dir, const char *prefix, char ***out) {
  DIR *d = opendir(dir);
  *out = NULL;
  if (!d) return 0;
  int n = 0, cap = 0;
  char **names = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    char path[4096];
    join(path, sizeof path, dir, e->d_name);
    if (!dir_exists(path)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nn = realloc(names, sizeof *names * (size_t)cap);
      if (!nn) { perror("realloc"); exit(2); }
      names = nn;
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
  *out = names;
  return n;
}

static void free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* Which inputs a compile attempt freezes to their test values: level 0
 * none; 1 every non-float input (shape-like parameters: Reshape's shape,
 * TopK's k, ...); 2 additionally every input but the first (float parameter
 * inputs: Resize's scales and roi, OneHot's depth, ...). */
static bool frozen_at(int level, int i, fsl_dtype dt) {
  return (level >= 1 && !is_float_dtype(dt)) || (level >= 2 && i > 0);
}

/* Whether freeze level `to` freezes an input that level `from` does not. */
static bool freezes_more(const tensor_list *in, int from, int to) {
  for (int i = 0; i < in->n; i++)
    if (frozen_at(to, i, in->t[i].dtype) && !frozen_at(from, i, in->t[i].dtype)) return true;
  return false;
}

/* The backend and strategy every case is compiled for (--backend,
 * --strategy); NULL / -1: the library's defaults (reference interpreter, no
 * plan). */
static const char *g_backend;
static int g_strategy = -1;
static int g_rewrite = -1; /* --rewrite; -1: the library's default (rules) */

/* Loads the model, chooses the backend and strategy, and binds every runtime
 * input to the shape of its test input; inputs frozen_at(level) become
 * constants. */
static fsl_status prepare(const char *model_path, tensor_list *in, int level, fsl_model **out,
                          char names[][128], int *n_names, int *frozen_count, char *why, size_t whycap) {
  fsl_model *m = NULL;
  *out = NULL;
  *frozen_count = 0;
  fsl_status s = fsl_model_load(model_path, &m);
  if (s != FSL_OK) {
    snprintf(why, whycap, "load: %s: %.700s", fsl_status_name(s), fsl_last_error());
    return s;
  }
  if (g_backend && (s = fsl_model_set_backend(m, g_backend)) != FSL_OK) {
    snprintf(why, whycap, "set_backend(%s): %s: %.700s", g_backend, fsl_status_name(s), fsl_last_error());
    fsl_model_free(m);
    return s;
  }
  if (g_strategy >= 0 && (s = fsl_model_set_strategy(m, g_strategy)) != FSL_OK) {
    snprintf(why, whycap, "set_strategy(%d): %s: %.700s", g_strategy, fsl_status_name(s), fsl_last_error());
    fsl_model_free(m);
    return s;
  }
  if (g_rewrite >= 0 && (s = fsl_model_set_rewrite(m, (fsl_rewrite_mode)g_rewrite)) != FSL_OK) {
    snprintf(why, whycap, "set_rewrite(%d): %s: %.700s", g_rewrite, fsl_status_name(s), fsl_last_error());
    fsl_model_free(m);
    return s;
  }
  int n = fsl_model_num_inputs(m);
  if (n != in->n) {
    snprintf(why, whycap, "model has %d runtime inputs, test data has %d", n, in->n);
    fsl_model_free(m);
    return FSL_ERR_INVALID;
  }
  for (int i = 0; i < n; i++) {
    fsl_tensor info;
    memset(&info, 0, sizeof info);
    s = fsl_model_input_info(m, i, &info);
    if (s != FSL_OK) {
      snprintf(why, whycap, "input_info(%d): %s: %.700s", i, fsl_status_name(s), fsl_last_error());
      fsl_model_free(m);
      return s;
    }
    copy_str(names[i], 128, info.name);
    /* Older ONNX test data (e.g. Debian's onnx 1.12) store bfloat16 tensors
     * as uint16; the bits are the same. */
    if (info.dtype == FSL_DT_BF16 && in->t[i].dtype == FSL_DT_U16) in->t[i].dtype = FSL_DT_BF16;
  }
  *n_names = n;
  for (int i = 0; i < n; i++) {
    s = fsl_model_bind_shape(m, names[i], in->t[i].rank, in->t[i].dims);
    if (s != FSL_OK) {
      snprintf(why, whycap, "bind_shape(%.127s): %s: %.700s", names[i], fsl_status_name(s), fsl_last_error());
      fsl_model_free(m);
      return s;
    }
  }
  if (level > 0) {
    for (int i = 0; i < n; i++) {
      if (!frozen_at(level, i, in->t[i].dtype)) continue;
      fsl_tensor t = in->t[i];
      copy_str(t.name, sizeof t.name, names[i]);
      s = fsl_model_freeze_input(m, &t);
      if (s != FSL_OK) {
        snprintf(why, whycap, "freeze_input(%.127s): %s: %.700s", names[i], fsl_status_name(s), fsl_last_error());
        fsl_model_free(m);
        return s;
      }
      (*frozen_count)++;
    }
  }
  *out = m;
  return FSL_OK;
}

static void run_data_set(const char *case_dir, const char *ds, bool verbose, case_out *co, bool *frozen_used) {
  char ds_dir[4096], model_path[4096];
  join(ds_dir, sizeof ds_dir, case_dir, ds);
  join(model_path, sizeof model_path, case_dir, "model.onnx");
  tensor_list in = {.n = 0}, want = {.n = 0};
  fsl_tensor got[MAX_IO];
  int n_got = 0;
  fsl_model *m = NULL;
  char names[MAX_IO][128];
  int n_names = 0, n_frozen = 0;
  char why1[1024] = "";
  fsl_status s;

  s = load_pbs(ds_dir, "input", &in, co->why, sizeof co->why);
  if (s == FSL_OK) s = load_pbs(ds_dir, "output", &want, co->why, sizeof co->why);
  if (s != FSL_OK) {
    co->kind = s == FSL_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
    goto done;
  }

  /* Compile with nothing frozen; on failure retry at the next freeze level
   * that freezes more inputs than the last. */
  int level = 0;
  for (;;) {
    s = prepare(model_path, &in, level, &m, names, &n_names, &n_frozen, co->why, sizeof co->why);
    if (s == FSL_OK) {
      s = fsl_model_compile(m);
      if (s != FSL_OK) snprintf(co->why, sizeof co->why, "compile: %s: %s", fsl_status_name(s), fsl_last_error());
    }
    if (s == FSL_OK) break;
    if (verbose) sb_printf(&co->det, "  %s: freeze level %d: %s\n", ds, level, co->why);
    if (level == 0) snprintf(why1, sizeof why1, "%s", co->why);
    fsl_model_free(m);
    m = NULL;
    int next = level + 1;
    while (next <= 2 && !freezes_more(&in, level, next)) next++;
    /* Only "unsupported" (a value needed at compile time) is worth a retry
     * with more inputs frozen; any other failure (invalid, a shape error, a
     * backend's compiler or runtime error) is reported as it is, so that
     * folding the whole case into constants cannot hide it. */
    if (s != FSL_ERR_UNSUPPORTED) {
      if (level > 0) {
        char tmp[sizeof co->why];
        snprintf(tmp, sizeof tmp, "%s", co->why);
        snprintf(co->why, sizeof co->why, "with inputs frozen (level %d): %.980s", level, tmp);
      }
      co->kind = R_FAIL;
      goto done;
    }
    if (next > 2) {
      snprintf(co->why, sizeof co->why, "%s", why1);
      co->kind = R_UNSUPPORTED;
      goto done;
    }
    level = next;
  }
  if (level > 0) *frozen_used = true;

  int n_out = fsl_model_num_outputs(m);
  if (n_out != want.n) {
    snprintf(co->why, sizeof co->why, "%s: model has %d outputs, test data has %d", ds, n_out, want.n);
    co->kind = R_FAIL;
    goto done;
  }
  if (n_out > MAX_IO) {
    snprintf(co->why, sizeof co->why, "too many outputs (%d)", n_out);
    co->kind = R_FAIL;
    goto done;
  }
  /* Runtime inputs: the ones not frozen, matched by name. */
  fsl_tensor feed[MAX_IO];
  int n_feed = 0;
  for (int i = 0; i < n_names; i++) {
    if (frozen_at(level, i, in.t[i].dtype)) continue;
    feed[n_feed] = in.t[i];
    copy_str(feed[n_feed].name, sizeof feed[n_feed].name, names[i]);
    n_feed++;
  }
  memset(got, 0, sizeof got);
  s = fsl_model_run(m, feed, n_feed, got, n_out);
  if (s != FSL_OK) {
    snprintf(co->why, sizeof co->why, "%s: run: %s: %s", ds, fsl_status_name(s), fsl_last_error());
    co->kind = R_FAIL;
    goto done;
  }
  n_got = n_out;
  if (g_backend && strcmp(g_backend, "ref")) {
    fsl_plan_info pi;
    if (fsl_model_plan_info(m, &pi) == FSL_OK && pi.n_fallback > co->n_fallback) {
      co->n_fallback = pi.n_fallback;
      snprintf(co->fallback_why, sizeof co->fallback_why, "%s", pi.fallback_why);
    }
  }
  for (int k = 0; k < n_out; k++) {
    char why[768];
    if (!compare(&got[k], &want.t[k], why, sizeof why, verbose ? &co->det : NULL)) {
      fsl_tensor info;
      memset(&info, 0, sizeof info);
      const char *oname = fsl_model_output_info(m, k, &info) == FSL_OK ? info.name : "?";
      snprintf(co->why, sizeof co->why, "%s: output %d (%s): %s", ds, k, oname, why);
      co->kind = R_FAIL;
      goto done;
    }
  }
  co->kind = R_PASS;
done:
  for (int k = 0; k < n_got; k++) fsl_tensor_free(&got[k]);
  fsl_model_free(m);
  tl_free(&in);
  tl_free(&want);
}

static void run_case(const char *case_dir, bool verbose, case_out *co) {
  char **sets = NULL;
  int n_sets = list_subdirs(case_dir, "test_data_set_", &sets);
  bool frozen = false;
  co->kind = R_PASS;
  co->why[0] = '\0';
  if (n_sets == 0) {
    co->kind = R_FAIL;
    snprintf(co->why, sizeof co->why, "no test_data_set_* folder");
  } else {
    /* Load the model once first: a model fissile rejects as unsupported
     * (e.g. sequence or optional inputs, whose test data are not tensors)
     * is reported as such before its test data are read. */
    char model_path[4096];
    join(model_path, sizeof model_path, case_dir, "model.onnx");
    fsl_model *m = NULL;
    fsl_status s = fsl_model_load(model_path, &m);
    if (s != FSL_OK) {
      co->kind = s == FSL_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
      snprintf(co->why, sizeof co->why, "load: %s: %s", fsl_status_name(s), fsl_last_error());
    }
    fsl_model_free(m);
  }
  for (int i = 0; i < n_sets && co->kind == R_PASS; i++) run_data_set(case_dir, sets[i], verbose, co, &frozen);
  if (co->kind == R_PASS && frozen) co->kind = R_PASS_FROZEN;
  free_names(sets, n_sets);
}

/* ---- driver: cases, children, results ---- */

typedef struct case_rec {
  char *dir;
  char *name;
  pid_t pid;
  int fd;            /* read end of the child's result pipe, -1 when closed */
  double start;
  bool done, printed, killed, crashed;
  result_kind kind;
  char *why;
  int n_fallback;    /* kernels run by the reference fallback */
  char *fallback_why;
  strbuf buf;        /* what the child wrote */
  double secs;
} case_rec;

typedef struct opts {
  int jobs;
  double timeout;
  bool verbose, no_fork, fail_on_crash;
  const char *list, *write_list, *filter;
  const char *fallback_list, *write_fallback_list;
  int sample_k, sample_n; /* --sample K/N: only the cases at sorted positions i with i % N == K */
} opts;

static case_rec *cases;
static int n_cases, cap_cases;

static bool passed(const case_rec *c) {
  return c->kind == R_PASS || c->kind == R_PASS_FROZEN;
}

static void add_case(const char *dir) {
  if (n_cases == cap_cases) {
    cap_cases = cap_cases ? cap_cases * 2 : 256;
    case_rec *nc = realloc(cases, sizeof *cases * (size_t)cap_cases);
    if (!nc) { perror("realloc"); exit(2); }
    cases = nc;
  }
  case_rec *c = &cases[n_cases++];
  memset(c, 0, sizeof *c);
  c->dir = strdup(dir);
  c->name = strdup(base_name(dir));
  c->fd = -1;
}

static void collect(const char *path, const char *filter) {
  char model[4096];
  join(model, sizeof model, path, "model.onnx");
  if (file_exists(model)) {
    if (!filter || strstr(base_name(path), filter)) add_case(path);
    return;
  }
  char **subs = NULL;
  int n = list_subdirs(path, "test_", &subs);
  for (int i = 0; i < n; i++) {
    char sub[4096];
    join(sub, sizeof sub, path, subs[i]);
    join(model, sizeof model, sub, "model.onnx");
    if (!file_exists(model)) continue;
    if (filter && !strstr(subs[i], filter)) continue;
    add_case(sub);
  }
  free_names(subs, n);
}

/* Encodes a result for the parent: "TAG reason\n", "FALLBACK N reason\n",
 * then details. */
static void encode_result(const case_out *co, strbuf *out) {
  char line[1100], fb[300];
  one_line(line, sizeof line, co->why);
  one_line(fb, sizeof fb, co->fallback_why);
  sb_printf(out, "%s %s\nFALLBACK %d %s\n", kind_tag[co->kind], line, co->n_fallback, fb);
  if (co->det.s) sb_append(out, co->det.s, co->det.len);
}

static void decode_result(case_rec *c) {
  const char *s = c->buf.s ? c->buf.s : "";
  c->kind = R_FAIL;
  for (int k = 0; k <= R_UNSUPPORTED; k++) {
    size_t n = strlen(kind_tag[k]);
    if (strncmp(s, kind_tag[k], n) == 0 && (s[n] == ' ' || s[n] == '\n')) {
      c->kind = (result_kind)k;
      s += n + (s[n] == ' ');
      break;
    }
  }
  const char *nl = strchr(s, '\n');
  size_t len = nl ? (size_t)(nl - s) : strlen(s);
  c->why = strndup(s, len);
  int used = 0;
  if (nl && sscanf(nl + 1, "FALLBACK %d %n", &c->n_fallback, &used) == 1 && used > 0) {
    const char *r = nl + 1 + used, *e = strchr(r, '\n');
    c->fallback_why = strndup(r, e ? (size_t)(e - r) : strlen(r));
  }
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    n -= (size_t)w;
  }
}

static void start_case(case_rec *c, const opts *o) {
  c->start = now_s();
  if (o->no_fork) {
    case_out co;
    memset(&co, 0, sizeof co);
    run_case(c->dir, o->verbose, &co);
    encode_result(&co, &c->buf);
    free(co.det.s);
    c->done = true;
    c->secs = now_s() - c->start;
    decode_result(c);
    return;
  }
  int p[2];
  if (pipe(p) != 0) { perror("pipe"); exit(2); }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); exit(2); }
  if (pid == 0) {
    close(p[0]);
    case_out co;
    memset(&co, 0, sizeof co);
    run_case(c->dir, o->verbose, &co);
    strbuf out = {0};
    encode_result(&co, &out);
    write_all(p[1], out.s, out.len);
    close(p[1]);
    exit(0); /* not _exit: lets LeakSanitizer check the child */
  }
  close(p[1]);
  c->pid = pid;
  c->fd = p[0];
}

static void finish_child(case_rec *c) {
  int st = 0;
  while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {}
  c->secs = now_s() - c->start;
  c->done = true;
  c->crashed = c->killed || WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
  if (c->killed) {
    c->kind = R_FAIL;
    char buf[128];
    snprintf(buf, sizeof buf, "timeout after %.3g s", c->secs);
    c->why = strdup(buf);
  } else if (WIFSIGNALED(st)) {
    c->kind = R_FAIL;
    char buf[128];
    snprintf(buf, sizeof buf, "crash (signal %d, %s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    c->why = strdup(buf);
  } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
    c->kind = R_FAIL;
    char buf[128];
    snprintf(buf, sizeof buf, "crash (exit status %d)", WEXITSTATUS(st));
    c->why = strdup(buf);
  } else if (!c->buf.s || c->buf.len == 0) {
    c->kind = R_FAIL;
    c->why = strdup("child wrote no result");
  } else {
    decode_result(c);
  }
}

static void print_case(const case_rec *c, const opts *o) {
  switch (c->kind) {
  case R_PASS: printf("PASS %s", c->name); break;
  case R_PASS_FROZEN: printf("PASS %s (frozen inputs)", c->name); break;
  case R_FAIL: printf("FAIL %s: %s", c->name, c->why ? c->why : ""); break;
  case R_UNSUPPORTED: printf("UNSUPPORTED %s: %s", c->name, c->why ? c->why : ""); break;
  }
  if (passed(c) && c->n_fallback > 0)
    printf(" [fallback: %d kernel%s, first %s]", c->n_fallback, c->n_fallback == 1 ? "" : "s",
           c->fallback_why ? c->fallback_why : "");
  if (o->verbose) {
    printf("  [%.2f s]\n", c->secs);
    const char *nl = c->buf.s ? strchr(c->buf.s, '\n') : NULL;
    if (nl && !strncmp(nl + 1, "FALLBACK ", 9)) nl = strchr(nl + 1, '\n');
    if (nl && nl[1]) fputs(nl + 1, stdout);
  } else {
    printf("\n");
  }
}

static void run_all(const opts *o) {
  int next = 0, running = 0, next_print = 0;
  struct pollfd *pfd = calloc((size_t)(o->jobs > 0 ? o->jobs : 1), sizeof *pfd);
  int *idx = calloc((size_t)(o->jobs > 0 ? o->jobs : 1), sizeof *idx);
  if (!pfd || !idx) { perror("calloc"); exit(2); }
  while (next_print < n_cases) {
    while (running < o->jobs && next < n_cases) {
      start_case(&cases[next], o);
      if (!cases[next].done) running++;
      next++;
    }
    int np = 0;
    for (int i = 0; i < next; i++) {
      case_rec *c = &cases[i];
      if (c->done || c->fd < 0) continue;
      pfd[np].fd = c->fd;
      pfd[np].events = POLLIN;
      pfd[np].revents = 0;
      idx[np++] = i;
    }
    if (np > 0) {
      int r = poll(pfd, (nfds_t)np, 200);
      if (r < 0 && errno != EINTR) { perror("poll"); exit(2); }
      for (int k = 0; k < np && r > 0; k++) {
        if (!pfd[k].revents) continue;
        case_rec *c = &cases[idx[k]];
        char buf[8192];
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n > 0) {
          sb_append(&c->buf, buf, (size_t)n);
        } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          close(c->fd);
          c->fd = -1;
          finish_child(c);
          running--;
        }
      }
      double t = now_s();
      for (int k = 0; k < np; k++) {
        case_rec *c = &cases[idx[k]];
        if (!c->done && !c->killed && t - c->start > o->timeout) {
          kill(c->pid, SIGKILL);
          c->killed = true;
        }
      }
    }
    while (next_print < n_cases && cases[next_print].done) {
      print_case(&cases[next_print], o);
      cases[next_print].printed = true;
      next_print++;
      fflush(stdout);
    }
  }
  free(pfd);
  free(idx);
}

/* ---- expected-pass lists ---- */

static int read_list(const char *path, char ***out) {
  FILE *f = fopen(path, "r");
  *out = NULL;
  if (!f) return -1;
  int n = 0, cap = 0;
  char **names = NULL;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    size_t len = strcspn(p, " \t\r\n#");
    if (len == 0) continue;
    p[len] = '\0';
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      char **nn = realloc(names, sizeof *names * (size_t)cap);
      if (!nn) { perror("realloc"); exit(2); }
      names = nn;
    }
    names[n++] = strdup(p);
  }
  fclose(f);
  *out = names;
  return n;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: fsl_conformance [options] PATH...\n"
          "  PATH             a test case folder (model.onnx + test_data_set_N/) or a folder of test_* cases\n"
          "  -v, --verbose    print details of failures (values, both compile attempts) and times\n"
          "  -j N             run N cases in parallel (default 2)\n"
          "  -k TEXT          only cases whose name contains TEXT\n"
          "  --sample K/N     only every N-th case, starting at the K-th (0 <= K < N), in name order\n"
          "                   (a deterministic sample: make test's sanitizer stage)\n"
          "  --timeout S      time limit per case in seconds (default 60)\n"
          "  --backend B      run on backend B: ref (default), plan-ref, cpu or opencl\n"
          "  --strategy S     build the plan with strategy S: unfused, opfuse, greedy or optimal\n"
          "                   (default with a plan backend: optimal)\n"
          "  --rewrite MODE   rewrite the primitive graph: off, rules (default) or search\n"
          "  --no-fork        run cases in this process (for a debugger; no crash isolation)\n"
          "  --list FILE      expected-pass list: exit 1 if a listed case does not pass\n"
          "  --write-list F   write the names of the cases that pass to F\n"
          "  --fallback-list FILE  expected fallbacks (plan backends): exit 1 if a passing case\n"
          "                   runs a kernel through the reference fallback and is not listed\n"
          "  --write-fallback-list F  write the names of the passing cases that fall back to F\n"
          "  --fail-on-crash  exit 1 if any case crashed, timed out or exited non-zero\n"
          "                   (e.g. a sanitizer report), listed or not\n"
          "Tolerance: |got - expected| <= 1e-7 + 1e-3 * |expected| (NaN == NaN); integers exact.\n");
}

int main(int argc, char **argv) {
  opts o = {.jobs = 2, .timeout = 60.0};
  const char **paths = calloc((size_t)argc, sizeof *paths);
  int n_paths = 0;
  if (!paths) return 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_next = i + 1 < argc;
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o.verbose = true;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--no-fork")) o.no_fork = true;
    else if (!strcmp(a, "--fail-on-crash")) o.fail_on_crash = true;
    else if (!strcmp(a, "-j") && has_next) o.jobs = atoi(argv[++i]);
    else if (!strncmp(a, "-j", 2) && a[2]) o.jobs = atoi(a + 2);
    else if (!strcmp(a, "-k") && has_next) o.filter = argv[++i];
    else if (!strcmp(a, "--timeout") && has_next) o.timeout = atof(argv[++i]);
    else if (!strcmp(a, "--sample") && has_next) {
      const char *v = argv[++i];
      if (sscanf(v, "%d/%d", &o.sample_k, &o.sample_n) != 2 || o.sample_n < 1 || o.sample_k < 0 ||
          o.sample_k >= o.sample_n) {
        fprintf(stderr, "fsl_conformance: --sample expects K/N with 0 <= K < N, got '%s'\n", v);
        return 2;
      }
    }
    else if (!strcmp(a, "--list") && has_next) o.list = argv[++i];
    else if (!strcmp(a, "--write-list") && has_next) o.write_list = argv[++i];
    else if (!strcmp(a, "--fallback-list") && has_next) o.fallback_list = argv[++i];
    else if (!strcmp(a, "--write-fallback-list") && has_next) o.write_fallback_list = argv[++i];
    else if (!strcmp(a, "--backend") && has_next) g_backend = argv[++i];
    else if (!strcmp(a, "--strategy") && has_next) {
      fsl_strategy st;
      if (fsl_strategy_from_name(argv[++i], &st) != FSL_OK) {
        fprintf(stderr, "fsl_conformance: %s\n", fsl_last_error());
        return 2;
      }
      g_strategy = (int)st;
    }
    else if (!strcmp(a, "--rewrite") && has_next) {
      const char *v = argv[++i];
      for (int k = 0; k < FSL_REWRITE_MODE_COUNT; k++)
        if (!strcmp(v, fsl_rewrite_mode_name((fsl_rewrite_mode)k))) g_rewrite = k;
      if (g_rewrite < 0) {
        fprintf(stderr, "fsl_conformance: --rewrite expects off, rules or search, got '%s'\n", v);
        return 2;
      }
    }
    else if (a[0] == '-') { fprintf(stderr, "fsl_conformance: unknown or incomplete option %s\n", a); usage(stderr); return 2; }
    else paths[n_paths++] = a;
  }
  if (g_backend && strcmp(g_backend, "ref") && strcmp(g_backend, "plan-ref") && strcmp(g_backend, "cpu") &&
      strcmp(g_backend, "opencl")) {
    fprintf(stderr, "fsl_conformance: unknown backend '%s' (ref, plan-ref, cpu, opencl)\n", g_backend);
    return 2;
  }
  if (o.jobs < 1) o.jobs = 1;
  if (o.timeout <= 0) o.timeout = 60;
  if (n_paths == 0) { usage(stderr); return 2; }
  for (int i = 0; i < n_paths; i++) {
    if (!dir_exists(paths[i])) {
      fprintf(stderr, "fsl_conformance: %s: not a folder\n", paths[i]);
      return 2;
    }
    collect(paths[i], o.filter);
  }
  if (o.sample_n > 1) { /* cases are collected in name order per PATH (list_subdirs sorts) */
    int kept = 0;
    for (int i = 0; i < n_cases; i++) {
      if (i % o.sample_n == o.sample_k) cases[kept++] = cases[i];
      else free(cases[i].dir), free(cases[i].name);
    }
    printf("conformance: sample %d/%d: %d of %d cases\n", o.sample_k, o.sample_n, kept, n_cases);
    n_cases = kept;
  }
  if (n_cases == 0) {
    fprintf(stderr, "fsl_conformance: no test cases found\n");
    return 2;
  }

  double t0 = now_s();
  run_all(&o);
  double secs = now_s() - t0;

  int n_pass = 0, n_frozen = 0, n_fail = 0, n_unsup = 0, n_crash = 0;
  for (int i = 0; i < n_cases; i++) {
    n_crash += cases[i].crashed;
    switch (cases[i].kind) {
    case R_PASS: n_pass++; break;
    case R_PASS_FROZEN: n_pass++; n_frozen++; break;
    case R_FAIL: n_fail++; break;
    case R_UNSUPPORTED: n_unsup++; break;
    }
  }
  printf("conformance: %d passed, %d failed, %d unsupported (of %d); backend %s, strategy %s\n", n_pass, n_fail,
         n_unsup, n_cases, g_backend ? g_backend : "ref",
         g_strategy >= 0 ? fsl_strategy_name((fsl_strategy)g_strategy) : g_backend && strcmp(g_backend, "ref") ? "optimal" : "none");
  printf("conformance: %d of the passes needed frozen inputs; %.1f s\n", n_frozen, secs);
  int n_fb_cases = 0, n_fb_kernels = 0;
  for (int i = 0; i < n_cases; i++)
    if (passed(&cases[i]) && cases[i].n_fallback > 0) {
      n_fb_cases++;
      n_fb_kernels += cases[i].n_fallback;
    }
  if (g_backend && strcmp(g_backend, "ref"))
    printf("conformance: %d of the passes ran %d kernels through the reference fallback\n", n_fb_cases,
           n_fb_kernels);

  int rc = 0;
  if (n_crash) {
    printf("conformance: %d cases crashed, timed out or exited non-zero:", n_crash);
    for (int i = 0; i < n_cases; i++)
      if (cases[i].crashed) printf(" %s", cases[i].name);
    printf("\n");
    if (o.fail_on_crash) rc = 1;
  }
  if (o.write_list) {
    char **names = calloc((size_t)n_cases, sizeof *names);
    int n = 0;
    for (int i = 0; i < n_cases; i++)
      if (passed(&cases[i])) names[n++] = cases[i].name;
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    FILE *f = fopen(o.write_list, "w");
    if (!f) {
      fprintf(stderr, "fsl_conformance: cannot write %s: %s\n", o.write_list, strerror(errno));
      rc = 2;
    } else {
      for (int i = 0; i < n; i++) fprintf(f, "%s\n", names[i]);
      fclose(f);
      printf("conformance: wrote %d names to %s\n", n, o.write_list);
    }
    free(names);
  }
  if (o.write_fallback_list) {
    FILE *f = fopen(o.write_fallback_list, "w");
    if (!f) {
      fprintf(stderr, "fsl_conformance: cannot write %s: %s\n", o.write_fallback_list, strerror(errno));
      rc = 2;
    } else {
      char **names = calloc((size_t)n_cases, sizeof *names);
      int n = 0;
      for (int i = 0; names && i < n_cases; i++)
        if (passed(&cases[i]) && cases[i].n_fallback > 0) names[n++] = cases[i].name;
      if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
      for (int i = 0; i < n; i++) fprintf(f, "%s\n", names[i]);
      fclose(f);
      free(names);
      printf("conformance: wrote %d names to %s\n", n, o.write_fallback_list);
    }
  }
  if (o.fallback_list) {
    char **names = NULL;
    int n = read_list(o.fallback_list, &names);
    if (n < 0) {
      fprintf(stderr, "fsl_conformance: cannot read %s: %s\n", o.fallback_list, strerror(errno));
      return 2;
    }
    int regress = 0, native = 0;
    for (int j = 0; j < n_cases; j++) {
      const case_rec *c = &cases[j];
      bool listed = false;
      for (int i = 0; i < n && !listed; i++) listed = !strcmp(c->name, names[i]);
      if (passed(c) && c->n_fallback > 0 && !listed) {
        if (!regress) printf("conformance: FALLBACK REGRESSIONS (not listed in %s):\n", o.fallback_list);
        printf("  %s: %d kernels, first %s\n", c->name, c->n_fallback, c->fallback_why ? c->fallback_why : "");
        regress++;
      }
      native += passed(c) && c->n_fallback == 0 && listed;
    }
    printf("conformance: fallback list %s: %d listed, %d regressions, %d listed cases now native%s\n",
           o.fallback_list, n, regress, native, native ? " -- consider regenerating the list" : "");
    if (regress) rc = 1;
    free_names(names, n);
  }
  if (o.list) {
    char **names = NULL;
    int n = read_list(o.list, &names);
    if (n < 0) {
      fprintf(stderr, "fsl_conformance: cannot read %s: %s\n", o.list, strerror(errno));
      return 2;
    }
    int regress = 0, missing = 0, extra = 0;
    for (int i = 0; i < n; i++) {
      const case_rec *c = NULL;
      for (int j = 0; j < n_cases; j++)
        if (!strcmp(cases[j].name, names[i])) { c = &cases[j]; break; }
      if (!c) {
        if (!o.filter && o.sample_n <= 1) missing++;
        continue;
      }
      if (!passed(c)) {
        if (!regress) printf("conformance: REGRESSIONS (listed in %s but not passing):\n", o.list);
        printf("  %s: %s\n", c->name, c->why ? c->why : "");
        regress++;
      }
    }
    for (int j = 0; j < n_cases; j++) {
      if (!passed(&cases[j])) continue;
      bool listed = false;
      for (int i = 0; i < n && !listed; i++) listed = !strcmp(cases[j].name, names[i]);
      extra += !listed;
    }
    printf("conformance: list %s: %d listed, %d regressions, %d newly passing (not listed)%s\n", o.list, n,
           regress, extra, extra ? " -- consider regenerating the list" : "");
    if (missing) printf("conformance: note: %d listed cases were not found\n", missing);
    if (regress) rc = 1;
    free_names(names, n);
  }
  for (int i = 0; i < n_cases; i++) {
    free(cases[i].dir);
    free(cases[i].name);
    free(cases[i].why);
    free(cases[i].fallback_why);
    free(cases[i].buf.s);
  }
  free(cases);
  free(paths);
  return rc;
}
