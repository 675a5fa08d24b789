/*
 * rnn.c — decompositions of the recurrent ONNX ops RNN, GRU and LSTM.
 *
 * Shapes are static, so the recurrence is unrolled over time: the input
 * projection X*W^T (+ biases) of every time step is one matmul, then each
 * step is a matmul with R^T plus elementwise gate arithmetic.  A non-trivial
 * sequence_lens masks the steps past each batch entry's length (the state
 * is carried through unchanged, Y is zero there).
 */
#include "fission/fission.h"

#include <strings.h>

enum { CELL_RNN, CELL_GRU, CELL_LSTM };

typedef enum act_kind {
  ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU,
  ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
} act_kind;

typedef struct act_info {
  const char *name;
  act_kind kind;
  int n_params;          /* 0: none, 1: alpha, 2: alpha and beta */
  double alpha, beta;    /* defaults */
} act_info;

static const act_info k_acts[] = {
  {"Relu", ACT_RELU, 0, 0, 0},
  {"Tanh", ACT_TANH, 0, 0, 0},
  {"Sigmoid", ACT_SIGMOID, 0, 0, 0},
  {"Affine", ACT_AFFINE, 2, 1.0, 0.0},
  {"LeakyRelu", ACT_LEAKYRELU, 1, 0.01, 0},
  {"ThresholdedRelu", ACT_THRESHOLDEDRELU, 1, 1.0, 0},
  {"ScaledTanh", ACT_SCALEDTANH, 2, 1.0, 1.0},
  {"HardSigmoid", ACT_HARDSIGMOID, 2, 0.2, 0.5},
  {"Elu", ACT_ELU, 1, 1.0, 0},
  {"Softsign", ACT_SOFTSIGN, 0, 0, 0},
  {"Softplus", ACT_SOFTPLUS, 0, 0, 0},
};

typedef struct rnn_act {
  act_kind kind;
  double alpha, beta;
} rnn_act;

typedef struct rnn_cfg {
  int cell, gates, n_acts, n_dir, layout;
  int64_t hidden, seq, batch, input;
  bool reverse;          /* direction "reverse" (single direction) */
  bool has_clip, lbr, input_forget;
  double clip;
  fsl_dtype dt;
  rnn_act act[2][3];     /* per direction: f, g, h */
  fsl_value *mask_lens;  /* sequence_lens when it masks, else NULL */
} rnn_cfg;

/* ---- activations ---- */

/* Reads 'activations', 'activation_alpha', 'activation_beta'; alphas and
 * betas are consumed in order by the activations that take them. */
static fsl_status read_acts(fsl_fctx *fx, rnn_cfg *c, const char *const *defaults) {
  const fsl_attr *names = fsl_attr_find(fx->node, "activations");
  const double *alphas = NULL, *betas = NULL;
  int na = fsl_attr_floats(fx->node, "activation_alpha", &alphas);
  int nb = fsl_attr_floats(fx->node, "activation_beta", &betas);
  int n = c->n_acts * c->n_dir, ia = 0, ib = 0;
  if (names && names->n != n)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected %d 'activations', got %d", n, names->n);
  for (int i = 0; i < n; i++) {
    const char *s = names ? names->strings[i] : defaults[i % c->n_acts];
    const act_info *ai = NULL;
    for (size_t j = 0; j < FSL_ARRAY_LEN(k_acts); j++)
      if (!strcasecmp(s, k_acts[j].name)) ai = &k_acts[j];
    if (!ai) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "unsupported activation '%s'", s);
    rnn_act *a = &c->act[i / c->n_acts][i % c->n_acts];
    a->kind = ai->kind;
    a->alpha = ai->alpha;
    a->beta = ai->beta;
    if (ai->n_params >= 1 && ia < na) a->alpha = alphas[ia++];
    if (ai->n_params >= 2 && ib < nb) a->beta = betas[ib++];
  }
  return FSL_OK;
}

static fsl_value *bin_s(fsl_builder *b, fsl_op op, fsl_value *x, double s) {
  return fsl_b_binary_scalar(b, op, x, s);
}

