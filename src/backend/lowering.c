/*
 * lowering.c — kernel -> steps for every backend that runs generated code
 * (lowering.h).
 */
#include "backend/lowering.h"

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (lowering kernels into steps)"); }

static const fsl_lowering_hooks no_hooks = {0};

fsl_status fsl_lowering_init(fsl_lowering *L, const fsl_graph *g, const fsl_dialect *dia,
                             const fsl_lowering_hooks *hooks, const void *ctx, int first_fn) {
  memset(L, 0, sizeof *L);
  if (!g || !dia) return fsl_errorf(FSL_ERR_ARG, "fsl_lowering_init: NULL argument");
  if (first_fn < 0) return fsl_errorf(FSL_ERR_ARG, "fsl_lowering_init: first function %d", first_fn);
  L->g = g;
  L->dia = dia;
  L->hooks = hooks ? hooks : &no_hooks;
  L->ctx = ctx;
  L->next_fn = first_fn;
  L->avail = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof(bool));
  if (!L->avail) return oom();
  fsl_lowering_avail_only(L, g->inputs, g->n_inputs);
  fsl_codegen_prelude(dia, &L->src);
  L->prelude_len = L->src.len;
  return L->src.oom ? oom() : FSL_OK;
}

void fsl_lowering_avail_only(fsl_lowering *L, fsl_value *const *vals, int n) {
  for (int i = 0; i < L->g->n_values; i++) L->avail[i] = L->g->values[i]->data != NULL;
  for (int i = 0; i < n; i++)
    if (vals[i]) L->avail[vals[i]->id] = true;
}

void fsl_lowering_free(fsl_lowering *L) {
  if (!L) return;
  for (int i = 0; i < L->n_steps; i++) {
    fsl_step *s = &L->steps[i];
    free(s->in);
    free(s->out);
    free(s->nodes);
    free(s->code);
    free(s->in_layout);
    free(s->out_layout);
    if (s->lib && L->hooks && L->hooks->lib_free) L->hooks->lib_free(s->lib);
  }
  free(L->steps);
  free(L->avail);
  fsl_sbuf_free(&L->src);
  for (int i = 0; L->fallback && i < L->cap_fallback; i++) free(L->fallback[i]);
  free(L->fallback);
  memset(L, 0, sizeof *L);
}

fsl_step *fsl_lowering_add(fsl_lowering *L, fsl_step_kind kind, int ki, const char *part, fsl_value *const *ins,
                           int n_in, fsl_value *const *outs, int n_out, fsl_node *const *nodes, int n) {
  if (!fsl_grow((void **)&L->steps, &L->cap_steps, L->n_steps + 1, sizeof *L->steps)) return NULL;
  fsl_step *s = &L->steps[L->n_steps];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->kernel = ki;
  s->fn_id = -1;
  s->part = part;
  if (!fsl_ptrs_dup((void ***)&s->in, &s->n_in, (void *const *)ins, n_in) ||
      !fsl_ptrs_dup((void ***)&s->out, &s->n_out, (void *const *)outs, n_out) ||
      !fsl_ptrs_dup((void ***)&s->nodes, &s->n_nodes, (void *const *)nodes, n)) {
    free(s->in);
    free(s->out);
    free(s->nodes);
    return NULL;
  }
  L->n_steps++;
  for (int i = 0; i < n_out; i++)
    if (outs[i]) L->avail[outs[i]->id] = true;
  return s;
}

/* Notes kernel k's (labelled ki) fallback to the host for reason `why`:
 * its first one is kept (fallback[ki], and the first of all in `why`). */
static fsl_status note_fallback(fsl_lowering *L, int ki, const fsl_kernel *k, const char *why) {
  if (ki >= L->cap_fallback) {
    int old = L->cap_fallback;
    if (!fsl_grow((void **)&L->fallback, &L->cap_fallback, ki + 1, sizeof *L->fallback)) return oom();
    memset(L->fallback + old, 0, sizeof *L->fallback * (size_t)(L->cap_fallback - old));
  }
  if (L->fallback[ki]) return FSL_OK;
  L->n_fallback++;
  const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
  char line[sizeof L->why + 256];
  snprintf(line, sizeof line, "kernel %d (%s '%s'): %s", ki, n0 && n0->origin_op ? n0->origin_op : "?",
           n0 && n0->origin_name ? n0->origin_name : "?", why);
  if (!L->why[0]) { /* truncated */
    size_t n = strnlen(line, sizeof L->why - 1);
    memcpy(L->why, line, n);
    L->why[n] = '\0';
  }
  L->fallback[ki] = strdup(line);
  return L->fallback[ki] ? FSL_OK : oom();
}

