/*
 * cpu.c — the CPU backend (backend.h): a plan becomes a list of steps,
 *
 *   GEN     a generated C function (emit.c) from the plan's shared object
 *   ONEDNN  a matmul/conv with absorbed epilogue post-ops (onednn.c)
 *   REF     nodes run one by one by the reference interpreter (opaque
 *           kernels, and kernels or linear ops the emitter cannot handle)
 *
 * LOOP and REDUCE kernels are one GEN step.  A LINEAR kernel is split into
 * an optional prologue (GEN, when its linear op's inputs are computed in
 * the kernel by more than views), the linear op (ONEDNN, or a generated
 * matmul / REF conv where oneDNN refuses, e.g. non-f32) and an epilogue
 * (GEN over the output, reading the linear result).  Every value a step
 * writes gets a buffer at its first write, which returns to the
 * executable's pool after the last step that reads or writes it (graph
 * outputs excepted); later steps and runs take pooled buffers of the same
 * byte size before calling malloc.  Values
 * written by several kernels (recomputation) are simply written again.
 * Design notes: docs/cpu-backend.md.
 */
#include "backend/backend.h"
#include "backend/cpu/calibrate.h"
#include "backend/cpu/compile.h"
#include "backend/cpu/emit.h"
#include "backend/cpu/linsplit.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/profile.h"
#include "eval/eval.h"

#include <time.h>

typedef int (*kernel_fn)(const void *const *in, void *const *out);

typedef enum { STEP_GEN, STEP_ONEDNN, STEP_REF } step_kind;

typedef struct step {
  step_kind kind;
  int kernel;              /* index in the plan */
  int fn_id;               /* GEN: fsl_k<fn_id> */
  kernel_fn fn;
  int n_in, n_out;
  int *in, *out;           /* value ids (ONEDNN: src, wei, then post operands or -1) */
  fsl_onednn_linear *dnn;  /* ONEDNN */
  int n_post;
  int n_nodes;             /* REF */
  fsl_node **nodes;
} step;

typedef struct cpu_exe {
  const fsl_plan *p;
  fsl_cpu_so so;
  step *steps;
  int n_steps, cap_steps;
  int *last;               /* value id -> last step touching it, -1 */
  bool *written;           /* compile-time: value id -> written by an earlier step */
  int next_fn;
  fsl_cpu_stats stats;
  char fallback_why[256];  /* the first fallback's kernel and reason */
  double *prof;            /* FSL_CPU_PROFILE set: seconds per step, summed over runs */
  int n_runs;
  /* buffers released by earlier steps and runs, for reuse by size: a fresh
   * malloc of a large buffer is a fresh mmap whose page faults cost more
   * than the kernel writing it (softmax 8x32000: 0.40 ms -> 0.14 ms) */
  struct pooled { size_t bytes; void *p; } *pool;
  int n_pool, cap_pool;
} cpu_exe;

/* ---- small helpers ---- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory"); }

static bool is_avail(const void *ctx, const fsl_value *v) {
  const cpu_exe *x = ctx;
  return v->data || v->is_input || x->written[v->id];
}

static step *new_step(cpu_exe *x, step_kind kind, int kernel) {
  if (x->n_steps == x->cap_steps) {
    int cap = x->cap_steps ? 2 * x->cap_steps : 16;
    step *s = realloc(x->steps, sizeof *s * (size_t)cap);
    if (!s) return NULL;
    x->steps = s;
    x->cap_steps = cap;
  }
  step *s = &x->steps[x->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->kernel = kernel;
  s->fn_id = -1;
  return s;
}

static bool set_ids(int **dst, int *n, fsl_value *const *vals, int count) {
  *dst = malloc(sizeof(int) * (size_t)(count > 0 ? count : 1));
  if (!*dst) return false;
  for (int i = 0; i < count; i++) (*dst)[i] = vals[i] ? vals[i]->id : -1;
  *n = count;
  return true;
}

static void mark_written(cpu_exe *x, fsl_value *const *vals, int n) {
  for (int i = 0; i < n; i++)
    if (vals[i]) x->written[vals[i]->id] = true;
}

/* Records that kernel ki falls back (in part) to the reference
 * interpreter, and why (the first reason is kept). */