/* Applies activation a to x. */
static fsl_value *apply_act(fsl_builder *b, const rnn_act *a, fsl_value *x) {
  if (!x) return NULL;
  switch (a->kind) {
  case ACT_RELU: return bin_s(b, FSL_OP_max, x, 0.0);
  case ACT_TANH: return fsl_b_unary(b, FSL_OP_tanh, x);
  case ACT_SIGMOID: return fsl_b_unary(b, FSL_OP_sigmoid, x);
  case ACT_AFFINE: return bin_s(b, FSL_OP_add, bin_s(b, FSL_OP_mul, x, a->alpha), a->beta);
  case ACT_LEAKYRELU:
    return fsl_b_binary(b, FSL_OP_add, bin_s(b, FSL_OP_max, x, 0.0),
                        bin_s(b, FSL_OP_mul, bin_s(b, FSL_OP_min, x, 0.0), a->alpha));
  case ACT_THRESHOLDEDRELU:
    return fsl_b_where(b, bin_s(b, FSL_OP_gt, x, a->alpha), x, fsl_b_scalar(b, x->dtype, 0.0));
  case ACT_SCALEDTANH:
    return bin_s(b, FSL_OP_mul, fsl_b_unary(b, FSL_OP_tanh, bin_s(b, FSL_OP_mul, x, a->beta)), a->alpha);
  case ACT_HARDSIGMOID:
    return bin_s(b, FSL_OP_max, bin_s(b, FSL_OP_min, bin_s(b, FSL_OP_add, bin_s(b, FSL_OP_mul, x, a->alpha), a->beta), 1.0),
                 0.0);
  case ACT_ELU: {
    fsl_value *neg = bin_s(b, FSL_OP_mul, bin_s(b, FSL_OP_sub, fsl_b_unary(b, FSL_OP_exp, x), 1.0), a->alpha);
    return fsl_b_where(b, bin_s(b, FSL_OP_lt, x, 0.0), neg, x);
  }
  case ACT_SOFTSIGN:
    return fsl_b_binary(b, FSL_OP_div, x, bin_s(b, FSL_OP_add, fsl_b_unary(b, FSL_OP_abs, x), 1.0));
  case ACT_SOFTPLUS:
    return fsl_b_unary(b, FSL_OP_log, bin_s(b, FSL_OP_add, fsl_b_unary(b, FSL_OP_exp, x), 1.0));
  }
  return NULL;
}

/* Clips gate pre-activations to [-clip, clip] when 'clip' is set, then
 * applies the activation. */
static fsl_value *gate(fsl_builder *b, const rnn_cfg *c, const rnn_act *a, fsl_value *x) {
  if (c->has_clip) x = bin_s(b, FSL_OP_min, bin_s(b, FSL_OP_max, x, -c->clip), c->clip);
  return apply_act(b, a, x);
}

/* ---- operand slicing ---- */

/* Slice [start, start+size) of the last axis of x. */
static fsl_value *last_slice(fsl_builder *b, fsl_value *x, int64_t start, int64_t size) {
  if (!x) return NULL;
  return fsl_b_slice_axis(b, x, x->rank - 1, start, size);
}

/* Direction d of a [num_dir, rest...] tensor, the leading axis dropped. */
static fsl_value *dir_part(fsl_builder *b, fsl_value *x, int d) {
  if (!x) return NULL;
  fsl_value *s = fsl_b_slice_axis(b, x, 0, d, 1);
  if (!s) return NULL;
  return fsl_b_reshape(b, s, x->rank - 1, x->dims + 1);
}

static fsl_value *transpose2(fsl_builder *b, fsl_value *x) {
  static const int64_t tr[2] = {1, 0};
  return x ? fsl_b_permute(b, x, tr) : NULL;
}

/* Swaps the two leading axes of a rank-3 tensor (layout 1 <-> layout 0). */
static fsl_value *swap01(fsl_builder *b, fsl_value *x) {
  static const int64_t p[3] = {1, 0, 2};
  return x ? fsl_b_permute(b, x, p) : NULL;
}

/* ---- configuration ---- */

/* Longest sequence unrolled (each step adds a few dozen primitives). */
#define FSL_RNN_MAX_STEPS 65536

