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

#endif
