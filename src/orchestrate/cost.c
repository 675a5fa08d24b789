/*
 * cost.c — the analytic roofline cost of a kernel (DESIGN.md section 5).
 *
 *   time = max(bytes / bandwidth, linear_flops / peak_flops
 *                                 + elem_work / elem_flops) + launch_s
 *
 * Linear flops are those of the kernel's matmul/conv node (2 * M * N * K
 * per matmul, 2 * out * (C_in/group * kernel volume) per conv).  The rest
 * is elementwise work in units of one multiply or add (what calibrate.c's
 * elem_flops measures): each node costs its element count (output for
 * elementwise and gather nodes, input for reductions) times a weight for
 * its op, the cost column of src/ir/ops.def (1 for arithmetic, comparisons
 * and selects, 4 for division and square roots, 16 for exp, log, tanh,
 * erf, sigmoid, pow and trigonometric functions, which generated code
 * evaluates as polynomials of about that many vector operations; 2 for
 * gathers and arg-reductions, which add index arithmetic).  Movement views
 * cost nothing beyond the bytes their kernel reads, but a sliding window
 * multiplies the work of what the kernel computes before it (eval_counts).  Device numbers come
 * from a backend's calibration through device.c, or fsl_device_default.
 *
 * A LINEAR kernel runs as its matmul/conv computing the closed prefix of
 * its epilogue chain before the store (oneDNN post-ops, a generated
 * epilogue: linchain.c, codegen/linsplit.h), then, when the kernel needs
 * more of what follows (a second output: y and sigmoid(y)), a pass of
 * generated code over the prefix's value.  Such a kernel costs two
 * rooflines and two launches: with one, the traffic of the second pass
 * hid under the linear op's compute, and the plan wrote y and sigmoid(y)
 * from the conv (a scalar pass on the CPU) and multiplied them in the next
 * kernel rather than keep x * sigmoid(x) a post-op (yolox_nano's C3
 * blocks).  In the closed prefix, ops of weight 1 whose other operands
 * are initializers (bias, scale, shift, ReLU, Clip, HardSigmoid) run at
 * the linear op's rate (constant_post_ops; docs/orchestration.md).
 */
#include "orchestrate/orchestrate.h"
#include "orchestrate/kernel_ws.h"

/* FLOPs of conv node n as Winograd F(2x2,3x3) (2 x 16 products of C and K
 * per 2x2 output tile; Lavin and Gray 2016) where fsl_device.winograd_3x3
 * describes it: a dense 2-D 3x3 convolution, stride and dilation 1, constant
 * weights, C, K and C x K at least FSL_WINOGRAD_MIN_CHANNELS and
 * FSL_WINOGRAD_MIN_CK (orchestrate.h), FSL_WINOGRAD_MIN_FLOP or more as a direct
 * convolution (the CPU backend's rule: onednn.c wino_pays and wino_try);
 * 0 otherwise. */
static double winograd_flops(const fsl_node *n, double direct) {
  const fsl_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
  if (x->rank != 4 || w->rank != 4 || y->rank != 4 || !w->data || w->dims[2] != 3 || w->dims[3] != 3 ||
      fsl_attr_int(n, "group", 1) != 1 || direct < FSL_WINOGRAD_MIN_FLOP)
    return 0;
  const char *one[] = {"strides", "dilations", "lhs_dilation"};
  for (int a = 0; a < 3; a++) {
    const int64_t *v = NULL;
    int k = fsl_attr_ints(n, one[a], &v);
    for (int i = 0; i < k; i++)
      if (v[i] != 1) return 0;
  }
  int64_t c = x->dims[1], kk = y->dims[1];
  if (c < FSL_WINOGRAD_MIN_CHANNELS || kk < FSL_WINOGRAD_MIN_CHANNELS || c * kk < FSL_WINOGRAD_MIN_CK) return 0;
  double tiles = (double)y->dims[0] * (double)((y->dims[2] + 1) / 2) * (double)((y->dims[3] + 1) / 2);
  return 2.0 * 16.0 * tiles * (double)c * (double)kk;
}

/* FLOPs of one matmul or conv node (multiply and add counted separately;
 * a conv that device d runs as Winograd, its Winograd products);
 * 0 for other ops or unknown shapes. */
