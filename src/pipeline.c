/*
 * pipeline.c — the pieces of the compile pipeline that the files of the
 * public API share (pipeline.h): api.c (load, compile), api_aot.c
 * (compiled model files) and api_tune.c (the measured plan choice) call
 * them, and they call no api*.c file back.
 */
#include "pipeline.h"

#include "backend/ref/interp.h"
#include "fission/fission.h"
#include "onnx/onnx_import.h"
#include "passes/passes.h"
#include "rewrite/rewrite.h"

fsl_status fsl_model_from_onnx(const void *buf, size_t len, const char *dir, fsl_model **out) {
  *out = NULL;
  fsl_model *m = calloc(1, sizeof *m);
  if (!m) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  m->strategy = -1;
  m->rewrite = FSL_REWRITE_RULES;
  snprintf(m->backend, sizeof m->backend, "%s", fsl_backend_interp.name);
  fsl_status st = fsl_onnx_import(buf, len, dir, &m->onnx);
  if (st != FSL_OK) { free(m); return st; }
  m->src_hash = fsl_hash(FSL_HASH_INIT, buf, len);
  m->src_len = len;
  *out = m;
  return FSL_OK;
}

void fsl_model_drop_plan(fsl_model *m) {
  if (m->be && m->exe) m->be->free_exe(m->exe);
  m->be = NULL;
  m->exe = NULL;
  fsl_memplan_free(&m->mem);
  if (m->has_plan) fsl_plan_free(&m->plan);
  else memset(&m->plan, 0, sizeof m->plan); /* a backend that needs no plan: the graph alone */
  m->has_plan = false;
  m->has_caps = false;
  m->backend_s = 0;
  m->tune = (fsl_tune_result){.tuned = false};
}

void fsl_model_invalidate(fsl_model *m) {
  fsl_model_drop_plan(m);
  fsl_graph_free(m->prim);
  m->prim = NULL;
  free(m->rewrite_fired);
  m->rewrite_fired = NULL;
  m->n_rewrites = 0;
  m->n_lut_tables = 0;
  m->n_qdq_lifted = 0;
  m->compiled = false;
  m->from_file = false;
}

static void apply_dims(fsl_model *m) {
  for (int i = 0; i < m->onnx->n_inputs; i++) {
    fsl_value *v = m->onnx->inputs[i];
    if (!v->dim_param) continue;
    for (int d = 0; d < v->rank; d++)
      for (int k = 0; k < m->n_dims && v->dim_param[d]; k++)
        if (v->dims[d] < 0 && !strcmp(v->dim_param[d], m->dims[k].name)) v->dims[d] = m->dims[k].size;
  }
}

fsl_status fsl_model_fission(fsl_model *m) {
  fsl_model_invalidate(m);
  apply_dims(m);
  fsl_graph *g;
  FSL_TRY(fsl_fission(m->onnx, &g));
  fsl_status st = fsl_pass_widen_half(g);
  /* QDQ convolutions and matmuls as integer ones where the backend's library runs int8 */
  const fsl_backend *be = fsl_backend_find(m->backend);
  bool int8 = be && fsl_model_caps(m, be)->linear_int8;
  if (st == FSL_OK) st = fsl_pass_qdq_linear(g, m->onnx, int8, NULL);
  /* QuantizeLinear of moved, pooled or clamped DequantizeLinear values: on the 8-bit integers */
  if (st == FSL_OK) st = fsl_pass_qdq_lift(g, &m->n_qdq_lifted);
  /* the weights of the linear ops left, computed from constants only (dequantized), once */
  if (st == FSL_OK) st = fsl_pass_fold_weights(g, NULL);
  /* activations between 8-bit tensors (QDQ's SiLU) as 256-entry tables, where the library runs int8 */
  if (st == FSL_OK && int8) st = fsl_pass_lut8(g, &m->n_lut_tables);
  if (st == FSL_OK) st = fsl_pass_cse(g);
  if (st == FSL_OK) st = fsl_pass_dce(g);
  if (st == FSL_OK && m->rewrite != FSL_REWRITE_OFF) {
    const fsl_ruleset *rs = fsl_ruleset_builtin();
    fsl_rewrite_stats rw = {0};
    if (!rs) st = FSL_ERR_INVALID;
    else if (m->rewrite == FSL_REWRITE_SEARCH) {
      st = fsl_rewrite_search(&g, rs, &m->search, &rw);
      m->search_evals = rw.n_evals;
      m->search_regions_solved = rw.n_regions_solved;
      m->search_regions_cached = rw.n_regions_cached;
      m->search_alpha = fsl_rewrite_search_alpha(&m->search);
      m->search = (fsl_rewrite_search_opts){0}; /* a replay is for one fission */
    } else {
      st = fsl_rewrite(g, rs, &rw);
    }
    m->rewrite_fired = rw.fired;
    m->n_rewrites = rw.n_applied;
    m->rewrite_s = rw.seconds;
  }
  if (st == FSL_OK) st = fsl_pass_unshare_views(g);
  if (st == FSL_OK) st = fsl_graph_verify(g);
  if (st != FSL_OK) {
    fsl_graph_free(g);
    return fsl_error_context(st, "after fission");
  }
  m->prim = g;
  return FSL_OK;
}

