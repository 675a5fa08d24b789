/*
 * prelude.h — the start of every OpenCL C source fissile generates (the
 * OpenCL dialect's prelude, src/backend/opencl/dialect_opencl.c; compiled
 * into libfissile as a string by cmake/embed.cmake).  OpenCL C has no C
 * standard headers: the <stdint.h> names the shared code prints are
 * typedefs of OpenCL's fixed-width types, and C's float-suffixed math
 * names (expf, fmodf, ...) are macros over OpenCL's overloaded built-ins
 * (INFINITY, NAN, isinf are built in).  Sums accumulate in double
 * (docs/primitives.md), so the device needs cl_khr_fp64 (the backend
 * checks).  The code generator appends the helpers every dialect shares
 * (src/codegen/helpers.h).
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef uchar uint8_t;
typedef ushort uint16_t;
typedef uint uint32_t;
typedef ulong uint64_t;
#define INT64_MAX 9223372036854775807L
#define INT64_MIN (-INT64_MAX - 1)
#define UINT64_MAX 18446744073709551615UL
#define expf exp
#define logf log
#define sqrtf sqrt
#define tanhf tanh
#define erff erf
#define sinf sin
#define cosf cos
#define tanf tan
#define asinf asin
#define acosf acos
#define atanf atan
#define sinhf sinh
#define coshf cosh
#define asinhf asinh
#define acoshf acosh
#define atanhf atanh
#define floorf floor
#define ceilf ceil
#define fabsf fabs
#define powf pow
#define fmodf fmod
#define nearbyintf rint /* round half to even in the default rounding mode, as C's nearbyint */
#define nearbyint rint

#define FSL_H static inline
/* the device's own exp/tanh/erf (vectorized by the OpenCL compiler) */
FSL_H float fsl_expf(float x) { return exp(x); }
FSL_H float fsl_expf_le0(float x) { return exp(x); } /* x <= 0 or NaN: the same */
FSL_H float fsl_tanhf(float x) { return tanh(x); }
FSL_H float fsl_erff(float x) { return erf(x); }
