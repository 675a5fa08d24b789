/* dtype.c — element types: names, sizes, f16/bf16 conversion, load/store. */
#include "core.h"
#include <math.h>

typedef struct { const char *name; size_t size; } dtype_info;

static const dtype_info k_dtypes[FSL_DT_COUNT] = {
  [FSL_DT_UNDEFINED] = {"undefined", 0}, [FSL_DT_F32] = {"float", 4},
  [FSL_DT_U8] = {"uint8", 1},   [FSL_DT_I8] = {"int8", 1},
  [FSL_DT_U16] = {"uint16", 2}, [FSL_DT_I16] = {"int16", 2},
  [FSL_DT_I32] = {"int32", 4},  [FSL_DT_I64] = {"int64", 8},
  [FSL_DT_STRING] = {"string", 0}, [FSL_DT_BOOL] = {"bool", 1},
  [FSL_DT_F16] = {"float16", 2}, [FSL_DT_F64] = {"double", 8},
  [FSL_DT_U32] = {"uint32", 4}, [FSL_DT_U64] = {"uint64", 8},
  [14] = {"complex64", 0}, [15] = {"complex128", 0},
  [FSL_DT_BF16] = {"bfloat16", 2}, [17] = {"float8e4m3fn", 0},
  [18] = {"float8e4m3fnuz", 0}, [19] = {"float8e5m2", 0},
  [20] = {"float8e5m2fnuz", 0}, [21] = {"uint4", 0}, [22] = {"int4", 0},
  [23] = {"float4e2m1", 0}, [24] = {"float8e8m0", 0}, [25] = {"uint2", 0},
  [26] = {"int2", 0},
};

const char *fsl_dtype_name(fsl_dtype dt) {
  return (unsigned)dt < FSL_DT_COUNT ? k_dtypes[dt].name : "unknown";
}
size_t fsl_dtype_size(fsl_dtype dt) {
  return (unsigned)dt < FSL_DT_COUNT ? k_dtypes[dt].size : 0;
}
bool fsl_dtype_valid(fsl_dtype dt) {
  return dt != FSL_DT_STRING && fsl_dtype_size(dt) > 0;
}
bool fsl_dtype_is_float(fsl_dtype dt) {
  return dt == FSL_DT_F32 || dt == FSL_DT_F64 || dt == FSL_DT_F16 || dt == FSL_DT_BF16;
}
bool fsl_dtype_is_int(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_U8: case FSL_DT_I8: case FSL_DT_U16: case FSL_DT_I16:
  case FSL_DT_I32: case FSL_DT_I64: case FSL_DT_U32: case FSL_DT_U64:
    return true;
  default: return false;
  }
}
bool fsl_dtype_is_signed(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_I8: case FSL_DT_I16: case FSL_DT_I32: case FSL_DT_I64:
    return true;
  default: return fsl_dtype_is_float(dt);
  }
}

int64_t fsl_numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    if (!fsl_mul_ok(n, dims[i], &n)) return -1;
  return n;
}
int64_t fsl_nbytes(fsl_dtype dt, int rank, const int64_t *dims) {
  int64_t n = fsl_numel(rank, dims), b;
  if (n < 0 || !fsl_mul_ok(n, (int64_t)fsl_dtype_size(dt), &b)) return -1;
  return b;
}

unsigned fsl_uniform_dims(const void *data, size_t elem, int rank, const int64_t *dims) {
  const unsigned char *d = data;
  unsigned mask = 0;
  for (int ax = 0; ax < rank && ax < 32; ax++) {
    int64_t ext = dims[ax], inner = 1, outer = 1;
    if (ext <= 1) continue;
    for (int i = ax + 1; i < rank; i++) inner *= dims[i];
    for (int i = 0; i < ax; i++) outer *= dims[i];
    size_t row = (size_t)inner * elem;
    bool uniform = true;
    for (int64_t o = 0; uniform && o < outer; o++)
      for (int64_t k = 1; uniform && k < ext; k++)
        uniform = !memcmp(d + (size_t)(o * ext + k) * row, d + (size_t)(o * ext) * row, row);
    if (uniform) mask |= 1u << ax;
  }
  return mask;
}

int64_t fsl_tensor_numel(const fsl_tensor *t) { return fsl_numel(t->rank, t->dims); }
void fsl_tensor_free(fsl_tensor *t) {
  if (!t) return;
  free(t->data);
  t->data = NULL;
}

char *fsl_shape_str(int rank, const int64_t *dims, char *buf, size_t len) {
  if (rank == 0) { snprintf(buf, len, "scalar"); return buf; }
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < rank && o < len; i++) {
    int w = dims[i] < 0 ? snprintf(buf + o, len - o, "%s?", i ? "x" : "")
                        : snprintf(buf + o, len - o, "%s%lld", i ? "x" : "", (long long)dims[i]);
    if (w < 0) break;
    o += (size_t)w;
  }
  return buf;
}

