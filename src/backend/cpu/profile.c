/*
 * profile.c — times kernels standalone as the CPU backend runs them
 * (profile.h): each kernel is lowered by the backend's own lowering
 * (lower.h), so the profiler measures exactly the steps a run executes.
 */
#include "backend/cpu/profile.h"
#include "backend/cpu/compile.h"
#include "backend/cpu/dialect_c.h"
#include "backend/cpu/isa.h"
#include "codegen/linsplit.h"
#include "backend/cpu/lower.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/calibrate.h"

#include <dlfcn.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#define PROFILE_VERSION "fissile-profile-v2" /* bumped when lowering changes what kernels cost */
#define MIN_REPS 5
#define MAX_REPS 25
#define TARGET_S 2e-3        /* keep timing while the timed total is below this */
#define WALL_S 10e-3         /* ... and the wall time with input refills too */
#define MAX_OPERANDS 256

/* The steps of one kernel: [first, first + n_steps) of the batch's lowering. */
typedef struct pkern {
  bool ok;                   /* lowered without a REF step (and, after compile, resolved) */
  int first, n_steps;
} pkern;

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "profile: out of memory"); }

/* ---- running one kernel ---- */

static _Thread_local uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

/* Fresh random non-zero data: floats in [0.5, 1.5), integers 1; bools
 * false (computed conditions such as "index < 0" take the common path). */
static void fill(void *p, const fsl_value *v, int64_t n) {
  switch (v->dtype) {
  case FSL_DT_F32:
    for (int64_t i = 0; i < n; i++) ((float *)p)[i] = 0.5f + (float)(next_rand() >> 40) * (1.0f / 16777216.0f);
    break;
  case FSL_DT_F64:
    for (int64_t i = 0; i < n; i++) ((double *)p)[i] = 0.5 + (double)(next_rand() >> 11) * (1.0 / 9007199254740992.0);
    break;
  case FSL_DT_BOOL:
    memset(p, 0, (size_t)n);
    break;
  case FSL_DT_I8: case FSL_DT_U8:
    memset(p, 1, (size_t)n);
    break;
  case FSL_DT_I16: case FSL_DT_U16:
    for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i] = 1;
    break;
  case FSL_DT_I32: case FSL_DT_U32:
    for (int64_t i = 0; i < n; i++) ((uint32_t *)p)[i] = 1;
    break;
  case FSL_DT_I64: case FSL_DT_U64:
    for (int64_t i = 0; i < n; i++) ((uint64_t *)p)[i] = 1;
    break;
  default: /* f16, bf16: about 1.0 in either */
    memset(p, 0x3c, (size_t)fsl_value_nbytes(v));
    break;
  }
}

static char k_empty[64];

