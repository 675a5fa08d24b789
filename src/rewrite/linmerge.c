/*
 * linmerge.c — the rewrite conv1x1-into-matmul: a 1x1 convolution whose
 * input is a matmul with constant weights (and a per-channel bias), seen
 * through reshapes and permutes, becomes that matmul with the two weight
 * matrices multiplied at compile time.
 *
 * Two linear maps over channels in a row are one:
 *
 *   conv(view(matmul(a, M) + b), W)  =  view'(matmul(a, M W') + b W')
 *
 * where W' is W as a [C, C_out] matrix, the products of constants fold,
 * and view' is the same chain of reshapes and permutes with the channel
 * axis C_out long.  The walk from the convolution's input follows the
 * channel axis back through reshapes that keep it whole (the elements
 * before and after it unchanged) and permutes, past an add of a constant
 * broadcast along that axis only (the bias), to a 2-D matmul
 * [P, K] x [K, C] with constant weights whose last axis it is.  Every
 * value on the way must be read by nothing else (a closed match: the old
 * matmul goes away), so the work always drops: 2 P (K C + C C_out) FLOPs
 * become 2 P K C_out and the [P, C] intermediate is not written.
 *
 * Where it applies: a per-position projection followed by a 1x1
 * convolution, which conv1x1-before-resample (sink.c) makes of SegFormer's
 * decoder (each stage's 256-channel MLP projection, then its slice of the
 * fuse convolution).  Like sink.c it is C because the chain has no fixed
 * length; fsl_rewrite runs it with the rules, counted as
 * FSL_RW_LINMERGE_NAME.
 */
#include "rewrite/rewrite.h"
#include "fission/builder.h"

#define MAX_CHAIN 16

/* The axis of `to` that is axis a of `from` when a reshape between them
 * keeps a whole: the same length, the same number of elements before it;
 * -1 when it is split or merged. */
static int reshape_axis(const fsl_value *from, const fsl_value *to, int a) {
  int64_t before = 1, b2 = 1;
  for (int i = 0; i < a; i++) before *= from->dims[i];
  for (int j = 0; j < to->rank; j++) {
    if (b2 == before && to->dims[j] == from->dims[a]) return j;
    b2 *= to->dims[j];
    if (b2 > before) break;
  }
  return -1;
}

/* A float32 constant that varies along axis a only: expand(c) with c
 * constant and every dim but a equal to 1, or a constant (an expand the
 * builder folded, at small sizes) that fsl_rw_varies_only along a.
 * Returns c or the constant; NULL when v is neither. */
static fsl_value *axis_const(fsl_value *v, int a) {
  fsl_value *c = v->producer && v->producer->op == FSL_OP_expand ? v->producer->in[0] : v;
  if (!c || !c->data || c->rank != v->rank || c->dtype != FSL_DT_F32 || c->dims[a] != v->dims[a]) return NULL;
  return fsl_rw_varies_only(c, a) ? c : NULL;
}

/* The [1.., C at a, ..1] constant of axis_const's answer c. */
static fsl_value *axis_vector(fsl_builder *bd, fsl_value *c, int a) {
  int64_t st[FSL_MAX_RANK], sp[FSL_MAX_RANK], sz[FSL_MAX_RANK];
  for (int i = 0; i < c->rank; i++) st[i] = 0, sp[i] = 1, sz[i] = i == a ? c->dims[a] : 1;
  return fsl_b_slice(bd, c, st, sp, sz);
}

/* One step of the chain, from the conv's input back to the matmul. */
typedef struct step {
  fsl_node *n;
  int axis;               /* the channel axis of n's output */
  fsl_value *bias;        /* add: the constant (axis_const) */
  int operand;            /* add: which input continues the chain */
} step;

static bool only_read_by(const fsl_value *v, const fsl_node *user) {
  return !v->is_output && v->n_cons == 1 && v->cons[0] == user;
}

/* Replaces dims[axis] by n. */
static void with_channels(const fsl_value *v, int axis, int64_t n, int64_t *dims) {
  for (int i = 0; i < v->rank; i++) dims[i] = i == axis ? n : v->dims[i];
}