/* ---- half precision (IEEE binary16) ---- */
float fsl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else { /* subnormal */
      float f = ldexpf((float)man, -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t fsl_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
  if (ax < 0x38800000u) { /* subnormal or zero in half */
    float a;
    memcpy(&a, &ax, 4);
    float r = nearbyintf(a * 16777216.0f); /* a / 2^-24, round to even */
    return (uint16_t)(sign | (uint32_t)r);
  }
  uint32_t e = ((ax >> 23) - 112) << 10, m = (ax >> 13) & 0x3ff;
  uint32_t h = e | m, rest = ax & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float fsl_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
uint16_t fsl_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1); /* round to nearest even */
  return (uint16_t)(x >> 16);
}

/* ---- typed element access ---- */
#define LOAD_CASES(T)                                                        \
  case FSL_DT_F32: return (T)((const float *)p)[i];                          \
  case FSL_DT_F64: return (T)((const double *)p)[i];                         \
  case FSL_DT_F16: return (T)fsl_f16_to_f32(((const uint16_t *)p)[i]);       \
  case FSL_DT_BF16: return (T)fsl_bf16_to_f32(((const uint16_t *)p)[i]);     \
  case FSL_DT_I8: return (T)((const int8_t *)p)[i];                          \
  case FSL_DT_I16: return (T)((const int16_t *)p)[i];                        \
  case FSL_DT_I32: return (T)((const int32_t *)p)[i];                        \
  case FSL_DT_I64: return (T)((const int64_t *)p)[i];                        \
  case FSL_DT_U8: return (T)((const uint8_t *)p)[i];                         \
  case FSL_DT_U16: return (T)((const uint16_t *)p)[i];                       \
  case FSL_DT_U32: return (T)((const uint32_t *)p)[i];                       \
  case FSL_DT_U64: return (T)((const uint64_t *)p)[i];                       \
  case FSL_DT_BOOL: return (T)(((const uint8_t *)p)[i] != 0);                \
  default: FSL_ASSERT(!"bad dtype"); return 0

double fsl_load_f64(fsl_dtype dt, const void *p, int64_t i) { switch (dt) { LOAD_CASES(double); } }

/* float -> int conversions: truncate, saturating NaN/out-of-range to 0-ish
 * values is implementation-defined in C; clamp to avoid UB. */
static int64_t f2i(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}
static uint64_t f2u(double v) {
  if (isnan(v) || v <= -1.0) return (uint64_t)f2i(v);
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return (uint64_t)v;
}

int64_t fsl_load_i64(fsl_dtype dt, const void *p, int64_t i) {
  if (fsl_dtype_is_float(dt)) return f2i(fsl_load_f64(dt, p, i));
  if (dt == FSL_DT_U64) return (int64_t)((const uint64_t *)p)[i];
  switch (dt) { LOAD_CASES(int64_t); }
}
uint64_t fsl_load_u64(fsl_dtype dt, const void *p, int64_t i) {
  if (fsl_dtype_is_float(dt)) return f2u(fsl_load_f64(dt, p, i));
  switch (dt) { LOAD_CASES(uint64_t); }
}

#define STORE_CASES(v)                                                       \
  case FSL_DT_I8: ((int8_t *)p)[i] = (int8_t)(v); break;                     \
  case FSL_DT_I16: ((int16_t *)p)[i] = (int16_t)(v); break;                  \
  case FSL_DT_I32: ((int32_t *)p)[i] = (int32_t)(v); break;                  \
  case FSL_DT_I64: ((int64_t *)p)[i] = (int64_t)(v); break;                  \
  case FSL_DT_U8: ((uint8_t *)p)[i] = (uint8_t)(v); break;                   \
  case FSL_DT_U16: ((uint16_t *)p)[i] = (uint16_t)(v); break;                \
  case FSL_DT_U32: ((uint32_t *)p)[i] = (uint32_t)(v); break;                \
  case FSL_DT_U64: ((uint64_t *)p)[i] = (uint64_t)(v); break;                \
  case FSL_DT_BOOL: ((uint8_t *)p)[i] = (v) != 0; break;                     \
  default: FSL_ASSERT(!"bad dtype")

void fsl_store_f64(fsl_dtype dt, void *p, int64_t i, double v) {
  switch (dt) {
  case FSL_DT_F32: ((float *)p)[i] = (float)v; break;
  case FSL_DT_F64: ((double *)p)[i] = v; break;
  case FSL_DT_F16: ((uint16_t *)p)[i] = fsl_f32_to_f16((float)v); break;
  case FSL_DT_BF16: ((uint16_t *)p)[i] = fsl_f32_to_bf16((float)v); break;
  case FSL_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default:
    if (fsl_dtype_is_signed(dt)) fsl_store_i64(dt, p, i, f2i(v));
    else fsl_store_u64(dt, p, i, f2u(v));
  }
}
void fsl_store_i64(fsl_dtype dt, void *p, int64_t i, int64_t v) {
  if (fsl_dtype_is_float(dt)) { fsl_store_f64(dt, p, i, (double)v); return; }
  switch (dt) { STORE_CASES(v); }
}
void fsl_store_u64(fsl_dtype dt, void *p, int64_t i, uint64_t v) {
  if (fsl_dtype_is_float(dt)) { fsl_store_f64(dt, p, i, (double)v); return; }
  switch (dt) { STORE_CASES(v); }
}