static fsl_status read_cfg(fsl_fctx *fx, rnn_cfg *c, int cell) {
  static const int gates[] = {1, 3, 4}, n_acts[] = {1, 2, 3};
  static const char *const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  memset(c, 0, sizeof *c);
  c->cell = cell;
  c->gates = gates[cell];
  c->n_acts = n_acts[cell];
  fsl_value *x = fx->in[0], *w = fx->in[1], *r = fx->in[2];
  c->layout = (int)fsl_attr_int(fx->node, "layout", 0);
  if (x->rank != 3 || w->rank != 3 || r->rank != 3)
    return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 3-D X, W and R");
  c->seq = x->dims[c->layout ? 1 : 0];
  c->batch = x->dims[c->layout ? 0 : 1];
  c->input = x->dims[2];
  c->hidden = fsl_attr_int(fx->node, "hidden_size", r->dims[2]);
  c->dt = x->dtype;
  if (!fsl_dtype_is_float(c->dt)) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "expected a float X");
  const char *dir = fsl_attr_str(fx->node, "direction", "forward");
  if (!strcmp(dir, "bidirectional")) c->n_dir = 2;
  else if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) c->n_dir = 1, c->reverse = dir[0] == 'r';
  else return fsl_fx_fail(fx, FSL_ERR_INVALID, "expected 'direction' forward, reverse or bidirectional, got '%s'", dir);
  if (c->seq > FSL_RNN_MAX_STEPS)
    return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "sequence length %lld: fissile unrolls the recurrence at compile "
                       "time, up to %d steps", (long long)c->seq, FSL_RNN_MAX_STEPS);
  if (c->hidden != r->dims[2])
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "hidden_size %lld, but R is [%lld, %lld, %lld]", (long long)c->hidden,
                       (long long)r->dims[0], (long long)r->dims[1], (long long)r->dims[2]);
  int64_t gh = c->gates * c->hidden;
  if (w->dims[0] != c->n_dir || w->dims[1] != gh || w->dims[2] != c->input || r->dims[0] != c->n_dir ||
      r->dims[1] != gh || r->dims[2] != c->hidden)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected W [%d, %lld, %lld] and R [%d, %lld, %lld]", c->n_dir, (long long)gh,
                       (long long)c->input, c->n_dir, (long long)gh, (long long)c->hidden);
  fsl_value *bias = fx->n_in > 3 ? fx->in[3] : NULL;
  if (bias && (bias->rank != 2 || bias->dims[0] != c->n_dir || bias->dims[1] != 2 * gh))
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected B [%d, %lld]", c->n_dir, (long long)(2 * gh));
  const fsl_attr *clip = fsl_attr_find(fx->node, "clip");
  c->has_clip = clip != NULL;
  c->clip = fsl_attr_float(fx->node, "clip", 0.0);
  c->lbr = fsl_attr_int(fx->node, "linear_before_reset", 0) != 0;
  c->input_forget = fsl_attr_int(fx->node, "input_forget", 0) != 0;
  return read_acts(fx, c, defaults[cell]);
}

/* sequence_lens: NULL when absent or a constant equal to seq everywhere
 * (no masking needed); otherwise it masks the steps. */
static fsl_status read_seq_lens(fsl_fctx *fx, rnn_cfg *c) {
  fsl_value *sl = fx->n_in > 4 ? fx->in[4] : NULL;
  if (!sl) return FSL_OK;
  if (sl->rank != 1 || sl->dims[0] != c->batch)
    return fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected sequence_lens [%lld]", (long long)c->batch);
  if (sl->data) {
    bool all = true;
    for (int64_t i = 0; i < c->batch; i++) {
      int64_t v = fsl_load_i64(sl->dtype, sl->data, i);
      if (v < 0 || v > c->seq)
        return fsl_fx_fail(fx, FSL_ERR_INVALID, "sequence_lens[%lld] = %lld outside [0, %lld]", (long long)i,
                           (long long)v, (long long)c->seq);
      all &= v == c->seq;
    }
    if (all) return FSL_OK;
  }
  c->mask_lens = fsl_b_reshape(fx->b, sl, 2, (int64_t[]){c->batch, 1});
  return FSL_OK;
}

/* An initial state ([num_dir, batch, hidden], or [batch, num_dir, hidden]
 * with layout 1) for direction d, or zeros. */
