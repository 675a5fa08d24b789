/*
 * profile.c — times kernels standalone as the CPU backend runs them
 * (profile.h).  A LINEAR kernel is split into prologue, oneDNN
 * primitive and epilogue as the CPU backend runs it (linsplit.h).
 */
#include "backend/cpu/profile.h"
#include "backend/cpu/compile.h"
#include "backend/cpu/dialect_c.h"
#include "backend/cpu/isa.h"
#include "backend/cpu/linsplit.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/calibrate.h"

#include <dlfcn.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#define PROFILE_VERSION "fissile-profile-v1"
#define MIN_REPS 5
#define MAX_REPS 25
#define TARGET_S 2e-3        /* keep timing while the timed total is below this */
#define WALL_S 10e-3         /* ... and the wall time with input refills too */
#define MAX_STEPS 3          /* prologue, linear op, epilogue */
#define MAX_OPERANDS 256

typedef int (*kernel_fn)(const void *const *in, void *const *out);

typedef struct pstep {
  bool dnn;                  /* oneDNN primitive, else generated fsl_k<fn_id> */
  int fn_id;
  kernel_fn fn;
  int n_in, n_out;
  fsl_value **in, **out;     /* dnn: src, wei, then post operands (NULL for eltwise) */
  fsl_onednn_linear *op;
} pstep;

typedef struct pkern {
  bool ok;                   /* steps built (and, after compile, resolved) */
  int n_steps;
  pstep steps[MAX_STEPS];
} pkern;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "profile: out of memory"); }

static bool copy_values(fsl_value ***dst, int *n, void *const *src, int count) {
  *dst = malloc(sizeof(fsl_value *) * (size_t)(count > 0 ? count : 1));
  if (!*dst) return false;
  memcpy(*dst, src, sizeof(fsl_value *) * (size_t)count);
  *n = count;
  return true;
}

static void pkern_clear(pkern *pk) {
  for (int i = 0; i < pk->n_steps; i++) {
    free(pk->steps[i].in);
    free(pk->steps[i].out);
    if (pk->steps[i].op) fsl_onednn_linear_free(pk->steps[i].op);
  }
  memset(pk, 0, sizeof *pk);
}

/* ---- steps of one kernel ---- */

typedef struct builder {
  const fsl_graph *g;
  fsl_sbuf *src;
  int *next_fn;
  pkern *pk;
  fsl_vlist written;         /* values written by an earlier step */
  const fsl_kernel *k;
} builder;

static bool avail(const void *ctx, const fsl_value *v) {
  const builder *b = ctx;
  if (v->data || fsl_vl_has(&b->written, v)) return true;
  for (int i = 0; i < b->k->n_in; i++)
    if (b->k->in[i] == v) return true;
  return false;
}

/* A generated step over nodes writing outs.  FSL_ERR_UNSUPPORTED when the
 * emitter cannot (the kernel is then not measured). */
static fsl_status add_gen(builder *b, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out) {
  if (n_out == 0) return FSL_OK;
  if (b->pk->n_steps == MAX_STEPS) return fsl_errorf(FSL_ERR_UNSUPPORTED, "profile: too many steps");
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_cg_spec spec = {.g = b->g, .id = *b->next_fn, .n_nodes = n, .nodes = nodes, .n_in = ins.n,
                        .in = (fsl_value *const *)ins.p, .n_out = n_out, .out = outs};
  fsl_status st = fsl_codegen_kernel(&fsl_dialect_c, &spec, b->src);
  pstep *s = &b->pk->steps[b->pk->n_steps];
  if (st == FSL_OK) {
    memset(s, 0, sizeof *s);
    if (!copy_values(&s->in, &s->n_in, ins.p, ins.n) || !copy_values(&s->out, &s->n_out, (void *const *)outs, n_out))
      st = oom();
    b->pk->n_steps++;
    s->fn_id = (*b->next_fn)++;
    for (int i = 0; i < n_out && st == FSL_OK; i++)
      if (!fsl_vl_add(&b->written, outs[i])) st = oom();
  }
  free(ins.p);
  return st;
}

/* The linear op: oneDNN with the longest usable epilogue chain, else a
 * generated matmul; *z is the value it writes, *n_abs the chain it absorbed. */
