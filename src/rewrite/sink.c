/*
 * sink.c — the rewrite conv1x1-before-resample: a 1x1 convolution over
 * spatially resampled values runs before the resampling, at the source
 * resolution.
 *
 * A 1x1 convolution (strides and dilations 1, no padding, one group) is a
 * linear map over channels applied at every position; Resize's linear and
 * cubic modes are, after fission (src/fission/resize.c), linear maps over
 * positions applied to every channel alike: gathers with constant indices
 * along spatial axes, products with constant weights broadcast over the
 * channels, sums.  The two commute, and a convolution over a channel
 * concat is the sum of convolutions over its parts with the matching
 * slices of the weights:
 *
 *   conv(concat_i R_i(x_i), W) = sum_i R_i(conv(x_i, W[:, C_i]))
 *
 * Each R_i is a subgraph of gather (constant indices, any axis but the
 * channel axis 1), mul by an expand of a constant whose channel dim is 1,
 * add, sub and neg, every leaf of which is one value x_i (R_i is the
 * identity when the operand is x_i itself).  The upsampled parts then
 * convolve at their source resolution: SegFormer's all-MLP decoder (three
 * bilinear upsamplings by 2x, 4x and 8x into a 1x1 fuse convolution over
 * 1024 channels) does a third of the fuse convolution's FLOPs and resamples
 * 256 channels where it resampled 768.  The per-channel bias add that
 * follows the convolution stays where it is.
 *
 * The rule language (core.rules) matches patterns of fixed shape; this one
 * has any depth and any number of concat operands, so it is written in C.
 * fsl_rewrite applies it with the rules, under the same contract: only
 * where what it replaces is used by nothing else (closed), and only where
 * the work it estimates (below) drops by a quarter, so that it never
 * duplicates work.  Its test (tests/unit/test_rewrite.c) runs graphs before
 * and after on random inputs with the reference interpreter.
 */
#include "rewrite/rewrite.h"
#include "fission/builder.h"

#define MAX_BRANCH_NODES 64
#define MAX_BRANCHES 16

/* FLOP-equivalents of writing one element (a convolution's output, a
 * resampled value): what the estimate charges for memory traffic beside
 * the convolutions' 2 * C_out * C_in FLOPs per position (a memory-bound
 * element costs tens of GEMM FLOPs on the CPUs and GPUs fissile targets). */
#define ELEM_WEIGHT 32.0

typedef struct branch {
  fsl_value *root;                       /* the concat operand (or the conv input) */
  fsl_value *src;                        /* the one leaf x_i */
  fsl_node *nodes[MAX_BRANCH_NODES];     /* R_i's nodes */
  int n_nodes;
  int64_t c0;                            /* first channel of the operand in the concat */
} branch;

static bool int_attr(const fsl_node *n, const char *name, int64_t want) {
  fsl_rw_ints v;
  if (!fsl_rw_node_ints(n, name, &v)) return false;
  for (int i = 0; i < v.n; i++)
    if (v.v[i] != want) return false;
  return true;
}

bool fsl_rw_pointwise_conv(const fsl_node *n) {
  if (n->op != FSL_OP_conv || n->n_in != 2 || !n->in[0] || !n->in[1] || !n->out[0]) return false;
  const fsl_value *x = n->in[0], *w = n->in[1];
  if (x->rank != 4 || w->rank != 4 || !w->data || w->dims[2] != 1 || w->dims[3] != 1) return false;
  return int_attr(n, "strides", 1) && int_attr(n, "dilations", 1) && int_attr(n, "pads", 0) &&
         int_attr(n, "group", 1) && int_attr(n, "lhs_dilation", 1);
}

/* A constant the same along the channel axis: expand(c) with c constant,
 * of rank 4 and channel dim 1, or a float32 constant (an expand the
 * builder folded, at small sizes) whose channels hold equal values. */
static bool channel_broadcast_const(const fsl_value *v) {
  const fsl_node *p = v->producer;
  if (p && p->op == FSL_OP_expand && p->in[0]) {
    const fsl_value *c = p->in[0];
    return c->data && c->rank == 4 && c->dims[1] == 1;
  }
  if (!v->data || v->rank != 4 || v->dtype != FSL_DT_F32) return false;
  size_t plane = sizeof(float) * (size_t)(v->dims[2] * v->dims[3]);
  const char *d = v->data;
  for (int64_t n = 0; n < v->dims[0]; n++)
    for (int64_t c = 1; c < v->dims[1]; c++)
      if (memcmp(d + (size_t)(n * v->dims[1] + c) * plane, d + (size_t)(n * v->dims[1]) * plane, plane)) return false;
  return true;
}

