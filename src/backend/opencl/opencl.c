/*
 * opencl.c — the OpenCL backend (backend.h; docs/gpu-backend.md).
 *
 * compile lowers every kernel of a plan into steps in the OpenCL C dialect
 * (dialect_opencl.h) through backend/gpusteps.h, shared with the CUDA
 * backend: generated kernels (a work-group per REDUCE row where the
 * generator says so; matmul and convolution tiles through local memory)
 * and host steps (the reference interpreter, for opaque kernels and as the
 * counted fallback): the buffers a host step reads are copied to the host,
 * its results back.
 * The generated kernels of the plan form one program, built from source
 * once per plan (device.c caches the binary).  Every value a kernel writes
 * lives in one device arena planned by runtime/memplan.c (graph outputs
 * included); graph inputs, constants and values internal to a kernel
 * (between the steps of a LINEAR or split kernel) get buffers of their
 * own (constants uploaded once, at compile).
 * Kernel arguments never change after compile; a run writes the inputs,
 * enqueues the steps on the in-order queue, reads the outputs and the
 * per-step error words back.
 */
#include "backend/opencl/opencl.h"

#include "backend/gpusteps.h"
#include "backend/opencl/dialect_opencl.h"
#include "runtime/memplan.h"

/* What a GEN step needs on this device. */
typedef struct ocl_launch {
  cl_kernel k;
  size_t gsize, lsize;     /* global and local work size */
} ocl_launch;

typedef struct ocl_exe {
  const fsl_plan *p;
  const fsl_ocl_device *d;
  fsl_dialect dia;         /* the OpenCL dialect, its work-groups narrowed to the device */
  fsl_cg_group grp;        /* dia.group: sizes and local memory of this device */
  fsl_gpu_lowering low;    /* the plan's steps and program source (backend/gpusteps.h) */
  ocl_launch *launch;      /* per step */
  fsl_memplan mem;
  cl_mem arena;
  cl_mem *own;             /* value id -> a buffer of its own (not in the arena), or NULL */
  cl_mem errs;             /* one int of FSL_KERR_* bits per step */
  cl_program prog;
  bool cache_hit;
} ocl_exe;

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory"); }

static const char *vname(const fsl_value *v) { return v->name ? v->name : "?"; }

/* ---- device buffers ---- */

/* Where value v lives on the device: the arena at its planned offset, or
 * a buffer of its own (created here; constants are uploaded). */
static fsl_status locate(ocl_exe *x, const fsl_value *v, cl_mem *m, cl_ulong *off) {
  *m = NULL; /* on every path, errors included */
  *off = 0;
  if (v->id < x->mem.n_ids && x->mem.offset[v->id] >= 0 && x->arena) {
    *m = x->arena;
    *off = (cl_ulong)x->mem.offset[v->id];
    return FSL_OK;
  }
  if (!x->own[v->id]) {
    int64_t nb = fsl_value_nbytes(v);
    if (nb < 0) return fsl_errorf(FSL_ERR_SHAPE, "opencl backend: value '%s' has no static shape", vname(v));
    cl_int err = CL_SUCCESS;
    bool up = v->data && nb > 0;
    x->own[v->id] = clCreateBuffer(x->d->ctx, CL_MEM_READ_WRITE | (up ? CL_MEM_COPY_HOST_PTR : 0),
                                   (size_t)(nb > 0 ? nb : 64), up ? (void *)v->data : NULL, &err);
    if (!x->own[v->id])
      return fsl_errorf(FSL_ERR_NOMEM, "opencl backend: cannot allocate %lld bytes on the device for '%s': %s",
                        (long long)nb, vname(v), fsl_ocl_strerror(err));
  }
  *m = x->own[v->id];
  return FSL_OK;
}

