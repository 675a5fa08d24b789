/*
 * quant_match.h — the primitives that fission makes of ONNX
 * DequantizeLinear and QuantizeLinear (src/fission/quant.c), recognised
 * with per-tensor parameters, for the passes that rewrite quantized graphs
 * (qdq.c, qdq_lift.c).
 */
#ifndef FSL_PASSES_QUANT_MATCH_H
#define FSL_PASSES_QUANT_MATCH_H

#include "ir/ir.h"

/** Binary node n's operand that is a one-value constant (or an
 *  expand/reshape view of one): its index in *which, its value in *c (the
 *  first, if both are); false when neither is. */
bool fsl_const_operand(const fsl_node *n, double *c, int *which);

/** A per-tensor dequantization v = (float(q) - zero) * scale. */
typedef struct fsl_dequant {
  fsl_value *q;      /* uint8 or int8, v's shape */
  double zero;       /* an integer within q's type (0 when absent) */
  double scale;      /* > 0, finite */
} fsl_dequant;

/** Whether float32 value v is mul(sub(cast_f32(q), zero), scale) or
 *  mul(cast_f32(q), scale), the zero point and scale constants of one
 *  value each (or expand/reshape views of one), q uint8 or int8 of v's
 *  shape; fills *d.  ONNX DequantizeLinear as fission writes it. */
bool fsl_match_dequant(const fsl_value *v, fsl_dequant *d);

/** A per-tensor quantization y = cast(min(max(round(x OP s) + zero, lo), hi)). */
typedef struct fsl_quant {
  fsl_value *x;      /* the float32 input */
  bool by_recip;     /* x * scale (a reciprocal), else x / scale */
  double scale;      /* the divisor or the multiplier: > 0, finite */
  double zero;       /* integer, 0 when absent */
  fsl_dtype dtype;   /* uint8 or int8: y's */
} fsl_quant;

/** Whether 8-bit value y is ONNX QuantizeLinear of a float32 value as
 *  fission writes it (x / scale, or x * (1/scale) after the rewrite
 *  div-by-const), rounded half to even, the zero point added (or not),
 *  clamped to exactly y's type range and cast; parameters one value each;
 *  fills *q. */
bool fsl_match_quant(const fsl_value *y, fsl_quant *q);

/** *q's quantization of one float c, computed in float32 as the generated
 *  code computes it (NaN: false). */
bool fsl_quant_scalar(const fsl_quant *q, double c, double *out);

#endif