/* The channel-broadcast constant v (channel_broadcast_const) for `dims`:
 * an expand view, folded only up to the builder's default size. */
static fsl_value *broadcast_for(fsl_builder *bd, fsl_value *v, const int64_t *dims) {
  fsl_value *c = v->data ? fsl_b_slice_axis(bd, v, 1, 0, 1) : v->producer->in[0];
  return fsl_b_expand(bd, c, dims);
}

static bool has_node(const branch *b, const fsl_node *n) {
  for (int i = 0; i < b->n_nodes; i++)
    if (b->nodes[i] == n) return true;
  return false;
}

/* Walks v's producers while they are per-channel linear maps over
 * positions; the first value that is not becomes the branch's source, and
 * every other leaf must be that value. */
static bool walk(branch *b, fsl_value *v, int64_t channels) {
  if (v->rank != 4 || v->dims[1] != channels || v->dtype != FSL_DT_F32) return false;
  if (v == b->src) return true;
  fsl_node *p = v->producer;
  bool linear = false;
  if (p && !has_node(b, p)) {
    fsl_rw_ints axis;
    switch (p->op) {
    case FSL_OP_gather:
      linear = p->n_in == 2 && p->in[1] && p->in[1]->data && p->in[1]->rank == 1 &&
               fsl_rw_node_ints(p, "axis", &axis) && axis.v[0] != 1 && axis.v[0] != -3;
      break;
    case FSL_OP_mul:
      linear = p->n_in == 2 && (channel_broadcast_const(p->in[0]) || channel_broadcast_const(p->in[1]));
      break;
    case FSL_OP_add: case FSL_OP_sub: case FSL_OP_neg:
      linear = true;
      break;
    default:
      break;
    }
  } else if (p) {
    return true; /* reached again through another path */
  }
  if (!linear) {
    if (v->data) return false; /* a constant leaf: an affine map, not a linear one */
    if (b->src) return false;
    b->src = v;
    return true;
  }
  if (b->n_nodes == MAX_BRANCH_NODES) return false;
  b->nodes[b->n_nodes++] = p;
  switch (p->op) {
  case FSL_OP_gather: return walk(b, p->in[0], channels);
  case FSL_OP_mul: return walk(b, channel_broadcast_const(p->in[1]) ? p->in[0] : p->in[1], channels);
  case FSL_OP_neg: return walk(b, p->in[0], channels);
  default: return walk(b, p->in[0], channels) && walk(b, p->in[1], channels);
  }
}

/* Every value the branch computes (but its source) is read only inside
 * the branch or by `user` (the concat or the conv). */
static bool branch_closed(const branch *b, const fsl_node *user) {
  for (int i = 0; i < b->n_nodes; i++) {
    const fsl_value *v = b->nodes[i]->out[0];
    if (v->is_output) return false;
    for (int c = 0; c < v->n_cons; c++) {
      const fsl_node *u = v->cons[c];
      if (u != user && !has_node(b, u)) return false;
    }
  }
  return true;
}

static double positions(const fsl_value *v) { return (double)fsl_value_numel(v) / (double)v->dims[1]; }

/* Rebuilds branch b's subgraph over `x` (the convolved source, C_out
 * channels) in place of its source; memo maps old values to new ones. */
typedef struct memo {
  const fsl_value *from[MAX_BRANCH_NODES + 1];
  fsl_value *to[MAX_BRANCH_NODES + 1];
  int n;
} memo;

static fsl_value *replay(fsl_builder *bd, const branch *b, memo *m, fsl_value *v) {
  for (int i = 0; i < m->n; i++)
    if (m->from[i] == v) return m->to[i];
  fsl_node *p = v->producer;
  fsl_value *r = NULL;
  if (p->op == FSL_OP_gather) {
    fsl_rw_ints axis;
    fsl_rw_node_ints(p, "axis", &axis);
    r = fsl_b_gather(bd, replay(bd, b, m, p->in[0]), p->in[1], (int)axis.v[0]);
  } else if (p->op == FSL_OP_mul) {
    int k = channel_broadcast_const(p->in[1]) ? 1 : 0;
    fsl_value *x = replay(bd, b, m, p->in[1 - k]);
    if (!x) return NULL;
    r = fsl_b_binary(bd, FSL_OP_mul, x, broadcast_for(bd, p->in[k], x->dims));
  } else if (p->op == FSL_OP_neg) {
    r = fsl_b_unary(bd, FSL_OP_neg, replay(bd, b, m, p->in[0]));
  } else {
    fsl_value *x = replay(bd, b, m, p->in[0]), *y = replay(bd, b, m, p->in[1]);
    r = x && y ? fsl_b_binary(bd, p->op, x, y) : NULL;
  }
  if (r && m->n < (int)FSL_ARRAY_LEN(m->from)) {
    m->from[m->n] = v;
    m->to[m->n++] = r;
  }
  return r;
}

