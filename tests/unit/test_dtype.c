/* test_dtype.c — f16/bf16 conversion in src/core/dtype.c: round to nearest,
 * ties to even (IEEE 754 roundTiesToEven), overflow to infinity, subnormals,
 * signed zeros, infinities and NaNs; and the typed element load/store. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>

#include "core/core.h"

static float f32_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint32_t bits_of(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}

static void test_f32_to_f16(void **state) {
  (void)state;
  static const struct { float in; uint16_t out; } cases[] = {
      {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.5f, 0x3800},
      {65504.0f, 0x7bff},                       /* largest finite */
      {65519.0f, 0x7bff},                       /* below the tie: stays finite */
      {65520.0f, 0x7c00},                       /* tie between 65504 (odd) and 2^16: up, to infinity */
      {1e6f, 0x7c00}, {-1e6f, 0xfc00},
      {1.0f + 0x1p-11f, 0x3c00},                /* tie: down to the even 0x3c00 */
      {1.0f + 3 * 0x1p-11f, 0x3c02},            /* tie: up to the even 0x3c02 */
      {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01},     /* just above the tie: up */
      {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00},     /* just below: down */
      {0x1p-14f, 0x0400},                       /* smallest normal */
      {0x1p-24f, 0x0001},                       /* smallest subnormal */
      {0x1p-25f, 0x0000},                       /* tie between 0 and 2^-24: to zero */
      {-0x1p-25f, 0x8000},
      {0x1p-25f + 0x1p-40f, 0x0001},            /* just above the tie */
      {3 * 0x1p-25f, 0x0002},                   /* tie between 1 and 2 units: to 2 */
      {5 * 0x1p-25f, 0x0002},                   /* tie between 2 and 3 units: to 2 */
      {0x1p-14f - 0x1p-25f, 0x0400},            /* tie, largest subnormal (odd) -> smallest normal */
      {0x1p-30f, 0x0000}, {0x1p-140f, 0x0000},  /* underflow; f32 subnormal */
      {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
  };
  for (size_t i = 0; i < FSL_ARRAY_LEN(cases); i++) {
    uint16_t h = fsl_f32_to_f16(cases[i].in);
    if (h != cases[i].out) fail_msg("f32 %a -> f16 0x%04x, expected 0x%04x", (double)cases[i].in, h, cases[i].out);
  }
  /* NaNs stay NaN (quiet, payload dropped), with their sign. */
  const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu};
  for (size_t i = 0; i < FSL_ARRAY_LEN(nans); i++) {
    uint16_t h = fsl_f32_to_f16(f32_of(nans[i]));
    assert_int_equal(h & 0x7c00, 0x7c00);
    assert_int_equal(h & 0x0200, 0x0200);
    assert_int_equal(h >> 15, nans[i] >> 31);
  }
}

static void test_f16_to_f32(void **state) {
  (void)state;
  assert_true(fsl_f16_to_f32(0x3c00) == 1.0f);
  assert_true(fsl_f16_to_f32(0x7bff) == 65504.0f);
  assert_true(fsl_f16_to_f32(0x0001) == 0x1p-24f);
  assert_true(fsl_f16_to_f32(0x03ff) == 0x3ffp-24f);
  assert_true(fsl_f16_to_f32(0x0400) == 0x1p-14f);
  assert_int_equal(bits_of(fsl_f16_to_f32(0x8000)), 0x80000000u);
  assert_true(fsl_f16_to_f32(0x7c00) == INFINITY);
  assert_true(fsl_f16_to_f32(0xfc00) == -INFINITY);
  assert_true(isnan(fsl_f16_to_f32(0x7e00)));
  assert_true(isnan(fsl_f16_to_f32(0x7c01)));
  assert_true(signbit(fsl_f16_to_f32(0xfe00)));
  /* Every half survives the round trip (NaNs as NaNs). */
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = fsl_f16_to_f32((uint16_t)h);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) assert_true(isnan(f));
    else if (fsl_f32_to_f16(f) != h) fail_msg("f16 0x%04x -> %a -> 0x%04x", h, (double)f, fsl_f32_to_f16(f));
  }
}

static void test_bf16(void **state) {
  (void)state;
  static const struct { uint32_t in; uint16_t out; } cases[] = {
      {0x3f800000u, 0x3f80}, {0x80000000u, 0x8000},
      {0x3f808000u, 0x3f80},  /* tie: down to the even 0x3f80 */
      {0x3f818000u, 0x3f82},  /* tie: up to the even 0x3f82 */
      {0x3f808001u, 0x3f81},  /* just above the tie */
      {0x3f807fffu, 0x3f80},  /* just below */
      {0x7f7f8000u, 0x7f80},  /* tie above the largest finite (odd): to infinity */
      {0x7f7f7fffu, 0x7f7f},
      {0x00008000u, 0x0000},  /* f32 subnormals round like the rest */
      {0x00018000u, 0x0002},
      {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},
  };
  for (size_t i = 0; i < FSL_ARRAY_LEN(cases); i++) {
    uint16_t h = fsl_f32_to_bf16(f32_of(cases[i].in));
    if (h != cases[i].out) fail_msg("f32 0x%08x -> bf16 0x%04x, expected 0x%04x", cases[i].in, h, cases[i].out);
  }
  /* NaNs, signalling ones included, come out as quiet NaNs. */
  const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu};
  for (size_t i = 0; i < FSL_ARRAY_LEN(nans); i++) {
    uint16_t h = fsl_f32_to_bf16(f32_of(nans[i]));
    assert_int_equal(h & 0x7fc0, 0x7fc0);
    assert_int_equal(h >> 15, nans[i] >> 31);
  }
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = fsl_bf16_to_f32((uint16_t)h);
    assert_int_equal(bits_of(f), h << 16);
    if (!isnan(f)) assert_int_equal(fsl_f32_to_bf16(f), h);
  }
}

/* fsl_store_f64 / fsl_load_f64 go through the same conversions. */
static void test_load_store(void **state) {
  (void)state;
  uint16_t buf[2];
  fsl_store_f64(FSL_DT_F16, buf, 1, 1.0 + 0x1p-11);
  assert_int_equal(buf[1], 0x3c00);
  assert_true(fsl_load_f64(FSL_DT_F16, buf, 1) == 1.0);
  fsl_store_f64(FSL_DT_BF16, buf, 0, -3.0);
  assert_int_equal(buf[0], 0xc040);
  assert_true(fsl_load_f64(FSL_DT_BF16, buf, 0) == -3.0);
  uint8_t b[2] = {0, 7};
  assert_true(fsl_load_f64(FSL_DT_BOOL, b, 1) == 1.0);
  fsl_store_u64(FSL_DT_BOOL, b, 0, 1ull << 63);
  assert_int_equal(b[0], 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f32_to_f16),
      cmocka_unit_test(test_f16_to_f32),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_load_store),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
