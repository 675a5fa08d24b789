/* ops.c — the op table (fsl_op_info per op), generated from ops.def. */
#include "ir/ir.h"

static const fsl_op_info k_ops[] = {
  {.name = "none", .kind = FSL_KIND_OPAQUE},
#define PRIM(name, n_in, kind, dtypes, cost, cfn) \
  {#name, (n_in) < 0 ? 1 : (n_in), n_in, FSL_KIND_##kind, true, FSL_DTC_##dtypes, cost, cfn, 0, 0},
#define ONNX(name, min_in, max_in, kind, since, until) \
  {#name, min_in, max_in, FSL_KIND_##kind, false, FSL_DTC_OWN, 0, NULL, since, until},
#include "ir/ops.def"
#undef PRIM
#undef ONNX
};
_Static_assert(FSL_ARRAY_LEN(k_ops) == FSL_OP_COUNT, "op table out of sync with fsl_op");

static const char *const k_kinds[] = {"elementwise", "reduce", "movement", "gather", "linear", "opaque"};
_Static_assert(FSL_ARRAY_LEN(k_kinds) == FSL_KIND_COUNT, "kind names out of sync");

const fsl_op_info *fsl_op_get(fsl_op op) {
  FSL_ASSERT((unsigned)op < FSL_OP_COUNT);
  return &k_ops[op];
}
const char *fsl_op_name(fsl_op op) { return fsl_op_get(op)->name; }
const char *fsl_kind_name(fsl_kind k) {
  return (unsigned)k < FSL_KIND_COUNT ? k_kinds[k] : "?";
}

fsl_op fsl_op_from_onnx(const char *op_type) {
  for (int i = 1; i < FSL_OP_COUNT; i++)
    if (!k_ops[i].primitive && strcmp(k_ops[i].name, op_type) == 0) return (fsl_op)i;
  return FSL_OP_NONE;
}
