/*
 * prelude.h — the start of every C source the CPU backend generates (the C
 * dialect's prelude, src/backend/cpu/dialect_c.c; compiled into libfissile
 * as a string by cmake/embed.cmake): C's includes, FSL_H and the fast
 * branch-free fsl_expf/fsl_tanhf/fsl_erff that let loops vectorize.  The
 * code generator appends the helpers every dialect shares
 * (src/codegen/helpers.h).
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
