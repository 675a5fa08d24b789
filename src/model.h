/* model.h — the state behind the public fsl_model handle (include/fissile.h),
 * shared by the files that implement the public API (api.c and its
 * siblings); nothing outside src/api*.c includes it. */
#ifndef FSL_MODEL_H
#define FSL_MODEL_H

#include "fissile.h"
#include "backend/backend.h"
#include "orchestrate/orchestrate.h"
#include "runtime/memplan.h"

typedef struct dim_binding { char *name; int64_t size; } dim_binding;

struct fsl_model {
  fsl_graph *onnx;   /* as imported (frozen inputs become constants) */
  fsl_graph *prim;   /* after compile, NULL before */
  dim_binding *dims;
  int n_dims;
  int strategy;      /* fsl_strategy, -1: not set */
  char backend[16];  /* "ref" (default), "plan-ref", "cpu" */
  bool profile;      /* measured kernel costs (fsl_model_set_profile) */
  /* built by compile when a strategy or a plan backend is set: */
  bool has_plan;
  fsl_plan plan;     /* over prim */
  fsl_memplan mem;
  fsl_device dev;
  const fsl_backend *be;  /* NULL: the reference interpreter over prim */
  void *exe;              /* be's executable of plan */
  double backend_s;
};

#endif