static double linear_flops(const fsl_node *n, const fsl_device *d) {
  if (n->n_in < 2 || n->n_out < 1 || !n->in[0] || !n->in[1] || !n->out[0]) return 0;
  const fsl_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
  int64_t out = fsl_value_numel(y);
  if (out <= 0) return 0;
  if (n->op == FSL_OP_matmul) {
    if (x->rank < 1) return 0;
    int64_t k = x->dims[x->rank - 1];
    return k > 0 ? 2.0 * (double)out * (double)k : 0;
  }
  if (n->op == FSL_OP_conv) {
    /* w: [C_out, C_in/group, k...]: one output element reads numel(w)/C_out weights */
    int64_t wn = fsl_value_numel(w);
    if (w->rank < 1 || w->dims[0] <= 0 || wn <= 0) return 0;
    double direct = 2.0 * (double)out * ((double)wn / (double)w->dims[0]);
    double wino = d->winograd_3x3 ? winograd_flops(n, direct) : 0;
    return wino > 0 ? wino : direct;
  }
  return 0;
}

/* Elementwise work of one non-linear node, in units (ops.def's cost
 * column).  A reduction over a window view (pooling) pays
 * FSL_COST_WINDOW_TAP more per tap: the generated code (codegen/columns.c)
 * loaded every tap through a clamped, strided index and updated the row's
 * accumulators in memory, not in registers.  Without it a pooling kernel
 * looked memory-bound and the work fused into it free: ResNet-18's MaxPool
 * 3x3/2 (1.8 M taps over 64x112x112) predicted 0.156 ms on AVX2 whether or
 * not the stem conv's bias and ReLU ran inside it (2.25 times per element
 * there), and measured 0.39-0.45 ms without them and 0.82-0.96 ms with
 * them, while the conv takes them as post-ops for nothing (1.88 against
 * 1.90 ms): the optimal plan moved them into the pool.  At the calibrated
 * rate the pool's code ran about 8 units per tap, hence 7 more than the
 * max's 1 (with 3, natively the pool still looked memory-bound and the
 * plan stayed; bench/results/cpu-window-taps-ab.md).  Since then a
 * max/min window row is separable within the row and carries no NaN-flag
 * arrays on long rows (columns.c): ResNet-18's pool runs about 4 units per
 * tap, so this over-prices such pools; not refitted yet
 * (bench/results/cpu-separable-pool-ab.md). */
static double elem_work(const fsl_node *n) {
  const fsl_op_info *oi = fsl_op_get(n->op);
  const fsl_value *o = n->n_out > 0 ? n->out[0] : NULL;
  double out = o ? (double)fsl_value_numel(o) : 0;
  if (out < 0) out = 0;
  switch (oi->kind) {
  case FSL_KIND_ELEMENTWISE: return out * oi->cost;
  case FSL_KIND_REDUCE: {
    double in = n->n_in > 0 && n->in[0] ? (double)fsl_value_numel(n->in[0]) : 0;
    bool taps = in > 0 && n->in[0]->producer && n->in[0]->producer->op == FSL_OP_window;
    return (in > 0 ? in : 0) * (oi->cost + (taps ? FSL_COST_WINDOW_TAP : 0));
  }
  case FSL_KIND_GATHER: return out * oi->cost;
  case FSL_KIND_MOVEMENT: case FSL_KIND_LINEAR: return 0;
  default: {  /* opaque: one unit per output element */
    double f = 0;
    for (int j = 0; j < n->n_out; j++)
      if (n->out[j] && fsl_value_numel(n->out[j]) > 0) f += (double)fsl_value_numel(n->out[j]);
    return f;
  }
  }
}

/* How many times generated code evaluates each element of node i's output
 * per run (dup[i] >= 1).  A fused kernel computes a value where it is
 * read: a sliding window reads each element up to kernel-volume times, so
 * everything the kernel computes before it runs that many times more (ONNX
 * MaxPool 13x13 after a SiLU: the sigmoid runs 169 times per element).
 * A gather reading a computed value as its data does the same on
 * average: numel(out) / numel(data) times per element (Resize upsampling
 * 8x8 through four bilinear taps: 256).  Broadcasts (expand) are not counted: the code generator computes a
 * reduction's kept-space values once per row and hoists values invariant
 * along the inner axis.  Duplication stops at a reduce, whose result is
 * computed once per kept element. */
