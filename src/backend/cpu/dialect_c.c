/*
 * dialect_c.c — the C/OpenMP dialect of the code generator (dialect.h):
 * C11 element types from <stdint.h> (f16 and bf16 stored as uint16_t and
 * computed in float), libm's float functions (expf), a
 * plain `int fsl_k<ID>(const void *const *in, void *const *out)` per
 * kernel, OpenMP `parallel for` and `simd` pragmas for loops, and the
 * prelude of inline helpers in prelude.h (embedded at build time).
 */
#include "backend/cpu/dialect_c.h"

extern const char fsl_prelude_c[]; /* prelude.h, embedded by cmake/embed.cmake */

static void c_kernel_open(fsl_sbuf *b, int id, int n_in, int n_out) {
  (void)n_in;
  (void)n_out;
  fsl_sbuf_printf(b, "int fsl_k%d(const void *const *in, void *const *out) {\n", id);
}

/* "#pragma omp parallel for [collapse(N)] schedule(static) [reduction(..)]..."
 * for parallel loops, "#pragma omp simd reduction(..)..." for SIMD ones;
 * every other kind is a plain loop (GROUPS and LANES only come from a
 * dialect with work-groups: the unit test of the OpenCL table gives C
 * one). */
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
  for (int i = 0; (L->kind == FSL_CG_PARALLEL || L->kind == FSL_CG_SIMD) && i < L->n_red && o < acap; i++)
    o += (size_t)snprintf(annot + o, acap - o, " reduction(%s)", L->red[i]);
  fsl_cg_for_line(L, head, hcap);
}

/* f16 and bf16: 16-bit storage, computed in float (prelude.h: fsl_h2f,
 * fsl_f2h with F16C where the target has it, fsl_bf2f, fsl_f2bf). */
static const char *c_storage_name(fsl_dtype dt) {
  return dt == FSL_DT_F16 || dt == FSL_DT_BF16 ? "uint16_t" : NULL;
}

static const char *c_convert(fsl_dtype dt, bool store) {
  if (dt == FSL_DT_F16) return store ? "fsl_f2h" : "fsl_h2f";
  return store ? "fsl_f2bf" : "fsl_bf2f";
}

const fsl_dialect fsl_dialect_c = {
    .name = "c",
    .prelude = fsl_prelude_c,
    .type_name = fsl_cg_stdint_type,
    .storage_name = c_storage_name,
    .convert = c_convert,
    .f32_math_suffix = "f",
    .restrict_kw = "restrict ",
    .buf_space = "",
    .ret_err = "return err_;",
    .ret_ok = "return 0;",
    .multi_pass = true,
    .par_min = 8192,
    .tile16_store = "fsl_tile16_store",
    .kernel_open = c_kernel_open,
    .loop_header = c_loop_header,
};
