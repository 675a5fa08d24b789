/*
 * cpu.c — the CPU backend (backend.h): every kernel of a plan is lowered
 * into steps (lower.h: GEN generated C functions, ONEDNN matmul/conv with
 * absorbed post-ops, REF the reference interpreter for opaque kernels and
 * as the counted fallback), the generated C of the whole plan is compiled
 * into one shared object (compile.h), and a run executes the steps in
 * order.  Every value a step writes gets a buffer at its first write,
 * which returns to the executable's pool after the last step that reads or
 * writes it (graph outputs excepted); later steps and runs take pooled
 * buffers of the same byte size before calling malloc.  Values written by
 * several kernels (recomputation) are simply written again.
 * Design notes: docs/cpu-backend.md.
 */
#include "backend/backend.h"
#include "backend/cpu/calibrate.h"
#include "backend/cpu/compile.h"
#include "backend/cpu/dialect_c.h"
#include "backend/cpu/lower.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/profile.h"
#include "backend/cpu/isa.h"
#include "core/bytes.h"
#include "eval/eval.h"
#include "runtime/memplan.h"


typedef fsl_step step;

typedef struct cpu_exe {
  const fsl_plan *p;
  fsl_cpu_so so;
  void *object;            /* imported (cpu_import): a copy of the object's bytes, for export */
  size_t object_len;
  fsl_backend_caps caps;   /* what the lowering may use (the compile context's, else fsl_backend_cpu.caps) */
  fsl_lowering low;        /* the steps of every kernel, in plan order (lower.h) */
  fsl_memplan mem;         /* where kernel outputs live in the arena (runtime/memplan.h) */
  unsigned char *arena;    /* one allocation of mem.peak_bytes for the executable */
  int *last;               /* value id -> last step touching it, -1 */
  fsl_cpu_stats stats;
  /* FSL_CPU_PROFILE set: seconds per step and run, one row of n_steps per
   * run, the first run's first (it pays one-time costs, such as oneDNN's
   * lazy JIT code generation: a batched gemm:jit matmul's mean over 23 runs
   * went 0.8 -> 3.8 ms with it), for the first PROFILE_MAX_RUNS runs */
  double *prof;
  int n_runs;              /* rows of prof filled, the first run's included */
  int cap_runs;            /* rows allocated */
  /* buffers released by earlier steps and runs, for reuse by size: a fresh
   * malloc of a large buffer is a fresh mmap whose page faults cost more
   * than the kernel writing it (softmax 8x32000: 0.40 ms -> 0.14 ms) */
  struct pooled { size_t bytes; void *p; } *pool;
  int n_pool, cap_pool;
} cpu_exe;

/* ---- small helpers ---- */

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory"); }

/* ---- compile ---- */

/* The runs FSL_CPU_PROFILE records (the first included); later runs are
 * not recorded. */
#define PROFILE_MAX_RUNS 4096

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* FSL_CPU_PROFILE: per-step times on stderr, slowest first by the median
 * over every run but the first (the first alone when there is no other),
 * with the mean beside it: on a shared host one preempted run (a 0.19 ms
 * convolution once took 5.5 ms) moves a mean, not a median.  The header
 * gives the means per run, by kind of step, and the sum of the medians.  A
 * number above 1 is how many steps to list (default 20). */