static void note_fallback(cpu_exe *x, int ki, const char *why) {
  x->stats.n_fallback++;
  if (x->fallback_why[0]) return;
  const fsl_kernel *k = x->p->kernels.k[ki];
  const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
  snprintf(x->fallback_why, sizeof x->fallback_why, "kernel %d (%s '%s'): %s", ki,
           n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?", why);
}

/* ---- steps ---- */

/* REF step over nodes, keeping outs. */
static fsl_status add_ref(cpu_exe *x, int kernel, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out) {
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  step *s = new_step(x, STEP_REF, kernel);
  fsl_status st = FSL_OK;
  if (!s || !set_ids(&s->in, &s->n_in, (fsl_value *const *)ins.p, ins.n) || !set_ids(&s->out, &s->n_out, outs, n_out) ||
      !(s->nodes = malloc(sizeof(fsl_node *) * (size_t)(n > 0 ? n : 1))))
    st = oom();
  else {
    memcpy(s->nodes, nodes, sizeof(fsl_node *) * (size_t)n);
    s->n_nodes = n;
    mark_written(x, outs, n_out);
  }
  free(ins.p);
  return st;
}

/* GEN step (emitted into src) or, when the emitter cannot, a REF step. */
static fsl_status add_gen(cpu_exe *x, fsl_sbuf *src, int kernel, fsl_node *const *nodes, int n,
                          fsl_value *const *outs, int n_out) {
  if (n_out == 0) return FSL_OK;
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_emit_spec spec = {.g = x->p->g, .id = x->next_fn, .n_nodes = n, .nodes = nodes, .n_in = ins.n,
                        .in = (fsl_value *const *)ins.p, .n_out = n_out, .out = outs};
  fsl_status st = fsl_emit_kernel(&spec, src);
  if (st == FSL_ERR_UNSUPPORTED) {
    note_fallback(x, kernel, fsl_last_error());
    fsl_error_clear();
    free(ins.p);
    return add_ref(x, kernel, nodes, n, outs, n_out);
  }
  if (st == FSL_OK) {
    step *s = new_step(x, STEP_GEN, kernel);
    if (!s || !set_ids(&s->in, &s->n_in, (fsl_value *const *)ins.p, ins.n) || !set_ids(&s->out, &s->n_out, outs, n_out))
      st = oom();
    else {
      s->fn_id = x->next_fn++;
      x->stats.n_generated++;
      mark_written(x, outs, n_out);
    }
  }
  free(ins.p);
  return st;
}

/* The linear op itself: oneDNN with the longest usable epilogue chain, else
 * a generated matmul, else the reference interpreter.  *z receives the
 * value it writes, *n_abs the absorbed chain length. */
static fsl_status add_linear(cpu_exe *x, fsl_sbuf *src, int kernel, fsl_node *lin, fsl_value *const *lin_in,
                             fsl_node *const *chain, int n_chain, fsl_value **z, int *n_abs) {
  *z = lin->out[0];
  *n_abs = 0;
  fsl_onednn_linear *op = NULL;
  int na = 0;
  fsl_status st = FSL_ERR_UNSUPPORTED;
  if (lin->in[0]->dtype == FSL_DT_F32 && getenv("FSL_NO_ONEDNN") == NULL)
    st = fsl_onednn_linear_create_avail(lin, chain, n_chain, 0, is_avail, x, &op, &na);
  if (st == FSL_OK) {
    step *s = new_step(x, STEP_ONEDNN, kernel);
    if (!s) {
      fsl_onednn_linear_free(op);
      return oom();
    }
    s->dnn = op;
    s->n_post = na;
    s->in = malloc(sizeof(int) * (size_t)(2 + na));
    s->out = malloc(sizeof(int));
    if (!s->in || !s->out) return oom();
    s->n_in = 2 + na;
    s->in[0] = lin_in[0]->id;
    s->in[1] = lin_in[1]->id;
    for (int i = 0; i < na; i++) {
      const fsl_value *pv = fsl_onednn_linear_post_value(op, i);
      s->in[2 + i] = pv ? pv->id : -1;
    }
    *z = na > 0 ? chain[na - 1]->out[0] : lin->out[0];
    *n_abs = na;
    s->n_out = 1;
    s->out[0] = (*z)->id;
    x->written[(*z)->id] = true;
    x->stats.n_onednn++;
    return FSL_OK;
  }
  if (st != FSL_ERR_UNSUPPORTED && st != FSL_ERR_SHAPE && st != FSL_ERR_RUNTIME) return st;
  fsl_error_clear();
  /* generated matmul over the (view-resolved) operands */
  if (lin->op == FSL_OP_matmul) {
    fsl_sbuf tmp = {0};
    if (fsl_emit_matmul(x->next_fn, lin, &tmp) == FSL_OK && !tmp.oom) {
      fsl_sbuf_puts(src, tmp.p);
      fsl_sbuf_free(&tmp);
      step *s = new_step(x, STEP_GEN, kernel);
      /* lin_in: the operands, or the values they are reshapes of (same bytes) */
      if (!s || !set_ids(&s->in, &s->n_in, lin_in, 2) || !set_ids(&s->out, &s->n_out, lin->out, 1)) return oom();
      s->fn_id = x->next_fn++;
      x->stats.n_generated++;
      x->written[lin->out[0]->id] = true;
      return FSL_OK;
    }
    fsl_sbuf_free(&tmp);
    fsl_error_clear();
  }
  char why[160];
  snprintf(why, sizeof why, "no oneDNN primitive or generated code for %s over %s", fsl_op_get(lin->op)->name,
           fsl_dtype_name(lin->in[0]->dtype));
  note_fallback(x, kernel, why);
  /* the reference runs the in-kernel reshapes between lin_in and lin too */
  fsl_node *nodes[2 * FSL_MAX_RANK + 1];
  int n = 0;
  for (int i = 0; i < 2; i++)
    for (fsl_value *v = lin->in[i]; v != lin_in[i] && n < 2 * FSL_MAX_RANK; v = v->producer->in[0])
      nodes[n++] = v->producer;
  /* reverse into topological order (each chain is already a path) */
  for (int i = 0, j = n - 1; i < j; i++, j--) {
    fsl_node *t = nodes[i];
    nodes[i] = nodes[j];
    nodes[j] = t;
  }
  nodes[n++] = lin;
  return add_ref(x, kernel, nodes, n, lin->out, 1);
}

static bool was_written(const void *ctx, const fsl_value *v) { return ((const cpu_exe *)ctx)->written[v->id]; }

/* Prologue, linear op, epilogue (linsplit.h). */
static fsl_status plan_linear(cpu_exe *x, fsl_sbuf *src, int ki, const fsl_kernel *k) {
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_ERR_UNSUPPORTED) {
    note_fallback(x, ki, fsl_last_error());
    fsl_error_clear();
    fsl_linear_split_free(&sp);
    return add_ref(x, ki, k->nodes, k->n_nodes, k->out, k->n_out);
  }
  if (st == FSL_OK && sp.gen_prologue)
    st = add_gen(x, src, ki, (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p, sp.pre_out.n);
  fsl_value *z = NULL;
  int n_abs = 0;
  if (st == FSL_OK) st = add_linear(x, src, ki, sp.lin, sp.lin_in, sp.chain, sp.n_chain, &z, &n_abs);
  /* epilogue: the rest, reading z */
  fsl_vlist post = {0}, post_out = {0};
  if (st == FSL_OK) st = fsl_linear_split_epilogue(k, &sp, n_abs, z, was_written, x, &post, &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = add_gen(x, src, ki, (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p, post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

/* ---- compile ---- */

/* FSL_CPU_PROFILE: per-step times on stderr, slowest first. */
static void print_profile(const cpu_exe *x) {
  double total = 0;
  for (int i = 0; i < x->n_steps; i++) total += x->prof[i];
  fprintf(stderr, "cpu profile: %d runs, %.3f ms per run\n", x->n_runs, 1e3 * total / (x->n_runs ? x->n_runs : 1));
  bool *done = calloc((size_t)(x->n_steps > 0 ? x->n_steps : 1), sizeof(bool));
  if (!done) return;
  for (int r = 0; r < x->n_steps && r < 20; r++) {
    int b = -1;
    for (int i = 0; i < x->n_steps; i++)
      if (!done[i] && (b < 0 || x->prof[i] > x->prof[b])) b = i;
    done[b] = true;
    const step *s = &x->steps[b];
    const fsl_kernel *k = x->p->kernels.k[s->kernel];
    const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
    char what[224] = ""; /* the function, or what oneDNN runs */
    if (s->kind == STEP_GEN) snprintf(what, sizeof what, " fsl_k%d", s->fn_id);
    if (s->kind == STEP_ONEDNN) snprintf(what, sizeof what, " %s", fsl_onednn_linear_describe(s->dnn));
    fprintf(stderr, "  %8.3f ms  step %d kernel %d (%s, %d nodes, from %s '%s')%s\n",
            1e3 * x->prof[b] / (x->n_runs ? x->n_runs : 1), b, s->kernel,
            s->kind == STEP_GEN ? "gen" : s->kind == STEP_ONEDNN ? "onednn" : "ref", k->n_nodes,
            n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?", what);
  }
  free(done);
}

static void free_exe(void *p) {
  cpu_exe *x = p;
  if (!x) return;
  if (x->prof) {
    print_profile(x);
    free(x->prof);
  }
  for (int i = 0; i < x->n_steps; i++) {
    step *s = &x->steps[i];
    free(s->in);
    free(s->out);
    free(s->nodes);
    if (s->dnn) fsl_onednn_linear_free(s->dnn);
  }
  free(x->steps);
  free(x->last);
  free(x->written);
  for (int i = 0; i < x->n_pool; i++) free(x->pool[i].p);
  free(x->pool);
  fsl_cpu_so_close(&x->so);
  free(x);
}

static fsl_status cpu_compile(const fsl_plan *p, void **exe) {
  if (!p || !exe || !p->g) return fsl_errorf(FSL_ERR_ARG, "cpu compile: NULL argument");
  *exe = NULL;
  cpu_exe *x = calloc(1, sizeof *x);
  if (!x) return oom();
  x->p = p;
  const fsl_graph *g = p->g;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  x->last = malloc(sizeof(int) * nv);
  x->written = calloc(nv, sizeof(bool));
  fsl_sbuf src = {0};
  fsl_status st = (x->last && x->written) ? FSL_OK : oom();
  x->stats.n_kernels = p->kernels.n;
  if (st == FSL_OK) fsl_emit_prologue(&src);
  for (int ki = 0; ki < p->kernels.n && st == FSL_OK; ki++) {
    const fsl_kernel *k = p->kernels.k[ki];
    bool opaque = false, linear = false;
    for (int i = 0; i < k->n_nodes; i++) {
      const fsl_op_info *oi = fsl_op_get(k->nodes[i]->op);
      if (!oi->primitive || oi->kind == FSL_KIND_OPAQUE) opaque = true;
      else if (oi->kind == FSL_KIND_LINEAR) linear = true;
    }
    if (opaque) {
      x->stats.n_opaque++;
      st = add_ref(x, ki, k->nodes, k->n_nodes, k->out, k->n_out);
    } else if (linear) {
      st = plan_linear(x, &src, ki, k);
    } else {
      st = add_gen(x, &src, ki, k->nodes, k->n_nodes, k->out, k->n_out);
    }
    if (st != FSL_OK) fsl_error_context(st, "cpu backend, kernel %d", ki);
  }
  if (st == FSL_OK && src.oom) st = oom();
  if (st == FSL_OK && x->stats.n_generated > 0) {
    st = fsl_cpu_so_load(src.p, &x->so);
    if (st == FSL_OK) {
      x->stats.cache_hit = x->so.cache_hit;
      x->stats.compile_s = x->so.compile_s;
      snprintf(x->stats.so_path, sizeof x->stats.so_path, "%s", x->so.path);
    }
    for (int i = 0; i < x->n_steps && st == FSL_OK; i++) {
      step *s = &x->steps[i];
      if (s->kind != STEP_GEN) continue;
      void *f = fsl_cpu_so_kernel(&x->so, s->fn_id);
      if (!f) st = FSL_ERR_RUNTIME;
      else memcpy(&s->fn, &f, sizeof f);
    }
  }
  fsl_sbuf_free(&src);
  if (st == FSL_OK) {
    for (size_t i = 0; i < nv; i++) x->last[i] = -1;
    for (int i = 0; i < x->n_steps; i++) {
      const step *s = &x->steps[i];
      for (int k = 0; k < s->n_in; k++)
        if (s->in[k] >= 0) x->last[s->in[k]] = i;
      for (int k = 0; k < s->n_out; k++) x->last[s->out[k]] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) x->last[g->outputs[i]->id] = x->n_steps;
  }
  if (st == FSL_OK && getenv("FSL_CPU_PROFILE") && !(x->prof = calloc((size_t)x->n_steps + 1, sizeof(double))))
    st = oom();
  if (st != FSL_OK) {
    free_exe(x);
    return st;
  }
  *exe = x;
  return FSL_OK;
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

static fsl_status run_ref_step(run_ctx *r, const step *s) {
  const fsl_graph *g = r->x->p->g;
  fsl_status st = FSL_OK;
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
        for (int j = 0; j < s->n_out; j++) keep = keep || s->out[j] == v->id;
        if (!keep) {
          if (n_made == (int)FSL_ARRAY_LEN(made)) st = fsl_errorf(FSL_ERR_UNSUPPORTED, "too many temporaries");
          else made[n_made++] = v->id;
        }
      }
      out[k] = (void *)r->buf[v->id];
    }
    if (st == FSL_OK) st = fsl_ref_eval(n, in, out);
  }
  for (int i = 0; i < n_made; i++) {
    if (r->owned[made[i]]) release(r, made[i]);
    r->owned[made[i]] = false;
    r->buf[made[i]] = NULL;
  }
  (void)g;
  return st;
}

static fsl_status run_step(run_ctx *r, const step *s) {
  const fsl_graph *g = r->x->p->g;
  const void *in[256];
  void *out[64];
  if (s->kind == STEP_REF) return run_ref_step(r, s);
  if (s->n_in > 256 || s->n_out > 64) return fsl_errorf(FSL_ERR_UNSUPPORTED, "too many kernel operands");
  for (int k = 0; k < s->n_in; k++) {
    in[k] = NULL;
    if (s->in[k] < 0) continue;
    FSL_TRY(need(r, s->in[k], s));
    in[k] = r->buf[s->in[k]];
  }
  for (int k = 0; k < s->n_out; k++) {
    FSL_TRY(ensure_buf(r, g->values[s->out[k]]));
    out[k] = (void *)r->buf[s->out[k]];
  }
  if (s->kind == STEP_ONEDNN) return fsl_onednn_linear_run(s->dnn, in[0], in[1], in + 2, out[0]);
  int e = s->fn(in, out);
  if (e) {
    const fsl_kernel *k = r->x->p->kernels.k[s->kernel];
    const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
    return fsl_errorf(FSL_ERR_RUNTIME, "cpu backend, kernel %d (from %s '%s'): %s", s->kernel,
                      n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?",
                      (e & FSL_KERR_INDEX)     ? "gather index out of range"
                      : (e & FSL_KERR_DIVZERO) ? "integer division by zero"
                                               : "out of memory");
  }
  return FSL_OK;
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
  for (int i = 0; i < x->n_steps && st == FSL_OK; i++) {
    const step *s = &x->steps[i];
    double t0 = x->prof ? now_s() : 0;
    st = run_step(&r, s);
    if (x->prof) x->prof[i] += now_s() - t0;
    /* free what this step touched last */
    for (int pass = 0; pass < 2 && st == FSL_OK; pass++) {
      int n = pass ? s->n_out : s->n_in;
      const int *ids = pass ? s->out : s->in;
      for (int k = 0; k < n; k++) {
        int id = ids[k];
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
  if (x->prof) x->n_runs++;
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

static void cpu_exe_info(const void *exe, fsl_backend_exe_info *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  const cpu_exe *x = exe;
  if (!x) return;
  int nk = x->p->kernels.n;
  bool *fb = calloc((size_t)(nk > 0 ? nk : 1), sizeof(bool));
  if (!fb) return;
  for (int i = 0; i < x->n_steps; i++)
    if (x->steps[i].kind == STEP_REF) fb[x->steps[i].kernel] = true;
  out->n_kernels = nk;
  out->n_opaque = x->stats.n_opaque;
  for (int i = 0; i < nk; i++) out->n_fallback += fb[i];
  out->n_fallback -= out->n_opaque; /* opaque kernels run by the reference by design */
  out->n_native = nk - out->n_fallback - out->n_opaque;
  snprintf(out->fallback_why, sizeof out->fallback_why, "%s", x->fallback_why);
  free(fb);
}

const fsl_backend fsl_backend_cpu = {
    .name = "cpu",
    .summary = "generated C per kernel in one shared object, oneDNN for matmul/conv",
    .calibrate = fsl_cpu_calibrate,
    .profiler_init = fsl_cpu_profiler_init,
    .compile = cpu_compile,
    .run = cpu_run,
    .exe_info = cpu_exe_info,
    .free_exe = free_exe,
};