const char *fsl_lowering_fallback(const fsl_lowering *L, int ki) {
  return L && ki >= 0 && ki < L->cap_fallback ? L->fallback[ki] : NULL;
}

void fsl_lowering_exe_info(const fsl_lowering *L, int n_kernels, fsl_backend_exe_info *out) {
  out->n_kernels = n_kernels;
  out->n_fallback = L->n_fallback;
  out->n_opaque = L->n_opaque;
  out->n_native = n_kernels - L->n_fallback - L->n_opaque;
  out->n_library = L->n_lib;
  out->n_library_int8 = L->n_lib_int8;
  out->n_library_requant = L->n_lib_requant;
  snprintf(out->fallback_why, sizeof out->fallback_why, "%s", L->why);
}

/* HOST step over nodes (topological order), keeping outs; why (NULL for
 * an opaque kernel): the reason the backend could not make code for them. */
static fsl_status add_host(fsl_lowering *L, int ki, const fsl_kernel *k, fsl_node *const *nodes, int n,
                           fsl_value *const *outs, int n_out, const char *why) {
  if (why) FSL_TRY(note_fallback(L, ki, k, why));
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_step *s = fsl_lowering_add(L, FSL_STEP_HOST, ki, "host", (fsl_value *const *)ins.p, ins.n, outs, n_out, nodes, n);
  free(ins.p);
  return s ? FSL_OK : oom();
}

/* The GEN step of function fsl_k<next_fn>, taking over *code. */
static fsl_status gen_step(fsl_lowering *L, int ki, const char *part, fsl_node *const *nodes, int n,
                           fsl_value *const *outs, int n_out, fsl_value *const *ins, int n_in, fsl_sbuf *code,
                           const fsl_cg_launch *launch) {
  fsl_step *s = fsl_lowering_add(L, FSL_STEP_GEN, ki, part, ins, n_in, outs, n_out, nodes, n);
  if (!s) return oom();
  s->fn_id = L->next_fn++;
  s->code = code->p;
  code->p = NULL;
  if (launch) s->launch = *launch;
  L->n_generated++;
  return FSL_OK;
}

/* Generates the nodes as function fsl_k<id> into *code; *ins receives the
 * values they read (the caller frees ins->p), *launch how to launch it. */
static fsl_status gen_one(fsl_lowering *L, fsl_node *const *nodes, int n, fsl_value *const *outs, int n_out, int id,
                          fsl_sbuf *code, fsl_vlist *ins, fsl_cg_launch *launch) {
  if (!fsl_vl_add_inputs(ins, nodes, n)) return oom();
  fsl_cg_spec spec = {.g = L->g, .id = id, .n_nodes = n, .nodes = nodes, .n_in = ins->n,
                      .in = (fsl_value *const *)ins->p, .n_out = n_out, .out = outs};
  fsl_status st = fsl_codegen_kernel(L->dia, &spec, code, launch);
  return st == FSL_OK && code->oom ? oom() : st;
}

/* The non-NULL outputs of node n into o[16]; their number. */
static int node_outs(const fsl_node *n, fsl_value **o) {
  int no = 0;
  for (int k = 0; k < n->n_out && no < 16; k++)
    if (n->out[k]) o[no++] = n->out[k];
  return no;
}

/* A kernel the dialect cannot take in one piece, as one function per node,
 * launched in order; values between them get buffers of their own.
 * FSL_ERR_UNSUPPORTED (nothing added) when a node cannot be generated
 * either. */