static fsl_status add_linear(builder *b, fsl_node *lin, fsl_value *const *lin_in, fsl_node *const *chain, int n_chain,
                             fsl_value **z, int *n_abs) {
  *z = lin->out[0];
  *n_abs = 0;
  if (b->pk->n_steps == MAX_STEPS) return fsl_errorf(FSL_ERR_UNSUPPORTED, "profile: too many steps");
  pstep *s = &b->pk->steps[b->pk->n_steps];
  memset(s, 0, sizeof *s);
  fsl_onednn_linear *op = NULL;
  int na = 0;
  fsl_status st = FSL_ERR_UNSUPPORTED;
  if (lin->in[0]->dtype == FSL_DT_F32 && getenv("FSL_NO_ONEDNN") == NULL)
    st = fsl_onednn_linear_create_avail(lin, chain, n_chain, 0, avail, b, &op, &na);
  if (st == FSL_OK) {
    s->dnn = true;
    s->op = op;
    b->pk->n_steps++;
    s->in = malloc(sizeof(fsl_value *) * (size_t)(2 + na));
    s->out = malloc(sizeof(fsl_value *));
    if (!s->in || !s->out) return oom();
    s->n_in = 2 + na;
    s->in[0] = lin_in[0];
    s->in[1] = lin_in[1];
    for (int i = 0; i < na; i++) s->in[2 + i] = (fsl_value *)fsl_onednn_linear_post_value(op, i);
    *z = na > 0 ? chain[na - 1]->out[0] : lin->out[0];
    *n_abs = na;
    s->n_out = 1;
    s->out[0] = *z;
    return fsl_vl_add(&b->written, *z) ? FSL_OK : oom();
  }
  if (st == FSL_ERR_NOMEM) return st;
  fsl_error_clear();
  if (lin->op != FSL_OP_matmul) return fsl_errorf(FSL_ERR_UNSUPPORTED, "profile: conv without oneDNN");
  fsl_sbuf tmp = {0};
  st = fsl_codegen_matmul(&fsl_dialect_c, *b->next_fn, lin, &tmp);
  if (st == FSL_OK && tmp.oom) st = oom();
  if (st == FSL_OK) {
    fsl_sbuf_puts(b->src, tmp.p);
    b->pk->n_steps++;
    if (!copy_values(&s->in, &s->n_in, (void *const *)lin_in, 2) ||
        !copy_values(&s->out, &s->n_out, (void *const *)lin->out, 1) || !fsl_vl_add(&b->written, lin->out[0]))
      st = oom();
    s->fn_id = (*b->next_fn)++;
  }
  fsl_sbuf_free(&tmp);
  return st;
}

static bool was_written(const void *ctx, const fsl_value *v) { return fsl_vl_has(&((const builder *)ctx)->written, v); }