static fsl_status merge_at(fsl_graph *g, fsl_node *conv, bool *done) {
  *done = false;
  if (!fsl_rw_pointwise_conv(conv)) return FSL_OK;
  const fsl_value *w = conv->in[1];
  step chain[MAX_CHAIN];
  int n = 0, axis = 1;
  fsl_value *v = conv->in[0];
  const fsl_node *user = conv;
  fsl_node *mm = NULL;
  while (!mm) {
    fsl_node *p = v->producer;
    if (!p || n == MAX_CHAIN || !only_read_by(v, user) || v->dtype != FSL_DT_F32) return FSL_OK;
    step s = {.n = p, .axis = axis, .operand = 0};
    if (p->op == FSL_OP_reshape) {
      axis = reshape_axis(v, p->in[0], axis);
    } else if (p->op == FSL_OP_permute) {
      const int64_t *perm;
      if (fsl_attr_ints(p, "perm", &perm) != v->rank) return FSL_OK;
      axis = (int)perm[axis];
    } else if (p->op == FSL_OP_add) {
      for (int k = 0; k < 2 && !s.bias; k++)
        if ((s.bias = axis_const(p->in[k], axis))) s.operand = 1 - k;
      if (!s.bias) return FSL_OK;
    } else if (p->op == FSL_OP_matmul) {
      const fsl_value *a = p->in[0], *m = p->in[1];
      if (a->rank != 2 || m->rank != 2 || !m->data || m->dtype != FSL_DT_F32 || axis != 1) return FSL_OK;
      mm = p;
      break;
    } else {
      return FSL_OK;
    }
    if (axis < 0) return FSL_OK;
    chain[n++] = s;
    user = p;
    v = p->in[s.operand];
  }
  if (!only_read_by(mm->out[0], user)) return FSL_OK;

  /* W as [C, C_out]; M W' and b W' fold into constants */
  int64_t c = w->dims[1], c_out = w->dims[0];
  fsl_builder bd = {.g = g, .fold = true,
                    .fold_limit = fsl_value_nbytes(mm->in[1]) + fsl_value_nbytes(w) +
                                  (int64_t)sizeof(float) * mm->in[1]->dims[0] * c_out,
                    .origin = conv->origin, .origin_name = conv->origin_name, .origin_op = conv->origin_op};
  int64_t w2d[2] = {c_out, c}, tp[2] = {1, 0};
  fsl_value *wt = fsl_b_permute(&bd, fsl_b_reshape(&bd, (fsl_value *)w, 2, w2d), tp);
  fsl_value *r = fsl_b_prim(&bd, FSL_OP_matmul, (fsl_value *[]){mm->in[0], fsl_b_matmul(&bd, mm->in[1], wt)}, 2,
                            NULL, 0);
  int64_t dims[FSL_MAX_RANK];
  for (int i = n - 1; i >= 0 && !bd.st; i--) {
    const step *s = &chain[i];
    const fsl_value *out = s->n->out[0];
    if (s->n->op == FSL_OP_reshape) {
      with_channels(out, s->axis, c_out, dims);
      r = fsl_b_reshape(&bd, r, out->rank, dims);
    } else if (s->n->op == FSL_OP_permute) {
      const int64_t *perm;
      fsl_attr_ints(s->n, "perm", &perm);
      r = fsl_b_permute(&bd, r, perm);
    } else { /* add: the bias through W' */
      int64_t b2d[2] = {1, c};
      fsl_value *bv = axis_vector(&bd, s->bias, s->axis);
      fsl_value *bw = fsl_b_matmul(&bd, fsl_b_reshape(&bd, bv, 2, b2d), wt);
      for (int k = 0; k < out->rank; k++) dims[k] = k == s->axis ? c_out : 1;
      bw = fsl_b_reshape(&bd, bw, out->rank, dims);
      with_channels(out, s->axis, c_out, dims);
      r = fsl_b_binary(&bd, FSL_OP_add, r, fsl_b_expand(&bd, bw, dims));
    }
  }
  if (bd.st) {
    if (bd.st == FSL_ERR_SHAPE) {
      fsl_error_clear();
      return FSL_OK;
    }
    return bd.st;
  }
  const fsl_value *y = conv->out[0];
  if (r->rank != y->rank || memcmp(r->dims, y->dims, sizeof(int64_t) * (size_t)y->rank))
    return fsl_errorf(FSL_ERR_INVALID, "rewrite %s: built %s where the conv made %s", FSL_RW_LINMERGE_NAME,
                      fsl_value_type_str(r, (char[64]){0}, 64), fsl_value_type_str(y, (char[64]){0}, 64));
  fsl_rw_replace_root(g, conv->out[0], r);
  *done = true;
  return FSL_OK;
}

fsl_status fsl_rewrite_linmerge(fsl_graph *g, int *applied) {
  int n = g->n_nodes;
  for (int i = 0; i < n; i++) {
    fsl_node *nd = g->nodes[i];
    if (nd->op != FSL_OP_conv) continue;
    bool done;
    FSL_TRY(merge_at(g, nd, &done));
    *applied += done;
  }
  return FSL_OK;
}