static void print_profile(const cpu_exe *x) {
  long n_list = strtol(getenv("FSL_CPU_PROFILE") ? getenv("FSL_CPU_PROFILE") : "", NULL, 10);
  if (n_list <= 1) n_list = 20;
  int ns = x->low.n_steps, timed = x->n_runs - 1; /* the runs after the first */
  const double *rows = timed > 0 ? x->prof + ns : x->prof;
  int runs = timed > 0 ? timed : x->n_runs;
  if (runs <= 0) return;
  double *mean = calloc((size_t)(ns > 0 ? ns : 1), sizeof(double)), *med = calloc((size_t)(ns > 0 ? ns : 1), sizeof(double));
  double *col = malloc((size_t)runs * sizeof(double));
  bool *done = calloc((size_t)(ns > 0 ? ns : 1), sizeof(bool));
  double total = 0, med_total = 0, by_kind[3] = {0};
  int n_kind[3] = {0};
  if (!mean || !med || !col || !done) goto out; /* out of memory: no profile */
  for (int i = 0; i < ns; i++) {
    for (int r = 0; r < runs; r++) col[r] = rows[(size_t)r * (size_t)ns + (size_t)i], mean[i] += col[r] / runs;
    qsort(col, (size_t)runs, sizeof(double), cmp_double);
    med[i] = runs % 2 ? col[runs / 2] : 0.5 * (col[runs / 2 - 1] + col[runs / 2]);
    total += mean[i], med_total += med[i];
    by_kind[x->low.steps[i].kind] += mean[i], n_kind[x->low.steps[i].kind]++;
  }
  char which[64] = "the first run only, one-time costs included";
  if (timed > 0) snprintf(which, sizeof which, "%d runs after the first", timed);
  fprintf(stderr,
          "cpu profile: %s, %.3f ms per run (gen %.3f ms in %d steps, onednn %.3f ms in %d, ref %.3f ms in %d), "
          "step medians sum to %.3f ms\n",
          which, 1e3 * total, 1e3 * by_kind[FSL_STEP_GEN], n_kind[FSL_STEP_GEN],
          1e3 * by_kind[FSL_STEP_LIB], n_kind[FSL_STEP_LIB], 1e3 * by_kind[FSL_STEP_HOST],
          n_kind[FSL_STEP_HOST], 1e3 * med_total);
  for (int r = 0; r < ns && r < n_list; r++) {
    int b = -1;
    for (int i = 0; i < ns; i++)
      if (!done[i] && (b < 0 || med[i] > med[b])) b = i;
    done[b] = true;
    const step *s = &x->low.steps[b];
    const fsl_kernel *k = x->p->kernels.k[s->kernel];
    const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
    char what[224] = ""; /* the function, or what oneDNN runs */
    if (s->kind == FSL_STEP_GEN) snprintf(what, sizeof what, " fsl_k%d", s->fn_id);
    if (s->kind == FSL_STEP_LIB) snprintf(what, sizeof what, " %s", fsl_onednn_linear_describe(fsl_cpu_step_dnn(s)));
    fprintf(stderr, "  %8.3f ms  step %d kernel %d (%s, %d nodes, from %s '%s')%s; mean %.3f ms\n", 1e3 * med[b], b,
            s->kernel, s->kind == FSL_STEP_GEN ? "gen" : s->kind == FSL_STEP_LIB ? "onednn" : "ref",
            k->n_nodes, n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?",
            what, 1e3 * mean[b]);
  }
out:
  free(mean);
  free(med);
  free(col);
  free(done);
}

static void free_exe(void *p) {
  cpu_exe *x = p;
  if (!x) return;
  if (x->prof) {
    print_profile(x);
    free(x->prof);
  }
  fsl_lowering_free(&x->low);
  fsl_memplan_free(&x->mem);
  free(x->arena);
  free(x->last);
  for (int i = 0; i < x->n_pool; i++) free(x->pool[i].p);
  free(x->pool);
  fsl_cpu_so_close(&x->so);
  free(x->object);
  free(x);
}

/* Where the generated code comes from: the compiler (through the kernel
 * cache), or the object a compiled model file holds (cpu_import). */
typedef struct code_source {
  bool imported;       /* false: compile */
  const void *object;  /* imported: the object's bytes */
  size_t len;
  uint64_t src_hash;   /* with object: the hash of the source it was built from */
} code_source;

