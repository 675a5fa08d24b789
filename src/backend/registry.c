/* registry.c — the one table of backends (backend.h). */
#include "backend/backend.h"
#include "backend/ref/interp.h"

/* The whole-graph interpreter "ref" first (the default of a new model),
 * then the plan backends in the order of preference for the host device.
 * A backend is listed when the build includes it (CMake option
 * FSL_BACKEND_<NAME> defines FSL_BACKEND_<NAME>=1 for this file); ref and
 * plan-ref are always built. */
static const fsl_backend *const k_backends[] = {
    &fsl_backend_interp,
#if FSL_BACKEND_CPU
    &fsl_backend_cpu,
#endif
#if FSL_BACKEND_OPENCL
    &fsl_backend_opencl,
#endif
#if FSL_CUDA_CODEGEN
    &fsl_backend_cuda,
#endif
    &fsl_backend_ref,
};

int fsl_backend_count(void) { return (int)FSL_ARRAY_LEN(k_backends); }

const fsl_backend *fsl_backend_at(int i) {
  return i >= 0 && i < fsl_backend_count() ? k_backends[i] : NULL;
}

const fsl_backend *fsl_backend_find(const char *name) {
  for (int i = 0; name && i < fsl_backend_count(); i++)
    if (!strcmp(k_backends[i]->name, name)) return k_backends[i];
  return NULL;
}

const fsl_backend *fsl_backend_host(void) {
  for (int i = 0; i < fsl_backend_count(); i++)
    if (k_backends[i]->calibrate) return k_backends[i];
  return NULL;
}

const fsl_backend *fsl_backend_best(void) {
  for (int i = 0; i < fsl_backend_count(); i++)
    if (!k_backends[i]->no_plan && k_backends[i] != &fsl_backend_ref) return k_backends[i];
  return NULL;
}

void fsl_backend_caps_get(const fsl_backend *be, fsl_backend_caps *out) {
  memset(out, 0, sizeof *out);
  if (be && be->caps) be->caps(out);
}

fsl_memplan_options fsl_backend_memplan_options(const fsl_backend *be) {
  fsl_memplan_options o = fsl_memplan_executor;
  if (be && be->arena_outputs) o.external_outputs = false;
  return o;
}