static fsl_value *initial_state(fsl_fctx *fx, const rnn_cfg *c, int input, int d) {
  fsl_builder *b = fx->b;
  fsl_value *s = fx->n_in > input ? fx->in[input] : NULL;
  int64_t dims[2] = {c->batch, c->hidden};
  if (!s) return fsl_b_broadcast_to(b, fsl_b_scalar(b, c->dt, 0.0), 2, dims);
  if (s->rank != 3 || s->dims[c->layout ? 1 : 0] != c->n_dir || s->dims[c->layout ? 0 : 1] != c->batch ||
      s->dims[2] != c->hidden) {
    fsl_fx_fail(fx, FSL_ERR_SHAPE, "expected input %d of shape [%lld, %d, %lld] (layout %d)", input,
                (long long)(c->layout ? c->batch : c->n_dir), c->layout ? c->n_dir : (int)c->batch,
                (long long)c->hidden, c->layout);
    return NULL;
  }
  return dir_part(b, c->layout ? swap01(b, s) : s, d);
}

/* ---- one direction ---- */

typedef struct rnn_dir {
  fsl_value *xw;         /* [seq, batch, G*H]: X W^T + biases folded in */
  fsl_value *rt;         /* R^T [H, G*H] (GRU lbr 0: [H, 2H] for z, r) */
  fsl_value *rt_h;       /* GRU lbr 0: Rh^T [H, H] */
  fsl_value *rb;         /* bias added to H R^T each step (NULL if folded) */
  fsl_value *rb_h;       /* GRU: Rbh */
  fsl_value *p;          /* LSTM peepholes [3H] */
  const rnn_act *act;
} rnn_dir;

/* Builds the per-direction constants and the input projection. */
static void setup_dir(fsl_fctx *fx, const rnn_cfg *c, fsl_value *x_sbi, int d, rnn_dir *rd) {
  fsl_builder *b = fx->b;
  int64_t h = c->hidden, gh = c->gates * h;
  fsl_value *w = dir_part(b, fx->in[1], d), *r = dir_part(b, fx->in[2], d);
  fsl_value *bias = fx->n_in > 3 && fx->in[3] ? dir_part(b, fx->in[3], d) : NULL;
  fsl_value *p = fx->n_in > 7 && fx->in[7] ? dir_part(b, fx->in[7], d) : NULL;
  memset(rd, 0, sizeof *rd);
  rd->act = c->act[d];
  rd->p = p;
  int64_t d2[2] = {c->seq * c->batch, c->input}, d3[3] = {c->seq, c->batch, gh};
  fsl_value *xw = fsl_b_matmul(b, fsl_b_reshape(b, x_sbi, 2, d2), transpose2(b, w));
  if (bias) {
    fsl_value *wb = last_slice(b, bias, 0, gh), *rb = last_slice(b, bias, gh, gh);
    if (c->cell == CELL_GRU) {
      /* Rbh stays inside the reset-gated term */
      fsl_value *rb_zr = last_slice(b, rb, 0, 2 * h);
      rd->rb_h = last_slice(b, rb, 2 * h, h);
      fsl_value *zero = fsl_b_broadcast_to(b, fsl_b_scalar(b, c->dt, 0.0), 1, &h);
      fsl_value *parts[2] = {rb_zr, zero};
      rb = fsl_b_concat(b, parts, 2, 0);
    }
    xw = fsl_b_binary(b, FSL_OP_add, xw, fsl_b_binary(b, FSL_OP_add, wb, rb));
  }
  rd->xw = fsl_b_reshape(b, xw, 3, d3);
  if (c->cell == CELL_GRU && !c->lbr) {
    rd->rt = transpose2(b, fsl_b_slice_axis(b, r, 0, 0, 2 * h));
    rd->rt_h = transpose2(b, fsl_b_slice_axis(b, r, 0, 2 * h, h));
  } else {
    rd->rt = transpose2(b, r);
  }
}

/* Keeps `prev` where the step is masked out (t >= sequence_lens[b]). */
static fsl_value *mask_step(fsl_builder *b, const fsl_value *mask, fsl_value *next, fsl_value *prev) {
  if (!mask) return next;
  return fsl_b_where(b, (fsl_value *)mask, next, prev);
}