static fsl_status load_code(const fsl_lowering *L, const code_source *cs, fsl_cpu_so *so) {
  if (!cs->imported) {
    char what[96];
    snprintf(what, sizeof what, "%d generated kernel%s for the cpu backend", L->n_generated,
             L->n_generated == 1 ? "" : "s");
    return fsl_cpu_so_load(L->src.p, what, so);
  }
  if (fsl_hash(FSL_HASH_INIT, L->src.p, L->src.len) != cs->src_hash)
    return fsl_errorf(FSL_ERR_INVALID, "the compiled kernels do not match the code this fissile generates for the "
                      "plan (a file from another fissile build)");
  if (!cs->len) return fsl_errorf(FSL_ERR_INVALID, "the file holds no compiled kernels, the plan needs %d",
                                  L->n_generated);
  return fsl_cpu_so_load_object(cs->object, cs->len, so);
}

/* The memory plan's may_alias (memplan.h) for the lowered steps L (ctx):
 * kernel k's output y may take over the buffer of its input x when a
 * oneDNN step of k writes y itself and starts from x as its sum post-op
 * (fsl_onednn_linear_sum_in_place), reads x as neither source nor
 * weights, and no later step of k reads x.  The copy of x into the
 * destination before the primitive runs then disappears (the residual
 * adds of ResNet and MBConv blocks without AVX-512: efficientvit_b1 18
 * copies per run, 0.39 ms, DNNL_VERBOSE). */
static bool sum_in_place(const void *ctx, int step, const fsl_kernel *k, const fsl_value *y, const fsl_value *x) {
  (void)k;
  const fsl_lowering *L = ctx;
  int at = -1;
  for (int i = 0; i < L->n_steps; i++) {
    const fsl_step *s = &L->steps[i];
    if (s->kernel != step) continue;
    if (at >= 0) { /* a later step of the kernel may not read x */
      for (int j = 0; j < s->n_in; j++)
        if (s->in[j] == x) return false;
      continue;
    }
    if (s->kind == FSL_STEP_LIB && s->n_out == 1 && s->out[0] == y && s->n_in >= 2 && s->in[0] != x &&
        s->in[1] != x && fsl_onednn_linear_sum_in_place(fsl_cpu_step_dnn(s), x))
      at = i;
  }
  return at >= 0;
}