/* Kernel, arguments and work sizes of a GEN step. */
static fsl_status setup_gen(ocl_exe *x, const fsl_gpu_step *s, ocl_launch *L, int si) {
  char name[32];
  snprintf(name, sizeof name, "fsl_k%d", s->fn_id);
  cl_int err = CL_SUCCESS;
  L->k = clCreateKernel(x->prog, name, &err);
  if (!L->k) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: kernel %s: %s", name, fsl_ocl_strerror(err));
  cl_uint a = 0;
  for (int i = 0; i < s->n_in + s->n_out; i++) {
    const fsl_value *v = i < s->n_in ? s->in[i] : s->out[i - s->n_in];
    cl_mem m;
    cl_ulong off;
    FSL_TRY(locate(x, v, &m, &off));
    err = clSetKernelArg(L->k, a++, sizeof m, &m);
    if (err == CL_SUCCESS) err = clSetKernelArg(L->k, a++, sizeof off, &off);
    if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: %s argument: %s", name, fsl_ocl_strerror(err));
  }
  cl_uint ei = (cl_uint)si;
  err = clSetKernelArg(L->k, a++, sizeof x->errs, &x->errs);
  if (err == CL_SUCCESS) err = clSetKernelArg(L->k, a++, sizeof ei, &ei);
  if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: %s argument: %s", name, fsl_ocl_strerror(err));
  cl_ulong lmem = 0;
  size_t kwg = 1;
  clGetKernelWorkGroupInfo(L->k, x->d->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
  clGetKernelWorkGroupInfo(L->k, x->d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
  char label[160];
  fsl_gpu_kernel_label(x->p, s->kernel, label, sizeof label);
  if (lmem > x->d->local_mem)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "opencl backend, %s: needs %llu bytes of local memory, '%s' has %llu", label,
                      (unsigned long long)lmem, x->d->name, (unsigned long long)x->d->local_mem);
  if (s->launch.group_size > 0) {
    /* work-groups of exactly the size the code was generated for, at most
     * 2^16 of them (a grid-stride loop over groups) */
    size_t gs = (size_t)s->launch.group_size;
    if (gs > kwg)
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "opencl backend, %s: needs work-groups of %zu work-items, '%s' allows %zu for it",
                        label, gs, x->d->name, kwg);
    int64_t ng = s->launch.groups < 1 ? 1 : s->launch.groups < 65536 ? s->launch.groups : 65536;
    L->lsize = gs;
    L->gsize = (size_t)ng * gs;
    return FSL_OK;
  }
  size_t items = (size_t)fsl_gpu_step_items(s), ls = items == 1 ? 1 : 64;
  while (ls > 1 && (ls > kwg || ls > x->d->max_wg)) ls /= 2;
  L->lsize = ls;
  L->gsize = (items + ls - 1) / ls * ls;
  return FSL_OK;
}

/* ---- the vtable ---- */

static void ocl_free(void *p) {
  ocl_exe *x = p;
  if (!x) return;
  for (int i = 0; x->launch && i < x->low.n_steps; i++)
    if (x->launch[i].k) clReleaseKernel(x->launch[i].k);
  free(x->launch);
  if (x->own)
    for (int i = 0; i < x->p->g->n_values; i++)
      if (x->own[i]) clReleaseMemObject(x->own[i]);
  free(x->own);
  if (x->arena) clReleaseMemObject(x->arena);
  if (x->errs) clReleaseMemObject(x->errs);
  if (x->prog) clReleaseProgram(x->prog);
  fsl_memplan_free(&x->mem);
  fsl_gpu_lowering_free(&x->low);
  free(x);
}