/* One step of the cell; updates *h (and *cs for LSTM). */
static void cell_step(fsl_builder *b, const rnn_cfg *c, const rnn_dir *rd, fsl_value *xt, fsl_value **h,
                      fsl_value **cs, const fsl_value *mask) {
  int64_t hs = c->hidden;
  fsl_value *hr = fsl_b_matmul(b, *h, rd->rt);
  if (c->cell == CELL_RNN) {
    *h = mask_step(b, mask, gate(b, c, &rd->act[0], fsl_b_binary(b, FSL_OP_add, xt, hr)), *h);
    return;
  }
  if (c->cell == CELL_GRU) {
    fsl_value *zr = fsl_b_binary(b, FSL_OP_add, last_slice(b, xt, 0, 2 * hs), last_slice(b, hr, 0, 2 * hs));
    fsl_value *z = gate(b, c, &rd->act[0], last_slice(b, zr, 0, hs));
    fsl_value *r = gate(b, c, &rd->act[0], last_slice(b, zr, hs, hs));
    fsl_value *hh;
    if (c->lbr) {
      hh = last_slice(b, hr, 2 * hs, hs);
      if (rd->rb_h) hh = fsl_b_binary(b, FSL_OP_add, hh, rd->rb_h);
      hh = fsl_b_binary(b, FSL_OP_mul, r, hh);
    } else {
      hh = fsl_b_matmul(b, fsl_b_binary(b, FSL_OP_mul, r, *h), rd->rt_h);
      if (rd->rb_h) hh = fsl_b_binary(b, FSL_OP_add, hh, rd->rb_h);
    }
    fsl_value *n = gate(b, c, &rd->act[1], fsl_b_binary(b, FSL_OP_add, last_slice(b, xt, 2 * hs, hs), hh));
    /* H = (1 - z) * n + z * H = n + z * (H - n) */
    fsl_value *hn = fsl_b_binary(b, FSL_OP_add, n, fsl_b_binary(b, FSL_OP_mul, z, fsl_b_binary(b, FSL_OP_sub, *h, n)));
    *h = mask_step(b, mask, hn, *h);
    return;
  }
  /* LSTM, gate order i o f c; peepholes P = [Pi, Po, Pf] */
  fsl_value *g = fsl_b_binary(b, FSL_OP_add, xt, hr);
  fsl_value *gi = last_slice(b, g, 0, hs), *go = last_slice(b, g, hs, hs);
  fsl_value *gf = last_slice(b, g, 2 * hs, hs), *gc = last_slice(b, g, 3 * hs, hs);
  if (rd->p) {
    gi = fsl_b_binary(b, FSL_OP_add, gi, fsl_b_binary(b, FSL_OP_mul, last_slice(b, rd->p, 0, hs), *cs));
    gf = fsl_b_binary(b, FSL_OP_add, gf, fsl_b_binary(b, FSL_OP_mul, last_slice(b, rd->p, 2 * hs, hs), *cs));
  }
  fsl_value *i = gate(b, c, &rd->act[0], gi);
  fsl_value *f = c->input_forget ? fsl_b_binary(b, FSL_OP_sub, fsl_b_scalar(b, c->dt, 1.0), i)
                                 : gate(b, c, &rd->act[0], gf);
  fsl_value *cc = gate(b, c, &rd->act[1], gc);
  fsl_value *cn = fsl_b_binary(b, FSL_OP_add, fsl_b_binary(b, FSL_OP_mul, f, *cs), fsl_b_binary(b, FSL_OP_mul, i, cc));
  if (rd->p) go = fsl_b_binary(b, FSL_OP_add, go, fsl_b_binary(b, FSL_OP_mul, last_slice(b, rd->p, hs, hs), cn));
  fsl_value *o = gate(b, c, &rd->act[0], go);
  fsl_value *hn = fsl_b_binary(b, FSL_OP_mul, o, apply_act(b, &rd->act[2], cn));
  *h = mask_step(b, mask, hn, *h);
  *cs = mask_step(b, mask, cn, *cs);
}

/* Runs direction d over all steps; returns Y_d [seq, 1, batch, H] and the
 * final states. */
