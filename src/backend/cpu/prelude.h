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
#if defined(__AVX__) || defined(__F16C__)
#include <immintrin.h>
#endif

#define FSL_H static inline __attribute__((unused))
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512") /* whole zmm registers for the loops below */
#endif
/* f16 and bf16 storage (the C dialect computes them in float): IEEE
 * conversions, rounding to nearest even, NaN kept quiet, overflow to inf,
 * half subnormals exact (the reference's, src/core/dtype.c).  F16C's
 * vcvtph2ps / vcvtps2ph where the target has it. */
#if defined(__F16C__)
FSL_H float fsl_h2f(uint16_t h) { return _cvtsh_ss(h); }
FSL_H uint16_t fsl_f2h(float f) { return (uint16_t)_cvtss_sh(f, 0); /* 0: round to nearest even */ }
#else
FSL_H float fsl_h2f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0x1f) u = s | 0x7f800000u | (m << 13);
  else if (e) u = s | ((e + 112) << 23) | (m << 13);
  else { float f = (float)m * 0x1p-24f; memcpy(&u, &f, 4); u |= s; }
  float f; memcpy(&f, &u, 4); return f; }
FSL_H uint16_t fsl_f2h(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u); /* 65520 and above round to inf */
  if (a < 0x38800000u) { float x; memcpy(&x, &a, 4); return (uint16_t)(s | (uint32_t)nearbyintf(x * 16777216.0f)); }
  return (uint16_t)(s | ((a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13)); }
#endif
FSL_H float fsl_bf2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
FSL_H uint16_t fsl_f2bf(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16); }
/* Branch-free float exp, tanh and erf, so that loops calling them vectorize.
 * expf: n = floor(x / ln 2) by the 1.5 * 2^23 rounding trick, Cody-Waite
 * reduction r = x - n ln 2 in [0, ln 2), a degree-6 minimax polynomial for
 * e^r on [0, ln 2] (fitted by Remez exchange for relative error), times 2^n
 * built in the exponent bits in one step.  Max rel. error 1.2e-7 where the
 * result is a normal float; below ln(FLT_MIN) the result is 0, as under
 * flush-to-zero, and above ln(FLT_MAX) it is inf.  Those ends are selected
 * on the result, not clamped on x: with a clamp of x, GCC 12 specialised
 * the code for each clamped branch (jump threading) and merged the paths
 * with 9 vector compares, masks and blends per vector, where two selects
 * on the result cost 4 (exp, tanh and erf 1.15-1.2x faster on AVX2).
 * Beyond the ends the arithmetic gives garbage that a select replaces;
 * NaN fails both comparisons and flows through. */
FSL_H float fsl_exp_poly(float x) { /* e^x where the result is a normal float; garbage beyond */
  float z = (x * 1.44269504088896341f - 0.5f) + 12582912.0f, n = z - 12582912.0f;
  float r = x - n * 0.693359375f; r = r + n * 2.12194440e-4f;
  float p = 0x1.007672p-9f; p = p * r + 0x1.fda20ep-8f; p = p * r + 0x1.57778ep-5f; p = p * r + 0x1.553568p-3f;
  p = p * r + 0x1.0000dcp-1f; p = p * r + 0x1.fffff8p-1f; p = p * r + 1.0f;
  uint32_t zi; memcpy(&zi, &z, 4); zi = (zi << 23) + (127u << 23); /* n + 127 in the exponent field */
  float s; memcpy(&s, &zi, 4);
  return p * s; }
FSL_H float fsl_expf(float x) {
  float y = fsl_exp_poly(x);
  y = x < -87.3365479f ? 0.0f : y; /* ln(FLT_MIN): n >= -127 above it (n = -127 gives s = 0) */
  return x > 88.7228317f ? INFINITY : y; /* ln(FLT_MAX) rounded down: n <= 127 below it */ }
/* expf of an argument known to be <= 0 or NaN (x - max(x) over its row:
 * a softmax's, src/codegen/expr.c), where the overflow select is dead. */
FSL_H float fsl_expf_le0(float x) { float y = fsl_exp_poly(x); return x < -87.3365479f ? 0.0f : y; }
/* tanhf: odd rational minimax approximation on [-7.9053, 7.9053] (the
 * coefficients of Eigen's generic_fast_tanh_float), +-1 beyond (its value at
 * the ends); max rel. error 3e-7.  As in expf, the ends are selected on the
 * result: beyond them p / q is garbage (inf / inf) that the select replaces. */
FSL_H float fsl_tanhf(float x) {
  float x2 = x * x;
  float p = -2.76076847742355e-16f; p = p * x2 + 2.00018790482477e-13f; p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f; p = p * x2 + 1.48572235717979e-05f; p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f; q = q * x2 + 1.18534705686654e-04f; q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  float y = p / q * x;
  y = x > 7.90531110763549805f ? 1.0f : y;
  return x < -7.90531110763549805f ? -1.0f : y; }
/* erff: odd rational approximation on [-4, 4] (Eigen's generic_fast_erf_float
 * coefficients), +-1 beyond (its value at the ends), selected on the result
 * as in tanhf; max abs. and rel. error 4e-7 */
FSL_H float fsl_erff(float x) {
  float x2 = x * x;
  float p = -2.72614225801306e-10f; p = p * x2 + 2.77068142495902e-08f; p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f; p = p * x2 - 7.34990630326855e-04f; p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f; q = q * x2 - 2.13374055278905e-04f; q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f; q = q * x2 - 1.42647390514189e-02f;
  float y = p / q * x;
  y = x > 4.0f ? 1.0f : y;
  return x < -4.0f ? -1.0f : y; }
/* A transposing nest's tile buffer into its output (src/codegen/loops.c):
 * dst[i*ld + j] = tb[j*16 + i] for i < n0, j < n1 (a 16 x 16 tile, row
 * stride 16).  Whole 8 x 8 blocks go through registers (AVX: 8 loads, 24
 * shuffles, 8 stores), the rest element by element: the scalar copy runs
 * at ~1 element per cycle, its strided reads the bottleneck. */
FSL_H void fsl_tile16_store(float *dst, int64_t ld, const float *tb, int64_t n0, int64_t n1) {
  for (int64_t bi = 0; bi < n0; bi += 8)
    for (int64_t bj = 0; bj < n1; bj += 8) {
      const float *s = tb + bj * 16 + bi;
      float *d = dst + bi * ld + bj;
#if defined(__AVX__)
      if (bi + 8 <= n0 && bj + 8 <= n1) {
        __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + 16), r2 = _mm256_loadu_ps(s + 32),
               r3 = _mm256_loadu_ps(s + 48), r4 = _mm256_loadu_ps(s + 64), r5 = _mm256_loadu_ps(s + 80),
               r6 = _mm256_loadu_ps(s + 96), r7 = _mm256_loadu_ps(s + 112);
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
        continue;
      }
#endif
      for (int64_t i = 0; i < 8 && bi + i < n0; i++)
        for (int64_t j = 0; j < 8 && bj + j < n1; j++) d[i * ld + j] = s[j * 16 + i];
    }
}
