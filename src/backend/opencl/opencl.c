/*
 * opencl.c — the OpenCL backend (backend.h; docs/gpu-backend.md).
 *
 * compile lowers every kernel of a plan into steps, in plan order:
 *   - GEN: a kernel generated in the OpenCL C dialect (dialect_opencl.h):
 *     LOOP and REDUCE kernels whole (one generated kernel per node when
 *     the dialect cannot take them in one piece: multi-pass reductions;
 *     a work-group per REDUCE row where the generator says so);
 *     a LINEAR kernel as a generated prologue, a generated matmul or
 *     convolution (tiled through local memory) and a generated epilogue
 *     (codegen/linsplit.h);
 *   - HOST: the reference interpreter on the host for an opaque kernel (by
 *     design), and as the counted fallback for what the dialect cannot
 *     take (f16/bf16, scatters, integer convolutions): the
 *     buffers it reads are copied to the host, its results back.
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

#include "backend/opencl/dialect_opencl.h"
#include "codegen/linsplit.h"
#include "eval/eval.h"
#include "runtime/memplan.h"

typedef enum { STEP_GEN, STEP_HOST } step_kind;

typedef struct ocl_step {
  step_kind kind;
  int kernel;              /* the plan kernel it belongs to */
  int fn_id;               /* GEN: fsl_k<fn_id> */
  cl_kernel k;             /* GEN */
  fsl_cg_launch launch;    /* GEN: what the generated code needs (work-groups) */
  size_t gsize, lsize;     /* GEN: global and local work size */
  int n_in, n_out;
  fsl_value **in, **out;   /* read and written values */
  int n_nodes;
  fsl_node **nodes;        /* HOST: evaluated in this order; GEN: what it computes */
} ocl_step;

typedef struct ocl_exe {
  const fsl_plan *p;
  const fsl_ocl_device *d;
  fsl_dialect dia;         /* the OpenCL dialect, its work-groups narrowed to the device */
  fsl_cg_group grp;        /* dia.group: sizes and local memory of this device */
  ocl_step *steps;
  int n_steps, cap_steps;
  bool *avail;             /* value id -> written by an earlier step (or input/constant) */
  bool *fell_back;         /* kernel -> has a fallback step */
  fsl_sbuf src;
  int next_fn;
  int n_fallback, n_opaque;
  char why[256];
  fsl_memplan mem;
  cl_mem arena;
  cl_mem *own;             /* value id -> a buffer of its own (not in the arena), or NULL */
  cl_mem errs;             /* one int of FSL_KERR_* bits per step */
  cl_program prog;
  bool cache_hit;
} ocl_exe;

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory"); }

static const char *vname(const fsl_value *v) { return v->name ? v->name : "?"; }

/* ---- lowering ---- */

