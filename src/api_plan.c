/* api_plan.c — the public API that looks at a compiled plan kernel by
 * kernel (include/fissile.h, "kernels of the plan"): kind, cost, size and
 * the ONNX nodes a kernel's primitives came from, and timing every kernel
 * as the backend runs it. */
#include "model.h"

#include <math.h>

static const char *const k_kind_name[FSL_KERNEL_KIND_COUNT] = {"loop", "reduce", "linear", "opaque"};

static fsl_status no_plan(void) {
  return fsl_errorf(FSL_ERR_ARG, "the model has no plan: set a strategy (or a plan backend) and compile first");
}

/* Kernel k of m's plan, or NULL with the error set. */
static const fsl_kernel *plan_kernel(const fsl_model *m, int k, const char *fn, fsl_status *st) {
  if (!m) {
    *st = fsl_errorf(FSL_ERR_ARG, "%s: NULL model", fn);
    return NULL;
  }
  if (!m->has_plan) {
    *st = no_plan();
    return NULL;
  }
  if (k < 0 || k >= m->plan.kernels.n) {
    *st = fsl_errorf(FSL_ERR_ARG, "%s: kernel %d out of range (the plan has %d)", fn, k, m->plan.kernels.n);
    return NULL;
  }
  *st = FSL_OK;
  return m->plan.kernels.k[k];
}

int fsl_model_num_kernels(const fsl_model *m) { return m && m->has_plan ? m->plan.kernels.n : 0; }

/* Whether node j of k is the first of k's nodes with its ONNX origin. */
static bool first_of_origin(const fsl_kernel *k, int j) {
  for (int i = 0; i < j; i++)
    if (k->nodes[i]->origin == k->nodes[j]->origin) return false;
  return true;
}

fsl_status fsl_model_kernel_info(const fsl_model *m, int k, fsl_kernel_info *out) {
  fsl_status st;
  const fsl_kernel *kn = plan_kernel(m, k, "fsl_model_kernel_info", &st);
  if (!kn) return st;
  if (!out) return fsl_errorf(FSL_ERR_ARG, "fsl_model_kernel_info: NULL argument");
  memset(out, 0, sizeof *out);
  out->index = k;
  out->kind = (int)kn->kind;
  out->kind_name = (unsigned)kn->kind < FSL_KERNEL_KIND_COUNT ? k_kind_name[kn->kind] : "?";
  out->n_primitives = kn->n_nodes;
  out->cost_s = kn->cost_s;
  /* the roofline of the plan's device, computed on a copy: fsl_kernel_cost
   * stores its result in the kernel */
  fsl_kernel tmp = *kn;
  out->roofline_s = fsl_kernel_cost(&tmp, &m->dev);
  out->cost_measured = m->plan.profiled && kn->cost_s != out->roofline_s;
  out->flops = kn->flops;
  out->bytes = kn->bytes;
  for (int j = 0; j < kn->n_nodes; j++) out->n_onnx_nodes += first_of_origin(kn, j);
  return FSL_OK;
}

fsl_status fsl_model_kernel_origin(const fsl_model *m, int k, int j, const char **name, const char **op_type) {
  fsl_status st;
  const fsl_kernel *kn = plan_kernel(m, k, "fsl_model_kernel_origin", &st);
  if (!kn) return st;
  if (!name || !op_type) return fsl_errorf(FSL_ERR_ARG, "fsl_model_kernel_origin: NULL argument");
  for (int i = 0, seen = 0; i < kn->n_nodes; i++) {
    if (!first_of_origin(kn, i)) continue;
    if (seen++ == j) {
      *name = kn->nodes[i]->origin_name ? kn->nodes[i]->origin_name : "";
      *op_type = kn->nodes[i]->origin_op ? kn->nodes[i]->origin_op : "";
      return FSL_OK;
    }
  }
  return fsl_errorf(FSL_ERR_ARG, "fsl_model_kernel_origin: ONNX node %d of kernel %d out of range", j, k);
}

fsl_status fsl_model_time_kernels(fsl_model *m, double *secs, int n) {
  if (!m || (!secs && n > 0)) return fsl_errorf(FSL_ERR_ARG, "fsl_model_time_kernels: NULL argument");
  if (!m->has_plan) return no_plan();
  const fsl_plan *p = &m->plan;
  if (n != p->kernels.n)
    return fsl_errorf(FSL_ERR_ARG, "fsl_model_time_kernels: room for %d times, the plan has %d kernels", n,
                      p->kernels.n);
  /* the backend that runs the plan, else the host's (as build_plan costs it) */
  const fsl_backend *be = m->be && m->be->profiler_init ? m->be : fsl_backend_host();
  if (!be || !be->profiler_init)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "no backend of this build can time kernels (the CPU backend is not built)");
  fsl_profiler prof;
  be->profiler_init(&prof, fsl_num_threads());
  int batch = prof.batch > 0 ? prof.batch : 128;
  for (int b = 0; b < n; b += batch) {
    int nb = n - b < batch ? n - b : batch;
    fsl_status st = prof.measure(prof.ctx, p->g, p->kernels.k + b, nb, secs + b);
    if (st != FSL_OK) return fsl_error_context(st, "timing kernels %d to %d of the plan", b, b + nb - 1);
    for (int i = b; i < b + nb; i++)
      if (!(secs[i] > 0 && isfinite(secs[i]))) secs[i] = NAN;
  }
  return FSL_OK;
}
