/*
 * eval.h — the reference semantics (the reference interpreter): executes
 * primitive graphs (and opaque ONNX ops) with plain loops; float math
 * accumulates in double, integer math in int64/uint64.  Slow and obviously
 * right: the oracle for every later pass and backend.  It is no backend:
 * fission's constant folding, the API's interpreter path, the plan-ref
 * backend (src/backend/ref/plan_exec.c) and the CPU backend's fallback all
 * call it.  Semantics of each primitive: docs/primitives.md.
 */
#ifndef FSL_EVAL_H
#define FSL_EVAL_H

#include "ir/ir.h"

/**
 * Evaluates one node (a primitive, or an opaque ONNX op left by fission).
 * in_data[i] holds the row-major contents of n->in[i] (NULL for an omitted
 * optional input); out_data[i] is a buffer of fsl_value_nbytes(n->out[i])
 * bytes to fill.  Shapes are read from the values (static).
 * Errors: FSL_ERR_RUNTIME (e.g. gather index out of range, integer division
 * by zero), FSL_ERR_UNSUPPORTED (op/dtype combination not implemented).
 */
fsl_status fsl_ref_eval(const fsl_node *n, const void *const *in_data, void *const *out_data);

/**
 * Runs a primitive graph.  inputs[i] holds the data of g->inputs[i];
 * on success outputs[i] receives a malloc'd buffer with the data of
 * g->outputs[i] (caller frees).  On error no output is allocated.
 */
fsl_status fsl_ref_run(const fsl_graph *g, const void *const *inputs, void **outputs);

/** Evaluates an opaque ONNX op node (TopK, CumSum, ...; src/eval/opaque.c),
 *  same contract as fsl_ref_eval. FSL_ERR_UNSUPPORTED for an op it lacks. */
fsl_status fsl_ref_eval_opaque(const fsl_node *n, const void *const *in_data, void *const *out_data);

/** Copies every graph output of g from buf (indexed by value id) into new
 *  malloc'd outputs[i]; `missing` completes the error for an output with no
 *  buffer ("is never computed").  On error no output is left allocated.
 *  Shared by fsl_ref_run and the plan-ref backend. */
fsl_status fsl_ref_copy_outputs(const fsl_graph *g, const void *const *buf, const char *missing, void **outputs);

#endif