static fsl_status add_gen_split(fsl_lowering *L, int ki, fsl_node *const *nodes, int n) {
  fsl_sbuf *code = calloc((size_t)n, sizeof *code);
  fsl_vlist *ins = calloc((size_t)n, sizeof *ins);
  fsl_cg_launch *launch = calloc((size_t)n, sizeof *launch);
  fsl_status st = code && ins && launch ? FSL_OK : oom();
  for (int i = 0; i < n && st == FSL_OK; i++) {
    fsl_value *o[16];
    st = gen_one(L, &nodes[i], 1, o, node_outs(nodes[i], o), L->next_fn + i, &code[i], &ins[i], &launch[i]);
  }
  for (int i = 0; i < n && st == FSL_OK; i++) {
    fsl_value *o[16];
    st = gen_step(L, ki, "node", &nodes[i], 1, o, node_outs(nodes[i], o), (fsl_value *const *)ins[i].p, ins[i].n,
                  &code[i], &launch[i]);
  }
  for (int i = 0; code && ins && i < n; i++) {
    fsl_sbuf_free(&code[i]);
    free(ins[i].p);
  }
  free(code);
  free(ins);
  free(launch);
  return st;
}

/* GEN step; when the dialect cannot take the nodes as one function, one
 * per node (hooks->split_by_node); else a HOST fallback. */
static fsl_status add_gen(fsl_lowering *L, int ki, const fsl_kernel *k, const char *part, fsl_node *const *nodes,
                          int n, fsl_value *const *outs, int n_out) {
  if (n_out == 0) return FSL_OK;
  fsl_vlist ins = {0};
  fsl_sbuf code = {0};
  fsl_cg_launch launch = {0};
  fsl_status st = gen_one(L, nodes, n, outs, n_out, L->next_fn, &code, &ins, &launch);
  if (st == FSL_OK) st = gen_step(L, ki, part, nodes, n, outs, n_out, (fsl_value *const *)ins.p, ins.n, &code, &launch);
  free(ins.p);
  fsl_sbuf_free(&code);
  if (st != FSL_ERR_UNSUPPORTED) return st;
  char why[256];
  snprintf(why, sizeof why, "%s", fsl_last_error());
  fsl_error_clear();
  if (n > 1 && L->hooks->split_by_node) {
    st = add_gen_split(L, ki, nodes, n);
    if (st != FSL_ERR_UNSUPPORTED) return st;
    fsl_error_clear();
  }
  return add_host(L, ki, k, nodes, n, outs, n_out, why);
}

/* The linear op: the library's (hooks->library), else a generated matmul
 * or convolution over the view-resolved operands with the longest epilogue
 * it can compute before its store (fsl_codegen_linear), else the host
 * (with the in-kernel reshapes between its operands and lin).  *z: the
 * value it writes; *n_abs: the chain nodes it absorbed. */
static fsl_status add_linear(fsl_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp,
                             fsl_value **z, int *n_abs) {
  fsl_node *lin = sp->lin;
  fsl_value *const *lin_in = sp->lin_in;
  const fsl_lowering_hooks *h = L->hooks;
  *n_abs = 0;
  *z = lin->out[0];
  if (h->library) {
    fsl_status st = h->library(L, ki, k, sp, z, n_abs);
    if (st != FSL_ERR_UNSUPPORTED) return st;
    fsl_error_clear();
    *n_abs = 0;
    *z = lin->out[0];
  }
  const char *part = lin->op == FSL_OP_matmul ? "matmul" : "conv";
  if (!h->generates_linear || h->generates_linear(L->dia, lin)) {
    fsl_sbuf code = {0};
    fsl_cg_launch launch = {0};
    fsl_vlist nodes = {0}, ins = {0};
    int na = 0;
    fsl_status st = fsl_codegen_linear(L->dia, L->next_fn, L->g, k, sp, &na, &nodes, &ins, &code, &launch);
    if (st == FSL_OK && code.oom) st = oom();
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
      fsl_value *out = fsl_linear_split_out(sp, na);
      st = gen_step(L, ki, part, comp, 1 + nodes.n, &out, 1, args, 2 + ins.n, &code, &launch);
      if (st == FSL_OK) {
        *z = out;
        *n_abs = na;
      }
    }
    fsl_sbuf_free(&code);
    free(nodes.p);
    free(ins.p);
    free(args);
    free(comp);
    if (st != FSL_ERR_UNSUPPORTED) return st;
    fsl_error_clear();
  }
  char why[192];
  if (h->library_name)
    snprintf(why, sizeof why, "no %s primitive or generated code for %s over %s", h->library_name,
             fsl_op_get(lin->op)->name, fsl_dtype_name(lin->in[0]->dtype));
  else
    snprintf(why, sizeof why, "no generated %s code for %s over %s", L->dia->name, fsl_op_get(lin->op)->name,
             fsl_dtype_name(lin->in[0]->dtype));
  fsl_node *hn[2 * FSL_MAX_RANK + 1];
  int n = fsl_linear_ref_nodes(lin, lin_in, hn);
  return add_host(L, ki, k, hn, n, lin->out, 1, why);
}