static fsl_value *run_dir(fsl_fctx *fx, const rnn_cfg *c, fsl_value *x_sbi, int d, fsl_value **h_out,
                          fsl_value **c_out) {
  fsl_builder *b = fx->b;
  rnn_dir rd;
  setup_dir(fx, c, x_sbi, d, &rd);
  fsl_value *h = initial_state(fx, c, 5, d);
  fsl_value *cs = c->cell == CELL_LSTM ? initial_state(fx, c, 6, d) : NULL;
  bool rev = c->reverse || d == 1;
  fsl_value **ys = calloc((size_t)c->seq, sizeof *ys);
  if (!ys) return fsl_b_fail(b, FSL_ERR_NOMEM, "out of memory unrolling %lld steps", (long long)c->seq);
  int64_t d2[2] = {c->batch, c->gates * c->hidden}, d4[4] = {1, 1, c->batch, c->hidden};
  for (int64_t s = 0; s < c->seq && b->st == FSL_OK; s++) {
    int64_t t = rev ? c->seq - 1 - s : s;
    fsl_value *xt = fsl_b_reshape(b, fsl_b_slice_axis(b, rd.xw, 0, t, 1), 2, d2);
    fsl_value *mask = NULL;
    if (c->mask_lens)
      mask = fsl_b_binary(b, FSL_OP_lt, fsl_b_scalar(b, c->mask_lens->dtype, (double)t), c->mask_lens);
    cell_step(b, c, &rd, xt, &h, &cs, mask);
    fsl_value *y = mask ? fsl_b_where(b, mask, h, fsl_b_scalar(b, c->dt, 0.0)) : h;
    ys[t] = fsl_b_reshape(b, y, 4, d4);
  }
  fsl_value *y = b->st == FSL_OK ? fsl_b_concat(b, ys, (int)c->seq, 0) : NULL;
  free(ys);
  *h_out = h;
  *c_out = cs;
  return y;
}

/* Reorders a [dir, batch, H] state for layout 1 ([batch, dir, H]). */
static fsl_value *state_out(fsl_builder *b, const rnn_cfg *c, fsl_value *const *parts) {
  int64_t d3[3] = {1, c->batch, c->hidden};
  fsl_value *r[2];
  for (int d = 0; d < c->n_dir; d++) r[d] = parts[d] ? fsl_b_reshape(b, parts[d], 3, d3) : NULL;
  if (b->st != FSL_OK) return NULL;
  fsl_value *s = c->n_dir == 2 ? fsl_b_concat(b, r, 2, 0) : r[0];
  return c->layout ? swap01(b, s) : s;
}

/* Shared driver of RNN, GRU and LSTM. */
static fsl_status recurrent(fsl_fctx *fx, int cell) {
  fsl_builder *b = fx->b;
  for (int i = 0; i < 3; i++)
    if (!fsl_fx_req(fx, i)) return fsl_fx_done(fx);
  rnn_cfg c;
  FSL_TRY(read_cfg(fx, &c, cell));
  if (c.seq < 1) return fsl_fx_fail(fx, FSL_ERR_UNSUPPORTED, "expected a sequence length >= 1");
  FSL_TRY(read_seq_lens(fx, &c));
  fsl_value *x = c.layout ? swap01(b, fx->in[0]) : fx->in[0];
  fsl_value *ys[2] = {NULL, NULL}, *hs[2] = {NULL, NULL}, *cs[2] = {NULL, NULL};
  for (int d = 0; d < c.n_dir; d++) ys[d] = run_dir(fx, &c, x, d, &hs[d], &cs[d]);
  FSL_TRY(fsl_fx_done(fx));
  fsl_value *y = c.n_dir == 2 ? fsl_b_concat(b, ys, 2, 1) : ys[0];
  if (c.layout) {
    static const int64_t p[4] = {2, 0, 1, 3};
    y = fsl_b_permute(b, y, p);
  }
  fx->out[0] = y;
  if (fx->n_out > 1) fx->out[1] = state_out(b, &c, hs);
  if (fx->n_out > 2 && cell == CELL_LSTM) fx->out[2] = state_out(b, &c, cs);
  return fsl_fx_done(fx);
}

/** ONNX RNN (opset 7, 14): Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb), unrolled. */
fsl_status fsl_fission_RNN(fsl_fctx *fx) { return recurrent(fx, CELL_RNN); }

/** ONNX GRU (opset 7, 14): update/reset gates, linear_before_reset, unrolled. */
fsl_status fsl_fission_GRU(fsl_fctx *fx) { return recurrent(fx, CELL_GRU); }

/** ONNX LSTM (opset 7, 14): i/o/f/c gates, peepholes, input_forget, unrolled. */
fsl_status fsl_fission_LSTM(fsl_fctx *fx) { return recurrent(fx, CELL_LSTM); }