static fsl_status build_exe(const fsl_plan *p, const fsl_compile_ctx *ctx, const code_source *cs, void **exe) {
  if (!p || !exe || !p->g) return fsl_errorf(FSL_ERR_ARG, "cpu compile: NULL argument");
  *exe = NULL;
  cpu_exe *x = calloc(1, sizeof *x);
  if (!x) return oom();
  x->p = p;
  if (ctx)
    x->caps = ctx->caps;
  else
    fsl_backend_caps_get(&fsl_backend_cpu, &x->caps);
  const fsl_graph *g = p->g;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  x->last = malloc(sizeof(int) * nv);
  fsl_status st = x->last ? fsl_cpu_lowering_init(&x->low, g, &x->caps) : oom();
  /* kernel outputs in one arena, in place where legal (generated
   * elementwise code reads element i before writing it); graph outputs get
   * buffers of their own, handed to the caller.  The plan's memory plan
   * (the compile context's, else built here with the same options) decides
   * which values keep a oneDNN layout (fsl_cpu_chain_layouts); the arena
   * is then planned again with the steps known, a convolution writing over
   * the residual it accumulates into (sum_in_place) */
  fsl_memplan base = {0};
  const fsl_memplan *mp = ctx && ctx->mem ? ctx->mem : &base;
  if (st == FSL_OK && mp == &base) st = fsl_memplan_build(p, &fsl_memplan_executor, &base);
  for (int ki = 0; ki < p->kernels.n && st == FSL_OK; ki++) {
    st = fsl_lower_kernel(&x->low, ki, p->kernels.k[ki]);
    if (st != FSL_OK) fsl_error_context(st, "cpu backend, kernel %d", ki);
  }
  if (st == FSL_OK) x->stats.n_chained = fsl_cpu_chain_layouts(&x->low, mp);
  fsl_memplan_free(&base);
  if (st == FSL_OK) fsl_cpu_lower_generated(&x->low, p->kernels.k, p->kernels.n);
  if (st == FSL_OK) st = fsl_lowering_source(&x->low);
  if (st == FSL_OK) {
    fsl_memplan_options mo = fsl_memplan_executor;
    mo.may_alias = sum_in_place, mo.alias_ctx = &x->low;
    st = fsl_memplan_build(p, &mo, &x->mem);
  }
  if (st == FSL_OK && x->mem.peak_bytes > 0 &&
      !(x->arena = aligned_alloc(FSL_MEMPLAN_ALIGN, (size_t)x->mem.peak_bytes)))
    st = fsl_errorf(FSL_ERR_NOMEM, "out of memory (%lld bytes for the arena)", (long long)x->mem.peak_bytes);
  const fsl_lowering *L = &x->low;
  x->stats.n_kernels = p->kernels.n;
  x->stats.n_generated = L->n_generated;
  x->stats.n_onednn = L->n_lib;
  for (int i = 0; i < L->n_steps; i++)
    x->stats.n_winograd += L->steps[i].kind == FSL_STEP_LIB && fsl_onednn_linear_winograd(fsl_cpu_step_dnn(&L->steps[i]));
  for (int v = 0; st == FSL_OK && x->mem.alias && v < x->mem.n_ids; v++) {
    int a = x->mem.alias[v];
    if (a < 0 || !x->mem.size[v]) continue;
    int k = x->mem.first[v];
    const fsl_kernel *kk = k >= 0 && k < p->kernels.n ? p->kernels.k[k] : NULL;
    x->stats.n_sum_in_place += kk && kk->kind == FSL_KERNEL_LINEAR;
  }
  x->stats.n_fallback = L->n_fallback;
  x->stats.n_opaque = L->n_opaque;
  if (st == FSL_OK && L->n_generated > 0) {
    st = load_code(L, cs, &x->so);
    if (st == FSL_OK && cs->imported) {
      if (!(x->object = malloc(cs->len))) st = oom();
      else memcpy(x->object, cs->object, x->object_len = cs->len);
    }
    if (st == FSL_OK) {
      x->stats.cache_hit = x->so.cache_hit;
      x->stats.compile_s = x->so.compile_s;
      snprintf(x->stats.so_path, sizeof x->stats.so_path, "%s", x->so.path);
    }
    for (int i = 0; i < L->n_steps && st == FSL_OK; i++) {
      step *s = &L->steps[i];
      if (s->kind != FSL_STEP_GEN) continue;
      void *f = fsl_cpu_so_kernel(&x->so, s->fn_id);
      if (!f) st = FSL_ERR_RUNTIME;
      else s->fn = f;
    }
  }
  if (st == FSL_OK) {
    for (size_t i = 0; i < nv; i++) x->last[i] = -1;
    for (int i = 0; i < L->n_steps; i++) {
      const step *s = &L->steps[i];
      for (int k = 0; k < s->n_in; k++)
        if (s->in[k]) x->last[s->in[k]->id] = i;
      for (int k = 0; k < s->n_out; k++) x->last[s->out[k]->id] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) x->last[g->outputs[i]->id] = L->n_steps;
  }
  if (st == FSL_OK && getenv("FSL_CPU_PROFILE") && !(x->prof = calloc((size_t)L->n_steps + 1, sizeof(double))))
    st = oom();
  if (x->prof) x->cap_runs = 1;
  if (st != FSL_OK) {
    free_exe(x);
    return st;
  }
  *exe = x;
  return FSL_OK;
}

static fsl_status cpu_compile(const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe) {
  code_source cs = {0};
  return build_exe(p, ctx, &cs, exe);
}

/* Exported executable: u64 hash of the generated source, u64 length, u64
 * hash and the bytes of the shared object (length 0 when nothing is
 * generated).  The object's hash is checked before dlopen, which is not
 * hardened against malformed objects. */
