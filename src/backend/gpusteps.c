/*
 * gpusteps.c — a plan lowered into GPU steps, their dependencies, host
 * steps and step errors (gpusteps.h), shared by the OpenCL and CUDA
 * backends.
 */
#include "backend/gpusteps.h"

#include "codegen/linsplit.h"
#include "eval/eval.h"

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (lowering a plan for a GPU)"); }

void fsl_gpu_kernel_label(const fsl_plan *p, int ki, char *buf, size_t len) {
  const fsl_kernel *k = p && ki >= 0 && ki < p->kernels.n ? p->kernels.k[ki] : NULL;
  const fsl_node *n0 = k && k->n_nodes ? k->nodes[0] : NULL;
  snprintf(buf, len, "kernel %d (from %s '%s')", ki, n0 && n0->origin_op ? n0->origin_op : "?",
           n0 && n0->origin_name ? n0->origin_name : "?");
}

/* ---- lowering ---- */

static fsl_gpu_step *new_step(fsl_gpu_lowering *x, fsl_gpu_step_kind kind, int ki, const char *part) {
  if (!fsl_grow((void **)&x->steps, &x->cap_steps, x->n_steps + 1, sizeof *x->steps)) return NULL;
  fsl_gpu_step *s = &x->steps[x->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->kernel = ki;
  s->fn_id = -1;
  s->part = part;
  return s;
}

/* Fills a step's value and node lists and marks its outputs written. */
static fsl_status fill_step(fsl_gpu_lowering *x, fsl_gpu_step *s, fsl_value *const *ins, int n_in,
                            fsl_value *const *outs, int n_out, fsl_node *const *nodes, int n) {
  if (!s || !fsl_ptrs_dup((void ***)&s->in, &s->n_in, (void *const *)ins, n_in) ||
      !fsl_ptrs_dup((void ***)&s->out, &s->n_out, (void *const *)outs, n_out) ||
      !fsl_ptrs_dup((void ***)&s->nodes, &s->n_nodes, (void *const *)nodes, n))
    return oom();
  for (int i = 0; i < n_out; i++) x->avail[outs[i]->id] = true;
  return FSL_OK;
}

/* Notes kernel ki's fallback to the host for reason `why` (its first one
 * is kept: l->fallback[ki], and the plan's first in l->why). */
static fsl_status note_fallback(fsl_gpu_lowering *x, int ki, const char *why) {
  if (x->fallback[ki]) return FSL_OK;
  x->n_fallback++;
  const fsl_kernel *k = x->p->kernels.k[ki];
  const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
  char line[sizeof x->why + 256];
  snprintf(line, sizeof line, "kernel %d (%s '%s'): %s", ki, n0 && n0->origin_op ? n0->origin_op : "?",
           n0 && n0->origin_name ? n0->origin_name : "?", why);
  if (!x->why[0]) { /* truncated */
    size_t n = strnlen(line, sizeof x->why - 1);
    memcpy(x->why, line, n);
    x->why[n] = '\0';
  }
  x->fallback[ki] = strdup(line);
  return x->fallback[ki] ? FSL_OK : oom();
}

/* HOST step over nodes (topological order), keeping outs. */
static fsl_status add_host(fsl_gpu_lowering *x, int ki, fsl_node *const *nodes, int n, fsl_value *const *outs,
                           int n_out) {
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_status st =
      fill_step(x, new_step(x, FSL_GPU_HOST, ki, "host"), (fsl_value *const *)ins.p, ins.n, outs, n_out, nodes, n);
  free(ins.p);
  return st;
}

/* Generates the nodes as function fsl_k<id> into dst; *ins receives the
 * values they read (the caller frees ins->p), *launch how to launch it. */
static fsl_status gen_one(fsl_gpu_lowering *x, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out,
                          int id, fsl_sbuf *dst, fsl_vlist *ins, fsl_cg_launch *launch) {
  if (!fsl_vl_add_inputs(ins, nodes, n)) return oom();
  fsl_cg_spec spec = {.g = x->p->g, .id = id, .n_nodes = n, .nodes = nodes, .n_in = ins->n,
                      .in = (fsl_value *const *)ins->p, .n_out = n_out, .out = outs};
  return fsl_codegen_kernel(x->dia, &spec, dst, launch);
}

/* The GEN step of the function generated next (fsl_k<n_fn>). */
static fsl_status gen_step(fsl_gpu_lowering *x, int ki, const char *part, fsl_node *const *nodes, int n,
                           fsl_value *const *outs, int n_out, fsl_value *const *ins, int n_in,
                           const fsl_cg_launch *launch) {
  fsl_gpu_step *s = new_step(x, FSL_GPU_GEN, ki, part);
  fsl_status st = fill_step(x, s, ins, n_in, outs, n_out, nodes, n);
  if (st == FSL_OK) {
    s->fn_id = x->n_fn++;
    s->launch = *launch;
  }
  return st;
}

/* The non-NULL outputs of node n into o[16]; their number. */
static int node_outs(const fsl_node *n, fsl_value **o) {
  int no = 0;
  for (int k = 0; k < n->n_out && no < 16; k++)
    if (n->out[k]) o[no++] = n->out[k];
  return no;
}

/* A kernel the dialect cannot take in one piece (a reduction needing
 * several passes: no barrier between work-groups) as one function per
 * node, launched in order; values between them get buffers of their own.
 * FSL_ERR_UNSUPPORTED (nothing added) when a node cannot be generated
 * either. */
static fsl_status add_gen_split(fsl_gpu_lowering *x, int ki, fsl_node *const *nodes, int n) {
  fsl_sbuf tmp = {0};
  fsl_vlist *ins = calloc((size_t)n, sizeof *ins);
  fsl_cg_launch *launch = calloc((size_t)n, sizeof *launch);
  fsl_status st = ins && launch ? FSL_OK : oom();
  for (int i = 0; i < n && st == FSL_OK; i++) {
    fsl_value *o[16];
    st = gen_one(x, &nodes[i], 1, o, node_outs(nodes[i], o), x->n_fn + i, &tmp, &ins[i], &launch[i]);
  }
  if (st == FSL_OK && tmp.oom) st = oom();
  if (st == FSL_OK) fsl_sbuf_puts(&x->src, tmp.p ? tmp.p : "");
  for (int i = 0; i < n && st == FSL_OK; i++) {
    fsl_value *o[16];
    st = gen_step(x, ki, "node", &nodes[i], 1, o, node_outs(nodes[i], o), (fsl_value *const *)ins[i].p, ins[i].n,
                  &launch[i]);
  }
  for (int i = 0; ins && i < n; i++) free(ins[i].p);
  free(ins);
  free(launch);
  fsl_sbuf_free(&tmp);
  return st;
}

/* GEN step; when the dialect cannot take the nodes as one function, one
 * per node; else a HOST fallback. */
static fsl_status add_gen(fsl_gpu_lowering *x, int ki, const char *part, fsl_node *const *nodes, int n,
                          fsl_value *const *outs, int n_out) {
  if (n_out == 0) return FSL_OK;
  fsl_vlist ins = {0};
  fsl_cg_launch launch;
  fsl_status st = gen_one(x, nodes, n, outs, n_out, x->n_fn, &x->src, &ins, &launch);
  if (st == FSL_OK) st = gen_step(x, ki, part, nodes, n, outs, n_out, (fsl_value *const *)ins.p, ins.n, &launch);
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
  st = note_fallback(x, ki, why);
  return st == FSL_OK ? add_host(x, ki, nodes, n, outs, n_out) : st;
}

/* The linear op: a generated matmul or direct convolution over the
 * view-resolved operands with the longest epilogue it can compute before
 * its store (fsl_codegen_linear; *z: the value it writes, *n_abs: the
 * chain nodes it absorbed), a LIB step, else the host (with the in-kernel
 * reshapes between its operands and lin). */
static fsl_status add_linear(fsl_gpu_lowering *x, int ki, const fsl_kernel *k, const fsl_linear_split *sp, int *n_abs,
                             const fsl_value **z) {
  fsl_node *lin = sp->lin;
  fsl_value *const *lin_in = sp->lin_in;
  *n_abs = 0;
  *z = lin->out[0];
  if (x->library && x->library(lin)) {
    fsl_gpu_step *s = new_step(x, FSL_GPU_LIB, ki, lin->op == FSL_OP_matmul ? "matmul" : "conv");
    return fill_step(x, s, lin_in, 2, lin->out, 1, &lin, 1);
  }
  fsl_sbuf tmp = {0};
  fsl_cg_launch launch = {0};
  fsl_vlist nodes = {0}, ins = {0};
  fsl_status st = fsl_codegen_linear(x->dia, x->n_fn, x->p->g, k, sp, n_abs, &nodes, &ins, &tmp, &launch);
  if (st == FSL_OK && tmp.oom) st = oom();
  /* the function's arguments by position (an operand may repeat), the nodes it computes */
  fsl_value **args = st == FSL_OK ? malloc(sizeof *args * (size_t)(2 + ins.n)) : NULL;
  fsl_node **comp = st == FSL_OK ? malloc(sizeof *comp * (size_t)(1 + nodes.n)) : NULL;
  if (st == FSL_OK && (!args || !comp)) st = oom();
  if (st == FSL_OK) {
    args[0] = lin_in[0];
    args[1] = lin_in[1];
    if (ins.n) memcpy(args + 2, ins.p, sizeof *args * (size_t)ins.n);
    comp[0] = lin;
    if (nodes.n) memcpy(comp + 1, nodes.p, sizeof *comp * (size_t)nodes.n);
    fsl_value *out = fsl_linear_split_out(sp, *n_abs);
    *z = out;
    fsl_sbuf_puts(&x->src, tmp.p);
    st = gen_step(x, ki, lin->op == FSL_OP_matmul ? "matmul" : "conv", comp, 1 + nodes.n, &out, 1, args, 2 + ins.n,
                  &launch);
  }
  fsl_sbuf_free(&tmp);
  free(nodes.p);
  free(ins.p);
  free(args);
  free(comp);
  if (st != FSL_ERR_UNSUPPORTED) return st;
  fsl_error_clear();
  char why[160];
  snprintf(why, sizeof why, "no generated %s code for %s over %s", x->dia->name, fsl_op_get(lin->op)->name,
           fsl_dtype_name(lin->in[0]->dtype));
  st = note_fallback(x, ki, why);
  fsl_node *hn[2 * FSL_MAX_RANK + 1];
  int n = fsl_linear_ref_nodes(lin, lin_in, hn);
  return st == FSL_OK ? add_host(x, ki, hn, n, lin->out, 1) : st;
}

static bool was_written(const void *ctx, const fsl_value *v) { return ((const fsl_gpu_lowering *)ctx)->avail[v->id]; }

static fsl_status lower_linear(fsl_gpu_lowering *x, int ki, const fsl_kernel *k) {
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_ERR_UNSUPPORTED) {
    char why[256];
    snprintf(why, sizeof why, "%s", fsl_last_error());
    fsl_error_clear();
    fsl_linear_split_free(&sp);
    st = note_fallback(x, ki, why);
    return st == FSL_OK ? add_host(x, ki, k->nodes, k->n_nodes, k->out, k->n_out) : st;
  }
  /* a generated matmul reads a prologue of views in place (a library one takes plain operands) */
  if (st == FSL_OK && !(x->library && x->library(sp.lin))) fsl_linear_split_views(&sp, x->dia);
  if (st == FSL_OK && sp.gen_prologue)
    st = add_gen(x, ki, "prologue", (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p,
                 sp.pre_out.n);
  int n_abs = 0;
  const fsl_value *z = NULL;
  if (st == FSL_OK) st = add_linear(x, ki, k, &sp, &n_abs, &z);
  fsl_vlist post = {0}, post_out = {0};
  if (st == FSL_OK) st = fsl_linear_split_epilogue(k, &sp, n_abs, z, was_written, x, &post, &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = add_gen(x, ki, "epilogue", (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p, post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

static fsl_status lower_kernel(fsl_gpu_lowering *x, int ki, const fsl_kernel *k) {
  bool opaque, linear;
  fsl_kernel_classes(k, &opaque, &linear);
  fsl_status st;
  if (opaque) {
    x->n_opaque++;
    st = add_host(x, ki, k->nodes, k->n_nodes, k->out, k->n_out);
  } else if (linear) {
    st = lower_linear(x, ki, k);
  } else {
    st = add_gen(x, ki, k->kind == FSL_KERNEL_REDUCE ? "reduce" : "loop", k->nodes, k->n_nodes, k->out, k->n_out);
  }
  if (st == FSL_OK && x->src.oom) st = oom();
  return st;
}

/* Sets up x for plan p: the values available before any step. */
static fsl_status lowering_init(fsl_gpu_lowering *x, const fsl_plan *p, const fsl_dialect *dia,
                                fsl_gpu_library library, int first_fn) {
  memset(x, 0, sizeof *x);
  x->p = p;
  x->dia = dia;
  x->library = library;
  x->first_fn = x->n_fn = first_fn;
  const fsl_graph *g = p->g;
  x->avail = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof(bool));
  x->fallback = calloc((size_t)(p->kernels.n > 0 ? p->kernels.n : 1), sizeof *x->fallback);
  if (!x->avail || !x->fallback) return oom();
  for (int i = 0; i < g->n_values; i++) x->avail[i] = g->values[i]->data != NULL;
  for (int i = 0; i < g->n_inputs; i++) x->avail[g->inputs[i]->id] = true;
  return FSL_OK;
}

fsl_status fsl_gpu_lower_at(const fsl_plan *p, const fsl_dialect *dia, fsl_gpu_library library, int first_fn,
                            fsl_gpu_lowering *out) {
  if (!out) return fsl_errorf(FSL_ERR_ARG, "fsl_gpu_lower: NULL argument");
  memset(out, 0, sizeof *out);
  if (!p || !p->g || !dia) return fsl_errorf(FSL_ERR_ARG, "fsl_gpu_lower: NULL argument");
  if (first_fn < 0) return fsl_errorf(FSL_ERR_ARG, "fsl_gpu_lower: first function %d", first_fn);
  fsl_status st = lowering_init(out, p, dia, library, first_fn);
  if (st == FSL_OK) {
    fsl_codegen_prelude(dia, &out->src);
    out->prelude_len = out->src.len;
    if (out->src.oom) st = oom();
  }
  for (int ki = 0; ki < p->kernels.n && st == FSL_OK; ki++) {
    st = lower_kernel(out, ki, p->kernels.k[ki]);
    if (st != FSL_OK) fsl_error_context(st, "%s backend, kernel %d", dia->name, ki);
  }
  return st;
}

fsl_status fsl_gpu_lower(const fsl_plan *p, const fsl_dialect *dia, fsl_gpu_library library, fsl_gpu_lowering *out) {
  return fsl_gpu_lower_at(p, dia, library, 0, out);
}

void fsl_gpu_lowering_free(fsl_gpu_lowering *l) {
  if (!l) return;
  for (int i = 0; i < l->n_steps; i++) {
    free(l->steps[i].in);
    free(l->steps[i].out);
    free(l->steps[i].nodes);
  }
  free(l->steps);
  fsl_sbuf_free(&l->src);
  free(l->avail);
  for (int i = 0; l->fallback && l->p && i < l->p->kernels.n; i++) free(l->fallback[i]);
  free(l->fallback);
  memset(l, 0, sizeof *l);
}

bool fsl_gpu_supports(const fsl_dialect *dia, fsl_gpu_library library, const fsl_graph *g, const fsl_kernel *k) {
  if (!dia || !g || !k) return false;
  fsl_kernel *ks[1] = {(fsl_kernel *)k};
  fsl_plan p;
  memset(&p, 0, sizeof p);
  p.g = g;
  p.kernels = (fsl_kernel_set){.g = g, .n = 1, .cap = 1, .k = ks};
  fsl_gpu_lowering x;
  bool ok = lowering_init(&x, &p, dia, library, 0) == FSL_OK;
  for (int i = 0; ok && i < k->n_in; i++) x.avail[k->in[i]->id] = true;
  ok = ok && lower_kernel(&x, 0, k) == FSL_OK && x.n_fallback == 0 && x.n_opaque == 0;
  fsl_error_clear();
  fsl_gpu_lowering_free(&x);
  return ok;
}

int64_t fsl_gpu_step_items(const fsl_gpu_step *s) {
  int64_t most = 1;
  bool scalar = true;
  for (int i = 0; i < s->n_out; i++) {
    int64_t ne = fsl_value_numel(s->out[i]);
    if (ne > most) most = ne;
    scalar = scalar && s->out[i]->rank == 0;
  }
  if (scalar) return 1;
  return most < ((int64_t)1 << 20) ? most : ((int64_t)1 << 20);
}

/* ---- dependencies ---- */

static bool overlap(fsl_gpu_range a, fsl_gpu_range b) {
  return a.buffer == b.buffer && a.bytes > 0 && b.bytes > 0 && a.off < b.off + b.bytes && b.off < a.off + a.bytes;
}

/* Whether step a (earlier) and step b of l conflict: one writes bytes the
 * other reads or writes. */
static bool conflict(const fsl_gpu_step *a, const fsl_gpu_step *b, fsl_gpu_where where, void *ctx) {
  for (int i = 0; i < a->n_in + a->n_out; i++) {
    bool aw = i >= a->n_in;
    fsl_gpu_range ra = where(ctx, aw ? a->out[i - a->n_in] : a->in[i]);
    for (int j = 0; j < b->n_in + b->n_out; j++) {
      bool bw = j >= b->n_in;
      if (!aw && !bw) continue;
      if (overlap(ra, where(ctx, bw ? b->out[j - b->n_in] : b->in[j]))) return true;
    }
  }
  return false;
}

void fsl_gpu_deps_free(int **deps, int *n_deps, int n) {
  for (int i = 0; deps && i < n; i++) free(deps[i]);
  free(deps);
  free(n_deps);
}

fsl_status fsl_gpu_step_deps(const fsl_gpu_lowering *l, int lo, int hi, fsl_gpu_where where, void *ctx, int ***deps,
                             int **n_deps) {
  *deps = NULL;
  *n_deps = NULL;
  int n = hi - lo;
  if (n <= 0) return FSL_OK;
  /* direct[i][j]: step lo+j conflicts with earlier step lo+i; reach[i][j]:
   * lo+j is reachable from lo+i through kept edges (j > i) */
  bool *direct = calloc((size_t)n * (size_t)n, sizeof(bool));
  bool *reach = calloc((size_t)n * (size_t)n, sizeof(bool));
  int **d = calloc((size_t)n, sizeof *d);
  int *nd = calloc((size_t)n, sizeof *nd);
  if (!direct || !reach || !d || !nd) {
    free(direct);
    free(reach);
    fsl_gpu_deps_free(d, nd, n);
    return oom();
  }
  for (int j = 0; j < n; j++)
    for (int i = 0; i < j; i++) direct[(size_t)i * n + j] = conflict(&l->steps[lo + i], &l->steps[lo + j], where, ctx);
  /* transitive reduction in topological (step) order: for each j, take the
   * conflicting steps from the latest down; an edge i -> j is needed only
   * when i does not reach j through an edge already kept */
  for (int j = 0; j < n; j++) {
    for (int i = j - 1; i >= 0; i--) {
      if (!direct[(size_t)i * n + j] || reach[(size_t)i * n + j]) continue;
      int *grown = realloc(d[j], sizeof(int) * (size_t)(nd[j] + 1));
      if (!grown) {
        free(direct);
        free(reach);
        fsl_gpu_deps_free(d, nd, n);
        return oom();
      }
      d[j] = grown;
      d[j][nd[j]++] = lo + i;
      /* everything that reaches i (and i) now reaches j */
      reach[(size_t)i * n + j] = true;
      for (int a = 0; a < i; a++)
        if (reach[(size_t)a * n + i]) reach[(size_t)a * n + j] = true;
    }
    /* ascending order */
    for (int a = 0, b = nd[j] - 1; a < b; a++, b--) {
      int t = d[j][a];
      d[j][a] = d[j][b];
      d[j][b] = t;
    }
  }
  free(direct);
  free(reach);
  *deps = d;
  *n_deps = nd;
  return FSL_OK;
}

/* ---- host steps and errors ---- */

fsl_status fsl_gpu_run_host(const fsl_graph *g, const fsl_gpu_step *s, fsl_gpu_copy to_host, fsl_gpu_copy to_device,
                            void *ctx, const char *backend) {
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
      if (!hb[v->id]) {
        if (v->data) {
          hb[v->id] = (void *)v->data;
        } else {
          int64_t nb = fsl_value_nbytes(v);
          if (!(hb[v->id] = malloc((size_t)(nb > 0 ? nb : 1)))) st = oom();
          ho[v->id] = true;
          if (st == FSL_OK && nb > 0) st = to_host(ctx, v, hb[v->id], nb);
        }
      }
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
    if (nb > 0) st = to_device(ctx, v, hb[v->id], nb);
  }
  for (int i = 0; hb && ho && i < g->n_values; i++)
    if (ho[i]) free(hb[i]);
  free(hb);
  free(ho);
  if (st != FSL_OK) fsl_error_context(st, "%s backend, kernel %d (on the host)", backend, s->kernel);
  return st;
}

fsl_status fsl_gpu_step_error(const fsl_plan *p, const fsl_gpu_step *s, int bits, const char *backend) {
  if (!bits) return FSL_OK;
  char label[160];
  fsl_gpu_kernel_label(p, s->kernel, label, sizeof label);
  const char *what = (bits & FSL_KERR_INDEX)     ? "gather index out of range"
                     : (bits & FSL_KERR_DIVZERO) ? "integer division by zero"
                                                 : "out of memory";
  return fsl_errorf(FSL_ERR_RUNTIME, "%s backend, %s: %s", backend, label, what);
}