static ocl_step *new_step(ocl_exe *x, step_kind kind, int ki) {
  if (!fsl_grow((void **)&x->steps, &x->cap_steps, x->n_steps + 1, sizeof *x->steps)) return NULL;
  ocl_step *s = &x->steps[x->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->kernel = ki;
  s->fn_id = -1;
  return s;
}

/* Fills a step's value and node lists and marks its outputs written. */
static fsl_status fill_step(ocl_exe *x, ocl_step *s, fsl_value *const *ins, int n_in, fsl_value *const *outs, int n_out,
                            fsl_node *const *nodes, int n) {
  if (!s || !fsl_ptrs_dup((void ***)&s->in, &s->n_in, (void *const *)ins, n_in) ||
      !fsl_ptrs_dup((void ***)&s->out, &s->n_out, (void *const *)outs, n_out) ||
      !fsl_ptrs_dup((void ***)&s->nodes, &s->n_nodes, (void *const *)nodes, n))
    return oom();
  for (int i = 0; i < n_out; i++) x->avail[outs[i]->id] = true;
  return FSL_OK;
}

static void note_fallback(ocl_exe *x, int ki, const char *why) {
  if (!x->fell_back[ki]) x->n_fallback++;
  x->fell_back[ki] = true;
  if (x->why[0]) return;
  const fsl_kernel *k = x->p->kernels.k[ki];
  const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
  snprintf(x->why, sizeof x->why, "kernel %d (%s '%s'): %s", ki, n0 && n0->origin_op ? n0->origin_op : "?",
           n0 && n0->origin_name ? n0->origin_name : "?", why);
}

/* HOST step over nodes (topological order), keeping outs. */
static fsl_status add_host(ocl_exe *x, int ki, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out) {
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_status st = fill_step(x, new_step(x, STEP_HOST, ki), (fsl_value *const *)ins.p, ins.n, outs, n_out, nodes, n);
  free(ins.p);
  return st;
}

/* The number of work-items a generated step launches: one per element of
 * its largest output (grid-stride loops make any number correct), at most
 * 2^20, rounded up to the work-group size set at compile. */
static size_t work_items(const ocl_step *s) {
  int64_t most = 1;
  for (int i = 0; i < s->n_out; i++) {
    int64_t ne = fsl_value_numel(s->out[i]);
    if (ne > most) most = ne;
  }
  return (size_t)(most < ((int64_t)1 << 20) ? most : ((int64_t)1 << 20));
}

/* Generates the nodes as kernel fsl_k<id> into dst; *ins receives the
 * values they read (the caller frees ins->p), *launch how to launch it. */
static fsl_status gen_one(ocl_exe *x, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out, int id,
                          fsl_sbuf *dst, fsl_vlist *ins, fsl_cg_launch *launch) {
  if (!fsl_vl_add_inputs(ins, nodes, n)) return oom();
  fsl_cg_spec spec = {.g = x->p->g, .id = id, .n_nodes = n, .nodes = nodes, .n_in = ins->n,
                      .in = (fsl_value *const *)ins->p, .n_out = n_out, .out = outs};
  return fsl_codegen_kernel(&x->dia, &spec, dst, launch);
}

/* The GEN step of the function generated next (fsl_k<next_fn>). */
static fsl_status gen_step(ocl_exe *x, int ki, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out,
                           const fsl_vlist *ins, const fsl_cg_launch *launch) {
  ocl_step *s = new_step(x, STEP_GEN, ki);
  fsl_status st = fill_step(x, s, (fsl_value *const *)ins->p, ins->n, outs, n_out, nodes, n);
  if (st == FSL_OK) {
    s->fn_id = x->next_fn++;
    s->launch = *launch;
  }
  return st;
}

/* A kernel the dialect cannot take in one piece (a reduction needing
 * several passes: no barrier between work-groups) as one generated kernel
 * per node, launched in order; values between them get buffers of their
 * own.  FSL_ERR_UNSUPPORTED (nothing added) when a node cannot be
 * generated either. */
static fsl_status add_gen_split(ocl_exe *x, int ki, fsl_node *const *nodes, int n) {
  fsl_sbuf tmp = {0};
  fsl_vlist *ins = calloc((size_t)n, sizeof *ins);
  fsl_cg_launch *launch = calloc((size_t)n, sizeof *launch);
  fsl_status st = ins && launch ? FSL_OK : oom();
  for (int i = 0; i < n && st == FSL_OK; i++) {
    fsl_value *o[16];
    int no = 0;
    for (int k = 0; k < nodes[i]->n_out && no < 16; k++)
      if (nodes[i]->out[k]) o[no++] = nodes[i]->out[k];
    st = gen_one(x, &nodes[i], 1, o, no, x->next_fn + i, &tmp, &ins[i], &launch[i]);
  }
  if (st == FSL_OK && tmp.oom) st = oom();
  if (st == FSL_OK) fsl_sbuf_puts(&x->src, tmp.p ? tmp.p : "");
  for (int i = 0; i < n && st == FSL_OK; i++) {
    fsl_value *o[16];
    int no = 0;
    for (int k = 0; k < nodes[i]->n_out && no < 16; k++)
      if (nodes[i]->out[k]) o[no++] = nodes[i]->out[k];
    st = gen_step(x, ki, &nodes[i], 1, o, no, &ins[i], &launch[i]);
  }
  for (int i = 0; ins && i < n; i++) free(ins[i].p);
  free(ins);
  free(launch);
  fsl_sbuf_free(&tmp);
  return st;
}

/* GEN step; when the dialect cannot take the nodes as one kernel, one per
 * node; else a HOST fallback. */
static fsl_status add_gen(ocl_exe *x, int ki, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out) {
  if (n_out == 0) return FSL_OK;
  fsl_vlist ins = {0};
  fsl_cg_launch launch;
  fsl_status st = gen_one(x, nodes, n, outs, n_out, x->next_fn, &x->src, &ins, &launch);
  if (st == FSL_OK) st = gen_step(x, ki, nodes, n, outs, n_out, &ins, &launch);
  free(ins.p);
  if (st != FSL_ERR_UNSUPPORTED) return st;
  char why[256];
  snprintf(why, sizeof why, "%s", fsl_last_error());
  fsl_error_clear();
  if (n > 1) {
    st = add_gen_split(x, ki, nodes, n);
    if (st != FSL_ERR_UNSUPPORTED) return st;
    fsl_error_clear();
  }
  note_fallback(x, ki, why);
  return add_host(x, ki, nodes, n, outs, n_out);
}

/* The linear op: a generated matmul or direct convolution over the
 * view-resolved operands, else the host (with the in-kernel reshapes
 * between its operands and lin). */
static fsl_status add_linear(ocl_exe *x, int ki, fsl_node *lin, fsl_value *const *lin_in) {
  if (lin->op == FSL_OP_matmul || lin->op == FSL_OP_conv) {
    fsl_sbuf tmp = {0};
    fsl_cg_launch launch = {0};
    fsl_status st = lin->op == FSL_OP_matmul ? fsl_codegen_matmul(&x->dia, x->next_fn, lin, &tmp, &launch)
                                              : fsl_codegen_conv(&x->dia, x->next_fn, lin, &tmp, &launch);
    if (st == FSL_OK && !tmp.oom) {
      fsl_sbuf_puts(&x->src, tmp.p);
      fsl_sbuf_free(&tmp);
      ocl_step *s = new_step(x, STEP_GEN, ki);
      st = fill_step(x, s, lin_in, 2, lin->out, 1, &lin, 1);
      if (st == FSL_OK) {
        s->fn_id = x->next_fn++;
        s->launch = launch;
      }
      return st;
    }
    fsl_sbuf_free(&tmp);
    fsl_error_clear();
  }
  char why[160];
  snprintf(why, sizeof why, "no generated OpenCL code for %s over %s", fsl_op_get(lin->op)->name,
           fsl_dtype_name(lin->in[0]->dtype));
  note_fallback(x, ki, why);
  fsl_node *nodes[2 * FSL_MAX_RANK + 1];
  int n = fsl_linear_ref_nodes(lin, lin_in, nodes);
  return add_host(x, ki, nodes, n, lin->out, 1);
}

static bool was_written(const void *ctx, const fsl_value *v) { return ((const ocl_exe *)ctx)->avail[v->id]; }

static fsl_status lower_linear(ocl_exe *x, int ki, const fsl_kernel *k) {
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_ERR_UNSUPPORTED) {
    note_fallback(x, ki, fsl_last_error());
    fsl_error_clear();
    fsl_linear_split_free(&sp);
    return add_host(x, ki, k->nodes, k->n_nodes, k->out, k->n_out);
  }
  if (st == FSL_OK && sp.gen_prologue)
    st = add_gen(x, ki, (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p, sp.pre_out.n);
  if (st == FSL_OK) st = add_linear(x, ki, sp.lin, sp.lin_in);
  fsl_vlist post = {0}, post_out = {0};
  if (st == FSL_OK)
    st = fsl_linear_split_epilogue(k, &sp, 0, sp.lin->out[0], was_written, x, &post, &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = add_gen(x, ki, (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p, post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

static fsl_status lower_kernel(ocl_exe *x, int ki, const fsl_kernel *k) {
  bool opaque = false, linear = false;
  for (int i = 0; i < k->n_nodes; i++) {
    const fsl_op_info *oi = fsl_op_get(k->nodes[i]->op);
    if (!oi->primitive || oi->kind == FSL_KIND_OPAQUE) opaque = true;
    else if (oi->kind == FSL_KIND_LINEAR) linear = true;
  }
  fsl_status st;
  if (opaque) {
    x->n_opaque++;
    st = add_host(x, ki, k->nodes, k->n_nodes, k->out, k->n_out);
  } else if (linear) {
    st = lower_linear(x, ki, k);
  } else {
    st = add_gen(x, ki, k->nodes, k->n_nodes, k->out, k->n_out);
  }
  if (st == FSL_OK && x->src.oom) st = oom();
  return st;
}

/* ---- device buffers ---- */

/* Where value v lives on the device: the arena at its planned offset, or
 * a buffer of its own (created here; constants are uploaded). */
static fsl_status locate(ocl_exe *x, const fsl_value *v, cl_mem *m, cl_ulong *off) {
  if (v->id < x->mem.n_ids && x->mem.offset[v->id] >= 0 && x->arena) {
    *m = x->arena;
    *off = (cl_ulong)x->mem.offset[v->id];
    return FSL_OK;
  }
  *off = 0;
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
static fsl_status setup_gen(ocl_exe *x, ocl_step *s, int si) {
  char name[32];
  snprintf(name, sizeof name, "fsl_k%d", s->fn_id);
  cl_int err = CL_SUCCESS;
  s->k = clCreateKernel(x->prog, name, &err);
  if (!s->k) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: kernel %s: %s", name, fsl_ocl_strerror(err));
  cl_uint a = 0;
  for (int i = 0; i < s->n_in + s->n_out; i++) {
    const fsl_value *v = i < s->n_in ? s->in[i] : s->out[i - s->n_in];
    cl_mem m;
    cl_ulong off;
    FSL_TRY(locate(x, v, &m, &off));
    err = clSetKernelArg(s->k, a++, sizeof m, &m);
    if (err == CL_SUCCESS) err = clSetKernelArg(s->k, a++, sizeof off, &off);
    if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: %s argument: %s", name, fsl_ocl_strerror(err));
  }
  cl_uint ei = (cl_uint)si;
  err = clSetKernelArg(s->k, a++, sizeof x->errs, &x->errs);
  if (err == CL_SUCCESS) err = clSetKernelArg(s->k, a++, sizeof ei, &ei);
  if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: %s argument: %s", name, fsl_ocl_strerror(err));
  cl_ulong lmem = 0;
  size_t kwg = 1;
  clGetKernelWorkGroupInfo(s->k, x->d->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
  clGetKernelWorkGroupInfo(s->k, x->d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
  if (lmem > x->d->local_mem) {
    const fsl_kernel *k = x->p->kernels.k[s->kernel];
    const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
    return fsl_errorf(FSL_ERR_UNSUPPORTED,
                      "opencl backend, kernel %d (from %s '%s'): needs %llu bytes of local memory, '%s' has %llu",
                      s->kernel, n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?",
                      (unsigned long long)lmem, x->d->name, (unsigned long long)x->d->local_mem);
  }
  if (s->launch.group_size > 0) {
    /* work-groups of exactly the size the code was generated for, at most
     * 2^16 of them (a grid-stride loop over groups) */
    size_t gs = (size_t)s->launch.group_size;
    if (gs > kwg) {
      const fsl_kernel *k = x->p->kernels.k[s->kernel];
      const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
      return fsl_errorf(FSL_ERR_UNSUPPORTED,
                        "opencl backend, kernel %d (from %s '%s'): needs work-groups of %zu work-items, '%s' allows %zu "
                        "for it",
                        s->kernel, n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?",
                        gs, x->d->name, kwg);
    }
    int64_t ng = s->launch.groups < 1 ? 1 : s->launch.groups < 65536 ? s->launch.groups : 65536;
    s->lsize = gs;
    s->gsize = (size_t)ng * gs;
    return FSL_OK;
  }
  /* a kernel whose outputs are all scalars has no PARALLEL loop: every
   * work-item would run it, which is wrong when it writes in place */
  bool scalar = true;
  for (int i = 0; i < s->n_out; i++) scalar = scalar && s->out[i]->rank == 0;
  size_t ls = scalar ? 1 : 64;
  while (ls > 1 && (ls > kwg || ls > x->d->max_wg)) ls /= 2;
  s->lsize = ls;
  s->gsize = scalar ? 1 : (work_items(s) + ls - 1) / ls * ls;
  return FSL_OK;
}

/* ---- the vtable ---- */

static void ocl_free(void *p) {
  ocl_exe *x = p;
  if (!x) return;
  for (int i = 0; i < x->n_steps; i++) {
    ocl_step *s = &x->steps[i];
    if (s->k) clReleaseKernel(s->k);
    free(s->in);
    free(s->out);
    free(s->nodes);
  }
  free(x->steps);
  if (x->own)
    for (int i = 0; i < x->p->g->n_values; i++)
      if (x->own[i]) clReleaseMemObject(x->own[i]);
  free(x->own);
  if (x->arena) clReleaseMemObject(x->arena);
  if (x->errs) clReleaseMemObject(x->errs);
  if (x->prog) clReleaseProgram(x->prog);
  fsl_memplan_free(&x->mem);
  fsl_sbuf_free(&x->src);
  free(x->avail);
  free(x->fell_back);
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
  size_t nv = (size_t)(g->n_values > 0 ? g->n_values : 1);
  x->avail = calloc(nv, sizeof(bool));
  x->own = calloc(nv, sizeof(cl_mem));
  x->fell_back = calloc((size_t)(p->kernels.n > 0 ? p->kernels.n : 1), sizeof(bool));
  fsl_status st = x->avail && x->own && x->fell_back ? FSL_OK : oom();
  for (int i = 0; i < g->n_values && st == FSL_OK; i++) x->avail[i] = g->values[i]->data != NULL;
  for (int i = 0; i < g->n_inputs && st == FSL_OK; i++) x->avail[g->inputs[i]->id] = true;
  if (st == FSL_OK) {
    fsl_codegen_prelude(&fsl_dialect_opencl, &x->src);
    if (x->src.oom) st = oom();
  }
  for (int ki = 0; ki < p->kernels.n && st == FSL_OK; ki++) {
    st = lower_kernel(x, ki, p->kernels.k[ki]);
    if (st != FSL_OK) fsl_error_context(st, "opencl backend, kernel %d", ki);
  }
  /* every kernel output in one arena (graph outputs too: read back from it) */
  const fsl_memplan_options mo = {.inplace = true, .external_outputs = false};
  if (st == FSL_OK) st = fsl_memplan_build(p, &mo, &x->mem);
  cl_int err = CL_SUCCESS;
  if (st == FSL_OK && x->mem.peak_bytes > 0 &&
      !(x->arena = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, (size_t)x->mem.peak_bytes, NULL, &err)))
    st = fsl_errorf(FSL_ERR_NOMEM, "opencl backend: cannot allocate the arena (%lld bytes) on '%s': %s",
                    (long long)x->mem.peak_bytes, d->name, fsl_ocl_strerror(err));
  if (st == FSL_OK &&
      !(x->errs = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, sizeof(cl_int) * (size_t)(x->n_steps > 0 ? x->n_steps : 1),
                                 NULL, &err)))
    st = fsl_errorf(FSL_ERR_NOMEM, "opencl backend: cannot allocate the error words: %s", fsl_ocl_strerror(err));
  const char *dump = getenv("FSL_OPENCL_SOURCE"); /* docs/gpu-backend.md: the generated program, for inspection */
  if (st == FSL_OK && dump && *dump) {
    FILE *f = fopen(dump, "w");
    if (f) {
      fputs(x->src.p ? x->src.p : "", f);
      fclose(f);
    }
  }
  if (st == FSL_OK && x->next_fn > 0) st = fsl_ocl_build(d, x->src.p, x->src.len, &x->prog, &x->cache_hit);
  for (int i = 0; i < x->n_steps && st == FSL_OK; i++) {
    ocl_step *s = &x->steps[i];
    if (s->kind == STEP_GEN) st = setup_gen(x, s, i);
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

/* Copies v from the device into a new host buffer *out (constants: their data). */
static fsl_status to_host(ocl_exe *x, const fsl_value *v, void **out, bool *owned) {
  *owned = false;
  if (v->data) {
    *out = (void *)v->data;
    return FSL_OK;
  }
  int64_t nb = fsl_value_nbytes(v);
  void *h = malloc((size_t)(nb > 0 ? nb : 1));
  if (!h) return oom();
  *out = h;
  *owned = true;
  if (nb == 0) return FSL_OK;
  cl_mem m;
  cl_ulong off;
  FSL_TRY(locate(x, v, &m, &off));
  cl_int err = clEnqueueReadBuffer(x->d->queue, m, CL_TRUE, (size_t)off, (size_t)nb, h, 0, NULL, NULL);
  if (err != CL_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: reading '%s': %s", vname(v), fsl_ocl_strerror(err));
  return FSL_OK;
}

/* A HOST step: the inputs to the host, the reference interpreter node by
 * node, the step's outputs back to the device. */
static fsl_status run_host(ocl_exe *x, const ocl_step *s) {
  const fsl_graph *g = x->p->g;
  void **hb = calloc((size_t)g->n_values, sizeof(void *));
  bool *ho = calloc((size_t)g->n_values, sizeof(bool));
  fsl_status st = hb && ho ? FSL_OK : oom();
  for (int i = 0; i < s->n_nodes && st == FSL_OK; i++) {
    const fsl_node *n = s->nodes[i];
    const void *in[32];
    void *out[16];
    if (n->n_in > 32 || n->n_out > 16) {
      st = fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "too many operands");
      break;
    }
    for (int k = 0; k < n->n_in && st == FSL_OK; k++) {
      in[k] = NULL;
      const fsl_value *v = n->in[k];
      if (!v) continue;
      if (!hb[v->id]) st = to_host(x, v, &hb[v->id], &ho[v->id]);
      in[k] = hb[v->id];
    }
    for (int k = 0; k < n->n_out && st == FSL_OK; k++) {
      out[k] = NULL;
      const fsl_value *v = n->out[k];
      if (!v) continue;
      int64_t nb = fsl_value_nbytes(v);
      if (!hb[v->id]) {
        if (!(hb[v->id] = malloc((size_t)(nb > 0 ? nb : 1)))) st = oom();
        ho[v->id] = true;
      }
      out[k] = hb[v->id];
    }
    if (st == FSL_OK) st = fsl_ref_eval(n, in, out);
  }
  for (int j = 0; j < s->n_out && st == FSL_OK; j++) {
    const fsl_value *v = s->out[j];
    int64_t nb = fsl_value_nbytes(v);
    if (nb <= 0) continue;
    cl_mem m;
    cl_ulong off;
    st = locate(x, v, &m, &off);
    cl_int err = st == FSL_OK ? clEnqueueWriteBuffer(x->d->queue, m, CL_TRUE, (size_t)off, (size_t)nb, hb[v->id], 0, NULL, NULL)
                              : CL_SUCCESS;
    if (err != CL_SUCCESS) st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: writing '%s': %s", vname(v), fsl_ocl_strerror(err));
  }
  for (int i = 0; hb && ho && i < g->n_values; i++)
    if (ho[i]) free(hb[i]);
  free(hb);
  free(ho);
  if (st != FSL_OK) fsl_error_context(st, "opencl backend, kernel %d (on the host)", s->kernel);
  return st;
}

/* The first step whose error word is set, as an error naming its kernel. */
static fsl_status step_errors(ocl_exe *x, const cl_int *e) {
  for (int i = 0; i < x->n_steps; i++) {
    if (!e[i]) continue;
    const ocl_step *s = &x->steps[i];
    const fsl_kernel *k = x->p->kernels.k[s->kernel];
    const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
    const char *what = (e[i] & FSL_KERR_INDEX)     ? "gather index out of range"
                       : (e[i] & FSL_KERR_DIVZERO) ? "integer division by zero"
                                                   : "out of memory";
    return fsl_errorf(FSL_ERR_RUNTIME, "opencl backend, kernel %d (from %s '%s'): %s", s->kernel,
                      n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?", what);
  }
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
  if (st == FSL_OK && x->n_steps > 0)
    err = clEnqueueFillBuffer(q, x->errs, &zero, sizeof zero, 0, sizeof(cl_int) * (size_t)x->n_steps, 0, NULL, NULL);
  if (err != CL_SUCCESS) st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: clearing the error words: %s", fsl_ocl_strerror(err));
  for (int i = 0; i < x->n_steps && st == FSL_OK; i++) {
    const ocl_step *s = &x->steps[i];
    if (s->kind == STEP_HOST) {
      st = run_host(x, s);
      continue;
    }
    err = clEnqueueNDRangeKernel(q, s->k, 1, NULL, &s->gsize, &s->lsize, 0, NULL, NULL);
    if (err != CL_SUCCESS)
      st = fsl_errorf(FSL_ERR_RUNTIME, "opencl backend, kernel %d: launching fsl_k%d: %s", s->kernel, s->fn_id,
                      fsl_ocl_strerror(err));
  }
  cl_int *e = st == FSL_OK ? malloc(sizeof(cl_int) * (size_t)(x->n_steps > 0 ? x->n_steps : 1)) : NULL;
  if (st == FSL_OK && !e) st = oom();
  if (st == FSL_OK && x->n_steps > 0) {
    err = clEnqueueReadBuffer(q, x->errs, CL_TRUE, 0, sizeof(cl_int) * (size_t)x->n_steps, e, 0, NULL, NULL);
    st = err == CL_SUCCESS ? step_errors(x, e)
                           : fsl_errorf(FSL_ERR_RUNTIME, "opencl backend: running the plan: %s", fsl_ocl_strerror(err));
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

/* Lowers k alone, as compile would, and looks for a host step (no device
 * is needed: only the code generator is asked). */
static bool ocl_supports(const fsl_graph *g, const fsl_kernel *k) {
  if (!g || !k) return false;
  fsl_kernel *ks[1] = {(fsl_kernel *)k};
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.kernels = (fsl_kernel_set){.g = g, .n = 1, .cap = 1, .k = ks};
  ocl_exe x;
  memset(&x, 0, sizeof x);
  x.p = &p;
  x.dia = fsl_dialect_opencl;
  x.avail = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof(bool));
  x.fell_back = calloc(1, sizeof(bool));
  bool ok = x.avail && x.fell_back;
  for (int i = 0; ok && i < g->n_values; i++) x.avail[i] = g->values[i]->data != NULL;
  for (int i = 0; ok && i < k->n_in; i++) x.avail[k->in[i]->id] = true;
  ok = ok && lower_kernel(&x, 0, k) == FSL_OK && x.n_fallback == 0 && x.n_opaque == 0;
  fsl_error_clear();
  for (int i = 0; i < x.n_steps; i++) {
    free(x.steps[i].in);
    free(x.steps[i].out);
    free(x.steps[i].nodes);
  }
  free(x.steps);
  free(x.avail);
  free(x.fell_back);
  fsl_sbuf_free(&x.src);
  return ok;
}

static void ocl_info(const void *exe, fsl_backend_exe_info *out) {
  const ocl_exe *x = exe;
  memset(out, 0, sizeof *out);
  out->arena_bytes = -1;
  if (!x) return;
  out->n_kernels = x->p->kernels.n;
  out->n_fallback = x->n_fallback;
  out->n_opaque = x->n_opaque;
  out->n_native = out->n_kernels - out->n_fallback - out->n_opaque;
  snprintf(out->fallback_why, sizeof out->fallback_why, "%s", x->why);
  out->arena_bytes = x->mem.peak_bytes;
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
    .compile = ocl_compile,
    .fingerprint = ocl_fingerprint,
    .export_exe = NULL,
    .import_exe = NULL,
    .run = ocl_run,
    .exe_info = ocl_info,
    .free_exe = ocl_free,
};