static fsl_status cpu_export(const void *exe, fsl_bytes *out) {
  const cpu_exe *x = exe;
  if (!x || !out) return fsl_errorf(FSL_ERR_ARG, "cpu export: NULL argument");
  fsl_bytes_u64(out, fsl_hash(FSL_HASH_INIT, x->low.src.p, x->low.src.len));
  void *obj = x->object;
  size_t len = x->object_len;
  if (x->so.handle && !obj) {
    fsl_status st = fsl_read_file(x->so.path, (size_t)1 << 31, &obj, &len);
    if (st != FSL_OK) return fsl_error_context(st, "the plan's kernel object");
  }
  fsl_bytes_u64(out, obj ? len : 0);
  fsl_bytes_u64(out, obj ? fsl_hash(FSL_HASH_INIT, obj, len) : 0);
  if (obj) fsl_bytes_put(out, obj, len);
  if (obj != x->object) free(obj);
  return out->oom ? fsl_errorf(FSL_ERR_NOMEM, "out of memory") : FSL_OK;
}

static fsl_status cpu_import(const fsl_plan *p, const fsl_compile_ctx *ctx, const void *data, size_t len, void **exe) {
  fsl_reader r = {data, (const unsigned char *)data + len, false};
  code_source cs = {0};
  cs.src_hash = fsl_read_u64(&r);
  uint64_t obj_len = fsl_read_u64(&r), obj_hash = fsl_read_u64(&r);
  cs.object = fsl_read_take(&r, obj_len);
  cs.len = (size_t)obj_len;
  if (r.bad || r.p != r.end) return fsl_errorf(FSL_ERR_INVALID, "the cpu executable record is malformed");
  /* a plan with no generated kernel exports no object, and hash 0 */
  if (obj_len == 0 ? obj_hash != 0 : fsl_hash(FSL_HASH_INIT, cs.object, cs.len) != obj_hash)
    return fsl_errorf(FSL_ERR_INVALID, "the compiled kernels in the file are damaged (checksum mismatch)");
  cs.imported = true;
  return build_exe(p, ctx, &cs, exe);
}

/* ---- run ---- */

typedef struct run_ctx {
  cpu_exe *x;
  const void **buf;   /* value id -> data */
  bool *owned;        /* buf[id] malloc'd by this run */
} run_ctx;

static char k_empty[64];

/* A buffer of exactly `bytes` from the pool, or a new one (NULL on OOM). */
static void *buf_take(cpu_exe *x, size_t bytes) {
  for (int i = x->n_pool - 1; i >= 0; i--)
    if (x->pool[i].bytes == bytes) {
      void *p = x->pool[i].p;
      x->pool[i] = x->pool[--x->n_pool];
      return p;
    }
  return malloc(bytes);
}

/* Returns a buffer of `bytes` to the pool (freed when the pool cannot grow). */
static void buf_give(cpu_exe *x, void *p, size_t bytes) {
  if (!fsl_grow((void **)&x->pool, &x->cap_pool, x->n_pool + 1, sizeof *x->pool)) {
    free(p);
    return;
  }
  x->pool[x->n_pool++] = (struct pooled){bytes, p};
}

/* Releases the run's buffer of value id (it must be owned). */
static void release(run_ctx *r, int id) {
  int64_t nb = fsl_value_nbytes(r->x->p->g->values[id]);
  buf_give(r->x, (void *)r->buf[id], (size_t)(nb > 0 ? nb : 1));
  r->buf[id] = NULL;
  r->owned[id] = false;
}

