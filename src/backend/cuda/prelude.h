/*
 * prelude.h — the start of every CUDA C source fissile generates (the CUDA
 * dialect's prelude, src/backend/cuda/dialect_cuda.c; compiled into
 * libfissile as a string by cmake/embed.cmake).  NVRTC has no C standard
 * headers: the integer types and limits are defined here; math functions
 * (expf, fmodf, nearbyintf, isinf, ...) are CUDA's device functions.  The
 * code generator appends the helpers every dialect shares
 * (src/codegen/helpers.h).
 */
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-INT64_MAX - 1)
#define UINT64_MAX 18446744073709551615ULL
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)

#define FSL_H static __device__ __forceinline__
/* the GPU's own expf/tanhf/erff are fast (special function units) */
FSL_H float fsl_expf(float x) { return expf(x); }
FSL_H float fsl_expf_le0(float x) { return expf(x); } /* x <= 0 or NaN: the same */
FSL_H float fsl_tanhf(float x) { return tanhf(x); }
FSL_H float fsl_erff(float x) { return erff(x); }