/* Rewrites conv node n when its input qualifies; true when it did. */
static fsl_status sink_at(fsl_graph *g, fsl_node *n, bool *done) {
  *done = false;
  if (!fsl_rw_pointwise_conv(n)) return FSL_OK;
  fsl_value *x = n->in[0], *w = n->in[1], *y = n->out[0];
  fsl_node *cat = x->producer;
  bool concat = cat && cat->op == FSL_OP_concat && x->n_cons == 1 && !x->is_output;
  if (concat) {
    fsl_rw_ints axis;
    concat = fsl_rw_node_ints(cat, "axis", &axis) && (axis.v[0] == 1 || axis.v[0] == -3) &&
             cat->n_in <= MAX_BRANCHES;
  }
  int nb = concat ? cat->n_in : 1;
  branch br[MAX_BRANCHES];
  memset(br, 0, sizeof br);
  int64_t c0 = 0;
  /* work: the convolutions' FLOPs, and ELEM_WEIGHT per element written by
   * them and by the resampling (one kernel's output: the concat's
   * resampled parts before, the sum after) */
  double c_out = (double)w->dims[0], p_out = positions(x);
  double old_work = 2.0 * c_out * (double)x->dims[1] * p_out + ELEM_WEIGHT * c_out * p_out;
  double new_work = ELEM_WEIGHT * c_out * p_out;
  bool resampled = false;
  for (int i = 0; i < nb; i++) {
    branch *b = &br[i];
    b->root = concat ? cat->in[i] : x;
    b->c0 = c0;
    if (!b->root || !walk(b, b->root, b->root->dims[1]) || !branch_closed(b, concat ? cat : n)) return FSL_OK;
    c0 += b->root->dims[1];
    new_work += (2.0 * (double)b->root->dims[1] + ELEM_WEIGHT) * c_out * positions(b->src);
    if (b->n_nodes) {
      resampled = true;
      old_work += ELEM_WEIGHT * (double)fsl_value_numel(b->root);
    }
  }
  if (!resampled || !(new_work < 0.75 * old_work)) return FSL_OK;

  /* the default folding size: the weights' slices shrink, so they fold
   * anyway; a larger limit (it was the weights' size) folded the broadcast
   * resampling weights into full-size constants, segformer_b0's
   * [1, 256, 14, 56], 0.8 MB read per tap instead of 56 floats */
  fsl_builder bd = {.g = g, .fold = true, .origin = n->origin, .origin_name = n->origin_name,
                    .origin_op = n->origin_op};
  int64_t strides[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0, 0, 0, 0};
  fsl_value *sum = NULL;
  for (int i = 0; i < nb && !bd.st; i++) {
    const branch *b = &br[i];
    fsl_value *wi = nb == 1 ? w : fsl_b_slice_axis(&bd, w, 1, b->c0, b->root->dims[1]);
    fsl_value *ci = fsl_b_conv(&bd, b->src, wi, strides, dil, pads, 1, NULL);
    memo m = {.n = 1};
    m.from[0] = b->src;
    m.to[0] = ci;
    fsl_value *ri = ci ? replay(&bd, b, &m, b->root) : NULL;
    sum = !sum ? ri : fsl_b_binary(&bd, FSL_OP_add, sum, ri);
  }
  if (bd.st) {
    /* a shape the builder refuses: leave this conv as it is */
    if (bd.st == FSL_ERR_SHAPE) {
      fsl_error_clear();
      return FSL_OK;
    }
    return bd.st;
  }
  fsl_rw_replace_root(g, y, sum);
  *done = true;
  return FSL_OK;
}

fsl_status fsl_rewrite_sink(fsl_graph *g, int *applied) {
  int n = g->n_nodes; /* nodes appended here are not visited */
  for (int i = 0; i < n; i++) {
    fsl_node *nd = g->nodes[i];
    if (nd->op != FSL_OP_conv || !nd->out[0]) continue;
    bool done;
    FSL_TRY(sink_at(g, nd, &done));
    *applied += done;
  }
  return FSL_OK;
}