static fsl_status ensure_buf(run_ctx *r, const fsl_value *v) {
  if (r->buf[v->id]) return FSL_OK;
  const fsl_memplan *mp = &r->x->mem;
  if (v->id < mp->n_ids && mp->offset[v->id] >= 0) { /* a kernel output: its arena slot */
    r->buf[v->id] = r->x->arena ? r->x->arena + mp->offset[v->id] : (const void *)k_empty;
    return FSL_OK;
  }
  int64_t nb = fsl_value_nbytes(v);
  if (nb < 0) return fsl_errorf(FSL_ERR_SHAPE, "value '%s' has no static shape", v->name ? v->name : "?");
  void *p = buf_take(r->x, (size_t)(nb > 0 ? nb : 1));
  if (!p) return fsl_errorf(FSL_ERR_NOMEM, "out of memory (%lld bytes for '%s')", (long long)nb, v->name ? v->name : "?");
  r->buf[v->id] = p;
  r->owned[v->id] = true;
  return FSL_OK;
}

static fsl_status need(const run_ctx *r, int id, const step *s) {
  if (r->buf[id]) return FSL_OK;
  const fsl_value *v = r->x->p->g->values[id];
  if (fsl_value_nbytes(v) == 0) {
    r->buf[id] = k_empty;
    return FSL_OK;
  }
  return fsl_errorf(FSL_ERR_INVALID, "cpu backend, kernel %d: value '%s' is read before it is written", s->kernel,
                    v->name ? v->name : "?");
}

/* Evaluates the step's nodes with the reference interpreter; *failed (if
 * not NULL) receives the index of the node that failed, -1 if none. */
static fsl_status ref_nodes(run_ctx *r, const step *s, int *failed) {
  const fsl_graph *g = r->x->p->g;
  fsl_status st = FSL_OK;
  if (failed) *failed = -1;
  int made[64], n_made = 0; /* temporaries allocated here (freed at the end) */
  for (int i = 0; i < s->n_nodes && st == FSL_OK; i++) {
    const fsl_node *n = s->nodes[i];
    const void *in[32];
    void *out[16];
    if (n->n_in > 32 || n->n_out > 16) return fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "too many operands");
    for (int k = 0; k < n->n_in && st == FSL_OK; k++) {
      in[k] = NULL;
      if (n->in[k]) {
        st = need(r, n->in[k]->id, s);
        in[k] = r->buf[n->in[k]->id];
      }
    }
    for (int k = 0; k < n->n_out && st == FSL_OK; k++) {
      out[k] = NULL;
      const fsl_value *v = n->out[k];
      if (!v) continue;
      bool fresh = r->buf[v->id] == NULL;
      st = ensure_buf(r, v);
      if (st == FSL_OK && fresh) {
        bool keep = false;
        for (int j = 0; j < s->n_out; j++) keep = keep || s->out[j] == v;
        if (!keep) {
          if (n_made == (int)FSL_ARRAY_LEN(made)) st = fsl_errorf(FSL_ERR_UNSUPPORTED, "too many temporaries");
          else made[n_made++] = v->id;
        }
      }
      out[k] = (void *)r->buf[v->id];
    }
    if (st == FSL_OK) {
      st = fsl_ref_eval(n, in, out);
      if (st != FSL_OK && failed) *failed = i;
    }
  }
  for (int i = 0; i < n_made; i++) {
    if (r->owned[made[i]]) release(r, made[i]);
    r->owned[made[i]] = false;
    r->buf[made[i]] = NULL;
  }
  (void)g;
  return st;
}

static fsl_status run_ref_step(run_ctx *r, const step *s) { return ref_nodes(r, s, NULL); }

/* A generated kernel returned the error bits e.  To name the primitive and
 * the ONNX node at fault (a fused kernel holds many), its nodes run again
 * through the reference interpreter on the same inputs, whose message says
 * what went wrong (e.g. the index and its range).  When that finds nothing
 * (an output written in place may have overwritten an input), the message
 * names the kernel's first node and the kind of error. */
