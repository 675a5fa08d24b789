/*
 * cfamily.c — pieces the C-family dialects share (dialect.h): C99
 * <stdint.h> element type names (CUDA's prelude defines the same names)
 * and the plain `for` line of a loop; the grid-stride loop of the GPU
 * dialects.
 */
#include "codegen/dialect.h"

const char *fsl_cg_stdint_type(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_F32: return "float";
  case FSL_DT_F64: return "double";
  case FSL_DT_I8: return "int8_t";
  case FSL_DT_I16: return "int16_t";
  case FSL_DT_I32: return "int32_t";
  case FSL_DT_I64: return "int64_t";
  case FSL_DT_U8: return "uint8_t";
  case FSL_DT_U16: return "uint16_t";
  case FSL_DT_U32: return "uint32_t";
  case FSL_DT_U64: return "uint64_t";
  case FSL_DT_BOOL: return "uint8_t";
  default: return NULL; /* f16/bf16: no arithmetic type in plain C */
  }
}

void fsl_cg_for_line(const fsl_cg_loop *L, char *head, size_t cap) {
  if (L->step > 1)
    snprintf(head, cap, "for (int64_t %s = %s; %s < %s; %s += %lld) {", L->var, L->lo, L->var, L->hi, L->var, L->step);
  else
    snprintf(head, cap, "for (int64_t %s = %s; %s < %s; %s++) {", L->var, L->lo, L->var, L->hi, L->var);
}

void fsl_cg_grid_stride_line(const fsl_cg_loop *L, const char *gid, const char *gsize, char *head, size_t cap) {
  snprintf(head, cap, "for (int64_t %s = %s + %s; %s < %s; %s += %s) {", L->var, L->lo, gid, L->var, L->hi, L->var, gsize);
}
