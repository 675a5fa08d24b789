/*
 * lower.c — the CPU backend's lowering of kernels into steps (lower.h).
 */
#include "backend/cpu/lower.h"

#include "backend/cpu/dialect_c.h"
#include "codegen/linsplit.h"

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory"); }

fsl_status fsl_cpu_lowering_init(fsl_cpu_lowering *L, const fsl_graph *g) {
  memset(L, 0, sizeof *L);
  L->g = g;
  L->avail = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof(bool));
  if (!L->avail) return oom();
  for (int i = 0; i < g->n_values; i++) L->avail[i] = g->values[i]->data != NULL;
  for (int i = 0; i < g->n_inputs; i++) L->avail[g->inputs[i]->id] = true;
  fsl_codegen_prelude(&fsl_dialect_c, &L->src);
  return L->src.oom ? oom() : FSL_OK;
}

void fsl_cpu_lowering_avail_only(fsl_cpu_lowering *L, fsl_value *const *vals, int n) {
  for (int i = 0; i < L->g->n_values; i++) L->avail[i] = L->g->values[i]->data != NULL;
  for (int i = 0; i < n; i++)
    if (vals[i]) L->avail[vals[i]->id] = true;
}

void fsl_cpu_lowering_free(fsl_cpu_lowering *L) {
  if (!L) return;
  for (int i = 0; i < L->n_steps; i++) {
    fsl_cpu_step *s = &L->steps[i];
    free(s->in);
    free(s->out);
    free(s->nodes);
    free(s->code);
    free(s->in_layout);
    free(s->out_layout);
    if (s->dnn) fsl_onednn_linear_free(s->dnn);
  }
  free(L->steps);
  free(L->avail);
  fsl_sbuf_free(&L->src);
  memset(L, 0, sizeof *L);
}