static fsl_status ocl_compile(const fsl_plan *p, void **exe) {
  if (!p || !exe || !p->g) return fsl_errorf(FSL_ERR_ARG, "opencl compile: NULL argument");
  *exe = NULL;
  const fsl_ocl_device *d = NULL;
  FSL_TRY(fsl_ocl_device_get(&d));
  ocl_exe *x = calloc(1, sizeof *x);
  if (!x) return oom();
  x->p = p;
  x->d = d;
  /* work-groups no larger than the device allows, within its local memory */
  x->grp = *fsl_dialect_opencl.group;
  while (x->grp.size > 1 && (size_t)x->grp.size > d->max_wg) x->grp.size /= 2;
  while (x->grp.tile > 1 && (size_t)(x->grp.tile * x->grp.tile) > d->max_wg) x->grp.tile /= 2;
  x->grp.local_bytes = (long long)d->local_mem;
  x->dia = fsl_dialect_opencl;
  x->dia.group = &x->grp;
  const fsl_graph *g = p->g;
  x->own = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof(cl_mem));
  fsl_status st = x->own ? fsl_gpu_lower(p, &x->dia, NULL, &x->low) : oom();
  const int n_steps = x->low.n_steps;
  if (st == FSL_OK && !(x->launch = calloc((size_t)(n_steps > 0 ? n_steps : 1), sizeof *x->launch))) st = oom();
  /* every kernel output in one arena (graph outputs too: read back from it) */
  const fsl_memplan_options mo = {.inplace = true, .external_outputs = false};
  if (st == FSL_OK) st = fsl_memplan_build(p, &mo, &x->mem);
  cl_int err = CL_SUCCESS;
  if (st == FSL_OK && x->mem.peak_bytes > 0 &&
      !(x->arena = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, (size_t)x->mem.peak_bytes, NULL, &err)))
    st = fsl_errorf(FSL_ERR_NOMEM, "opencl backend: cannot allocate the arena (%lld bytes) on '%s': %s",
                    (long long)x->mem.peak_bytes, d->name, fsl_ocl_strerror(err));
  if (st == FSL_OK &&
      !(x->errs = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, sizeof(cl_int) * (size_t)(n_steps > 0 ? n_steps : 1),
                                 NULL, &err)))
    st = fsl_errorf(FSL_ERR_NOMEM, "opencl backend: cannot allocate the error words: %s", fsl_ocl_strerror(err));
  const char *dump = getenv("FSL_OPENCL_SOURCE"); /* docs/gpu-backend.md: the generated program, for inspection */
  if (st == FSL_OK && dump && *dump) {
    FILE *f = fopen(dump, "w");
    if (f) {
      fputs(x->low.src.p ? x->low.src.p : "", f);
      fclose(f);
    }
  }
  if (st == FSL_OK && x->low.n_fn > 0) st = fsl_ocl_build(d, x->low.src.p, x->low.src.len, &x->prog, &x->cache_hit);
  for (int i = 0; i < n_steps && st == FSL_OK; i++) {
    const fsl_gpu_step *s = &x->low.steps[i];
    if (s->kind == FSL_GPU_GEN) st = setup_gen(x, s, &x->launch[i], i);
    else
      for (int k = 0; k < s->n_out + s->n_in && st == FSL_OK; k++) {
        cl_mem m;
        cl_ulong off;
        st = locate(x, k < s->n_in ? s->in[k] : s->out[k - s->n_in], &m, &off);
      }
  }
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++) {
    cl_mem m;
    cl_ulong off;
    st = locate(x, g->inputs[i], &m, &off);
  }
  if (st != FSL_OK) {
    ocl_free(x);
    return st;
  }
  *exe = x;
  return FSL_OK;
}