/* Runs the steps once; false on a reported error. */
static bool run_once(const fsl_lowering *L, const pkern *pk, const void **buf) {
  for (int i = 0; i < pk->n_steps; i++) {
    const fsl_step *s = &L->steps[pk->first + i];
    const void *in[MAX_OPERANDS];
    void *out[MAX_OPERANDS];
    for (int j = 0; j < s->n_in; j++) in[j] = s->in[j] ? buf[s->in[j]->id] : NULL;
    for (int j = 0; j < s->n_out; j++) out[j] = (void *)buf[s->out[j]->id];
    if (s->kind == FSL_STEP_LIB) {
      if (fsl_onednn_linear_run(fsl_cpu_step_dnn(s), in[0], in[1], in + 2, out[0]) != FSL_OK) {
        fsl_error_clear();
        return false;
      }
    } else if (fsl_cpu_step_call(s, in, out) != 0) {
      return false;
    }
  }
  return true;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Allocates the buffers of fresh[0..n) (false when out of memory). */
static bool alloc_all(const void **buf, fsl_value *const *fresh, int n) {
  for (int i = 0; i < n; i++)
    if (!(buf[fresh[i]->id] = malloc((size_t)fsl_value_nbytes(fresh[i])))) return false;
  return true;
}

static void free_all(const void **buf, fsl_value *const *fresh, int n) {
  for (int i = 0; i < n; i++) {
    free((void *)buf[fresh[i]->id]);
    buf[fresh[i]->id] = NULL;
  }
}

/*
 * Median seconds of pk on fresh inputs, NaN when it cannot run.  The
 * buffers of the values the steps write are allocated and freed inside
 * every timed run, as the CPU backend's run allocates a value at its first
 * write and frees it after its last use.
 */
static fsl_status time_kernel(const fsl_lowering *L, const fsl_kernel *k, const pkern *pk, double *secs) {
  const fsl_graph *g = L->g;
  *secs = NAN;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  const void **buf = calloc(nv, sizeof *buf);
  bool *owned = calloc(nv, sizeof *owned);
  fsl_vlist fresh = {0};
  fsl_status st = buf && owned ? FSL_OK : oom();
  bool ok = st == FSL_OK;
  /* kernel inputs: constants keep their data, the rest is filled */
  for (int i = 0; i < k->n_in && ok && st == FSL_OK; i++) {
    const fsl_value *v = k->in[i];
    int64_t nb = fsl_value_nbytes(v);
    if (v->data) buf[v->id] = v->data;
    else if (nb == 0) buf[v->id] = k_empty;
    else if (nb < 0) ok = false;
    else if (!(buf[v->id] = malloc((size_t)nb))) st = oom();
    else owned[v->id] = true;
  }
  /* what a step reads must be an input or written by an earlier step */
  for (int i = 0; i < pk->n_steps && ok && st == FSL_OK; i++) {
    const fsl_step *s = &L->steps[pk->first + i];
    if (s->n_in > MAX_OPERANDS || s->n_out > MAX_OPERANDS) ok = false;
    for (int j = 0; j < s->n_in && ok; j++)
      if (s->in[j] && !buf[s->in[j]->id] && !fsl_vl_has(&fresh, s->in[j])) ok = false;
    for (int j = 0; j < s->n_out && ok && st == FSL_OK; j++) {
      fsl_value *v = s->out[j];
      int64_t nb = fsl_value_nbytes(v);
      if (buf[v->id] || fsl_vl_has(&fresh, v)) continue;
      if (nb == 0) buf[v->id] = k_empty;
      else if (nb < 0) ok = false;
      else if (!fsl_vl_add(&fresh, v)) st = oom();
    }
  }
  fsl_value *const *fv = (fsl_value *const *)fresh.p;
  double t[MAX_REPS], total = 0, start = fsl_now_s();
  int reps = 0;
  for (int r = -1; ok && st == FSL_OK && r < MAX_REPS; r++) {
    for (int i = 0; i < k->n_in; i++)
      if (owned[k->in[i]->id]) fill((void *)buf[k->in[i]->id], k->in[i], fsl_value_numel(k->in[i]));
    double t0 = fsl_now_s();
    if (!alloc_all(buf, fv, fresh.n)) st = oom();
    else ok = run_once(L, pk, buf);
    free_all(buf, fv, fresh.n);
    double dt = fsl_now_s() - t0;
    if (r < 0) continue; /* warm-up */
    t[reps++] = dt;
    total += dt;
    if (reps >= MIN_REPS && (total >= TARGET_S || fsl_now_s() - start >= WALL_S)) break;
  }
  if (ok && st == FSL_OK && reps > 0) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *secs = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    if (!(*secs > 0)) *secs = 1e-9; /* below the clock's resolution */
  }
  for (size_t i = 0; owned && i < nv; i++)
    if (owned[i]) free((void *)buf[i]);
  free(buf);
  free(owned);
  free(fresh.p);
  return st;
}

/* ---- batches ---- */

/* Whether the compiler builds the generated prologue alone. */
static bool compiler_works(void) {
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_c, &src);
  fsl_cpu_so so;
  bool ok = !src.oom && fsl_cpu_so_load(src.p, NULL, &so) == FSL_OK;
  if (ok) fsl_cpu_so_close(&so);
  else fsl_error_clear();
  fsl_sbuf_free(&src);
  return ok;
}

