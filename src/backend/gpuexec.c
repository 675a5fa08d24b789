/*
 * gpuexec.c — the GPU executor (gpuexec.h): compile, run, exe_info,
 * free_exe and fingerprint of the CUDA and OpenCL backends over their ops
 * tables and driver memory calls.
 */
#include "backend/gpuexec.h"

static fsl_status oom(const fsl_gpu_exe *x) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (%s backend)", x->ops->name); }

static const char *vname(const fsl_value *v) { return v->name ? v->name : "?"; }

/* Bytes a value takes in the staging memory (64-byte slots). */
static int64_t staged(int64_t bytes) { return (bytes + 63) / 64 * 64; }

fsl_status fsl_gpu_locate(fsl_gpu_exe *x, const fsl_value *v, fsl_gpu_buf *buf, int64_t *off) {
  *buf = 0; /* on every path, errors included */
  *off = 0;
  if (v->id < x->mem->n_ids && x->mem->offset[v->id] >= 0 && x->arena) {
    *buf = x->arena;
    *off = x->mem->offset[v->id];
    return FSL_OK;
  }
  const fsl_gpu_mem *mem = x->dev.mem;
  if (!x->own[v->id]) {
    int64_t nb = fsl_value_nbytes(v);
    if (nb < 0) return fsl_errorf(FSL_ERR_SHAPE, "%s backend: value '%s' has no static shape", x->ops->name, vname(v));
    fsl_status st = mem->alloc(nb > 0 ? nb : 64, &x->own[v->id]);
    if (st != FSL_OK)
      return fsl_error_context(st, "%s backend: %lld bytes for '%s'", x->ops->name, (long long)nb, vname(v));
    if (v->data && nb > 0) {
      FSL_TRY(mem->upload(x->own[v->id], 0, v->data, nb));
      FSL_TRY(mem->sync()); /* v->data may change once compile returns: the copy must end first */
    }
  }
  *buf = x->own[v->id];
  return FSL_OK;
}

int fsl_gpu_device_run_end(const fsl_lowering *l, int lo) {
  int hi = lo;
  while (hi < l->n_steps && l->steps[hi].kind != FSL_STEP_HOST) hi++;
  return hi;
}

/* Every value of every step and every graph input located, in step
 * order, then each device step's launch record. */
static fsl_status prepare_steps(fsl_gpu_exe *x) {
  fsl_gpu_buf buf;
  int64_t off;
  for (int i = 0; i < x->low.n_steps; i++) {
    const fsl_step *s = &x->low.steps[i];
    for (int k = 0; k < s->n_in + s->n_out; k++)
      FSL_TRY(fsl_gpu_locate(x, k < s->n_in ? s->in[k] : s->out[k - s->n_in], &buf, &off));
    if (s->kind != FSL_STEP_HOST) FSL_TRY(x->ops->prepare(x, i));
  }
  const fsl_graph *g = x->p->g;
  for (int i = 0; i < g->n_inputs; i++) FSL_TRY(fsl_gpu_locate(x, g->inputs[i], &buf, &off));
  return FSL_OK;
}

/* The generated source into the file $<ops->source_env>, when set, for inspection. */
static void dump_source(const fsl_gpu_exe *x) {
  const char *path = getenv(x->ops->source_env);
  if (!path || !*path) return;
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(x->low.src.p ? x->low.src.p : "", f);
  fclose(f);
}

/* Device memory of x: the arena (laid out by the compile context's memory
 * plan, else one built here with graph outputs in the arena), the error
 * words and the staging memory. */
static fsl_status allocate(fsl_gpu_exe *x, const fsl_compile_ctx *ctx) {
  const fsl_gpu_mem *mem = x->dev.mem;
  const int n_steps = x->low.n_steps > 0 ? x->low.n_steps : 1;
  if (ctx && ctx->mem) {
    x->mem = ctx->mem;
  } else {
    const fsl_memplan_options mo = {.inplace = true, .external_outputs = false};
    FSL_TRY(fsl_memplan_build(x->p, &mo, &x->own_plan));
    x->mem = &x->own_plan;
  }
  if (x->mem->peak_bytes > 0) FSL_TRY(mem->alloc(x->mem->peak_bytes, &x->arena));
  FSL_TRY(mem->alloc(4 * (int64_t)n_steps, &x->errs));
  const fsl_graph *g = x->p->g;
  int64_t staging = 4 * (int64_t)n_steps;
  for (int i = 0; i < g->n_inputs; i++) staging += staged(fsl_value_nbytes(g->inputs[i]));
  for (int i = 0; i < g->n_outputs; i++) staging += staged(fsl_value_nbytes(g->outputs[i]));
  return mem->host_alloc(staging, &x->staging);
}