/* Copies value v between the device and the host (a HOST step's fsl_gpu_copy). */
static fsl_status copy_to_host(void *ctx, const fsl_value *v, void *host, int64_t bytes) {
  ocl_exe *x = ctx;
  cl_mem m;
  cl_ulong off;
  FSL_TRY(locate(x, v, &m, &off));
  cl_int err = clEnqueueReadBuffer(x->d->queue, m, CL_TRUE, (size_t)off, (size_t)bytes, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: reading '%s': %s", vname(v), fsl_ocl_strerror(err));
  return FSL_OK;
}

static fsl_status copy_to_device(void *ctx, const fsl_value *v, void *host, int64_t bytes) {
  ocl_exe *x = ctx;
  cl_mem m;
  cl_ulong off;
  FSL_TRY(locate(x, v, &m, &off));
  cl_int err = clEnqueueWriteBuffer(x->d->queue, m, CL_TRUE, (size_t)off, (size_t)bytes, host, 0, NULL, NULL);
  if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: writing '%s': %s", vname(v), fsl_ocl_strerror(err));
  return FSL_OK;
}

static fsl_status ocl_run(void *exe, const void *const *inputs, void **outputs) {
  ocl_exe *x = exe;
  if (!x || (!outputs && x->p->g->n_outputs > 0)) return fsl_errorf(FSL_ERR_ARG, "opencl run: NULL argument");
  const fsl_graph *g = x->p->g;
  cl_command_queue q = x->d->queue;
  for (int i = 0; i < g->n_outputs; i++) outputs[i] = NULL;
  fsl_status st = FSL_OK;
  cl_int err = CL_SUCCESS, zero = 0;
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++) {
    const fsl_value *v = g->inputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (nb <= 0) continue;
    if (!inputs || !inputs[i]) {
      st = fsl_errorf(FSL_ERR_ARG, "no data for graph input '%s'", vname(v));
      break;
    }
    cl_mem m;
    cl_ulong off;
    st = locate(x, v, &m, &off);
    if (st == FSL_OK) err = clEnqueueWriteBuffer(q, m, CL_FALSE, (size_t)off, (size_t)nb, inputs[i], 0, NULL, NULL);
    if (err != CL_SUCCESS) st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: writing input '%s': %s", vname(v), fsl_ocl_strerror(err));
  }
  const int n_steps = x->low.n_steps;
  if (st == FSL_OK && n_steps > 0)
    err = clEnqueueFillBuffer(q, x->errs, &zero, sizeof zero, 0, sizeof(cl_int) * (size_t)n_steps, 0, NULL, NULL);
  if (err != CL_SUCCESS) st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: clearing the error words: %s", fsl_ocl_strerror(err));
  for (int i = 0; i < n_steps && st == FSL_OK; i++) {
    const fsl_gpu_step *s = &x->low.steps[i];
    if (s->kind == FSL_GPU_HOST) {
      st = fsl_gpu_run_host(g, s, copy_to_host, copy_to_device, x, "opencl");
      continue;
    }
    const ocl_launch *L = &x->launch[i];
    err = clEnqueueNDRangeKernel(q, L->k, 1, NULL, &L->gsize, &L->lsize, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend, kernel %d: launching fsl_k%d: %s", s->kernel, s->fn_id,
                      fsl_ocl_strerror(err));
  }
  cl_int *e = st == FSL_OK ? malloc(sizeof(cl_int) * (size_t)(n_steps > 0 ? n_steps : 1)) : NULL;
  if (st == FSL_OK && !e) st = oom();
  if (st == FSL_OK && n_steps > 0) {
    err = clEnqueueReadBuffer(q, x->errs, CL_TRUE, 0, sizeof(cl_int) * (size_t)n_steps, e, 0, NULL, NULL);
    if (err != CL_SUCCESS) st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: running the plan: %s", fsl_ocl_strerror(err));
    for (int i = 0; i < n_steps && st == FSL_OK; i++) st = fsl_gpu_step_error(x->p, &x->low.steps[i], e[i], "opencl");
  }
  free(e);
  for (int i = 0; i < g->n_outputs && st == FSL_OK; i++) {
    const fsl_value *v = g->outputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (!(outputs[i] = malloc((size_t)(nb > 0 ? nb : 1)))) {
      st = oom();
      break;
    }
    if (nb == 0) continue;
    if (v->data) { /* a constant passed through */
      memcpy(outputs[i], v->data, (size_t)nb);
      continue;
    }
    cl_mem m;
    cl_ulong off;
    st = locate(x, v, &m, &off);
    if (st == FSL_OK) err = clEnqueueReadBuffer(q, m, CL_TRUE, (size_t)off, (size_t)nb, outputs[i], 0, NULL, NULL);
    if (err != CL_SUCCESS) st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: reading output '%s': %s", vname(v), fsl_ocl_strerror(err));
  }
  if (st != FSL_OK) {
    clFinish(q);
    for (int i = 0; i < g->n_outputs; i++) {
      free(outputs[i]);
      outputs[i] = NULL;
    }
  }
  return st;
}

/* The generated tiled matmul reads prologue views in place (fsl_linear_split_views). */
static bool ocl_linear_views(void) { return true; }

/* Lowers k alone, as compile would, and looks for a host step (no device
 * is needed: only the code generator is asked). */
static bool ocl_supports(const fsl_graph *g, const fsl_kernel *k) { return fsl_gpu_supports(&fsl_dialect_opencl, NULL, g, k); }

static void ocl_info(const void *exe, fsl_backend_exe_info *out) {
  const ocl_exe *x = exe;
  memset(out, 0, sizeof *out);
  out->arena_bytes = -1;
  if (x) fsl_gpu_exe_info(&x->low, x->mem.peak_bytes, out);
}

static void ocl_fingerprint(char *buf, size_t len) {
  const fsl_ocl_device *d = NULL;
  if (fsl_ocl_device_get(&d) == FSL_OK) snprintf(buf, len, "opencl: %s, %s", d->name, d->driver);
  else {
    fsl_error_clear();
    snprintf(buf, len, "opencl: no device");
  }
}

const fsl_backend fsl_backend_opencl = {
    .name = "opencl",
    .summary = "generated OpenCL C on an OpenCL device (FSL_OPENCL_DEVICE; PoCL runs it on the CPU)",
    .calibrate = fsl_ocl_calibrate,
    .profiler_init = NULL,
    .supports = ocl_supports,
    .linear_views = ocl_linear_views,
    .compile = ocl_compile,
    .fingerprint = ocl_fingerprint,
    .export_exe = NULL,
    .import_exe = NULL,
    .run = ocl_run,
    .exe_info = ocl_info,
    .free_exe = ocl_free,
};
