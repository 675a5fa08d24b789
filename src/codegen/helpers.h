/*
 * helpers.h — the helper functions the generated expressions call, written
 * once for every dialect (src/codegen/expr.c prints the calls; each
 * dialect's prelude defines FSL_H, the integer types, INFINITY/NAN/INT64_*
 * and fsl_expf/fsl_tanhf/fsl_erff before these; fsl_codegen_prelude
 * appends this file, embedded at build time by cmake/embed.cmake):
 * NaN-propagating max/min, sign, floor-mod, saturating float->int casts,
 * checked integer division (error bit 2), integer powers and shifts, pad
 * index maps (numpy.pad) and argmax/argmin ties.
 */
FSL_H float fsl_sigmoidf(float x) { float t = fsl_expf(-fabsf(x)); float s = 1.0f / (1.0f + t); return x >= 0 ? s : t * s; }
FSL_H double fsl_sigmoidd(double x) { double t = exp(-fabs(x)); double s = 1.0 / (1.0 + t); return x >= 0 ? s : t * s; }
FSL_H float fsl_signf(float x) { return x != x ? x : x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f; }
FSL_H double fsl_signd(double x) { return x != x ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
FSL_H float fsl_maxf(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
FSL_H double fsl_maxd(double a, double b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
FSL_H float fsl_minf(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
FSL_H double fsl_mind(double a, double b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
FSL_H float fsl_fmodfloorf(float a, float b) { float r = fmodf(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
FSL_H double fsl_fmodfloord(double a, double b) { double r = fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
FSL_H int64_t fsl_f2i(double v) { if (v != v) return 0; if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN; return (int64_t)v; }
FSL_H uint64_t fsl_f2u(double v) { if (v != v || v <= -1.0) return (uint64_t)fsl_f2i(v);
  if (v >= 18446744073709551615.0) return UINT64_MAX; return (uint64_t)v; }
FSL_H int64_t fsl_sdiv(int64_t a, int64_t b, int *e) { if (b == 0) { *e |= 2; return 0; }
  if (b == -1) return (int64_t)(0 - (uint64_t)a); return a / b; }
FSL_H int64_t fsl_smod(int64_t a, int64_t b, int cf, int *e) { if (b == 0) { *e |= 2; return 0; } if (b == -1) return 0;
  int64_t r = a % b; if (!cf && r != 0 && ((r < 0) != (b < 0))) r += b; return r; }
FSL_H uint64_t fsl_udiv(uint64_t a, uint64_t b, int *e) { if (b == 0) { *e |= 2; return 0; } return a / b; }
FSL_H uint64_t fsl_umod(uint64_t a, uint64_t b, int *e) { if (b == 0) { *e |= 2; return 0; } return a % b; }
FSL_H uint64_t fsl_ipowu(uint64_t x, uint64_t e) { uint64_t r = 1; for (; e; e >>= 1) { if (e & 1) r *= x; x *= x; } return r; }
FSL_H uint64_t fsl_ipows(int64_t a, int64_t b) { if (b < 0) return a == 1 ? 1 : a == -1 ? (uint64_t)((b & 1) ? -1 : 1) : 0;
  return fsl_ipowu((uint64_t)a, (uint64_t)b); }
FSL_H uint64_t fsl_shls(int64_t a, int64_t b, int bits) { return (b < 0 || b >= bits) ? 0 : (uint64_t)a << b; }
FSL_H uint64_t fsl_shrs(int64_t a, int64_t b, int bits) { return (b < 0 || b >= bits) ? (a < 0 ? UINT64_MAX : 0) : (uint64_t)(a >> b); }
FSL_H uint64_t fsl_shlu(uint64_t a, uint64_t b, int bits) { return b >= (uint64_t)bits ? 0 : a << b; }
FSL_H uint64_t fsl_shru(uint64_t a, uint64_t b, int bits) { return b >= (uint64_t)bits ? 0 : a >> b; }
/* numpy.pad source coordinate of p = out - begin over an axis of length len */
FSL_H int64_t fsl_pad_reflect(int64_t p, int64_t len) { if (p >= 0 && p < len) return p; if (len == 1) return 0;
  int64_t per = 2 * (len - 1), q = p % per; if (q < 0) q += per; return q < len ? q : per - q; }
FSL_H int64_t fsl_pad_edge(int64_t p, int64_t len) { return p < 0 ? 0 : p >= len ? len - 1 : p; }
FSL_H int64_t fsl_pad_wrap(int64_t p, int64_t len) { int64_t q = p % len; return q < 0 ? q + len : q; }
/* argmax/argmin: 1 if a beats the current best b (NaN is the extreme value) */
FSL_H int fsl_argbetter(double a, double b, int ismax, int last) {
  int na = a != a, nb = b != b, c;
  if (na || nb) c = (na && nb) ? 0 : (na ? 1 : -1); else c = ismax ? (a > b) - (a < b) : (b > a) - (b < a);
  return c > 0 || (last && c == 0); }
/* argmax/argmin across the partial results of a work-group row: 1 if
 * (a at index ia) beats (b at ib); index -1: no element; equal values
 * (or two NaNs): the lower index, with `last` the higher (the serial
 * scan's answer, whatever order the partials meet in) */
FSL_H int fsl_argtake(double a, int64_t ia, double b, int64_t ib, int ismax, int last) {
  if (ia < 0) return 0;
  if (ib < 0) return 1;
  int na = a != a, nb = b != b, c;
  if (na || nb) c = (na && nb) ? 0 : (na ? 1 : -1); else c = ismax ? (a > b) - (a < b) : (b > a) - (b < a);
  return c > 0 || (c == 0 && (last ? ia > ib : ia < ib)); }