static bool was_written(const void *ctx, const fsl_value *v) { return ((const fsl_lowering *)ctx)->avail[v->id]; }

/* Prologue, linear op, epilogue (linsplit.h). */
static fsl_status lower_linear(fsl_lowering *L, int ki, const fsl_kernel *k) {
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_ERR_UNSUPPORTED) {
    char why[256];
    snprintf(why, sizeof why, "%s", fsl_last_error());
    fsl_error_clear();
    fsl_linear_split_free(&sp);
    return add_host(L, ki, k, k->nodes, k->n_nodes, k->out, k->n_out, why);
  }
  /* a generated linear op reads a prologue of views in place (a library one takes plain operands) */
  if (st == FSL_OK && L->hooks->views && !(L->hooks->library_takes && L->hooks->library_takes(L, sp.lin)))
    fsl_linear_split_views(&sp, L->dia);
  fsl_value *z = NULL;
  int n_abs = 0;
  bool through = false; /* the library reads the prologue's sources (hooks->library_through) */
  if (st == FSL_OK && sp.gen_prologue && L->hooks->library_through) {
    st = L->hooks->library_through(L, ki, k, &sp, &z, &n_abs);
    through = st == FSL_OK;
    if (st == FSL_ERR_UNSUPPORTED) {
      fsl_error_clear();
      st = FSL_OK;
    }
  }
  if (st == FSL_OK && sp.gen_prologue && !through)
    st = add_gen(L, ki, k, "prologue", (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p,
                 sp.pre_out.n);
  if (st == FSL_OK && !through) st = add_linear(L, ki, k, &sp, &z, &n_abs);
  fsl_vlist post = {0}, post_out = {0};
  if (st == FSL_OK) st = fsl_linear_split_epilogue(k, &sp, n_abs, z, was_written, L, &post, &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = add_gen(L, ki, k, "epilogue", (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p, post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

fsl_status fsl_lower_kernel(fsl_lowering *L, int ki, const fsl_kernel *k) {
  bool opaque, linear;
  fsl_kernel_classes(k, &opaque, &linear);
  if (opaque) {
    L->n_opaque++;
    return add_host(L, ki, k, k->nodes, k->n_nodes, k->out, k->n_out, NULL);
  }
  if (linear) return lower_linear(L, ki, k);
  return add_gen(L, ki, k, k->kind == FSL_KERNEL_REDUCE ? "reduce" : "loop", k->nodes, k->n_nodes, k->out, k->n_out);
}

fsl_status fsl_lower_plan(fsl_lowering *L, const fsl_plan *p) {
  for (int ki = 0; ki < p->kernels.n; ki++) {
    fsl_status st = fsl_lower_kernel(L, ki, p->kernels.k[ki]);
    if (st != FSL_OK) return fsl_error_context(st, "%s backend, kernel %d", L->dia->name, ki);
  }
  return fsl_lowering_source(L);
}

fsl_status fsl_lowering_source(fsl_lowering *L) {
  for (int i = 0; i < L->n_steps; i++)
    if (L->steps[i].kind == FSL_STEP_GEN && L->steps[i].code) fsl_sbuf_puts(&L->src, L->steps[i].code);
  return L->src.oom ? oom() : FSL_OK;
}

bool fsl_lowering_supports(const fsl_graph *g, const fsl_dialect *dia, const fsl_lowering_hooks *hooks,
                           const void *ctx, const fsl_kernel *k) {
  if (!g || !dia || !k) return false;
  fsl_lowering L;
  bool ok = fsl_lowering_init(&L, g, dia, hooks, ctx, 0) == FSL_OK;
  if (ok) fsl_lowering_avail_only(&L, k->in, k->n_in);
  ok = ok && fsl_lower_kernel(&L, 0, k) == FSL_OK && L.n_fallback == 0 && L.n_opaque == 0;
  fsl_error_clear();
  fsl_lowering_free(&L);
  return ok;
}
