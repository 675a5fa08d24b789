/*
 * interp.c — the reference backend "ref" (fsl_backend_interp, interp.h):
 * the whole primitive graph run by the reference interpreter (fsl_ref_run),
 * no plan needed (backend.h, no_plan).  Its executable is the graph itself;
 * a plan, when a strategy built one, is not read beyond its graph.  The
 * plan-ref backend (plan_exec.c) runs a plan kernel by kernel instead.
 */
#include "backend/ref/interp.h"

#include "eval/eval.h"

static fsl_status interp_compile(const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe) {
  (void)ctx;
  if (!exe) return fsl_errorf(FSL_ERR_ARG, "ref backend: NULL executable pointer");
  *exe = NULL;
  if (!p || !p->g) return fsl_errorf(FSL_ERR_ARG, "ref backend: NULL graph");
  *exe = (void *)p->g;
  return FSL_OK;
}

static fsl_status interp_run(void *exe, const void *const *inputs, void **outputs) {
  return fsl_ref_run(exe, inputs, outputs);
}

static void interp_free_exe(void *exe) { (void)exe; /* the graph is the model's */ }

const fsl_backend fsl_backend_interp = {
    .name = "ref",
    .summary = "the reference interpreter over the whole primitive graph (float64 accumulation; no plan)",
    .no_plan = true,
    .compile = interp_compile,
    .run = interp_run,
    .free_exe = interp_free_exe,
};
