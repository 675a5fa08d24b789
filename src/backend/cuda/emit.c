/*
 * emit.c — the CUDA C of a plan's kernels (emit.h): a pass over the steps
 * of the plan lowered in the CUDA dialect (lowering.h, every linear op
 * generated), listing the generated functions and how to launch them.
 */
#include "backend/cuda/emit.h"

#include "backend/cuda/dialect_cuda.h"
#include "backend/gpusteps.h"

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (CUDA C of a plan)"); }

/* Appends GEN step s of l to e's functions. */
static fsl_status add_function(fsl_cuda_emitter *e, const fsl_step *s) {
  if (!fsl_grow((void **)&e->fn, &e->cap_fn, e->n_fn + 1, sizeof *e->fn)) return oom();
  const fsl_node *n0 = s->n_nodes ? s->nodes[0] : NULL;
  fsl_cuda_function *f = &e->fn[e->n_fn++];
  memset(f, 0, sizeof *f);
  f->kernel = s->kernel;
  f->id = s->fn_id;
  f->part = s->part;
  f->onnx_op = n0 && n0->origin_op ? n0->origin_op : "?";
  f->onnx_name = n0 && n0->origin_name ? n0->origin_name : "?";
  f->block_threads = s->launch.group_size;
  f->blocks = s->launch.group_size > 0 ? s->launch.groups : 0;
  return FSL_OK;
}

/* Counts plan kernel ki of l: opaque (a host step by design), refused (a
 * host step the dialect could not avoid: listed with its reason) or
 * generated entirely. */
static fsl_status count_kernel(fsl_cuda_emitter *e, const fsl_lowering *l, int ki, bool host) {
  e->n_kernels++;
  const char *why = fsl_lowering_fallback(l, ki);
  if (!why) {
    if (host) e->n_opaque++;
    else e->n_generated++;
    return FSL_OK;
  }
  char *dup = strdup(why);
  if (!dup || !fsl_grow((void **)&e->refused, &e->cap_refused, e->n_refused + 1, sizeof *e->refused)) {
    free(dup);
    return oom();
  }
  e->refused[e->n_refused++] = dup;
  return FSL_OK;
}

fsl_status fsl_cuda_emit_plan(fsl_cuda_emitter *e, const fsl_plan *p) {
  if (!e || !p) return fsl_errorf(FSL_ERR_ARG, "fsl_cuda_emit_plan: NULL argument");
  fsl_lowering l;
  fsl_status st = fsl_lowering_init(&l, p->g, &fsl_dialect_cuda, &fsl_gpu_generated, NULL, e->next_id);
  if (st == FSL_OK) st = fsl_lower_plan(&l, p);
  if (st == FSL_OK) {
    /* the prelude once, then every generated function */
    fsl_sbuf_puts(&e->src, l.src.p + (e->src.len ? l.prelude_len : 0));
    e->next_id = l.next_fn;
  }
  for (int i = 0, ki = 0; st == FSL_OK && ki < p->kernels.n; ki++) {
    bool host = false;
    for (; st == FSL_OK && i < l.n_steps && l.steps[i].kernel == ki; i++) {
      host = host || l.steps[i].kind == FSL_STEP_HOST;
      if (l.steps[i].kind == FSL_STEP_GEN) st = add_function(e, &l.steps[i]);
    }
    if (st == FSL_OK) st = count_kernel(e, &l, ki, host);
  }
  fsl_lowering_free(&l);
  if (st == FSL_OK && e->src.oom) st = oom();
  return st;
}

void fsl_cuda_emitter_free(fsl_cuda_emitter *e) {
  if (!e) return;
  fsl_sbuf_free(&e->src);
  for (int i = 0; i < e->n_refused; i++) free(e->refused[i]);
  free(e->refused);
  free(e->fn);
  memset(e, 0, sizeof *e);
}