const fsl_backend_caps *fsl_model_caps(fsl_model *m, const fsl_backend *be) {
  if (!m->has_caps) fsl_backend_caps_get(be, &m->caps);
  m->has_caps = true;
  return &m->caps;
}

fsl_status fsl_model_finish_plan(fsl_model *m, const void *exe, size_t len) {
  const fsl_backend *be = fsl_backend_find(m->backend);
  if (!be) return fsl_errorf(FSL_ERR_UNSUPPORTED, "this build of fissile has no backend '%s'", m->backend);
  fsl_compile_ctx ctx = {.caps = *fsl_model_caps(m, be), .mem = NULL};
  if (m->has_plan) {
    /* the one memory plan: the report's and the backend's */
    fsl_memplan_options mo = fsl_backend_memplan_options(be);
    FSL_TRY(fsl_memplan_build(&m->plan, &mo, &m->mem));
    ctx.mem = &m->mem;
  } else if (be->no_plan) {
    /* the graph alone: a plan of no kernels */
    memset(&m->plan, 0, sizeof m->plan);
    m->plan.g = m->prim;
    m->plan.kernels.g = m->prim;
  } else {
    return fsl_errorf(FSL_ERR_INVALID, "backend %s runs a plan, and the model has none", m->backend);
  }
  m->be = be;
  double t0 = fsl_now_s();
  fsl_status st = exe && m->be->import_exe ? m->be->import_exe(&m->plan, &ctx, exe, len, &m->exe)
                                           : m->be->compile(&m->plan, &ctx, &m->exe);
  if (st != FSL_OK) {
    m->exe = NULL;
    m->be = NULL;
    return fsl_error_context(st, "backend %s", m->backend);
  }
  m->backend_s = fsl_now_s() - t0;
  return FSL_OK;
}

uint64_t fsl_model_graph_hash(const fsl_graph *g) {
  uint64_t h = fsl_hash(FSL_HASH_INIT, &g->n_nodes, sizeof g->n_nodes);
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *n = g->nodes[i];
    int32_t head[3] = {(int32_t)n->op, n->n_in, n->n_out};
    h = fsl_hash(h, head, sizeof head);
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      const fsl_value *v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      int32_t vi[4] = {v ? v->id : -1, v ? (int32_t)v->dtype : 0, v ? v->rank : 0, v && v->data};
      h = fsl_hash(h, vi, sizeof vi);
      if (v && v->rank > 0) h = fsl_hash(h, v->dims, sizeof(int64_t) * (size_t)v->rank);
    }
  }
  for (int i = 0; i < g->n_inputs; i++) h = fsl_hash(h, &g->inputs[i]->id, sizeof(int));
  for (int i = 0; i < g->n_outputs; i++) h = fsl_hash(h, &g->outputs[i]->id, sizeof(int));
  return h;
}
