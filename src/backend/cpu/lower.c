/*
 * lower.c — the CPU backend's part of the lowering (lower.h): oneDNN as
 * the library hook, layout chaining and generated GEMVs as passes.
 */
#include "backend/cpu/lower.h"

#include "backend/cpu/dialect_c.h"
#include "codegen/linsplit.h"

static bool is_avail(const void *ctx, const fsl_value *v) { return ((const fsl_lowering *)ctx)->avail[v->id]; }

/* Whether linear op `op` keeps the residual v of its absorbed node `node`
 * (fsl_onednn_linear_create_avail): not when v comes from a oneDNN step
 * that writes a layout generated code reads (nhwc) other than the one op
 * wants (YOLOX's bottlenecks: the shortcut from a channels-last 1x1
 * convolution, also read by the next 1x1 one, into a blocked 3x3 one;
 * ResNet's downsample into a Winograd convolution with AVX-512).  There
 * the generated epilogue reads v where it lies; reordering it for op
 * would make its producer reorder it to row-major first. */
static bool keep_residual(const void *ctx, const fsl_onednn_linear *op, int node, const fsl_value *v) {
  const fsl_lowering *L = ctx;
  fsl_cg_layout lay;
  for (int i = L->n_steps - 1; i >= 0; i--) {
    const fsl_step *p = &L->steps[i];
    if (p->n_out != 1 || p->out[0] != v) continue;
    return p->kind != FSL_STEP_LIB || !fsl_onednn_linear_dst_layout(fsl_cpu_step_dnn(p), v, &lay) ||
           fsl_onednn_linear_post_chainable(fsl_cpu_step_dnn(p), op, node, (size_t)fsl_value_nbytes(v));
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

/* Whether v is an input of kernel ctx: what the memory plan keeps alive
 * until the kernel runs. */
static bool kernel_input(const void *ctx, const fsl_value *v) {
  const fsl_kernel *k = ctx;
  for (int i = 0; i < k->n_in; i++)
    if (k->in[i] == v) return true;
  return false;
}

/* Int32 linear op sp->lin of kernel k as a oneDNN int8 primitive
 * (onednn_int8.c), reading the 8-bit values its operands widen (and the
 * run-time value its zero point is cast from) where they are inputs of k
 * (the values the plan keeps alive for it: a LINEAR kernel with the
 * widening as its prologue): a LIB step with inputs {source, weights, zero
 * point source or NULL}.  FSL_ERR_UNSUPPORTED when the
 * caps rule oneDNN int8 out, the operands do not match or oneDNN has no
 * optimized kernel.  It absorbs the dequantizing / requantizing part of
 * the epilogue chain that the primitive computes (fsl_onednn_int8_create).
 * The library hook for an int32 op, and the library_through hook (tried
 * before a prologue is generated). */
static fsl_status onednn_int8(fsl_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp, fsl_value **z,
                              int *n_abs) {
  const fsl_backend_caps *caps = L->ctx;
  fsl_node *lin = sp->lin;
  if (!caps || !caps->linear_int8 || !lin->out[0] || lin->out[0]->dtype != FSL_DT_I32)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "no oneDNN int8 path");
  fsl_onednn_int8 q;
  FSL_TRY(fsl_onednn_int8_match(lin, kernel_input, k, &q));
  if (!kernel_input(k, q.src) || (q.zp_src && !kernel_input(k, q.zp_src)))
    return fsl_node_errorf(lin, FSL_ERR_UNSUPPORTED, "oneDNN int8: the 8-bit source is not an input of the kernel");
  fsl_onednn_linear *op = NULL;
  int na = 0;
  FSL_TRY(fsl_onednn_int8_create(lin, &q, sp->chain, sp->n_chain, 0, &op, &na));
  fsl_value *in[3] = {(fsl_value *)q.src, (fsl_value *)q.wei, (fsl_value *)q.zp_src};
  fsl_value *out = na > 0 ? sp->chain[na - 1]->out[0] : lin->out[0];
  fsl_node **nodes = malloc(sizeof *nodes * (size_t)(1 + na));
  fsl_step *s = NULL;
  if (nodes) {
    nodes[0] = lin;
    memcpy(nodes + 1, sp->chain, sizeof *nodes * (size_t)na);
    s = fsl_lowering_add(L, FSL_STEP_LIB, ki, lin->op == FSL_OP_matmul ? "matmul" : "conv", in, 3, &out, 1, nodes,
                         1 + na);
  }
  free(nodes);
  if (!s) {
    fsl_onednn_linear_free(op);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory (cpu lowering)");
  }
  s->lib = op;
  L->n_lib++;
  L->n_lib_int8++;
  if (out->dtype == FSL_DT_U8 || out->dtype == FSL_DT_I8) L->n_lib_requant++;
  *z = out;
  *n_abs = na;
  return FSL_OK;
}

/* The lowering's library hook: linear op sp->lin as a oneDNN primitive
 * (a LIB step) absorbing the longest usable epilogue chain as post-ops,
 * when the caps allow oneDNN (L->ctx) and the op is float32.  *z receives
 * the value it writes, *n_abs the absorbed chain length;
 * FSL_ERR_UNSUPPORTED: oneDNN has no primitive for it. */
static fsl_status onednn_library(fsl_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp,
                                 fsl_value **z, int *n_abs) {
  const fsl_backend_caps *caps = L->ctx;
  fsl_node *lin = sp->lin, *const *chain = sp->chain;
  if (caps && caps->linear_int8 && lin->out[0] && lin->out[0]->dtype == FSL_DT_I32)
    return onednn_int8(L, ki, k, sp, z, n_abs);
  if (!caps || !caps->library || lin->in[0]->dtype != FSL_DT_F32) return FSL_ERR_UNSUPPORTED;
  fsl_onednn_linear *op = NULL;
  int na = 0;
  fsl_status st = fsl_onednn_linear_create_avail(lin, chain, sp->n_chain, 0, is_avail, keep_residual, L, &op, &na);
  if (st == FSL_ERR_SHAPE || st == FSL_ERR_RUNTIME) st = FSL_ERR_UNSUPPORTED;
  if (st != FSL_OK) return st;
  /* inputs: source, weights, then each absorbed node's operand (NULL for unary post-ops) */
  fsl_value **in = malloc(sizeof *in * (size_t)(2 + na));
  fsl_node **nodes = malloc(sizeof *nodes * (size_t)(1 + na));
  fsl_step *s = NULL;
  fsl_value *out = na > 0 ? chain[na - 1]->out[0] : lin->out[0];
  if (in && nodes) {
    in[0] = sp->lin_in[0];
    in[1] = sp->lin_in[1];
    nodes[0] = lin;
    for (int i = 0; i < na; i++) {
      in[2 + i] = (fsl_value *)fsl_onednn_linear_post_value(op, i);
      nodes[1 + i] = chain[i];
    }
    s = fsl_lowering_add(L, FSL_STEP_LIB, ki, lin->op == FSL_OP_matmul ? "matmul" : "conv", in, 2 + na, &out, 1, nodes,
                         1 + na);
  }
  free(in);
  free(nodes);
  if (!s) {
    fsl_onednn_linear_free(op);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory (cpu lowering)");
  }
  s->lib = op;
  L->n_lib++;
  *z = out;
  *n_abs = na;
  return FSL_OK;
}

static void onednn_free(void *op) { fsl_onednn_linear_free(op); }

/* Generated code takes matmuls, the depthwise (row by row) and
 * single-position pointwise convolutions the C dialect generates, and
 * integer convolutions oneDNN's int8 primitives do not take
 * (onednn_int8.c: ConvInteger, QLinearConv with 16-bit data, a per-channel
 * source zero point). */
static bool generates_linear(const fsl_dialect *d, const fsl_node *lin) {
  return lin->op == FSL_OP_matmul || fsl_codegen_conv_rows(d, lin) || fsl_codegen_conv_dot(d, lin) ||
         (lin->op == FSL_OP_conv && fsl_dtype_is_int(lin->in[0]->dtype));
}

static const fsl_lowering_hooks k_cpu_hooks = {
    .library = onednn_library, .library_through = onednn_int8, .generates_linear = generates_linear, .library_name = "oneDNN",
    .lib_free = onednn_free,
};

const fsl_lowering_hooks *fsl_cpu_lowering_hooks(void) { return &k_cpu_hooks; }

fsl_status fsl_cpu_lowering_init(fsl_lowering *L, const fsl_graph *g, const fsl_backend_caps *caps) {
  return fsl_lowering_init(L, g, &fsl_dialect_c, &k_cpu_hooks, caps, 0);
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
static bool concat_innermost(const fsl_step *s, const fsl_node *n, int o, const fsl_cg_layout *lay) {
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
 * table lookup (fsl_node_is_table_lookup: QDQ activations, passes/lut.c)
 * reads its index where an elementwise node would.  A
 * reader's pooling windows (pad, window) qualify: the code generator reads
 * them as columns along the layout's innermost axis, the taps contiguous
 * and clamped (fsl_cg_layout_window_axis), or refuses the layout.  A
 * concat qualifies where it is the output and lies along the innermost
 * axis of the output's layout (concat_innermost: lay, for output o, the
 * layout considered; NULL: s's out_layout), and anywhere in a step that
 * reads a layout (o < 0) and writes row-major: its nest tiles the
 * transposed read (efficientvit_b1's attention splits q, k and v out of
 * the channel concat of two nhwc convolutions, so those chain). */
static bool layout_friendly(const fsl_step *s, bool reduce, int o, const fsl_cg_layout *lay) {
  for (int k = 0; k < s->n_nodes; k++) {
    const fsl_node *n = s->nodes[k];
    fsl_kind kind = fsl_op_get(n->op)->kind;
    if (n->op == FSL_OP_concat && (concat_innermost(s, n, o, lay) || (o < 0 && !s->out_layout))) continue;
    bool win = o < 0 && reduce && (n->op == FSL_OP_window || n->op == FSL_OP_pad);
    if (kind != FSL_KIND_ELEMENTWISE && !(reduce && kind == FSL_KIND_REDUCE) && n->op != FSL_OP_reshape &&
        n->op != FSL_OP_expand && n->op != FSL_OP_slice && !win && !fsl_node_is_table_lookup(n))
      return false;
  }
  return s->n_nodes > 0;
}

static chain_read chain_reader(const fsl_step *p, const fsl_step *c, const fsl_value *v, size_t capacity) {
  chain_read r = READ_NONE;
  for (int k = 0; k < c->n_out; k++)
    if (c->out[k] == v) return READ_OTHER;
  for (int k = 0; k < c->n_in; k++) {
    if (c->in[k] != v) continue;
    if (c < p) return READ_OTHER;
    if (c->kind == FSL_STEP_LIB && k == 0 && fsl_onednn_linear_chainable(fsl_cpu_step_dnn(p), fsl_cpu_step_dnn(c), capacity))
      r = READ_ONEDNN;
    else if (c->kind == FSL_STEP_LIB && k >= 2 && fsl_onednn_linear_post_chainable(fsl_cpu_step_dnn(p), fsl_cpu_step_dnn(c), k - 2, capacity))
      r = READ_POST;
    else if (c->kind == FSL_STEP_GEN && layout_friendly(c, true, -1, NULL) && r == READ_NONE)
      r = READ_GEN;
    else
      return READ_OTHER;
  }
  return r;
}

/* Generates GEN step s's function again, with its inputs' layouts. */
static bool regen(fsl_lowering *L, fsl_step *s) {
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
static bool gen_reads_layout(fsl_lowering *L, fsl_step *s, const fsl_value *v, const fsl_cg_layout *lay) {
  if (!s->in_layout && !(s->in_layout = calloc((size_t)s->n_in, sizeof *s->in_layout))) return false;
  fsl_cg_layout none = {0};
  for (int k = 0; k < s->n_in; k++)
    if (s->in[k] == v) s->in_layout[k] = lay ? *lay : none;
  if (regen(L, s)) return true;
  for (int k = 0; k < s->n_in; k++)
    if (s->in[k] == v) s->in_layout[k] = none;
  return false;
}

static bool step_reads(const fsl_step *s, const fsl_value *v) {
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
static void chain_reads(const fsl_step *c, const fsl_value *v) {
  if (c->n_in > 0 && c->in[0] == v) fsl_onednn_linear_chain_src(fsl_cpu_step_dnn(c));
  for (int k = 2; k < c->n_in; k++)
    if (c->in[k] == v) fsl_onednn_linear_chain_post(fsl_cpu_step_dnn(c), k - 2);
}

/* Value w, output `o` of GEN step g (index gi): written in the dense
 * permutation the oneDNN steps reading it (as their source, or as a
 * residual they absorbed) reorder it to, when g can generate it so and
 * every other reader is a later GEN step that can read it there (a
 * residual add after a block's first convolution reads the block's input
 * too). */
static bool chain_gen_output(fsl_lowering *L, int gi, int o, const fsl_memplan *mp) {
  fsl_step *g = &L->steps[gi];
  const fsl_value *w = g->out[o];
  int64_t nb = fsl_value_nbytes(w);
  if (!w || nb <= 0 || (mp && mp->alias && w->id < mp->n_ids && mp->alias[w->id] >= 0)) return false;
  for (int k = 0; k < L->g->n_outputs; k++)
    if (L->g->outputs[k] == w) return false;
  fsl_cg_layout lay = {0}, cl;
  int readers = 0, gen_readers = 0;
  for (int j = 0; j < L->n_steps; j++) {
    const fsl_step *c = &L->steps[j];
    for (int k = 0; k < c->n_out; k++)
      if (c->out[k] == w && j != gi) return false;
    for (int k = 0; k < c->n_in; k++) {
      if (c->in[k] != w) continue;
      if (j > gi && c->kind == FSL_STEP_GEN && layout_friendly(c, true, -1, NULL)) {
        gen_readers++;
        continue;
      }
      if (j <= gi || c->kind != FSL_STEP_LIB || k == 1 ||
          !(k == 0 ? fsl_onednn_linear_src_layout(fsl_cpu_step_dnn(c), w, (size_t)nb, &cl)
                   : fsl_onednn_linear_post_layout(fsl_cpu_step_dnn(c), k - 2, w, (size_t)nb, &cl)) ||
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
    fsl_step *c = &L->steps[j];
    if (c->kind != FSL_STEP_GEN || !step_reads(c, w) || gen_reads_layout(L, c, w, &lay)) continue;
    for (int q = gi + 1; q < j; q++)
      if (L->steps[q].kind == FSL_STEP_GEN && step_reads(&L->steps[q], w)) gen_reads_layout(L, &L->steps[q], w, NULL);
    memset(&g->out_layout[o], 0, sizeof lay);
    regen(L, g);
    return false;
  }
  for (int j = gi + 1; j < L->n_steps; j++)
    if (L->steps[j].kind == FSL_STEP_LIB) chain_reads(&L->steps[j], w);
  return true;
}

/* Value z, written by oneDNN step i, kept in its primitive layout when
 * every reader can take it there (fsl_cpu_chain_layouts); how each step
 * reads z goes to how[] (one entry per step). */
static bool chain_onednn_output(fsl_lowering *L, int i, const fsl_memplan *mp, chain_read *how) {
  fsl_step *p = &L->steps[i];
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
      (n_gen > 0 && (!fsl_onednn_linear_dst_layout(fsl_cpu_step_dnn(p), z, &lay) || has_inplace_reader(mp, z))))
    return false;
  /* generated readers first: any that cannot read the layout keeps z row-major */
  for (int j = 0; j < L->n_steps; j++) {
    if (how[j] != READ_GEN || gen_reads_layout(L, &L->steps[j], z, &lay)) continue;
    for (int q = 0; q < j; q++)
      if (how[q] == READ_GEN) gen_reads_layout(L, &L->steps[q], z, NULL);
    return false;
  }
  fsl_onednn_linear_chain_dst(fsl_cpu_step_dnn(p));
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
static bool better_generated(const fsl_step *s, const fsl_node *lin) {
  if (fsl_codegen_conv_rows(&fsl_dialect_c, lin)) return fsl_onednn_linear_reorders_both(fsl_cpu_step_dnn(s));
  const fsl_value *a = lin->in[0], *w = lin->in[1];
  bool gemv = lin->op == FSL_OP_matmul ? fsl_numel(a->rank - 1, a->dims) == 1
                                       : fsl_codegen_conv_dot(&fsl_dialect_c, lin) && a->dims[0] == 1;
  return gemv && a->dtype == FSL_DT_F32 && fsl_value_nbytes(w) <= GEMV_MAX_BYTES && fsl_onednn_linear_plain(fsl_cpu_step_dnn(s));
}

/* ONEDNN step s of kernel k, when its linear op is better generated
 * (better_generated), becomes a GEN step computing the linear op and the
 * nodes oneDNN absorbed (with the side nodes computing their operands) on
 * the row-major data.  False (s unchanged) otherwise, or when the code
 * generator would absorb another part of the epilogue than oneDNN did
 * (the GEN step after s reads what s writes). */
static bool generate_linear(fsl_lowering *L, fsl_step *s, const fsl_kernel *k) {
  if (s->kind != FSL_STEP_LIB || s->n_nodes < 1 || s->n_in < 2 || !k || !better_generated(s, s->nodes[0]))
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
    fsl_onednn_linear_free(fsl_cpu_step_dnn(s));
    s->lib = NULL;
    free(s->in);
    free(s->nodes);
    s->in = si;
    s->n_in = 2 + ins.n;
    s->nodes = sn;
    s->n_nodes = 1 + nodes.n;
    s->kind = FSL_STEP_GEN;
    s->fn_id = L->next_fn++;
    s->code = code.p;
    code.p = NULL;
    L->n_lib--;
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

int fsl_cpu_lower_generated(fsl_lowering *L, fsl_kernel *const *ks, int n_kernels) {
  int n = 0;
  for (int i = 0; i < L->n_steps; i++) {
    fsl_step *s = &L->steps[i];
    n += s->kernel >= 0 && s->kernel < n_kernels && generate_linear(L, s, ks[s->kernel]);
  }
  return n;
}

int fsl_cpu_chain_layouts(fsl_lowering *L, const fsl_memplan *mp) {
  int n_chained = 0;
  /* last step first: a value's generated readers have their own output
   * layouts decided (a concat reads any layout only when it writes one) */
  for (int i = L->n_steps - 1; i >= 0; i--) {
    fsl_step *g = &L->steps[i];
    if (g->kind != FSL_STEP_GEN || g->n_nodes == 0) continue;
    for (int o = 0; o < g->n_out; o++) n_chained += chain_gen_output(L, i, o, mp);
  }
  chain_read *how = malloc(sizeof *how * (size_t)(L->n_steps > 0 ? L->n_steps : 1));
  for (int i = 0; i < L->n_steps && how; i++) {
    const fsl_step *p = &L->steps[i];
    if (p->kind == FSL_STEP_LIB && p->n_out == 1 && p->out[0]) n_chained += chain_onednn_output(L, i, mp, how);
  }
  free(how);
  return n_chained;
}