/* Measures ks[0..n): one shared object, halves on a compile failure. */
static fsl_status measure_range(const fsl_graph *g, fsl_kernel *const *ks, int n, double *secs, bool *checked) {
  pkern *pk = calloc((size_t)n, sizeof *pk);
  if (!pk) return oom();
  fsl_backend_caps caps; /* read once per batch: what the backend would use */
  fsl_backend_caps_get(&fsl_backend_cpu, &caps);
  fsl_lowering L;
  fsl_status st = fsl_cpu_lowering_init(&L, g, &caps);
  for (int i = 0; i < n; i++) secs[i] = NAN;
  for (int i = 0; i < n && st == FSL_OK; i++) {
    /* standalone: the kernel reads its inputs and constants only */
    fsl_lowering_avail_only(&L, ks[i]->in, ks[i]->n_in);
    pk[i].first = L.n_steps;
    st = fsl_lower_kernel(&L, i, ks[i]);
    pk[i].n_steps = L.n_steps - pk[i].first;
    /* a kernel the backend runs (in part) with the reference interpreter is not measured */
    pk[i].ok = st == FSL_OK && pk[i].n_steps > 0;
    for (int j = 0; j < pk[i].n_steps; j++) pk[i].ok = pk[i].ok && L.steps[pk[i].first + j].kind != FSL_STEP_HOST;
  }
  if (st == FSL_OK) fsl_cpu_lower_generated(&L, ks, n);
  if (st == FSL_OK) st = fsl_lowering_source(&L);
  fsl_cpu_so so = {0};
  bool loaded = false;
  if (st == FSL_OK && L.n_generated > 0) {
    if (fsl_cpu_so_load(L.src.p, NULL, &so) == FSL_OK) {
      loaded = true;
    } else if (n > 1) {
      fsl_error_clear();
      if (!*checked && !compiler_works()) {
        st = fsl_errorf(FSL_ERR_RUNTIME, "profile: the C compiler cannot build generated code ('%s')",
                        getenv("FSL_CC") ? getenv("FSL_CC") : "cc");
      } else {
        *checked = true;
        fsl_lowering_free(&L);
        free(pk);
        int h = n / 2;
        st = measure_range(g, ks, h, secs, checked);
        if (st == FSL_OK) st = measure_range(g, ks + h, n - h, secs + h, checked);
        return st;
      }
    } else {
      fsl_error_clear(); /* the one kernel stays unmeasured */
    }
  }
  for (int i = 0; i < n && st == FSL_OK; i++) {
    if (!pk[i].ok) continue;
    for (int j = 0; j < pk[i].n_steps && pk[i].ok; j++) {
      fsl_step *s = &L.steps[pk[i].first + j];
      if (s->kind != FSL_STEP_GEN) continue;
      void *f = loaded ? fsl_cpu_so_kernel(&so, s->fn_id) : NULL;
      if (!f) {
        fsl_error_clear();
        pk[i].ok = false;
      } else {
        s->fn = f;
      }
    }
    if (pk[i].ok) st = time_kernel(&L, ks[i], &pk[i], &secs[i]);
  }
  if (loaded) fsl_cpu_so_close(&so);
  fsl_lowering_free(&L);
  free(pk);
  return st;
}

fsl_status fsl_cpu_profile_measure(void *ctx, const fsl_graph *g, fsl_kernel *const *ks, int n, double *secs) {
  (void)ctx;
  if (!g || n < 0 || (n > 0 && (!ks || !secs))) return fsl_errorf(FSL_ERR_ARG, "fsl_cpu_profile_measure: NULL argument");
  if (n == 0) return FSL_OK;
  bool checked = false;
  return measure_range(g, ks, n, secs, &checked);
}

/* ---- the device fingerprint ---- */

static void first_line(const char *cmd, char *buf, size_t len) {
  snprintf(buf, len, "unknown");
  FILE *f = popen(cmd, "r");
  if (!f) return;
  char line[256];
  if (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (line[0]) snprintf(buf, len, "%.*s", (int)(len - 1), line);
  }
  while (fgets(line, sizeof line, f)) {
  }
  pclose(f);
}

void fsl_cpu_profiler_init(fsl_profiler *p, int n_threads) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->measure = fsl_cpu_profile_measure;
  p->batch = 128;
  if (n_threads <= 0) {
    int (*max_threads)(void) = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    memcpy(&max_threads, &sym, sizeof max_threads < sizeof sym ? sizeof max_threads : sizeof sym);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = max_threads ? max_threads() : (int)(ncpu > 0 ? ncpu : 1);
  }
  char cc_version[128], cmd[600];
  const char *cc = getenv("FSL_CC");
  snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cc && *cc ? cc : "cc");
  first_line(cmd, cc_version, sizeof cc_version);
  char model[160];
  fsl_cpu_model_name(model, sizeof model);
  fsl_cpu_isa isa;
  if (fsl_cpu_isa_get(&isa) != FSL_OK) fsl_error_clear(); /* compiling reports it */
  const dnnl_version_t *dv = dnnl_version();
  snprintf(p->device_name, sizeof p->device_name,
           "%s; cpu: %.100s, %ld cpus, %d threads, isa %s; cc: %.64s; oneDNN %d.%d.%d", PROFILE_VERSION, model,
           sysconf(_SC_NPROCESSORS_ONLN), n_threads, isa.name, cc_version, dv ? dv->major : 0,
           dv ? dv->minor : 0, dv ? dv->patch : 0);
  p->device = fsl_hash(FSL_HASH_INIT, p->device_name, strlen(p->device_name));
}