static void eval_counts(const fsl_kernel *k, double *dup) {
  for (int i = k->n_nodes - 1; i >= 0; i--) {
    const fsl_node *n = k->nodes[i];
    dup[i] = 1;
    if (!n || n->n_out < 1 || !n->out[0] || fsl_op_get(n->op)->kind == FSL_KIND_REDUCE) continue;
    double in_numel = (double)fsl_value_numel(n->out[0]);
    for (int j = i + 1; j < k->n_nodes; j++) {
      const fsl_node *c = k->nodes[j];
      bool reads = false;
      for (int a = 0; c && a < c->n_in; a++) reads = reads || c->in[a] == n->out[0];
      if (!reads) continue;
      double f = 1;
      /* a window, or a gather's data operand (Resize's bilinear taps), reads
       * each element out/in times on average */
      bool rereads = c->op == FSL_OP_window ||
                     ((c->op == FSL_OP_gather || c->op == FSL_OP_gather_elements || c->op == FSL_OP_gather_nd) &&
                      c->in[0] == n->out[0]);
      if (rereads && c->n_out > 0 && c->out[0] && in_numel > 0 && fsl_value_numel(c->out[0]) > in_numel)
        f = (double)fsl_value_numel(c->out[0]) / in_numel;
      if (dup[j] * f > dup[i]) dup[i] = dup[j] * f;
    }
  }
}

static double nbytes(const fsl_value *v) {
  int64_t b = v ? fsl_value_nbytes(v) : 0;
  return b > 0 ? (double)b : 0;
}

static bool produced_by(const fsl_value *v, fsl_node *const *nodes, int n, const bool *mark) {
  for (int i = 0; i < n; i++)
    if (mark[i] && nodes[i])
      for (int o = 0; o < nodes[i]->n_out; o++)
        if (nodes[i]->out[o] == v) return true;
  return false;
}

/* A LINEAR kernel's linear node (li; -1 when k has none) and the closed
 * prefix of its epilogue chain that the linear op computes before its
 * store (chain[0..n_abs), n_abs 0: it stores its own result).  A permute
 * ends the prefix unless d's linear ops are generated code
 * (linear_views), which store through a tail of permutes and reshapes. */
typedef struct {
  int li, n_abs;
  fsl_node *chain[64];
} linear_prefix;

static void absorbed_prefix(const fsl_kernel *k, const fsl_device *d, linear_prefix *p) {
  p->n_abs = 0;
  p->li = fsl_linear_node_index(k);
  if (p->li < 0) return;
  const fsl_node *lin = k->nodes[p->li];
  int n_chain = fsl_linear_chain(k, p->li, p->chain, 64);
  bool tail = false;
  for (int j = 0; j < n_chain; j++) {
    bool moves = p->chain[j]->op == FSL_OP_permute || p->chain[j]->op == FSL_OP_reshape;
    if (p->chain[j]->op == FSL_OP_permute && !d->linear_views) break;
    if (tail && !moves) break;
    tail = tail || p->chain[j]->op == FSL_OP_permute;
    if (fsl_linear_chain_closed(lin, p->chain, j + 1)) p->n_abs = j + 1;
  }
}

/* The value a movement view inside k (a bias expand) reads, followed back
 * to a value no such view of k produces: what a pass reading v loads. */
static const fsl_value *view_source(const fsl_kernel *k, const fsl_value *v) {
  for (int hops = 0; v && v->producer && hops < 16; hops++) {
    const fsl_node *p = v->producer;
    bool inside = false;
    for (int i = 0; i < k->n_nodes && !inside; i++) inside = k->nodes[i] == p;
    if (!inside || fsl_op_get(p->op)->kind != FSL_KIND_MOVEMENT || p->n_in < 1) break;
    v = p->in[0];
  }
  return v;
}

