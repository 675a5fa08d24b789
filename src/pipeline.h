/* pipeline.h — the compile pipeline that the files of the public API
 * (api.c, api_aot.c, api_tune.c) share, in pipeline.c: a model over ONNX
 * bytes, fission of its bound graph, the backend's executable, dropping
 * what compile built, the structural hash of a primitive graph.  Nothing
 * here calls back into an api*.c file. */
#ifndef FSL_PIPELINE_H
#define FSL_PIPELINE_H

#include "model.h"

/** A new model over an imported ONNX graph (settings at their defaults:
 *  no strategy, rewrite rules, backend "ref").  Errors: those of
 *  fsl_onnx_import, FSL_ERR_NOMEM. */
fsl_status fsl_model_from_onnx(const void *buf, size_t len, const char *dir, fsl_model **out);
/** Frees what compile built beyond the primitive graph: the executable,
 *  the memory plan, the plan, the tuning result. */
void fsl_model_drop_plan(fsl_model *m);
/** Drops prim, plan and executable (a setting changed, or the source
 *  graph: binding, freezing). */
void fsl_model_invalidate(fsl_model *m);
/** Fission of the bound ONNX graph into m->prim (CSE, DCE, rewrites,
 *  unshared views, verified). */
fsl_status fsl_model_fission(fsl_model *m);
/** The capabilities of backend be for model m (backend.h): read once per
 *  plan (fsl_model_drop_plan forgets them), then the same for the plan's
 *  device numbers, its compile and the tuner's candidates. */
const fsl_backend_caps *fsl_model_caps(fsl_model *m, const fsl_backend *be);

/** The backend's executable of m (m->be, m->exe), made by the backend's
 *  import_exe from `exe` (len bytes) when given, else by compiling: of
 *  m->plan with its memory plan when m has a plan; of the graph alone (a
 *  plan of no kernels) for a backend that needs none (backend.h, no_plan);
 *  FSL_ERR_INVALID for a plan backend without a plan. */
fsl_status fsl_model_finish_plan(fsl_model *m, const void *exe, size_t len);
/** A structural hash of a primitive graph: node ops and wiring, value
 *  dtypes and shapes, which values are inputs, outputs and constants (not
 *  the constants' bytes). */
uint64_t fsl_model_graph_hash(const fsl_graph *g);

#endif