fsl_status fsl_gpu_compile(const fsl_gpu_ops *ops, const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe) {
  if (!p || !exe || !p->g) return fsl_errorf(FSL_ERR_ARG, "%s compile: NULL argument", ops->name);
  *exe = NULL;
  fsl_gpu_exe *x = calloc(1, ops->exe_bytes);
  if (!x) return fsl_errorf(FSL_ERR_NOMEM, "out of memory (%s backend)", ops->name);
  x->p = p;
  x->ops = ops;
  if (ctx)
    x->caps = ctx->caps;
  else if (ops->caps)
    ops->caps(&x->caps);
  fsl_status st = ops->open(&x->dev, x);
  if (st != FSL_OK) {
    free(x);
    return st;
  }
  /* work-groups no larger than the device allows, within its local memory */
  x->grp = *ops->dialect->group;
  while (x->grp.size > 1 && x->grp.size > x->dev.max_group) x->grp.size /= 2;
  while (x->grp.tile > 1 && x->grp.tile * x->grp.tile > x->dev.max_group) x->grp.tile /= 2;
  x->grp.local_bytes = x->dev.local_bytes;
  x->dia = *ops->dialect;
  x->dia.group = &x->grp;
  const fsl_graph *g = p->g;
  x->own = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof *x->own);
  st = x->own ? fsl_lowering_init(&x->low, g, &x->dia, ops->hooks, &x->caps, 0) : oom(x);
  if (st == FSL_OK) st = fsl_lower_plan(&x->low, p);
  const int n_steps = x->low.n_steps > 0 ? x->low.n_steps : 1;
  if (st == FSL_OK && !(x->launch = calloc((size_t)n_steps, ops->launch_bytes))) st = oom(x);
  if (st == FSL_OK) st = allocate(x, ctx);
  if (st == FSL_OK) dump_source(x);
  if (st == FSL_OK && x->low.next_fn > 0) st = ops->build(x);
  if (st == FSL_OK) st = prepare_steps(x);
  if (st == FSL_OK && ops->finish) st = ops->finish(x);
  if (st != FSL_OK) {
    fsl_gpu_free(x);
    return st;
  }
  *exe = x;
  return FSL_OK;
}

/* Copies value v between the device and host memory, waited for. */
static fsl_status copy_value(fsl_gpu_exe *x, const fsl_value *v, void *host, int64_t bytes, bool to_host) {
  fsl_gpu_buf buf;
  int64_t off;
  FSL_TRY(fsl_gpu_locate(x, v, &buf, &off));
  FSL_TRY(to_host ? x->dev.mem->download(host, buf, off, bytes) : x->dev.mem->upload(buf, off, host, bytes));
  return x->dev.mem->sync();
}

/* A HOST step's copies (fsl_gpu_copy). */
static fsl_status copy_to_host(void *ctx, const fsl_value *v, void *host, int64_t bytes) {
  return copy_value(ctx, v, host, bytes, true);
}

static fsl_status copy_to_device(void *ctx, const fsl_value *v, void *host, int64_t bytes) {
  return copy_value(ctx, v, host, bytes, false);
}

/* The graph inputs through the staging memory to the device; the staging
 * memory after them (where the outputs go) in *next. */
static fsl_status send_inputs(fsl_gpu_exe *x, const void *const *inputs, unsigned char **next) {
  const fsl_graph *g = x->p->g;
  unsigned char *stage = x->staging;
  *next = stage;
  for (int i = 0; i < g->n_inputs; i++) {
    const fsl_value *v = g->inputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (nb <= 0) continue;
    if (!inputs || !inputs[i]) return fsl_errorf(FSL_ERR_ARG, "no data for graph input '%s'", vname(v));
    fsl_gpu_buf buf;
    int64_t off;
    memcpy(stage, inputs[i], (size_t)nb);
    FSL_TRY(fsl_gpu_locate(x, v, &buf, &off));
    FSL_TRY(x->dev.mem->upload(buf, off, stage, nb));
    stage += staged(nb);
    *next = stage;
  }
  return FSL_OK;
}

/* Every step in order: each maximal run of device steps queued, a host
 * step after waiting for what came before. */
static fsl_status run_steps(fsl_gpu_exe *x) {
  for (int lo = 0; lo < x->low.n_steps;) {
    const fsl_step *s = &x->low.steps[lo];
    if (s->kind == FSL_STEP_HOST) {
      FSL_TRY(x->dev.mem->sync());
      FSL_TRY(fsl_gpu_run_host(x->p->g, s, copy_to_host, copy_to_device, x, x->ops->name));
      lo++;
      continue;
    }
    int hi = fsl_gpu_device_run_end(&x->low, lo);
    FSL_TRY(x->ops->launch(x, lo, hi));
    lo = hi;
  }
  return FSL_OK;
}