static fsl_cpu_step *new_step(fsl_cpu_lowering *L, fsl_cpu_step_kind kind, int kernel) {
  if (!fsl_grow((void **)&L->steps, &L->cap_steps, L->n_steps + 1, sizeof *L->steps)) return NULL;
  fsl_cpu_step *s = &L->steps[L->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->kernel = kernel;
  s->fn_id = -1;
  return s;
}

static bool copy_values(fsl_value ***dst, int *n, fsl_value *const *vals, int count) {
  return fsl_ptrs_dup((void ***)dst, n, (void *const *)vals, count);
}

static void mark(fsl_cpu_lowering *L, fsl_value *const *vals, int n) {
  for (int i = 0; i < n; i++)
    if (vals[i]) L->avail[vals[i]->id] = true;
}

/* Copies the new step s's inputs, outputs and nodes (n of them; none when
 * nodes is NULL) and marks its outputs written; s NULL: out of memory. */
static fsl_status fill_step(fsl_cpu_lowering *L, fsl_cpu_step *s, fsl_value *const *ins, int n_in,
                            fsl_value *const *outs, int n_out, fsl_node *const *nodes, int n) {
  if (!s || !copy_values(&s->in, &s->n_in, ins, n_in) || !copy_values(&s->out, &s->n_out, outs, n_out) ||
      (nodes && !fsl_ptrs_dup((void ***)&s->nodes, &s->n_nodes, (void *const *)nodes, n)))
    return oom();
  mark(L, outs, n_out);
  return FSL_OK;
}

/* Records that kernel k (labelled ki) falls back in part, and why. */
static void note_fallback(fsl_cpu_lowering *L, int ki, const fsl_kernel *k, const char *why) {
  L->n_fallback++;
  if (L->fallback_why[0]) return;
  const fsl_node *n0 = k->n_nodes ? k->nodes[0] : NULL;
  snprintf(L->fallback_why, sizeof L->fallback_why, "kernel %d (%s '%s'): %s", ki,
           n0 && n0->origin_op ? n0->origin_op : "?", n0 && n0->origin_name ? n0->origin_name : "?", why);
}

/* REF step over nodes, keeping outs. */
static fsl_status add_ref(fsl_cpu_lowering *L, int ki, fsl_node *const *nodes, int n, fsl_value *const *outs,
                          int n_out, bool fallback) {
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_cpu_step *s = new_step(L, FSL_CPU_STEP_REF, ki);
  fsl_status st = fill_step(L, s, (fsl_value *const *)ins.p, ins.n, outs, n_out, nodes, n);
  if (st == FSL_OK) s->fallback = fallback;
  free(ins.p);
  return st;
}

/* GEN step (its function appended to src) or, when the code generator
 * cannot, a REF step. */
static fsl_status add_gen(fsl_cpu_lowering *L, int ki, const fsl_kernel *k, fsl_node *const *nodes, int n,
                          fsl_value *const *outs, int n_out) {
  if (n_out == 0) return FSL_OK;
  fsl_vlist ins = {0};
  if (!fsl_vl_add_inputs(&ins, nodes, n)) return oom();
  fsl_cg_spec spec = {.g = L->g, .id = L->next_fn, .n_nodes = n, .nodes = nodes, .n_in = ins.n,
                      .in = (fsl_value *const *)ins.p, .n_out = n_out, .out = outs};
  fsl_sbuf code = {0};
  fsl_status st = fsl_codegen_kernel(&fsl_dialect_c, &spec, &code, NULL);
  if (st == FSL_OK && code.oom) st = oom();
  if (st == FSL_ERR_UNSUPPORTED) {
    note_fallback(L, ki, k, fsl_last_error());
    fsl_error_clear();
    free(ins.p);
    fsl_sbuf_free(&code);
    return add_ref(L, ki, nodes, n, outs, n_out, true);
  }
  if (st == FSL_OK) {
    fsl_cpu_step *s = new_step(L, FSL_CPU_STEP_GEN, ki);
    st = fill_step(L, s, (fsl_value *const *)ins.p, ins.n, outs, n_out, nodes, n);
    if (st == FSL_OK) {
      s->fn_id = L->next_fn++;
      s->code = code.p;
      code.p = NULL;
      L->n_generated++;
    }
  }
  fsl_sbuf_free(&code);
  free(ins.p);
  return st;
}

static bool is_avail(const void *ctx, const fsl_value *v) { return ((const fsl_cpu_lowering *)ctx)->avail[v->id]; }

/* Whether linear op `op` keeps the residual v of its absorbed node `node`
 * (fsl_onednn_linear_create_avail): not when v comes from a oneDNN step
 * that writes a layout generated code reads (nhwc) other than the one op
 * wants (YOLOX's bottlenecks: the shortcut from a channels-last 1x1
 * convolution, also read by the next 1x1 one, into a blocked 3x3 one;
 * ResNet's downsample into a Winograd convolution with AVX-512).  There
 * the generated epilogue reads v where it lies; reordering it for op
 * would make its producer reorder it to row-major first. */
static bool keep_residual(const void *ctx, const fsl_onednn_linear *op, int node, const fsl_value *v) {
  const fsl_cpu_lowering *L = ctx;
  fsl_cg_layout lay;
  for (int i = L->n_steps - 1; i >= 0; i--) {
    const fsl_cpu_step *p = &L->steps[i];
    if (p->n_out != 1 || p->out[0] != v) continue;
    return p->kind != FSL_CPU_STEP_ONEDNN || !fsl_onednn_linear_dst_layout(p->dnn, v, &lay) ||
           fsl_onednn_linear_post_chainable(p->dnn, op, node, (size_t)fsl_value_nbytes(v));
  }
  return true;
}

/* The inputs of a generated linear step (fsl_codegen_linear): its
 * operands lin_in, then the epilogue's inputs ins; malloc'd, NULL on OOM. */
static fsl_value **linear_inputs(fsl_value *const *lin_in, const fsl_vlist *ins) {
  fsl_value **v = malloc(sizeof *v * (size_t)(2 + ins->n));
  if (!v) return NULL;
  v[0] = lin_in[0];
  v[1] = lin_in[1];
  for (int i = 0; i < ins->n; i++) v[2 + i] = ins->p[i];
  return v;
}

/* The linear op itself: oneDNN with the longest usable epilogue chain, else
 * a generated matmul or convolution (depthwise, or pointwise at one
 * position) with the longest epilogue the generator takes, else the
 * reference interpreter.  *z receives the
 * value it writes, *n_abs the absorbed chain length.  FSL_NO_ONEDNN (set)
 * keeps oneDNN out (docs/cli.md). */
static fsl_status add_linear(fsl_cpu_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp,
                             fsl_value **z, int *n_abs) {
  fsl_node *lin = sp->lin, *const *chain = sp->chain;
  fsl_value *const *lin_in = sp->lin_in;
  int n_chain = sp->n_chain;
  *z = lin->out[0];
  *n_abs = 0;
  fsl_onednn_linear *op = NULL;
  int na = 0;
  fsl_status st = FSL_ERR_UNSUPPORTED;
  if (lin->in[0]->dtype == FSL_DT_F32 && getenv("FSL_NO_ONEDNN") == NULL)
    st = fsl_onednn_linear_create_avail(lin, chain, n_chain, 0, is_avail, keep_residual, L, &op, &na);
  if (st == FSL_OK) {
    fsl_cpu_step *s = new_step(L, FSL_CPU_STEP_ONEDNN, ki);
    if (!s) {
      fsl_onednn_linear_free(op);
      return oom();
    }
    s->dnn = op;
    s->in = malloc(sizeof(fsl_value *) * (size_t)(2 + na));
    s->out = malloc(sizeof(fsl_value *));
    s->nodes = malloc(sizeof(fsl_node *) * (size_t)(1 + na));
    if (!s->in || !s->out || !s->nodes) return oom();
    s->nodes[0] = lin;
    for (int i = 0; i < na; i++) s->nodes[1 + i] = chain[i];
    s->n_nodes = 1 + na;
    s->n_in = 2 + na;
    s->in[0] = lin_in[0];
    s->in[1] = lin_in[1];
    for (int i = 0; i < na; i++) s->in[2 + i] = (fsl_value *)fsl_onednn_linear_post_value(op, i);
    *z = na > 0 ? chain[na - 1]->out[0] : lin->out[0];
    *n_abs = na;
    s->n_out = 1;
    s->out[0] = *z;
    L->avail[(*z)->id] = true;
    L->n_onednn++;
    return FSL_OK;
  }
  if (st != FSL_ERR_UNSUPPORTED && st != FSL_ERR_SHAPE && st != FSL_ERR_RUNTIME) return st;
  fsl_error_clear();
  /* a generated matmul or convolution over the (view-resolved) operands,
   * with the epilogue the generator takes; the step keeps no node list (its
   * layouts are not chained: fsl_cpu_chain_layouts regenerates loop kernels) */
  if (lin->op == FSL_OP_matmul || fsl_codegen_conv_rows(&fsl_dialect_c, lin) || fsl_codegen_conv_dot(&fsl_dialect_c, lin)) {
    fsl_vlist nodes = {0}, ins = {0};
    fsl_sbuf code = {0};
    int na_gen = 0;
    fsl_status gs = fsl_codegen_linear(&fsl_dialect_c, L->next_fn, L->g, k, sp, &na_gen, &nodes, &ins, &code, NULL);
    fsl_value **gin = gs == FSL_OK && !code.oom ? linear_inputs(sp->lin_in, &ins) : NULL;
    free(nodes.p);
    if (gin) {
      *z = fsl_linear_split_out(sp, na_gen);
      fsl_cpu_step *s = new_step(L, FSL_CPU_STEP_GEN, ki);
      fsl_status fs = fill_step(L, s, gin, 2 + ins.n, z, 1, NULL, 0);
      free(gin);
      free(ins.p);
      if (fs != FSL_OK) {
        fsl_sbuf_free(&code);
        return fs;
      }
      *n_abs = na_gen;
      s->code = code.p;
      s->fn_id = L->next_fn++;
      L->n_generated++;
      return FSL_OK;
    }
    free(ins.p);
    fsl_sbuf_free(&code);
    if (gs == FSL_ERR_NOMEM || (gs == FSL_OK && !gin)) return oom();
    fsl_error_clear();
  }
  char why[160];
  snprintf(why, sizeof why, "no oneDNN primitive or generated code for %s over %s", fsl_op_get(lin->op)->name,
           fsl_dtype_name(lin->in[0]->dtype));
  note_fallback(L, ki, k, why);
  /* the reference runs the in-kernel reshapes between lin_in and lin too */
  fsl_node *nodes[2 * FSL_MAX_RANK + 1];
  int n = fsl_linear_ref_nodes(lin, lin_in, nodes);
  return add_ref(L, ki, nodes, n, lin->out, 1, true);
}

static bool was_written(const void *ctx, const fsl_value *v) { return ((const fsl_cpu_lowering *)ctx)->avail[v->id]; }

/* Prologue, linear op, epilogue (linsplit.h). */
static fsl_status lower_linear(fsl_cpu_lowering *L, int ki, const fsl_kernel *k) {
  fsl_linear_split sp;
  fsl_status st = fsl_linear_split_make(k, &sp);
  if (st == FSL_ERR_UNSUPPORTED) {
    note_fallback(L, ki, k, fsl_last_error());
    fsl_error_clear();
    fsl_linear_split_free(&sp);
    return add_ref(L, ki, k->nodes, k->n_nodes, k->out, k->n_out, true);
  }
  if (st == FSL_OK && sp.gen_prologue)
    st = add_gen(L, ki, k, (fsl_node *const *)sp.anc.p, sp.anc.n, (fsl_value *const *)sp.pre_out.p, sp.pre_out.n);
  fsl_value *z = NULL;
  int n_abs = 0;
  if (st == FSL_OK) st = add_linear(L, ki, k, &sp, &z, &n_abs);
  /* epilogue: the rest, reading z */
  fsl_vlist post = {0}, post_out = {0};
  if (st == FSL_OK) st = fsl_linear_split_epilogue(k, &sp, n_abs, z, was_written, L, &post, &post_out);
  if (st == FSL_OK && post_out.n > 0)
    st = add_gen(L, ki, k, (fsl_node *const *)post.p, post.n, (fsl_value *const *)post_out.p, post_out.n);
  fsl_linear_split_free(&sp);
  free(post.p);
  free(post_out.p);
  return st;
}

fsl_status fsl_cpu_lower_kernel(fsl_cpu_lowering *L, int ki, const fsl_kernel *k) {
  bool opaque, linear;
  fsl_kernel_classes(k, &opaque, &linear);
  fsl_status st;
  if (opaque) {
    L->n_opaque++;
    st = add_ref(L, ki, k->nodes, k->n_nodes, k->out, k->n_out, false);
  } else if (linear) {
    st = lower_linear(L, ki, k);
  } else {
    st = add_gen(L, ki, k, k->nodes, k->n_nodes, k->out, k->n_out);
  }
  return st;
}

fsl_status fsl_cpu_lowering_source(fsl_cpu_lowering *L) {
  for (int i = 0; i < L->n_steps; i++)
    if (L->steps[i].kind == FSL_CPU_STEP_GEN && L->steps[i].code) fsl_sbuf_puts(&L->src, L->steps[i].code);
  return L->src.oom ? oom() : FSL_OK;
}

/* How step c reads value v, written by oneDNN step p in a buffer of
 * `capacity` bytes: */
typedef enum {
  READ_NONE,    /* not at all */
  READ_ONEDNN,  /* as the source of a oneDNN step in p's layout (fsl_onednn_linear_chainable) */
  READ_GEN,     /* as an input of generated code, which can read any dense permutation */
  READ_POST,    /* as a oneDNN step's full-size post-op operand in p's layout (fsl_onednn_linear_post_chainable) */
  READ_OTHER,   /* otherwise (or c writes v): v must stay row-major */
} chain_read;

/* Whether concat node n of GEN step s writes s's only output, stored in
 * layout lay when o names it (else in s's out_layout), whose innermost
 * memory axis is the concat's: the nest then runs one SIMD loop per concat
 * input inside each row (loops.c), with no branch per element (a channel
 * concat of YOLOX's CSP blocks written NHWC). */
static bool concat_innermost(const fsl_cpu_step *s, const fsl_node *n, int o, const fsl_cg_layout *lay) {
  if (s->n_out != 1 || n->out[0] != s->out[0]) return false;
  if (o != 0 || !lay) lay = s->out_layout ? &s->out_layout[0] : NULL;
  int r = n->out[0]->rank;
  return lay && lay->rank == r && r > 0 && lay->order[r - 1] == (int)fsl_attr_int(n, "axis", 0);
}

/* Whether generated step s does elementwise work over broadcast views
 * only (`reduce` true: reductions too): a nest along another layout keeps it
 * vectorized; a slice is an affine index too (YOLOX's Focus stem: four
 * strided slices concatenated along channels).  A gather kernel
 * (segformer_b0's Resize + Concat head) reads or writes channels-innermost
 * with strided loads and branches per element: 3.7 -> 7.0 ms there.  A
 * reader's pooling windows (pad, window) qualify: the code generator reads
 * them as columns along the layout's innermost axis, the taps contiguous
 * and clamped (fsl_cg_layout_window_axis), or refuses the layout.  A
 * concat qualifies where it is the output and lies along the innermost
 * axis of the output's layout (concat_innermost: lay, for output o, the
 * layout considered; NULL: s's out_layout), and anywhere in a step that
 * reads a layout (o < 0) and writes row-major: its nest tiles the
 * transposed read (efficientvit_b1's attention splits q, k and v out of
 * the channel concat of two nhwc convolutions, so those chain). */
static bool layout_friendly(const fsl_cpu_step *s, bool reduce, int o, const fsl_cg_layout *lay) {
  for (int k = 0; k < s->n_nodes; k++) {
    const fsl_node *n = s->nodes[k];
    fsl_kind kind = fsl_op_get(n->op)->kind;
    if (n->op == FSL_OP_concat && (concat_innermost(s, n, o, lay) || (o < 0 && !s->out_layout))) continue;
    bool win = o < 0 && reduce && (n->op == FSL_OP_window || n->op == FSL_OP_pad);
    if (kind != FSL_KIND_ELEMENTWISE && !(reduce && kind == FSL_KIND_REDUCE) && n->op != FSL_OP_reshape &&
        n->op != FSL_OP_expand && n->op != FSL_OP_slice && !win)
      return false;
  }
  return s->n_nodes > 0;
}

static chain_read chain_reader(const fsl_cpu_step *p, const fsl_cpu_step *c, const fsl_value *v, size_t capacity) {
  chain_read r = READ_NONE;
  for (int k = 0; k < c->n_out; k++)
    if (c->out[k] == v) return READ_OTHER;
  for (int k = 0; k < c->n_in; k++) {
    if (c->in[k] != v) continue;
    if (c < p) return READ_OTHER;
    if (c->kind == FSL_CPU_STEP_ONEDNN && k == 0 && fsl_onednn_linear_chainable(p->dnn, c->dnn, capacity))
      r = READ_ONEDNN;
    else if (c->kind == FSL_CPU_STEP_ONEDNN && k >= 2 && fsl_onednn_linear_post_chainable(p->dnn, c->dnn, k - 2, capacity))
      r = READ_POST;
    else if (c->kind == FSL_CPU_STEP_GEN && layout_friendly(c, true, -1, NULL) && r == READ_NONE)
      r = READ_GEN;
    else
      return READ_OTHER;
  }
  return r;
}

/* Generates GEN step s's function again, with its inputs' layouts. */
static bool regen(fsl_cpu_lowering *L, fsl_cpu_step *s) {
  fsl_cg_spec spec = {.g = L->g, .id = s->fn_id, .n_nodes = s->n_nodes, .nodes = s->nodes, .n_in = s->n_in,
                      .in = s->in, .in_layout = s->in_layout, .n_out = s->n_out, .out = s->out,
                      .out_layout = s->out_layout};
  fsl_sbuf code = {0};
  if (fsl_codegen_kernel(&fsl_dialect_c, &spec, &code, NULL) != FSL_OK || code.oom) {
    fsl_error_clear();
    fsl_sbuf_free(&code);
    return false;
  }
  free(s->code);
  s->code = code.p;
  return true;
}

/* Sets (lay) or clears (NULL) the layout of v among GEN step s's inputs
 * and generates s again; false (s unchanged) when that fails: the code
 * generator refuses a layout its loops would read with a stride per
 * element (a reduction's rows across it, a window not read as columns). */
static bool gen_reads_layout(fsl_cpu_lowering *L, fsl_cpu_step *s, const fsl_value *v, const fsl_cg_layout *lay) {
  if (!s->in_layout && !(s->in_layout = calloc((size_t)s->n_in, sizeof *s->in_layout))) return false;
  fsl_cg_layout none = {0};
  for (int k = 0; k < s->n_in; k++)
    if (s->in[k] == v) s->in_layout[k] = lay ? *lay : none;
  if (regen(L, s)) return true;
  for (int k = 0; k < s->n_in; k++)
    if (s->in[k] == v) s->in_layout[k] = none;
  return false;
}

static bool step_reads(const fsl_cpu_step *s, const fsl_value *v) {
  for (int k = 0; k < s->n_in; k++)
    if (s->in[k] == v) return true;
  return false;
}

/* Whether a value is placed in place over v's buffer (memplan.h): it
 * would be written row-major over data read in another layout. */
static bool has_inplace_reader(const fsl_memplan *mp, const fsl_value *v) {
  if (!mp || !mp->alias) return false;
  for (int id = 0; id < mp->n_ids; id++)
    for (int a = mp->alias[id], hops = 0; a >= 0 && a < mp->n_ids && hops < mp->n_ids; a = mp->alias[a], hops++)
      if (a == v->id) return true;
  return false;
}

/* oneDNN step c reads v in its primitive layouts from now on: as its
 * source and as the residual of each absorbed node that reads v (a step
 * may do both: conv(v) + v). */
static void chain_reads(const fsl_cpu_step *c, const fsl_value *v) {
  if (c->n_in > 0 && c->in[0] == v) fsl_onednn_linear_chain_src(c->dnn);
  for (int k = 2; k < c->n_in; k++)
    if (c->in[k] == v) fsl_onednn_linear_chain_post(c->dnn, k - 2);
}

/* Value w, output `o` of GEN step g (index gi): written in the dense
 * permutation the oneDNN steps reading it (as their source, or as a
 * residual they absorbed) reorder it to, when g can generate it so and
 * every other reader is a later GEN step that can read it there (a
 * residual add after a block's first convolution reads the block's input
 * too). */
static bool chain_gen_output(fsl_cpu_lowering *L, int gi, int o, const fsl_memplan *mp) {
  fsl_cpu_step *g = &L->steps[gi];
  const fsl_value *w = g->out[o];
  int64_t nb = fsl_value_nbytes(w);
  if (!w || nb <= 0 || (mp && mp->alias && w->id < mp->n_ids && mp->alias[w->id] >= 0)) return false;
  for (int k = 0; k < L->g->n_outputs; k++)
    if (L->g->outputs[k] == w) return false;
  fsl_cg_layout lay = {0}, cl;
  int readers = 0, gen_readers = 0;
  for (int j = 0; j < L->n_steps; j++) {
    const fsl_cpu_step *c = &L->steps[j];
    for (int k = 0; k < c->n_out; k++)
      if (c->out[k] == w && j != gi) return false;
    for (int k = 0; k < c->n_in; k++) {
      if (c->in[k] != w) continue;
      if (j > gi && c->kind == FSL_CPU_STEP_GEN && layout_friendly(c, true, -1, NULL)) {
        gen_readers++;
        continue;
      }
      if (j <= gi || c->kind != FSL_CPU_STEP_ONEDNN || k == 1 ||
          !(k == 0 ? fsl_onednn_linear_src_layout(c->dnn, w, (size_t)nb, &cl)
                   : fsl_onednn_linear_post_layout(c->dnn, k - 2, w, (size_t)nb, &cl)) ||
          (readers > 0 && memcmp(&cl, &lay, sizeof cl) != 0))
        return false;
      lay = cl;
      readers++;
    }
  }
  if (readers == 0 || !layout_friendly(g, false, o, &lay) || (gen_readers > 0 && has_inplace_reader(mp, w))) return false;
  if (!g->out_layout && !(g->out_layout = calloc((size_t)g->n_out, sizeof *g->out_layout))) return false;
  g->out_layout[o] = lay;
  if (!regen(L, g)) {
    memset(&g->out_layout[o], 0, sizeof lay);
    return false;
  }
  /* the generated readers: any that cannot read the layout undoes it all */
  for (int j = gi + 1; j < L->n_steps && gen_readers > 0; j++) {
    fsl_cpu_step *c = &L->steps[j];
    if (c->kind != FSL_CPU_STEP_GEN || !step_reads(c, w) || gen_reads_layout(L, c, w, &lay)) continue;
    for (int q = gi + 1; q < j; q++)
      if (L->steps[q].kind == FSL_CPU_STEP_GEN && step_reads(&L->steps[q], w)) gen_reads_layout(L, &L->steps[q], w, NULL);
    memset(&g->out_layout[o], 0, sizeof lay);
    regen(L, g);
    return false;
  }
  for (int j = gi + 1; j < L->n_steps; j++)
    if (L->steps[j].kind == FSL_CPU_STEP_ONEDNN) chain_reads(&L->steps[j], w);
  return true;
}

/* Value z, written by oneDNN step i, kept in its primitive layout when
 * every reader can take it there (fsl_cpu_chain_layouts); how each step
 * reads z goes to how[] (one entry per step). */
static bool chain_onednn_output(fsl_cpu_lowering *L, int i, const fsl_memplan *mp, chain_read *how) {
  fsl_cpu_step *p = &L->steps[i];
  const fsl_value *z = p->out[0];
  int64_t nb = fsl_value_nbytes(z);
  if (nb <= 0) return false;
  for (int k = 0; k < L->g->n_outputs; k++)
    if (L->g->outputs[k] == z) return false;
  for (int k = 0; k < p->n_in; k++)
    if (p->in[k] == z) return false;
  int n_dnn = 0, n_gen = 0;
  for (int j = 0; j < L->n_steps; j++) {
    how[j] = j == i ? READ_NONE : chain_reader(p, &L->steps[j], z, (size_t)nb);
    if (how[j] == READ_OTHER) return false;
    n_dnn += how[j] == READ_ONEDNN || how[j] == READ_POST;
    n_gen += how[j] == READ_GEN;
  }
  fsl_cg_layout lay;
  if (n_dnn + n_gen == 0 ||
      (n_gen > 0 && (!fsl_onednn_linear_dst_layout(p->dnn, z, &lay) || has_inplace_reader(mp, z))))
    return false;
  /* generated readers first: any that cannot read the layout keeps z row-major */
  for (int j = 0; j < L->n_steps; j++) {
    if (how[j] != READ_GEN || gen_reads_layout(L, &L->steps[j], z, &lay)) continue;
    for (int q = 0; q < j; q++)
      if (how[q] == READ_GEN) gen_reads_layout(L, &L->steps[q], z, NULL);
    return false;
  }
  fsl_onednn_linear_chain_dst(p->dnn);
  for (int j = 0; j < L->n_steps; j++)
    if (how[j] == READ_ONEDNN || how[j] == READ_POST) chain_reads(&L->steps[j], z);
  return true;
}

/* The largest weights (bytes) of a GEMV that generated code runs in place
 * of oneDNN (column blocks, fsl_codegen_matmul; dot products,
 * fsl_codegen_conv_dot):
 * below it oneDNN's fixed cost per call (about 4 us on the 2-vCPU guests
 * here) is most of a squeeze-and-excitation FC's time; above it both
 * stream the weights at the same speed (bench/results/gemv-generated.md). */
#define GEMV_MAX_BYTES (1 << 20)

/* Whether oneDNN step s of linear op lin is better generated: a 2-D
 * depthwise convolution that reorders its source and its result
 * (fsl_onednn_linear_reorders_both: two passes over its input and output
 * fewer, fsl_codegen_conv_rows), or a GEMV on plain operands with at most
 * GEMV_MAX_BYTES of weights: a one-row f32 matmul (batch 1, M 1) or an
 * f32 pointwise convolution of one image at a single position
 * (fsl_codegen_conv_dot). */
static bool better_generated(const fsl_cpu_step *s, const fsl_node *lin) {
  if (fsl_codegen_conv_rows(&fsl_dialect_c, lin)) return fsl_onednn_linear_reorders_both(s->dnn);
  const fsl_value *a = lin->in[0], *w = lin->in[1];
  bool gemv = lin->op == FSL_OP_matmul ? fsl_numel(a->rank - 1, a->dims) == 1
                                       : fsl_codegen_conv_dot(&fsl_dialect_c, lin) && a->dims[0] == 1;
  return gemv && a->dtype == FSL_DT_F32 && fsl_value_nbytes(w) <= GEMV_MAX_BYTES && fsl_onednn_linear_plain(s->dnn);
}

/* ONEDNN step s of kernel k, when its linear op is better generated
 * (better_generated), becomes a GEN step computing the linear op and the
 * nodes oneDNN absorbed (with the side nodes computing their operands) on
 * the row-major data.  False (s unchanged) otherwise, or when the code
 * generator would absorb another part of the epilogue than oneDNN did
 * (the GEN step after s reads what s writes). */
static bool generate_linear(fsl_cpu_lowering *L, fsl_cpu_step *s, const fsl_kernel *k) {
  if (s->kind != FSL_CPU_STEP_ONEDNN || s->n_nodes < 1 || s->n_in < 2 || !k || !better_generated(s, s->nodes[0]))
    return false;
  fsl_node *lin = s->nodes[0];
  fsl_linear_split sp;
  fsl_vlist nodes = {0}, ins = {0};
  fsl_sbuf code = {0};
  int n_abs = -1;
  fsl_status st = fsl_linear_split_make(k, &sp);
  /* the same operands as oneDNN's: the linear op's, or the values they are reshapes of */
  fsl_value *lin_in[2] = {sp.lin_in[0], sp.lin_in[1]};
  if (st == FSL_OK && (sp.lin != lin || s->in[0] != lin_in[0] || s->in[1] != lin_in[1])) st = FSL_ERR_UNSUPPORTED;
  if (st == FSL_OK)
    st = fsl_codegen_linear(&fsl_dialect_c, L->next_fn, L->g, k, &sp, &n_abs, &nodes, &ins, &code, NULL);
  fsl_linear_split_free(&sp);
  fsl_node **sn = NULL;
  fsl_value **si = NULL;
  bool ok = st == FSL_OK && !code.oom && n_abs == s->n_nodes - 1 && (n_abs == 0 || nodes.n >= n_abs) &&
            (sn = malloc(sizeof *sn * (size_t)(1 + nodes.n))) && (si = linear_inputs(lin_in, &ins));
  if (ok) {
    sn[0] = lin;
    for (int i = 0; i < nodes.n; i++) sn[1 + i] = nodes.p[i]; /* nodes.p NULL when empty */
    fsl_onednn_linear_free(s->dnn);
    s->dnn = NULL;
    free(s->in);
    free(s->nodes);
    s->in = si;
    s->n_in = 2 + ins.n;
    s->nodes = sn;
    s->n_nodes = 1 + nodes.n;
    s->kind = FSL_CPU_STEP_GEN;
    s->fn_id = L->next_fn++;
    s->code = code.p;
    code.p = NULL;
    L->n_onednn--;
    L->n_generated++;
  } else {
    free(sn);
    fsl_error_clear();
  }
  fsl_sbuf_free(&code);
  free(nodes.p);
  free(ins.p);
  return ok;
}

int fsl_cpu_lower_generated(fsl_cpu_lowering *L, fsl_kernel *const *ks, int n_kernels) {
  int n = 0;
  for (int i = 0; i < L->n_steps; i++) {
    fsl_cpu_step *s = &L->steps[i];
    n += s->kernel >= 0 && s->kernel < n_kernels && generate_linear(L, s, ks[s->kernel]);
  }
  return n;
}

int fsl_cpu_chain_layouts(fsl_cpu_lowering *L, const fsl_memplan *mp) {
  /* last step first: a value's generated readers have their own output
   * layouts decided (a concat reads any layout only when it writes one) */
  for (int i = L->n_steps - 1; i >= 0; i--) {
    fsl_cpu_step *g = &L->steps[i];
    if (g->kind != FSL_CPU_STEP_GEN || g->n_nodes == 0) continue;
    for (int o = 0; o < g->n_out; o++) L->n_chained += chain_gen_output(L, i, o, mp);
  }
  chain_read *how = malloc(sizeof *how * (size_t)(L->n_steps > 0 ? L->n_steps : 1));
  for (int i = 0; i < L->n_steps && how; i++) {
    const fsl_cpu_step *p = &L->steps[i];
    if (p->kind == FSL_CPU_STEP_ONEDNN && p->n_out == 1 && p->out[0]) L->n_chained += chain_onednn_output(L, i, mp, how);
  }
  free(how);
  return L->n_chained;
}
