/*
 * ref.h — the reference interpreter: executes primitive graphs (and opaque
 * ONNX ops) with plain loops; float math accumulates in double, integer
 * math in int64/uint64.  Slow and obviously right: the oracle for every
 * later pass and backend.  Semantics of each primitive: docs/primitives.md.
 */
#ifndef FSL_REF_H
#define FSL_REF_H

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

/** Evaluates an opaque ONNX op node (TopK, CumSum, ...; src/backend/ref/opaque.c),
 *  same contract as fsl_ref_eval. FSL_ERR_UNSUPPORTED for an op it lacks. */
fsl_status fsl_ref_eval_opaque(const fsl_node *n, const void *const *in_data, void *const *out_data);

#endif
