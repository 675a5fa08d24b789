/*
 * emit.c — the CUDA C of a plan's kernels (emit.h): each kernel lowered
 * into generated functions in the CUDA dialect (dialect_cuda.h).
 */
#include "backend/cuda/emit.h"

#include "backend/cuda/dialect_cuda.h"
#include "codegen/codegen.h"
#include "codegen/linsplit.h"

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (CUDA C of a plan)"); }

/* The ONNX node of a kernel's first primitive. */
static const fsl_node *first_node(const fsl_kernel *k) { return k->n_nodes ? k->nodes[0] : NULL; }
static const char *node_op(const fsl_node *n) { return n && n->origin_op ? n->origin_op : "?"; }
static const char *node_name(const fsl_node *n) { return n && n->origin_name ? n->origin_name : "?"; }

/* Lists kernel ki of the current plan as refused with fsl_last_error()'s reason. */
static fsl_status refuse(fsl_cuda_emitter *e, int ki, const fsl_kernel *k) {
  char line[512];
  const fsl_node *n0 = first_node(k);
  snprintf(line, sizeof line, "kernel %d (%s '%s'): %s", ki, node_op(n0), node_name(n0), fsl_last_error());
  fsl_error_clear();
  char *dup = strdup(line);
  if (!dup || !fsl_grow((void **)&e->refused, &e->cap_refused, e->n_refused + 1, sizeof *e->refused)) {
    free(dup);
    return oom();
  }
  e->refused[e->n_refused++] = dup;
  return FSL_OK;
}

/* Appends what gen made in tmp as function fsl_k<e->next_id>, part `part`
 * of kernel ki whose first node is n0, to be launched as *L says.  st is
 * gen's status: FSL_ERR_UNSUPPORTED is passed on (nothing appended),
 * another error names the kernel. */
static fsl_status take(fsl_cuda_emitter *e, int ki, const fsl_node *n0, const char *part, fsl_status st,
                       fsl_sbuf *tmp, const fsl_cg_launch *L) {
  if (st == FSL_OK && tmp->oom) st = oom();
  if (st == FSL_OK && !fsl_grow((void **)&e->fn, &e->cap_fn, e->n_fn + 1, sizeof *e->fn)) st = oom();
  if (st == FSL_OK) {
    fsl_cuda_function *f = &e->fn[e->n_fn++];
    memset(f, 0, sizeof *f);
    f->kernel = ki;
    f->id = e->next_id++;
    f->part = part;
    f->onnx_op = node_op(n0);
    f->onnx_name = node_name(n0);
    f->block_threads = L->group_size;
    f->blocks = L->group_size > 0 ? L->groups : 0;
    fsl_sbuf_puts(&e->src, tmp->p ? tmp->p : "");
    if (e->src.oom) st = oom();
  } else if (st != FSL_ERR_UNSUPPORTED && st != FSL_ERR_NOMEM) {
    st = fsl_error_context(st, "CUDA C of kernel %d (%s '%s', %s)", ki, node_op(n0), node_name(n0), part);
  }
  fsl_sbuf_free(tmp);
  return st;
}

/* The nodes (topological order) writing outs as one function. */
static fsl_status gen_nodes(fsl_cuda_emitter *e, const fsl_plan *p, int ki, const char *part, fsl_node *const *nodes,
                            int n, fsl_value *const *outs, int n_out) {
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_cg_spec spec = {.g = p->g, .id = e->next_id, .n_nodes = n, .nodes = nodes, .n_in = ins.n,
                      .in = (fsl_value *const *)ins.p, .n_out = n_out, .out = outs};
  fsl_sbuf tmp = {0};
  fsl_cg_launch L = {0};
  fsl_status st = take(e, ki, n ? nodes[0] : NULL, part, fsl_codegen_kernel(&fsl_dialect_cuda, &spec, &tmp, &L), &tmp, &L);
  free(ins.p);
  return st;
}

static bool in_list(const void *ctx, const fsl_value *v) { return fsl_vl_has(ctx, v); }
static const fsl_vlist k_none;

/* A LINEAR kernel: prologue, matmul or conv, epilogue (linsplit.h). */
static fsl_status gen_linear(fsl_cuda_emitter *e, const fsl_plan *p, int ki, const fsl_kernel *k) {
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_OK) fsl_linear_split_views(&sp, &fsl_dialect_cuda); /* a prologue of views is read in place */
  if (st == FSL_OK && sp.gen_prologue)
    st = gen_nodes(e, p, ki, "prologue", (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p,
                   sp.pre_out.n);
  int n_abs = 0;
  if (st == FSL_OK) {
    fsl_sbuf tmp = {0};
    fsl_cg_launch L = {0};
    fsl_vlist nodes = {0}, ins = {0};
    st = fsl_codegen_linear(&fsl_dialect_cuda, e->next_id, p->g, k, &sp, &n_abs, &nodes, &ins, &tmp, &L);
    st = take(e, ki, sp.lin, sp.lin->op == FSL_OP_matmul ? "matmul" : "conv", st, &tmp, &L);
    free(nodes.p);
    free(ins.p);
  }
  fsl_vlist post = {0}, post_out = {0};
  const fsl_value *z = fsl_linear_split_out(&sp, n_abs);
  if (st == FSL_OK)
    st = fsl_linear_split_epilogue(k, &sp, n_abs, z, in_list, sp.gen_prologue ? &sp.pre_out : &k_none, &post,
                                   &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = gen_nodes(e, p, ki, "epilogue", (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p,
                   post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

fsl_status fsl_cuda_emit_plan(fsl_cuda_emitter *e, const fsl_plan *p) {
  if (!e || !p) return fsl_errorf(FSL_ERR_ARG, "fsl_cuda_emit_plan: NULL argument");
  if (e->src.len == 0) fsl_codegen_prelude(&fsl_dialect_cuda, &e->src);
  for (int ki = 0; ki < p->kernels.n; ki++) {
    const fsl_kernel *k = p->kernels.k[ki];
    e->n_kernels++;
    if (k->kind == FSL_KERNEL_OPAQUE) {
      e->n_opaque++;
      continue;
    }
    fsl_status st = k->kind == FSL_KERNEL_LINEAR
                        ? gen_linear(e, p, ki, k)
                        : gen_nodes(e, p, ki, k->kind == FSL_KERNEL_LOOP ? "loop" : "reduce", k->nodes,
                                    k->n_nodes, k->out, k->n_out);
    if (st == FSL_ERR_UNSUPPORTED) st = refuse(e, ki, k);
    else if (st == FSL_OK) e->n_generated++;
    if (st != FSL_OK) return st;
  }
  return e->src.oom ? oom() : FSL_OK;
}

void fsl_cuda_emitter_free(fsl_cuda_emitter *e) {
  if (!e) return;
  fsl_sbuf_free(&e->src);
  for (int i = 0; i < e->n_refused; i++) free(e->refused[i]);
  free(e->refused);
  free(e->fn);
  memset(e, 0, sizeof *e);
}