static fsl_status kernel_error(run_ctx *r, const step *s, int e) {
  const fsl_kernel *k = r->x->p->kernels.k[s->kernel];
  const char *what = (e & FSL_KERR_INDEX)     ? "gather index out of range"
                     : (e & FSL_KERR_DIVZERO) ? "integer division by zero"
                                              : "out of memory";
  int bad = -1;
  /* the reference's message names the node (fsl_node_errorf) */
  if (!(e & FSL_KERR_NOMEM) && s->n_nodes > 0 && ref_nodes(r, s, &bad) != FSL_OK && bad >= 0) {
    return fsl_error_context(FSL_ERR_RUNTIME, "cpu backend, kernel %d", s->kernel);
  }
  fsl_error_clear();
  const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
  return fsl_errorf(FSL_ERR_RUNTIME, "cpu backend, kernel %d (from %s '%s'): %s", s->kernel,
                    n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?", what);
}

static fsl_status run_step(run_ctx *r, const step *s) {
  const void *in[256];
  void *out[64];
  if (s->kind == FSL_STEP_HOST) return run_ref_step(r, s);
  if (s->n_in > 256 || s->n_out > 64) return fsl_errorf(FSL_ERR_UNSUPPORTED, "too many kernel operands");
  for (int k = 0; k < s->n_in; k++) {
    in[k] = NULL;
    if (!s->in[k]) continue;
    FSL_TRY(need(r, s->in[k]->id, s));
    in[k] = r->buf[s->in[k]->id];
  }
  for (int k = 0; k < s->n_out; k++) {
    FSL_TRY(ensure_buf(r, s->out[k]));
    out[k] = (void *)r->buf[s->out[k]->id];
  }
  if (s->kind == FSL_STEP_LIB) return fsl_onednn_linear_run(fsl_cpu_step_dnn(s), in[0], in[1], in + 2, out[0]);
  int e = fsl_cpu_step_call(s, in, out);
  return e ? kernel_error(r, s, e) : FSL_OK;
}

/* FSL_CPU_PROFILE: the zeroed row of prof for this run, or NULL (not
 * profiling, PROFILE_MAX_RUNS recorded, or out of memory: the run is not
 * recorded). */
static double *profile_row(cpu_exe *x) {
  if (!x->prof || x->n_runs >= PROFILE_MAX_RUNS) return NULL;
  size_t ns = (size_t)x->low.n_steps;
  if (x->n_runs == x->cap_runs) {
    int cap = 2 * x->cap_runs < PROFILE_MAX_RUNS ? 2 * x->cap_runs : PROFILE_MAX_RUNS;
    double *p = realloc(x->prof, ((size_t)cap * ns + 1) * sizeof(double));
    if (!p) return NULL;
    x->prof = p, x->cap_runs = cap;
  }
  double *row = x->prof + (size_t)x->n_runs * ns;
  memset(row, 0, ns * sizeof(double));
  return row;
}

static fsl_status cpu_run(void *exe, const void *const *inputs, void **outputs) {
  cpu_exe *x = exe;
  if (!x || (!outputs && x->p->g->n_outputs > 0)) return fsl_errorf(FSL_ERR_ARG, "cpu run: NULL argument");
  const fsl_graph *g = x->p->g;
  for (int i = 0; i < g->n_outputs; i++) outputs[i] = NULL;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  run_ctx r = {x, calloc(nv, sizeof(void *)), calloc(nv, sizeof(bool))};
  fsl_status st = FSL_OK;
  if (!r.buf || !r.owned) {
    st = oom();
    goto done;
  }
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i]->data) r.buf[i] = g->values[i]->data;
  for (int i = 0; i < g->n_inputs; i++) {
    const fsl_value *v = g->inputs[i];
    if ((!inputs || !inputs[i]) && fsl_value_nbytes(v) > 0) {
      st = fsl_errorf(FSL_ERR_ARG, "no data for graph input '%s'", v->name ? v->name : "?");
      goto done;
    }
    r.buf[v->id] = inputs && inputs[i] ? inputs[i] : k_empty;
  }
  double *prof_row = profile_row(x);
  for (int i = 0; i < x->low.n_steps && st == FSL_OK; i++) {
    const step *s = &x->low.steps[i];
    double t0 = prof_row ? fsl_now_s() : 0;
    st = run_step(&r, s);
    if (prof_row) prof_row[i] = fsl_now_s() - t0;
    /* free what this step touched last */
    for (int pass = 0; pass < 2 && st == FSL_OK; pass++) {
      int n = pass ? s->n_out : s->n_in;
      fsl_value *const *vals = pass ? s->out : s->in;
      for (int k = 0; k < n; k++) {
        int id = vals[k] ? vals[k]->id : -1;
        if (id >= 0 && x->last[id] == i && r.owned[id]) release(&r, id);
      }
    }
  }
  for (int i = 0; i < g->n_outputs && st == FSL_OK; i++) {
    const fsl_value *v = g->outputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (!r.buf[v->id] && nb > 0) {
      st = fsl_errorf(FSL_ERR_INVALID, "graph output '%s' is never computed", v->name ? v->name : "?");
      break;
    }
    bool dup = false;
    for (int j = 0; j < i; j++) dup = dup || g->outputs[j] == v;
    if (r.owned[v->id] && !dup) {
      outputs[i] = (void *)r.buf[v->id];
      r.owned[v->id] = false; /* handed over */
      continue;
    }
    outputs[i] = malloc((size_t)(nb > 0 ? nb : 1));
    if (!outputs[i]) st = oom();
    else if (nb > 0) memcpy(outputs[i], r.buf[v->id], (size_t)nb);
  }
  if (prof_row) x->n_runs++;
  if (st != FSL_OK)
    for (int i = 0; i < g->n_outputs; i++) {
      /* an output handed over is no longer owned: free it here */
      free(outputs[i]);
      outputs[i] = NULL;
    }
