/*
 * onednn_layout.c — the activation layouts of prepared linear ops: which
 * primitive layouts are dense permutations of row-major (nhwc) that
 * generated code may read and write, and layout chaining between oneDNN
 * primitives and with generated code (docs/cpu-backend.md, "Layout
 * chaining"; the oneDNN developer guide, "Memory Format Propagation").
 */
#include "backend/cpu/onednn_impl.h"

/* Whether primitive descriptor pp (with caller-side descriptor pu) holds
 * value v as a dense permutation of its row-major layout; *lay receives
 * the axes in memory order. */
bool fsl_onednn_perm_layout(fsl_cmd pp, fsl_cmd pu, const fsl_value *v, fsl_cg_layout *lay) {
  if (!pp || !pu || v->rank < 1 || v->rank > FSL_MAX_RANK || v->rank > DNNL_MAX_NDIMS || !md_plain_strided(pp) ||
      md_ndims(pp) != v->rank || md_ndims(pu) != v->rank)
    return false;
  int64_t pdm[DNNL_MAX_NDIMS], ppad[DNNL_MAX_NDIMS], udm[DNNL_MAX_NDIMS], st[DNNL_MAX_NDIMS];
  if (!md_query_dims(pp, MD_DIMS, pdm) || !md_query_dims(pp, MD_PADDED_DIMS, ppad) ||
      !md_query_dims(pu, MD_DIMS, udm) || !md_query_dims(pp, MD_STRIDES, st))
    return false;
  for (int i = 0; i < v->rank; i++)
    if (pdm[i] != v->dims[i] || ppad[i] != v->dims[i] || udm[i] != v->dims[i]) return false;
  /* axes by decreasing stride (a stable sort: size-1 axes keep their order) */
  lay->rank = v->rank;
  for (int i = 0; i < v->rank; i++) lay->order[i] = i;
  for (int i = 1; i < v->rank; i++)
    for (int j = i; j > 0 && st[lay->order[j]] > st[lay->order[j - 1]]; j--) {
      int t = lay->order[j];
      lay->order[j] = lay->order[j - 1];
      lay->order[j - 1] = t;
    }
  /* dense: each stride the product of the dims inside it */
  int64_t want = 1;
  for (int k = v->rank - 1; k >= 0; k--) {
    int a = lay->order[k];
    if (v->dims[a] != 1 && st[a] != want) return false;
    want *= v->dims[a];
  }
  return true;
}

/* Whether what one primitive writes (pu: its row-major user memory, pp:
 * its primitive memory) is exactly what another reads (cu, cp): the same
 * descriptors on both sides, the primitive layout within `capacity` bytes. */
static bool same_layouts(const_dnnl_memory_t pu_mem, const_dnnl_memory_t pp_mem, const_dnnl_memory_t cu_mem,
                         const_dnnl_memory_t cp_mem, size_t capacity) {
  fsl_cmd pu = NULL, pp = NULL, cu = NULL, cp = NULL;
  if (dnnl_memory_get_memory_desc(pu_mem, &pu) != dnnl_success || dnnl_memory_get_memory_desc(pp_mem, &pp) != dnnl_success ||
      dnnl_memory_get_memory_desc(cu_mem, &cu) != dnnl_success || dnnl_memory_get_memory_desc(cp_mem, &cp) != dnnl_success ||
      !pu || !pp || !cu || !cp)
    return false;
  return dnnl_memory_desc_equal(pu, cu) && dnnl_memory_desc_equal(pp, cp) && dnnl_memory_desc_get_size(pp) <= capacity;
}

bool fsl_onednn_linear_chainable(const fsl_onednn_linear *prod, const fsl_onednn_linear *cons, size_t capacity) {
  if (!prod || !cons || prod == cons || !prod->dst_reorder || !cons->src_reorder || cons->src_const) return false;
  return same_layouts(prod->dst_user_mem, prod->dst_mem, cons->src_user_mem, cons->src_mem, capacity);
}

bool fsl_onednn_linear_dst_layout(const fsl_onednn_linear *op, const fsl_value *v, fsl_cg_layout *lay) {
  fsl_cmd pp = NULL, pu = NULL;
  return op && v && lay && op->dst_reorder && dnnl_memory_get_memory_desc(op->dst_mem, &pp) == dnnl_success &&
         dnnl_memory_get_memory_desc(op->dst_user_mem, &pu) == dnnl_success && fsl_onednn_perm_layout(pp, pu, v, lay);
}

