/*
 * prelude.h — the start of every C source the CPU backend generates (the C
 * dialect's prelude, src/backend/cpu/dialect_c.c; compiled into libfissile
 * as a string by cmake/embed.cmake): includes, and the inline helpers the
 * code generator's expressions call (src/codegen/expr.c), with the same
 * names in every dialect: fast branch-free fsl_expf/fsl_tanhf/fsl_erff,
 * NaN-propagating max/min, floor-mod, saturating float->int casts,
 * checked integer division, shifts, pad index maps and argmax ties.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define FSL_H static inline __attribute__((unused))
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512") /* whole zmm registers for the loops below */
#endif
/* Branch-free float exp, tanh and erf, so that loops calling them vectorize.
 * expf: Cody-Waite reduction by ln 2, degree-6 polynomial, 2^n applied in two
 * steps so that overflow gives inf and small results are exact subnormals
 * (max rel. error 1.2e-7 over the normal range).  NaN flows through the clamps. */
FSL_H float fsl_expf(float x) {
  float xc = x > 89.0f ? 89.0f : x; xc = xc < -104.0f ? -104.0f : xc;
  float z = xc * 1.44269504088896341f + 12582912.0f, n = z - 12582912.0f;
  float r = xc - n * 0.693359375f; r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f; p = p * r + 1.3981999507e-3f; p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f; p = p * r + 1.6666665459e-1f; p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t zi; memcpy(&zi, &z, 4); zi -= 0x4B400000;
  int32_t n1 = zi >> 1, ai = (n1 + 127) << 23, bi = (zi - n1 + 127) << 23;
  float af, bf; memcpy(&af, &ai, 4); memcpy(&bf, &bi, 4);
  return p * af * bf; }
/* tanhf: odd rational minimax approximation on [-7.9053, 7.9053] (the
 * coefficients of Eigen's generic_fast_tanh_float), +-1 beyond; max rel. error 3e-7 */
FSL_H float fsl_tanhf(float x) {
  float xc = x > 7.90531110763549805f ? 7.90531110763549805f : x;
  xc = xc < -7.90531110763549805f ? -7.90531110763549805f : xc;
  float x2 = xc * xc;
  float p = -2.76076847742355e-16f; p = p * x2 + 2.00018790482477e-13f; p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f; p = p * x2 + 1.48572235717979e-05f; p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f; q = q * x2 + 1.18534705686654e-04f; q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q * xc; }
/* erff: odd rational approximation on [-4, 4] (Eigen's generic_fast_erf_float
 * coefficients), +-1 beyond; max abs. and rel. error 4e-7 */
FSL_H float fsl_erff(float x) {
  float xc = x > 4.0f ? 4.0f : x; xc = xc < -4.0f ? -4.0f : xc;
  float x2 = xc * xc;
  float p = -2.72614225801306e-10f; p = p * x2 + 2.77068142495902e-08f; p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f; p = p * x2 - 7.34990630326855e-04f; p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f; q = q * x2 - 2.13374055278905e-04f; q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f; q = q * x2 - 1.42647390514189e-02f;
  return p / q * xc; }
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

