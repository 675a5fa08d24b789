/*
 * api_cuda.c — a compiled plan's source in a dialect (fsl_model_emit,
 * include/fissile.h): the CUDA C emitter over src/backend/cuda/emit.h,
 * when this build has the CUDA C dialect (FSL_CUDA_CODEGEN: NVRTC found at
 * configure); FSL_ERR_UNSUPPORTED for the other dialects.
 */
#include "model.h"

#ifdef FSL_CUDA_CODEGEN
#include "backend/cuda/emit.h"

/* Moves what e generated into r (e is left empty). */
static void take_emitter(fsl_cuda_emitter *e, fsl_emit_result *r) {
  r->source = e->src.p;
  r->source_len = e->src.len;
  r->functions = e->fn;
  r->n_functions = e->n_fn;
  r->refused = e->refused;
  r->n_refused = e->n_refused;
  r->n_kernels = e->n_kernels;
  r->n_generated = e->n_generated;
  r->n_opaque = e->n_opaque;
  memset(e, 0, sizeof *e);
}

/* The function of r whose text holds line `line` (1-based) of r->source,
 * or NULL: the last "void fsl_k<ID>(" at or before that line. */
static const fsl_cuda_function *function_at_line(const fsl_emit_result *r, long line) {
  int id = -1;
  long at = 1;
  for (const char *p = r->source; p && *p && at <= line; at++) {
    const char *nl = strchr(p, '\n');
    const char *k = strstr(p, "void fsl_k");
    if (k && (!nl || k < nl)) id = atoi(k + strlen("void fsl_k"));
    if (!nl) break;
    p = nl + 1;
  }
  for (int i = 0; id >= 0 && i < r->n_functions; i++)
    if (r->functions[i].id == id) return &r->functions[i];
  return NULL;
}

/* NVRTC's message names lines of "fissile.cu": prefixes the error with the
 * plan kernel and ONNX node of the first one. */
static fsl_status name_kernel(const fsl_emit_result *r, fsl_status st) {
  const char *at = strstr(fsl_last_error(), "fissile.cu(");
  const fsl_cuda_function *f = at ? function_at_line(r, strtol(at + strlen("fissile.cu("), NULL, 10)) : NULL;
  if (!f) return st;
  return fsl_error_context(st, "kernel %d (%s '%s'), function fsl_k%d (%s)", f->kernel, f->onnx_op, f->onnx_name, f->id,
                           f->part);
}

/* Compiles r->source for arch a and fills the functions' usage[a]. */
static fsl_status compile_arch(fsl_emit_result *r, int a) {
  fsl_cuda_build b;
  fsl_status st = fsl_cuda_compile(r->source ? r->source : "", r->targets[a], &b);
  if (st == FSL_ERR_RUNTIME) st = name_kernel(r, st);
  r->compile_s[a] = b.compile_s;
  r->binary_bytes[a] = b.cubin_bytes;
  if (st == FSL_OK && r->n_functions > 0 && b.n == 0)
    st = fsl_errorf(FSL_ERR_RUNTIME,
                    "NVRTC (%s): no ptxas report at all: the CUBIN came from the CUDA compute cache, which skips "
                    "ptxas; set CUDA_CACHE_DISABLE=1 before the process's first CUDA call",
                    r->targets[a]);
  for (int i = 0; st == FSL_OK && i < r->n_functions; i++) {
    char name[32];
    snprintf(name, sizeof name, "fsl_k%d", r->functions[i].id);
    const fsl_cuda_usage *u = fsl_cuda_build_find(&b, name);
    if (!u) st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s): ptxas reported nothing for %s", r->targets[a], name);
    else r->functions[i].usage[a] = *u;
  }
  fsl_cuda_build_free(&b);
  return st;
}
#endif

/* The "cuda" dialect: CUDA C compiled by NVRTC for each architecture. */
static fsl_status emit_cuda(const fsl_model *m, const char *const *archs, int n_archs, fsl_emit_result *out) {
  if (!archs) return fsl_errorf(FSL_ERR_ARG, "fsl_model_emit: NULL argument");
  if (n_archs < 1 || n_archs > FSL_EMIT_MAX_TARGETS)
    return fsl_errorf(FSL_ERR_ARG, "fsl_model_emit: %d architectures (1 to %d)", n_archs, FSL_EMIT_MAX_TARGETS);
  if (!m->has_plan)
    return fsl_errorf(FSL_ERR_ARG, "the model has no plan: set a strategy (or a plan backend) and compile first");
#ifdef FSL_CUDA_CODEGEN
  for (int a = 0; a < n_archs; a++) {
    if (!archs[a] || strlen(archs[a]) >= sizeof out->targets[a])
      return fsl_errorf(FSL_ERR_ARG, "fsl_model_emit: architecture %d missing or too long", a);
    snprintf(out->targets[a], sizeof out->targets[a], "%s", archs[a]);
  }
  out->n_targets = n_archs;
  fsl_cuda_emitter e = {0};
  fsl_status st = fsl_cuda_emit_plan(&e, &m->plan);
  take_emitter(&e, out);
  for (int a = 0; a < n_archs && st == FSL_OK; a++) st = compile_arch(out, a);
  return st;
#else
  return fsl_errorf(FSL_ERR_UNSUPPORTED,
                    "this build of fissile has no CUDA C dialect (NVRTC was not found when it was configured: "
                    "install the CUDA toolkit under /usr/local/cuda and configure again)");
#endif
}

fsl_status fsl_model_emit(const fsl_model *m, const char *dialect, const char *const *targets, int n_targets,
                          fsl_emit_result *out) {
  if (!m || !dialect || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_model_emit: NULL argument");
  memset(out, 0, sizeof *out);
  if (!strcmp(dialect, "cuda")) {
    snprintf(out->dialect, sizeof out->dialect, "%s", dialect);
    return emit_cuda(m, targets, n_targets, out);
  }
  if (!strcmp(dialect, "opencl") || !strcmp(dialect, "c"))
    return fsl_errorf(FSL_ERR_UNSUPPORTED,
                      "fsl_model_emit: dialect '%s' is not implemented (its backend generates that source when it "
                      "compiles a plan: fsl_model_set_backend); only \"cuda\" is", dialect);
  return fsl_errorf(FSL_ERR_ARG, "fsl_model_emit: unknown dialect '%s' (expected cuda, opencl or c)", dialect);
}

void fsl_emit_result_free(fsl_emit_result *r) {
  if (!r) return;
  free(r->source);
  free(r->functions);
  for (int i = 0; i < r->n_refused; i++) free(r->refused[i]);
  free(r->refused);
  memset(r, 0, sizeof *r);
}