bool fsl_onednn_linear_src_layout(const fsl_onednn_linear *op, const fsl_value *v, size_t capacity,
                                  fsl_cg_layout *lay) {
  fsl_cmd pp = NULL, pu = NULL;
  return op && v && lay && op->src_reorder && !op->src_const && !op->src_chained &&
         dnnl_memory_get_memory_desc(op->src_mem, &pp) == dnnl_success &&
         dnnl_memory_get_memory_desc(op->src_user_mem, &pu) == dnnl_success && fsl_onednn_perm_layout(pp, pu, v, lay) &&
         dnnl_memory_desc_get_size(pp) <= capacity;
}

/* Appends to the description which activations are chained. */
static void describe_chain(fsl_onednn_linear *op) {
  bool post = false;
  for (int i = 0; i < MAX_POST; i++) post = post || op->post_chained[i];
  const char *part[3] = {op->src_chained ? "src" : NULL, op->dst_chained ? "dst" : NULL, post ? "residual" : NULL};
  size_t l = op->desc_len;
  op->desc[l] = 0;
  for (int i = 0, k = 0; i < 3; i++)
    if (part[i] && l < sizeof op->desc) {
      snprintf(op->desc + l, sizeof op->desc - l, "%s%s", k++ ? "+" : ", chained ", part[i]);
      l += strlen(op->desc + l);
    }
}

/* The entry of cons's full-size operand for absorbed epi node `node` that
 * is reordered from row-major at run time, or -1. */
int fsl_onednn_full_entry(const fsl_onednn_linear *cons, int node) {
  for (int i = 0; cons && i < cons->n_entries; i++)
    if (cons->entries[i].binary && cons->entries[i].full && cons->entries[i].node == node && cons->post_reorder[i])
      return i;
  return -1;
}

bool fsl_onednn_linear_post_chainable(const fsl_onednn_linear *prod, const fsl_onednn_linear *cons, int node,
                                      size_t capacity) {
  int i = fsl_onednn_full_entry(cons, node);
  if (!prod || prod == cons || !prod->dst_reorder || i < 0 || cons->post_chained[i]) return false;
  return same_layouts(prod->dst_user_mem, prod->dst_mem, cons->post_user_mem[i], cons->post_mem[i], capacity);
}

bool fsl_onednn_linear_post_layout(const fsl_onednn_linear *op, int node, const fsl_value *v, size_t capacity,
                                   fsl_cg_layout *lay) {
  int i = fsl_onednn_full_entry(op, node);
  fsl_cmd pp = NULL, pu = NULL;
  return i >= 0 && v && lay && !op->post_chained[i] &&
         dnnl_memory_get_memory_desc(op->post_mem[i], &pp) == dnnl_success &&
         dnnl_memory_get_memory_desc(op->post_user_mem[i], &pu) == dnnl_success &&
         fsl_onednn_perm_layout(pp, pu, v, lay) &&
         dnnl_memory_desc_get_size(pp) <= capacity;
}

void fsl_onednn_linear_chain_post(fsl_onednn_linear *cons, int node) {
  int i = fsl_onednn_full_entry(cons, node);
  if (i < 0) return;
  cons->post_chained[i] = true;
  /* the operand memory now points at the caller's buffer on every run */
  free(cons->post_buf[i]), cons->post_buf[i] = NULL;
  describe_chain(cons);
}

void fsl_onednn_linear_chain_dst(fsl_onednn_linear *prod) {
  if (!prod) return;
  prod->dst_chained = true;
  /* the primitive memory now points at the caller's buffer on every run */
  free(prod->dst_buf), prod->dst_buf = NULL;
  describe_chain(prod);
}

void fsl_onednn_linear_chain_src(fsl_onednn_linear *cons) {
  if (!cons) return;
  cons->src_chained = true;
  free(cons->src_buf), cons->src_buf = NULL;
  describe_chain(cons);
}


bool fsl_onednn_linear_reorders_both(const fsl_onednn_linear *op) {
  if (!op || !op->src_reorder || op->src_chained || op->src_const || !op->dst_reorder || op->dst_chained) return false;
  for (int i = 0; i < MAX_POST; i++)
    if (op->post_chained[i]) return false;
  return true;
}

bool fsl_onednn_linear_plain(const fsl_onednn_linear *op) {
  if (!op || op->src_reorder || op->src_chained || op->src_const || op->dst_reorder || op->dst_chained) return false;
  for (int i = 0; i < MAX_POST; i++)
    if (op->post_chained[i] || op->post_reorder[i]) return false;
  return true;
}