/* Prologue, linear op, epilogue, as the CPU backend runs them (linsplit.h). */
static fsl_status build_linear(builder *b) {
  const fsl_kernel *k = b->k;
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_OK && sp.gen_prologue)
    st = add_gen(b, (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p, sp.pre_out.n);
  fsl_value *z = NULL;
  int n_abs = 0;
  if (st == FSL_OK) st = add_linear(b, sp.lin, sp.lin_in, sp.chain, sp.n_chain, &z, &n_abs);
  fsl_vlist post = {0}, post_out = {0};
  if (st == FSL_OK) st = fsl_linear_split_epilogue(k, &sp, n_abs, z, was_written, b, &post, &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = add_gen(b, (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p, post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

/* Builds the steps of k (emitting into src); pk->ok false when k cannot be
 * measured.  Only out-of-memory is an error. */
static fsl_status build_kernel(const fsl_graph *g, const fsl_kernel *k, fsl_sbuf *src, int *next_fn, pkern *pk) {
  memset(pk, 0, sizeof *pk);
  builder b = {.g = g, .src = src, .next_fn = next_fn, .pk = pk, .k = k};
  bool opaque = false, linear = false;
  for (int i = 0; i < k->n_nodes; i++) {
    const fsl_op_info *oi = fsl_op_get(k->nodes[i]->op);
    if (!oi->primitive || oi->kind == FSL_KIND_OPAQUE) opaque = true;
    else if (oi->kind == FSL_KIND_LINEAR) linear = true;
  }
  fsl_status st = FSL_ERR_UNSUPPORTED;
  if (!opaque) st = linear ? build_linear(&b) : add_gen(&b, k->nodes, k->n_nodes, k->out, k->n_out);
  free(b.written.p);
  if (st == FSL_OK && src->oom) st = oom();
  if (st == FSL_OK) {
    pk->ok = true;
    return FSL_OK;
  }
  pkern_clear(pk);
  if (st == FSL_ERR_NOMEM) return st;
  fsl_error_clear();
  return FSL_OK;
}

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
static bool run_once(const pkern *pk, const void **buf) {
  for (int i = 0; i < pk->n_steps; i++) {
    const pstep *s = &pk->steps[i];
    const void *in[MAX_OPERANDS];
    void *out[MAX_OPERANDS];
    for (int j = 0; j < s->n_in; j++) in[j] = s->in[j] ? buf[s->in[j]->id] : NULL;
    for (int j = 0; j < s->n_out; j++) out[j] = (void *)buf[s->out[j]->id];
    if (s->dnn) {
      if (fsl_onednn_linear_run(s->op, in[0], in[1], in + 2, out[0]) != FSL_OK) {
        fsl_error_clear();
        return false;
      }
    } else if (s->fn(in, out) != 0) {
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
static fsl_status time_kernel(const fsl_graph *g, const fsl_kernel *k, const pkern *pk, double *secs) {
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
    const pstep *s = &pk->steps[i];
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
  double t[MAX_REPS], total = 0, start = now_s();
  int reps = 0;
  for (int r = -1; ok && st == FSL_OK && r < MAX_REPS; r++) {
    for (int i = 0; i < k->n_in; i++)
      if (owned[k->in[i]->id]) fill((void *)buf[k->in[i]->id], k->in[i], fsl_value_numel(k->in[i]));
    double t0 = now_s();
    if (!alloc_all(buf, fv, fresh.n)) st = oom();
    else ok = run_once(pk, buf);
    free_all(buf, fv, fresh.n);
    double dt = now_s() - t0;
    if (r < 0) continue; /* warm-up */
    t[reps++] = dt;
    total += dt;
    if (reps >= MIN_REPS && (total >= TARGET_S || now_s() - start >= WALL_S)) break;
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
  bool ok = !src.oom && fsl_cpu_so_load(src.p, &so) == FSL_OK;
  if (ok) fsl_cpu_so_close(&so);
  else fsl_error_clear();
  fsl_sbuf_free(&src);
  return ok;
}

/* Measures ks[0..n): one shared object, halves on a compile failure. */
static fsl_status measure_range(const fsl_graph *g, fsl_kernel *const *ks, int n, double *secs, bool *checked) {
  pkern *pk = calloc((size_t)n, sizeof *pk);
  if (!pk) return oom();
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_c, &src);
  int next_fn = 0;
  fsl_status st = FSL_OK;
  for (int i = 0; i < n; i++) secs[i] = NAN;
  for (int i = 0; i < n && st == FSL_OK; i++) st = build_kernel(g, ks[i], &src, &next_fn, &pk[i]);
  if (st == FSL_OK && src.oom) st = oom();
  fsl_cpu_so so = {0};
  bool loaded = false;
  if (st == FSL_OK && next_fn > 0) {
    if (fsl_cpu_so_load(src.p, &so) == FSL_OK) {
      loaded = true;
    } else if (n > 1) {
      fsl_error_clear();
      if (!*checked && !compiler_works()) {
        st = fsl_errorf(FSL_ERR_RUNTIME, "profile: the C compiler cannot build generated code ('%s')",
                        getenv("FSL_CC") ? getenv("FSL_CC") : "cc");
      } else {
        *checked = true;
        for (int i = 0; i < n; i++) pkern_clear(&pk[i]);
        fsl_sbuf_free(&src);
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
      pstep *s = &pk[i].steps[j];
      if (s->dnn) continue;
      void *f = loaded ? fsl_cpu_so_kernel(&so, s->fn_id) : NULL;
      if (!f) {
        fsl_error_clear();
        pk[i].ok = false;
      } else {
        memcpy(&s->fn, &f, sizeof f);
      }
    }
    if (pk[i].ok) st = time_kernel(g, ks[i], &pk[i], &secs[i]);
  }
  for (int i = 0; i < n; i++) pkern_clear(&pk[i]);
  if (loaded) fsl_cpu_so_close(&so);
  fsl_sbuf_free(&src);
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