done:
  if (r.owned)
    for (size_t i = 0; i < nv; i++)
      if (r.owned[i]) release(&r, (int)i);
  free(r.buf);
  free(r.owned);
  return st;
}

void fsl_cpu_exe_stats(const void *exe, fsl_cpu_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (exe) *out = ((const cpu_exe *)exe)->stats;
}

/* The backend's capabilities (backend.h), read once per model: oneDNN for
 * linear ops unless FSL_NO_ONEDNN is set (docs/cli.md); Winograd with it:
 * oneDNN's own kernels with AVX-512 (onednn.c, wino_pays), fissile's
 * F(2x2,3x3) without (winograd.h); none where oneDNN is off (convolutions
 * are generated code).  oneDNN reads plain operands: no linear views. */
static void cpu_caps(fsl_backend_caps *out) {
  out->library = getenv("FSL_NO_ONEDNN") == NULL;
  out->winograd_3x3 = out->library;
  out->linear_int8 = out->library && fsl_onednn_int8_available(); /* oneDNN int8 primitives (onednn_int8.c) */
}

/* Lowers k alone (as the profiler does) and looks for a fallback step. */
static bool cpu_supports(const fsl_graph *g, const fsl_kernel *k) {
  fsl_backend_caps caps;
  fsl_backend_caps_get(&fsl_backend_cpu, &caps);
  return fsl_lowering_supports(g, &fsl_dialect_c, fsl_cpu_lowering_hooks(), &caps, k);
}

static void cpu_exe_info(const void *exe, fsl_backend_exe_info *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  const cpu_exe *x = exe;
  if (!x) return;
  fsl_lowering_exe_info(&x->low, x->p->kernels.n, out);
  out->arena_bytes = x->mem.peak_bytes;
}

const fsl_backend fsl_backend_cpu = {
    .name = "cpu",
    .summary = "generated C per kernel in one shared object, oneDNN for matmul/conv",
    .no_plan = false,
    .calibrate = fsl_cpu_calibrate,
    .profiler_init = fsl_cpu_profiler_init,
    .supports = cpu_supports,
    .caps = cpu_caps,
    .compile = cpu_compile,
    .fingerprint = fsl_cpu_fingerprint,
    .export_exe = cpu_export,
    .import_exe = cpu_import,
    .run = cpu_run,
    .exe_info = cpu_exe_info,
    .free_exe = free_exe,
};
