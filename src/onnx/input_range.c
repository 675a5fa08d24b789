/*
 * input_range.c — how an ONNX graph uses an integer input (input_range.h).
 */
#include "onnx/input_range.h"

#define MAX_SEEN 256

/* ONNX TensorProto.DataType codes of the float and bool types. */
static bool casts_to_float_or_bool(const fsl_node *n) {
  int64_t to = fsl_attr_int(n, "to", 0);
  return to == 1 || to == 9 || to == 10 || to == 11 || to == 16;
}

static bool keeps_values(const fsl_node *n) {
  switch (n->op) {
  case FSL_OP_Identity: case FSL_OP_Reshape: case FSL_OP_Flatten: case FSL_OP_Squeeze: case FSL_OP_Unsqueeze:
  case FSL_OP_Expand:
    return true;
  case FSL_OP_Cast: return !casts_to_float_or_bool(n);
  default: return false;
  }
}

/* Length along `axis` of a gather's data, 0 when not static. */
static int64_t gathered_len(const fsl_node *n) {
  const fsl_value *d = n->in[0];
  if (!d || d->rank <= 0) return 0;
  if (n->op == FSL_OP_GatherND) { /* an index per leading dim: the smallest bounds them all */
    int64_t m = 0;
    for (int i = (int)fsl_attr_int(n, "batch_dims", 0); i < d->rank; i++)
      if (d->dims[i] > 0 && (m == 0 || d->dims[i] < m)) m = d->dims[i];
    return m;
  }
  int64_t axis = fsl_attr_int(n, "axis", 0);
  if (axis < 0) axis += d->rank;
  return axis >= 0 && axis < d->rank && d->dims[axis] > 0 ? d->dims[axis] : 0;
}

fsl_input_use fsl_onnx_input_use(const fsl_value *v, int64_t *hi) {
  const fsl_value *todo[MAX_SEEN];
  int n_todo = 0, head = 0;
  bool index = false, other = false;
  int64_t len = 0;
  if (v) todo[n_todo++] = v;
  while (head < n_todo) {
    const fsl_value *x = todo[head++];
    for (int c = 0; c < x->n_cons; c++) {
      const fsl_node *n = x->cons[c];
      bool gather = n->op == FSL_OP_Gather || n->op == FSL_OP_GatherElements || n->op == FSL_OP_GatherND;
      if (gather && n->n_in > 1 && n->in[1] == x) {
        int64_t l = gathered_len(n);
        if (l > 0 && (len == 0 || l < len)) len = l;
        index = true;
      } else if (keeps_values(n) && n->in[0] == x && n->n_out > 0 && n->out[0]) {
        if (n_todo < MAX_SEEN) todo[n_todo++] = n->out[0];
      } else if ((n->op == FSL_OP_Cast && casts_to_float_or_bool(n)) || n->op == FSL_OP_Equal ||
                 n->op == FSL_OP_Greater || n->op == FSL_OP_Less || n->op == FSL_OP_GreaterOrEqual ||
                 n->op == FSL_OP_LessOrEqual || (n->op == FSL_OP_Where && n->in[0] == x)) {
        /* a mask */
      } else {
        other = true;
      }
    }
  }
  *hi = len;
  if (index && len > 0) return FSL_INPUT_USE_INDEX;
  if (!index && !other && n_todo > 0 && v->n_cons > 0) return FSL_INPUT_USE_MASK;
  return FSL_INPUT_USE_OTHER;
}
