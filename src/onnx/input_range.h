/*
 * input_range.h — the values an integer graph input can take, read off
 * what the ONNX graph does with it (for random inputs that a model can
 * take: `fissile run` and `bench` without --input).
 */
#ifndef FSL_ONNX_INPUT_RANGE_H
#define FSL_ONNX_INPUT_RANGE_H

#include "ir/ir.h"

/** How an integer input is used. */
typedef enum fsl_input_use {
  FSL_INPUT_USE_OTHER,   /* arithmetic, shapes, ...: no bound known */
  FSL_INPUT_USE_INDEX,   /* the indices of a Gather/GatherElements/GatherND */
  FSL_INPUT_USE_MASK,    /* only cast to float or bool, compared, or a Where condition */
} fsl_input_use;

/**
 * Follows input v of an ONNX-level graph through Identity, Cast to an
 * integer type, Reshape, Flatten, Squeeze, Unsqueeze and Expand (which keep
 * the values) to its uses.  INDEX when some use is the indices operand of
 * Gather (ONNX spec: indices in [-s, s-1], s the data's length along
 * `axis`), GatherElements (the same) or GatherND (each index into the
 * data's leading dims): *hi is the smallest such length with a static
 * shape (or 0 when none is static: then OTHER); MASK when every use is a
 * Cast to a float or bool type, a comparison, or Where's condition;
 * otherwise OTHER.  Never fails.
 */
fsl_input_use fsl_onnx_input_use(const fsl_value *v, int64_t *hi);

#endif
