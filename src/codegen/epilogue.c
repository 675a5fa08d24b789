/*
 * epilogue.c — an epilogue inside a generated matmul or convolution
 * (fsl_cg_epilogue, codegen.h): the store of the accumulated value becomes
 * the epilogue's expressions at the output element's coordinates, with the
 * linear op's output taken from the accumulator and every other operand
 * loaded or computed by the value printer (value.c).  The same tables let
 * a tiled matmul load its operands through movement views of its inputs
 * (fsl_cg_epilogue.src, .views: e.g. attention's K^T read in place).
 */
#include "codegen/cg.h"

bool fsl_cg_epi_open(em *e, const fsl_cg_epilogue *epi, const fsl_node *lin) {
  e->lin_out = lin->out[0];
  e->epi = epi;
  if (!epi) return true;
  const fsl_value *y = lin->out[0], *z = epi->out;
  if (!epi->g || !z || fsl_value_numel(z) != fsl_value_numel(y))
    return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "an epilogue that changes the size of the linear op's output");
  e->epi_in = malloc(sizeof(fsl_value *) * (size_t)(epi->n_in + 2));
  if (!fsl_cg_value_tables(e, epi->g) || !e->epi_in) return fsl_cg_fail(e, FSL_ERR_NOMEM, "out of memory");
  /* in[0], in[1] are the linear op's operands, read by its own code, or
   * the sources of its operand views, read through them (fsl_cg_ev) */
  for (int i = 0; i < 2; i++) {
    e->epi_in[i] = epi->src[i] ? epi->src[i] : lin->in[i];
    if (epi->src[i]) e->in_idx[epi->src[i]->id] = i;
  }
  for (int i = 0; i < epi->n_views; i++) {
    const fsl_node *n = epi->views[i];
    if (!fsl_op_is_primitive(n->op) || fsl_op_get(n->op)->kind != FSL_KIND_MOVEMENT || n->n_out != 1)
      return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "op %s in an operand view of a linear op", fsl_op_name(n->op));
    e->inside[n->out[0]->id] = true;
  }
  for (int i = 0; i < epi->n_in; i++) {
    e->epi_in[2 + i] = epi->in[i];
    e->in_idx[epi->in[i]->id] = 2 + i;
  }
  bool made = z == y; /* no epilogue nodes: only views */
  for (int i = 0; i < epi->n_nodes; i++) {
    const fsl_node *n = epi->nodes[i];
    fsl_kind kind = fsl_op_get(n->op)->kind;
    if (!fsl_op_is_primitive(n->op) || (kind != FSL_KIND_ELEMENTWISE && kind != FSL_KIND_MOVEMENT && kind != FSL_KIND_GATHER))
      return fsl_cg_fail(e, FSL_ERR_UNSUPPORTED, "op %s in the epilogue of a linear op", fsl_op_name(n->op));
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k]) {
        e->inside[n->out[k]->id] = true;
        made = made || n->out[k] == z;
      }
  }
  if (!made) return fsl_cg_fail(e, FSL_ERR_INVALID, "the epilogue does not produce its output");
  e->epi_spec = (fsl_cg_spec){.g = epi->g, .id = -1, .n_nodes = epi->n_nodes, .nodes = epi->nodes,
                              .n_in = epi->n_in + 2, .in = e->epi_in, .n_out = 1, .out = (fsl_value *const *)&e->epi->out};
  e->s = &e->epi_spec;
  fsl_cg_supported_dtype(e, z);
  for (int i = 0; i < epi->n_in + 2 && e->st == FSL_OK; i++) {
    const fsl_value *v = e->epi_in[i];
    if (i < 2 && !epi->src[i]) continue; /* read as a and w (b) by the linear op's code */
    if (!fsl_cg_supported_dtype(e, v)) break;
    fsl_cg_line(e, "const %s%s *%sin%d = (const %s%s *)in[%d];", e->d->buf_space, fsl_cg_stype(e->d, v->dtype),
                e->d->restrict_kw, i, e->d->buf_space, fsl_cg_stype(e->d, v->dtype), i);
  }
  fsl_cg_line(e, "int err_ = 0;");
  return e->st == FSL_OK;
}