/* Marks in post (by position in k->nodes) the nodes of LINEAR kernel k's
 * absorbed prefix of weight 1 that apply constants only: each reads the
 * value before it in the chain and otherwise initializers (a bias, scale
 * or shift through the kernel's broadcast views; ReLU, Clip, HardSigmoid,
 * all of HardSwish but its final y * f(y)).  The linear op applies those
 * to its accumulators in its own vector code before the store (oneDNN
 * eltwise and per-channel post-ops), so their work runs at its rate: a
 * depthwise 5x5 conv alone 50 us, with bias + HardSwish 51 us
 * (mobilenet_v3_small, AVX2), where the elementwise rate charged 10 us
 * more.  A residual Add (a second runtime tensor, a binary post-op) keeps
 * the elementwise rate, and so do a product of two values of the chain
 * and transcendental ops: with SiLU's sigmoid at the conv's rate
 * yolox_nano's SiLUs moved into its convs and its Concats became copy
 * kernels (1.27x in 5 interleaved rounds on AVX2); with only the product
 * there, about half of them did (not measured; left out). */
static void constant_post_ops(const fsl_kernel *k, const linear_prefix *p, bool *post) {
  if (p->li < 0) return;
  const fsl_value *cur = k->nodes[p->li]->out[0];
  for (int j = 0; j < p->n_abs; j++) {
    const fsl_node *n = p->chain[j];
    const fsl_op_info *oi = fsl_op_get(n->op);
    bool constant = oi->kind == FSL_KIND_ELEMENTWISE && oi->cost <= 1;
    for (int a = 0; a < n->n_in && constant; a++) {
      const fsl_value *v = n->in[a] == cur ? NULL : view_source(k, n->in[a]);
      constant = !v || v->data != NULL;
    }
    for (int i = 0; i < k->n_nodes; i++)
      if (k->nodes[i] == n) post[i] = constant;
    if (n->n_out > 0) cur = n->out[0];
  }
}

/* The epilogue pass of LINEAR kernel k (linsplit.h): the linear op computes
 * the absorbed prefix p of its epilogue chain (fsl_linear_chain) before
 * its store, writing z; every other node after it that a kernel output
 * needs runs as generated code over z.  Marks the pass's nodes in epi (by
 * position in k->nodes) and returns z, or NULL when there is no such pass
 * (every output is z or a prologue value). */
static const fsl_value *epilogue_pass(const fsl_kernel *k, const linear_prefix *p, bool *epi) {
  int li = p->li, n_abs = p->n_abs;
  if (li < 0 || k->n_out < 1 || !k->out) return NULL;
  const fsl_node *lin = k->nodes[li];
  fsl_node *const *chain = p->chain;
  const fsl_value *z = n_abs > 0 ? chain[n_abs - 1]->out[0] : lin->out[0];
  /* descendants of lin that are not in the absorbed prefix */
  bool any = false;
  for (int i = li + 1; i < k->n_nodes; i++) {
    const fsl_node *n = k->nodes[i];
    bool absorbed = false, below = false;
    for (int j = 0; j < n_abs && !absorbed; j++) absorbed = chain[j] == n;
    for (int a = 0; a < n->n_in && !below && !absorbed; a++) {
      const fsl_value *v = n->in[a];
      below = v && (v == lin->out[0] || produced_by(v, k->nodes, k->n_nodes, epi));
      for (int j = 0; j < n_abs && v && !below; j++) below = chain[j]->out[0] == v;
    }
    epi[i] = below && !absorbed;
  }
  for (int j = 0; j < k->n_out && !any; j++)
    any = k->out[j] && k->out[j] != z && produced_by(k->out[j], k->nodes, k->n_nodes, epi);
  return any ? z : NULL;
}

/* Whether the int32 linear op lin of kernel k is one the device's int8
 * library runs (fsl_device.linear_int8): its source is widened inside k
 * (a prologue of fsl_kernel_int8_widening nodes, through reshapes), so
 * the library reads the 8-bit data.  Otherwise (the int32 source
 * materialised by another kernel) it runs as generated code, whose int64
 * multiply-adds go at the elementwise rate, not the library's. */
static bool int8_library_runs(const fsl_kernel *k, const fsl_node *lin, const fsl_device *d) {
  if (!d->linear_int8 || !lin->out[0] || lin->out[0]->dtype != FSL_DT_I32) return true;
  const fsl_value *v = lin->in[0];
  for (int hops = 0; v && v->producer && hops < 8; hops++) {
    const fsl_node *p = v->producer;
    bool inside = false;
    for (int i = 0; i < k->n_nodes && !inside; i++) inside = k->nodes[i] == p;
    if (!inside) return false;
    if (p->op != FSL_OP_reshape) return fsl_kernel_int8_widening(p);
    v = p->in[0];
  }
  return false;
}