/* The graph outputs (but constants) into the staging memory at stage, the
 * error words after them (*errs). */
static fsl_status fetch_outputs(fsl_gpu_exe *x, unsigned char *stage, int **errs) {
  const fsl_graph *g = x->p->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (nb > 0 && !v->data) {
      fsl_gpu_buf buf;
      int64_t off;
      FSL_TRY(fsl_gpu_locate(x, v, &buf, &off));
      FSL_TRY(x->dev.mem->download(stage, buf, off, nb));
    }
    stage += staged(nb);
  }
  *errs = (int *)(void *)stage;
  return x->low.n_steps > 0 ? x->dev.mem->download(*errs, x->errs, 0, 4 * (int64_t)x->low.n_steps) : FSL_OK;
}

/* outputs[i]: a malloc'd copy of graph output i from the staging memory
 * at stage (a constant: from its data). */
static fsl_status copy_outputs(const fsl_gpu_exe *x, const unsigned char *stage, void **outputs) {
  const fsl_graph *g = x->p->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    int64_t nb = fsl_value_nbytes(v);
    if (!(outputs[i] = malloc((size_t)(nb > 0 ? nb : 1)))) return oom(x);
    if (nb > 0) memcpy(outputs[i], v->data ? v->data : stage, (size_t)nb);
    stage += staged(nb);
  }
  return FSL_OK;
}

fsl_status fsl_gpu_run(void *exe, const void *const *inputs, void **outputs) {
  fsl_gpu_exe *x = exe;
  if (!x || (!outputs && x->p->g->n_outputs > 0))
    return fsl_errorf(FSL_ERR_ARG, "%s run: NULL argument", x ? x->ops->name : "gpu");
  const fsl_graph *g = x->p->g;
  for (int i = 0; i < g->n_outputs; i++) outputs[i] = NULL;
  unsigned char *out_stage = NULL;
  int *errs = NULL;
  fsl_status st = send_inputs(x, inputs, &out_stage);
  if (st == FSL_OK && x->low.n_steps > 0) st = x->dev.mem->zero32(x->errs, x->low.n_steps);
  if (st == FSL_OK) st = run_steps(x);
  if (st == FSL_OK) st = fetch_outputs(x, out_stage, &errs);
  fsl_status sync_st = x->dev.mem->sync();
  if (st == FSL_OK) st = sync_st;
  for (int i = 0; i < x->low.n_steps && st == FSL_OK; i++)
    st = fsl_gpu_step_error(x->p, &x->low.steps[i], errs[i], x->ops->name);
  if (st == FSL_OK) st = copy_outputs(x, out_stage, outputs);
  if (st != FSL_OK)
    for (int i = 0; i < g->n_outputs; i++) {
      free(outputs[i]);
      outputs[i] = NULL;
    }
  return st;
}

void fsl_gpu_exe_info(const void *exe, fsl_backend_exe_info *out) {
  const fsl_gpu_exe *x = exe;
  memset(out, 0, sizeof *out);
  out->arena_bytes = -1;
  if (!x) return;
  fsl_lowering_exe_info(&x->low, x->p->kernels.n, out);
  out->arena_bytes = x->mem ? x->mem->peak_bytes : 0;
}

void fsl_gpu_free(void *exe) {
  fsl_gpu_exe *x = exe;
  if (!x) return;
  const fsl_gpu_mem *mem = x->dev.mem;
  x->ops->release(x);
  if (x->own)
    for (int i = 0; i < x->p->g->n_values; i++)
      if (x->own[i]) mem->free(x->own[i]);
  free(x->own);
  if (x->arena) mem->free(x->arena);
  if (x->errs) mem->free(x->errs);
  if (x->staging) mem->host_free(x->staging);
  free(x->launch);
  fsl_memplan_free(&x->own_plan);
  fsl_lowering_free(&x->low);
  free(x);
}

void fsl_gpu_fingerprint(const fsl_gpu_ops *ops, char *buf, size_t len) {
  fsl_gpu_device dev;
  memset(&dev, 0, sizeof dev);
  if (ops->open(&dev, NULL) == FSL_OK) snprintf(buf, len, "%s: %s", ops->name, dev.id);
  else {
    fsl_error_clear();
    snprintf(buf, len, "%s: no device", ops->name);
  }
}
