/*
 * passes.h — graph-to-graph clean-up passes run by the compile driver.
 *
 * Every pass takes a graph whose nodes are in topological order and leaves
 * them in topological order.  Passes never rename graph inputs or outputs.
 */
#ifndef FSL_PASSES_H
#define FSL_PASSES_H

#include "ir/ir.h"

/**
 * Common-subexpression elimination.  Merges nodes with the same op, the
 * same input values (pointer-equal) and equal attributes, keeping the
 * first; merges equal small constants (same dtype, shape and bytes, at most
 * FSL_CSE_MAX_CONST_BYTES) used as node inputs.  A node whose output is a
 * graph output is never the one removed.  The merged-away nodes are
 * removed from the graph.  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_cse(fsl_graph *g);

/** Largest constant (in bytes) that CSE compares for merging. */
#define FSL_CSE_MAX_CONST_BYTES 4096

/**
 * Dead-code elimination.  Removes every node none of whose outputs reaches
 * a graph output (walking back from the outputs).  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_dce(fsl_graph *g);

/**
 * Gives every view computed from constants only (a chain of movement
 * primitives over initializers, e.g. a bias broadcast that CSE shared
 * between layers) one private copy per consumer node, so that each
 * consumer's kernel can recompute it from the small constant instead of
 * reading a materialised full-size tensor (unshare.c).  Run after CSE.
 * Leaves the nodes in topological order.  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_unshare_views(fsl_graph *g);

/**
 * Computes a graph's float16 and bfloat16 values in float32 (widen.c): every
 * half value but the graph's inputs and outputs becomes f32 (constants
 * converted here, exactly), casts to a half type cast to f32, a half graph
 * input is widened by one cast before its readers and a half graph output
 * rounded (to nearest even) by one cast after its producer; casts that end
 * up f32 -> f32 are removed.  The graph is left as it is when a node that
 * touches a half value is not a primitive whose dtype follows its operands
 * (an opaque op).  Semantics: each half node computed in f32 without
 * rounding between nodes, as ONNX Runtime's CPU provider computes half
 * nodes it has no half kernel for.  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_widen_half(fsl_graph *g);

/**
 * The weights (input 1) of every matmul and conv that are computed from
 * constants only (a DequantizeLinear of 8-bit initializers past fission's
 * folding limit) become constants, evaluated once by the reference
 * interpreter (fold.c), within the budget of the model's constants
 * (FSL_CONST_LIMIT_*).  The chains are left for DCE.  Sets *n_folded.
 * Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_fold_weights(fsl_graph *g, int *n_folded);

/**
 * Float32 convolutions and 2-D matmuls whose source is a per-tensor
 * DequantizeLinear of uint8/int8 data and whose constant weights fission
 * folded from a DequantizeLinear of 8-bit initializers (per tensor or per
 * output channel) become the same op over int32 operands (the 8-bit values
 * widened, minus their zero points) scaled by x_scale * w_scale (qdq.c):
 * what a backend whose library multiplies 8-bit data runs as int8.
 * `onnx` is the ONNX graph the primitives came from (node origins);
 * linear_int8 whether the backend's library runs int8
 * (fsl_backend_caps.linear_int8; false: the pass does nothing).  An int8
 * convolution source with a zero point on a CPU without VNNI is rewritten
 * too, and its convolution then runs as generated code (onednn_int8.c
 * refuses it there).  Sets *n_rewritten.  The replaced nodes are left for
 * DCE.  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_qdq_linear(fsl_graph *g, const fsl_graph *onnx, bool linear_int8, int *n_rewritten);

/**
 * Elementwise functions of one 8-bit tensor as tables (lut.c): where a
 * chain of elementwise primitives over one run-time uint8/int8 value x
 * (and one-element constants) computes, through a transcendental (exp,
 * sigmoid, tanh, erf, ...), a float32 or 8-bit value of x's dims that the
 * rest of the graph reads, that value becomes Gather(table, int32(x)) with
 * a constant table of 256 entries, computed here by the reference
 * interpreter on every value of x (exact: the values the chain computes).
 * QDQ models' SiLU, Sigmoid, GELU and the like between int8 convolutions.
 * Widening casts (what int8 linear ops read) end a chain.  The chains are
 * left for DCE.  Sets *n_tables.  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_lut8(fsl_graph *g, int *n_tables);

/**
 * QuantizeLinear whose input only moves (reshape, permute, expand, slice,
 * pad, concat, window), pools or clamps (max, min, reduce_max,
 * reduce_min) DequantizeLinear values of the same per-tensor scale, zero
 * point and 8-bit type, rewritten as those primitives on the 8-bit
 * integers: bit-exact (src/passes/qdq_lift.c says why).  Every backend
 * (it only removes float work).  *n_lifted: how many QuantizeLinear
 * outputs were replaced.  FSL_ERR_NOMEM.
 */
fsl_status fsl_pass_qdq_lift(fsl_graph *g, int *n_lifted);

#endif
