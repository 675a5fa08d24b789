/*
 * plan_exec.c — the reference backend (fsl_backend_ref, backend.h): runs a
 * plan kernel by kernel with the reference interpreter, honouring exactly
 * the plan's grouping.  Inside a kernel its nodes run in order and every
 * value a node of the kernel produces is read from the kernel's own scratch
 * buffers (recomputation included); only a kernel's outputs outlive it, and
 * only until the last later kernel that reads them.  A kernel that reads a
 * value no earlier kernel wrote fails, so running a plan here checks that
 * the plan computes what the graph computes.
 */
#include "backend/backend.h"
#include "eval/eval.h"

typedef struct ref_exe {
  const fsl_plan *p;
  int *last_read;  /* per value id: index of the last kernel that reads it; -1 none */
  bool *keep;      /* per value id: graph output, never freed before the end */
} ref_exe;

static const char k_empty[8];  /* stands in for zero-size buffers */

static bool value_ok(const fsl_graph *g, const fsl_value *v) {
  return v && v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

static void ref_free_exe(void *exe) {
  ref_exe *e = exe;
  if (!e) return;
  free(e->last_read);
  free(e->keep);
  free(e);
}

/* Keeps the plan (verified first) and its liveness: which kernel reads each value last. */
static fsl_status ref_compile(const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe) {
  (void)ctx;
  if (!exe) return fsl_errorf(FSL_ERR_ARG, "ref backend: NULL executable pointer");
  *exe = NULL;
  if (!p || !p->g) return fsl_errorf(FSL_ERR_ARG, "ref backend: NULL plan");
  FSL_TRY(fsl_plan_verify(p));
  const fsl_graph *g = p->g;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  ref_exe *e = calloc(1, sizeof *e);
  if (e) {
    e->last_read = malloc(nv * sizeof *e->last_read);
    e->keep = calloc(nv, sizeof *e->keep);
  }
  if (!e || !e->last_read || !e->keep) {
    ref_free_exe(e);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  e->p = p;
  for (int i = 0; i < g->n_values; i++) e->last_read[i] = -1;
  for (int ki = 0; ki < p->kernels.n; ki++) {
    const fsl_kernel *k = p->kernels.k[ki];
    for (int i = 0; i < k->n_in; i++) e->last_read[k->in[i]->id] = ki;
  }
  for (int i = 0; i < g->n_outputs; i++) e->keep[g->outputs[i]->id] = true;
  *exe = e;
  return FSL_OK;
}

typedef struct run_state {
  const fsl_graph *g;
  const void **buf;  /* per value id: data visible between kernels, NULL if none */
  bool *owned;       /* buf[i] was malloc'd here */
  void **local;      /* per value id: scratch of the running kernel */
  int *local_k;      /* local[i] belongs to kernel local_k[i] - 1 */
} run_state;

static void release(run_state *rs, int id) {
  if (rs->owned[id]) free((void *)rs->buf[id]);
  rs->owned[id] = false;
  rs->buf[id] = NULL;
}

/* Frees the scratch buffers kernel ki still holds. */
static void free_local(run_state *rs, const fsl_kernel *k, int ki) {
  for (int i = 0; i < k->n_nodes; i++) {
    const fsl_node *n = k->nodes[i];
    for (int j = 0; j < n->n_out; j++) {
      const fsl_value *v = n->out[j];
      if (v && value_ok(rs->g, v) && rs->local_k[v->id] == ki + 1) {
        free(rs->local[v->id]);
        rs->local[v->id] = NULL;
        rs->local_k[v->id] = 0;
      }
    }
  }
}

/* Evaluates node n of kernel ki: inputs from the kernel's scratch when a
 * node of the kernel produced them, else from earlier kernels. */
static fsl_status run_node(run_state *rs, const fsl_node *n, int ki) {
  const void *small_in[8];
  void *small_out[4];
  const void **in = n->n_in <= 8 ? small_in : malloc(sizeof(void *) * (size_t)n->n_in);
  void **out = n->n_out <= 4 ? small_out : malloc(sizeof(void *) * (size_t)n->n_out);
  fsl_status st = FSL_OK;
  if (!in || !out) {
    st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int j = 0; j < n->n_in; j++) {
    const fsl_value *v = n->in[j];
    in[j] = NULL;
    if (!v) continue;
    if (!value_ok(rs->g, v)) {
      st = fsl_node_errorf(n, FSL_ERR_INVALID, "input %d is not a value of the graph", j);
      goto done;
    }
    if (rs->local_k[v->id] == ki + 1) in[j] = rs->local[v->id];
    else if (rs->buf[v->id]) in[j] = rs->buf[v->id];
    else if (fsl_value_nbytes(v) == 0) in[j] = k_empty;
    else {
      st = fsl_node_errorf(n, FSL_ERR_INVALID, "plan kernel k%d reads '%s' before any kernel writes it", ki,
                           v->name ? v->name : "?");
      goto done;
    }
  }
  for (int j = 0; j < n->n_out; j++) out[j] = NULL;
  for (int j = 0; j < n->n_out; j++) {
    const fsl_value *v = n->out[j];
    if (!v) continue;
    if (!value_ok(rs->g, v)) {
      st = fsl_node_errorf(n, FSL_ERR_INVALID, "output %d is not a value of the graph", j);
      goto done;
    }
    int64_t nb = fsl_value_nbytes(v);
    if (!fsl_value_has_shape(v) || nb < 0) {
      st = fsl_node_errorf(n, FSL_ERR_SHAPE, "output '%s' has no static shape", v->name ? v->name : "?");
      goto done;
    }
    if (rs->local_k[v->id] == ki + 1) free(rs->local[v->id]);  /* a node listed twice */
    out[j] = malloc((size_t)(nb > 0 ? nb : 1));
    rs->local[v->id] = out[j];
    rs->local_k[v->id] = out[j] ? ki + 1 : 0;
    if (!out[j]) {
      st = fsl_errorf(FSL_ERR_NOMEM, "out of memory (%lld bytes for '%s')", (long long)nb, v->name ? v->name : "?");
      goto done;
    }
  }
  st = fsl_ref_eval(n, (const void *const *)in, (void *const *)out);
  if (st != FSL_OK) fsl_error_context(st, "plan kernel k%d", ki);
done:
  if (in != small_in) free(in);
  if (out != small_out) free(out);
  return st;
}

/* Runs kernel ki, publishes its outputs, frees what no later kernel reads. */
static fsl_status run_kernel(run_state *rs, const ref_exe *e, int ki) {
  const fsl_kernel *k = e->p->kernels.k[ki];
  fsl_status st = FSL_OK;
  for (int i = 0; st == FSL_OK && i < k->n_nodes; i++) st = run_node(rs, k->nodes[i], ki);
  for (int i = 0; st == FSL_OK && i < k->n_out; i++) {
    const fsl_value *v = k->out[i];
    if (rs->local_k[v->id] != ki + 1) {
      st = fsl_errorf(FSL_ERR_INVALID, "plan kernel k%d lists output '%s' but none of its nodes computes it", ki,
                      v->name ? v->name : "?");
      break;
    }
    release(rs, v->id);
    rs->buf[v->id] = rs->local[v->id];
    rs->owned[v->id] = true;
    rs->local[v->id] = NULL;
    rs->local_k[v->id] = 0;
  }
  free_local(rs, k, ki);
  if (st != FSL_OK) return st;
  for (int i = 0; i < k->n_in; i++) {
    int id = k->in[i]->id;
    if (e->last_read[id] == ki && !e->keep[id]) release(rs, id);
  }
  for (int i = 0; i < k->n_out; i++) {
    int id = k->out[i]->id;
    if (e->last_read[id] <= ki && !e->keep[id]) release(rs, id);
  }
  return FSL_OK;
}

static fsl_status ref_run(void *exe, const void *const *inputs, void **outputs) {
  const ref_exe *e = exe;
  if (!e || !e->p || !e->p->g) return fsl_errorf(FSL_ERR_ARG, "ref backend: NULL executable");
  const fsl_graph *g = e->p->g;
  if (!outputs && g->n_outputs > 0) return fsl_errorf(FSL_ERR_ARG, "ref backend: NULL outputs");
  for (int i = 0; i < g->n_outputs; i++) outputs[i] = NULL;
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  run_state rs = {g, calloc(nv, sizeof(void *)), calloc(nv, sizeof(bool)), calloc(nv, sizeof(void *)),
                  calloc(nv, sizeof(int))};
  fsl_status st = FSL_OK;
  if (!rs.buf || !rs.owned || !rs.local || !rs.local_k) {
    st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i]->data) rs.buf[i] = g->values[i]->data;
  for (int i = 0; i < g->n_inputs; i++) {
    const fsl_value *v = g->inputs[i];
    if (!value_ok(g, v)) {
      st = fsl_errorf(FSL_ERR_INVALID, "graph input %d is not a value of the graph", i);
      goto done;
    }
    if (!fsl_value_has_shape(v) || fsl_value_nbytes(v) < 0) {
      st = fsl_errorf(FSL_ERR_SHAPE, "graph input '%s' has no static shape", v->name ? v->name : "?");
      goto done;
    }
    if (!inputs || (!inputs[i] && fsl_value_nbytes(v) > 0)) {
      st = fsl_errorf(FSL_ERR_ARG, "no data for graph input '%s'", v->name ? v->name : "?");
      goto done;
    }
    rs.buf[v->id] = inputs[i] ? inputs[i] : k_empty;
  }
  for (int ki = 0; st == FSL_OK && ki < e->p->kernels.n; ki++) st = run_kernel(&rs, e, ki);
  if (st == FSL_OK) st = fsl_ref_copy_outputs(g, rs.buf, "is written by no kernel of the plan", outputs);
done:
  if (rs.owned)
    for (int i = 0; i < g->n_values; i++)
      if (rs.owned[i]) free((void *)rs.buf[i]);
  if (rs.local)
    for (int i = 0; i < g->n_values; i++) free(rs.local[i]);
  free(rs.buf);
  free(rs.owned);
  free(rs.local);
  free(rs.local_k);
  return st;
}

/* Every kernel runs on the reference interpreter, which is this backend's
 * own code: nothing falls back. */
static void ref_exe_info(const void *exe, fsl_backend_exe_info *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  const ref_exe *e = exe;
  out->arena_bytes = -1; /* one buffer per value */
  if (e) out->n_kernels = out->n_native = e->p->kernels.n;
}

const fsl_backend fsl_backend_ref = {
    .name = "plan-ref",
    .summary = "the reference interpreter running the plan kernel by kernel (checks plans)",
    .no_plan = false,
    .compile = ref_compile,
    .run = ref_run,
    .exe_info = ref_exe_info,
    .free_exe = ref_free_exe,
};
