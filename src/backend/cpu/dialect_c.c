/*
 * dialect_c.c — the C/OpenMP dialect of the code generator (dialect.h):
 * C11 element types from <stdint.h>, libm's float functions (expf), a
 * plain `int fsl_k<ID>(const void *const *in, void *const *out)` per
 * kernel, OpenMP `parallel for` and `simd` pragmas for loops, and the
 * prelude of inline helpers in prelude.h (embedded at build time).
 */
#include "backend/cpu/dialect_c.h"

extern const char fsl_prelude_c[]; /* prelude.h, embedded by cmake/embed.cmake */

static const char *c_type(fsl_dtype dt) {
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
  default: return NULL; /* f16/bf16: no C arithmetic type */
  }
}

static void c_kernel_open(fsl_sbuf *b, int id) {
  fsl_sbuf_printf(b, "int fsl_k%d(const void *const *in, void *const *out) {\n", id);
}

/* "#pragma omp parallel for [collapse(N)] schedule(static) [reduction(..)]..."
 * for parallel loops, "#pragma omp simd reduction(..)..." for SIMD ones. */
static void c_loop_header(const fsl_cg_loop *L, char *annot, size_t acap, char *head, size_t hcap) {
  size_t o = 0;
  annot[0] = 0;
  if (L->kind == FSL_CG_PARALLEL) {
    o += (size_t)snprintf(annot + o, acap - o, "#pragma omp parallel for");
    if (L->collapse > 1 && o < acap) o += (size_t)snprintf(annot + o, acap - o, " collapse(%d)", L->collapse);
    if (o < acap) o += (size_t)snprintf(annot + o, acap - o, " schedule(static)");
  } else if (L->kind == FSL_CG_SIMD) {
    o += (size_t)snprintf(annot + o, acap - o, "#pragma omp simd");
  }
  for (int i = 0; L->kind != FSL_CG_SERIAL && i < L->n_red && o < acap; i++)
    o += (size_t)snprintf(annot + o, acap - o, " reduction(%s)", L->red[i]);
  if (L->step > 1)
    snprintf(head, hcap, "for (int64_t %s = %s; %s < %s; %s += %lld) {", L->var, L->lo, L->var, L->hi, L->var, L->step);
  else
    snprintf(head, hcap, "for (int64_t %s = %s; %s < %s; %s++) {", L->var, L->lo, L->var, L->hi, L->var);
}

const fsl_dialect fsl_dialect_c = {
    .name = "c",
    .prelude = fsl_prelude_c,
    .type_name = c_type,
    .f32_math_suffix = "f",
    .restrict_kw = "restrict ",
    .ret_err = "return err_;",
    .ret_ok = "return 0;",
    .multi_pass = true,
    .par_min = 32768,
    .kernel_open = c_kernel_open,
    .loop_header = c_loop_header,
};