/* Roofline seconds of bytes moved and linear flops plus elementwise work. */
static double roofline(const fsl_device *d, double bytes, double lin, double work) {
  double mem = d->bandwidth > 0 ? bytes / d->bandwidth : 0;
  double compute = (d->peak_flops > 0 ? lin / d->peak_flops : 0) + (d->elem_flops > 0 ? work / d->elem_flops : 0);
  return (mem > compute ? mem : compute) + (d->launch_s > 0 ? d->launch_s : 0);
}

double fsl_kernel_cost(fsl_kernel *k, const fsl_device *d) {
  if (!k) return 0;
  fsl_device def;
  if (!d) {
    fsl_device_default(&def);
    d = &def;
  }
  double lin = 0, work = 0, epi_work = 0;
  double dup_small[32], *dup = k->n_nodes <= 32 ? dup_small : malloc(sizeof(double) * (size_t)k->n_nodes);
  bool epi_small[32], *epi = k->n_nodes <= 32 ? epi_small : malloc(sizeof(bool) * (size_t)k->n_nodes);
  bool post_small[32] = {0}, *post = k->n_nodes <= 32 ? post_small : calloc((size_t)k->n_nodes, sizeof(bool));
  linear_prefix pre;
  absorbed_prefix(k, d, &pre);
  if (dup) eval_counts(k, dup);
  if (epi) memset(epi, 0, sizeof(bool) * (size_t)k->n_nodes);
  if (post) constant_post_ops(k, &pre, post);
  const fsl_value *z = epi ? epilogue_pass(k, &pre, epi) : NULL;
  for (int i = 0; i < k->n_nodes; i++) {
    if (!k->nodes[i]) continue;
    if (fsl_op_get(k->nodes[i]->op)->kind == FSL_KIND_LINEAR) {
      if (int8_library_runs(k, k->nodes[i], d)) lin += linear_flops(k->nodes[i], d);
      else work += linear_flops(k->nodes[i], d);
    }
    else if (post && post[i]) lin += elem_work(k->nodes[i]);
    else if (z && epi[i]) epi_work += elem_work(k->nodes[i]) * (dup ? dup[i] : 1);
    else work += elem_work(k->nodes[i]) * (dup ? dup[i] : 1);
  }
  if (dup != dup_small) free(dup);
  double t;
  if (!z) {
    t = roofline(d, k->bytes, lin, work);
  } else {
    /* the linear op writes z (unless it is an output already) and not the
     * epilogue's outputs; the epilogue reads z and what else its nodes
     * take from outside them, and writes its outputs */
    double main_bytes = k->bytes, epi_bytes = 0;
    bool z_out = false;
    for (int j = 0; j < k->n_out; j++) {
      z_out = z_out || k->out[j] == z;
      if (k->out[j] && k->out[j] != z && produced_by(k->out[j], k->nodes, k->n_nodes, epi)) {
        main_bytes -= nbytes(k->out[j]);
        epi_bytes += nbytes(k->out[j]);
      }
    }
    if (!z_out) main_bytes += nbytes(z);
    for (int j = 0; j < k->n_in; j++) { /* inputs only the epilogue reads */
      bool only_epi = k->in[j] != NULL;
      for (int i = 0; i < k->n_nodes && only_epi; i++)
        for (int a = 0; a < k->nodes[i]->n_in && only_epi; a++)
          only_epi = epi[i] || view_source(k, k->nodes[i]->in[a]) != k->in[j];
      if (only_epi) main_bytes -= nbytes(k->in[j]);
    }
    const fsl_value *read[64];
    int n_read = 0;
    for (int i = 0; i < k->n_nodes; i++)
      for (int a = 0; epi[i] && a < k->nodes[i]->n_in; a++) {
        const fsl_value *v = view_source(k, k->nodes[i]->in[a]);
        bool seen = !v || produced_by(v, k->nodes, k->n_nodes, epi);
        for (int r = 0; r < n_read && !seen; r++) seen = read[r] == v;
        if (seen) continue;
        if (n_read < 64) read[n_read++] = v;
        epi_bytes += nbytes(v);
      }
    t = roofline(d, main_bytes, lin, work) + roofline(d, epi_bytes, 0, epi_work);
  }
  if (epi != epi_small) free(epi);
  if (post != post_small) free(post);
  k->cost_s = t;
  return t;
}
