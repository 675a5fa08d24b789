/*
 * baselines.h — the rule-based strategies the optimal plan is compared
 * with (DESIGN.md section 5: unfused, opfuse, greedy).  Implemented in
 * baselines.c; used by fsl_plan_build (plan.c).
 */
#ifndef FSL_BASELINES_H
#define FSL_BASELINES_H

#include "orchestrate/orchestrate.h"

/**
 * Groups the primitive nodes of g into kernels by strategy s, which is
 * FSL_STRATEGY_UNFUSED (one kernel per ONNX op, i.e. per node origin, split
 * where an op's primitives are not one legal kernel), FSL_STRATEGY_OPFUSE
 * (TVM FuseOps-style rule-based fusion at ONNX-op granularity: kind lattice
 * + post-dominators) or FSL_STRATEGY_GREEDY (the same rules over
 * primitives).  prologue: what LINEAR kernels may take as a prologue
 * besides reshapes (FSL_PROLOGUE_* flags, fsl_device_prologue).  `out` (initialised by the caller with out->g = g, no
 * kernels) receives kernels made with fsl_kernel_make, in an executable
 * order, covering every node exactly once; costs are not set.
 * Errors: FSL_ERR_ARG (other strategy), FSL_ERR_NOMEM, FSL_ERR_RUNTIME (a
 * group that is not a legal kernel).  On error `out` holds no kernels.
 */
fsl_status fsl_baseline(const fsl_graph *g, fsl_strategy s, unsigned prologue, fsl_kernel_set *out);

#endif