/* *c = the coordinates over dims (rank) of flat index expression x. */
static void redecompose(em *e, const char *x, int rank, const int64_t *dims, coords *c) {
  int f = fsl_cg_new_tmp(e), axes[FSL_MAX_RANK];
  fsl_cg_line(e, "const int64_t t%d = %s;", f, x);
  char v[CLEN], prefix[24];
  snprintf(v, sizeof v, "t%d", f);
  snprintf(prefix, sizeof prefix, "z%d_", f);
  for (int i = 0; i < rank; i++) axes[i] = i;
  c->rank = rank;
  fsl_cg_decompose(e, v, rank, axes, dims, prefix, c);
}

/* The tail of z: the epilogue's path of permutes and reshapes ending at z,
 * back to its first permute (fsl_linear_split_fused), in order into
 * tail[]; its length, 0 when the path holds no permute (z is then stored
 * at the linear output's flat index).  *w: the value before the tail. */
static int tail_of(const em *e, const fsl_value *z, const fsl_node **tail, const fsl_value **w) {
  const fsl_node *rev[FSL_MAX_RANK * 4];
  int n = 0, first_perm = -1;
  for (const fsl_value *v = z; v->producer && e->inside[v->id] && n < (int)FSL_ARRAY_LEN(rev);) {
    const fsl_node *p = v->producer;
    if ((p->op != FSL_OP_permute && p->op != FSL_OP_reshape) || p->n_in != 1) break;
    rev[n++] = p;
    if (p->op == FSL_OP_permute) first_perm = n - 1;
    v = p->in[0];
  }
  if (first_perm < 0) return 0;
  int k = 0;
  for (int i = first_perm; i >= 0; i--) tail[k++] = rev[i];
  *w = tail[0]->in[0];
  return k;
}

void fsl_cg_epi_store(em *e, const char *T, const char *acc, const coords *c, const char *dst, const char *idx) {
  if (!e->epi) {
    fsl_cg_line(e, "%s[%s] = (%s)%s;", dst, idx, T, acc);
    return;
  }
  fsl_cg_line(e, "{");
  fsl_cg_open_scope(e);
  int t = fsl_cg_new_tmp(e);
  fsl_cg_line(e, "const %s t%d = (%s)%s;", T, t, T, acc);
  snprintf(e->lin_var, CLEN, "t%d", t);
  /* w, the value computed here: epi->out, or what a tail of permutes moves
   * into it; at the stored element it has the linear output's flat index
   * (elementwise nodes and reshapes keep the element order) */
  const fsl_value *y = e->lin_out, *z = e->epi->out, *w = z;
  const fsl_node *tail[FSL_MAX_RANK * 4];
  int nt = tail_of(e, z, tail, &w);
  coords wc = *c;
  if (!fsl_value_same_shape(w, y)) redecompose(e, idx, w->rank, w->dims, &wc);
  char res[CLEN], at[CLEN];
  snprintf(at, sizeof at, "%s", idx);
  if (nt > 0) {
    /* the tail moves the element: its coordinates in each value up to z */
    coords vc = wc;
    for (int i = 0; i < nt; i++) {
      const fsl_node *n = tail[i];
      const fsl_value *in = n->in[0], *out = n->out[0];
      if (n->op == FSL_OP_permute) {
        const int64_t *perm = NULL;
        if (fsl_attr_ints(n, "perm", &perm) != out->rank) {
          fsl_cg_fail(e, FSL_ERR_INVALID, "permute without a perm of rank %d", out->rank);
          break;
        }
        coords oc = {.rank = out->rank};
        for (int k = 0; k < out->rank; k++) snprintf(oc.c[k], CLEN, "%s", vc.c[perm[k]]);
        vc = oc;
      } else {
        char flat[CLEN];
        fsl_cg_flat_index(e, in->rank, in->dims, &vc, flat);
        redecompose(e, flat, out->rank, out->dims, &vc);
      }
    }
    fsl_cg_flat_index(e, z->rank, z->dims, &vc, at);
  }
  char sv[2 * CLEN + 16];
  if (e->st == FSL_OK && fsl_cg_ev(e, w, &wc, res)) {
    fsl_cg_conv(e->d, z->dtype, false, res, sv, sizeof sv);
    fsl_cg_line(e, "%s[%s] = %s;", dst, at, sv);
  }
  e->lin_var[0] = 0;
  fsl_cg_close_scope(e);
  fsl_cg_line(e, "}");
}
