/*
 * kernel_ws.h — a reusable workspace for checking many node sets of one
 * graph as kernels without O(graph) work per set (kernel.c).  Private to
 * src/orchestrate (candidates.c, baselines.c).
 */
#ifndef FSL_KERNEL_WS_H
#define FSL_KERNEL_WS_H

#include "orchestrate/orchestrate.h"

typedef struct fsl_kernel_ws fsl_kernel_ws;

/** Verdicts of fsl_kernel_ws_make: legal; not legal; not legal and no
 *  superset grown from it can be (candidates.c stops growing it). */
enum { KV_LEGAL = 0, KV_ILLEGAL = 1, KV_PRUNE = 2 };

/** A workspace for graph g (topo: fsl_graph_topo_index(g)).  FSL_ERR_NOMEM. */
fsl_status fsl_kernel_ws_new(const fsl_graph *g, const int *topo, fsl_kernel_ws **out);
void fsl_kernel_ws_free(fsl_kernel_ws *ws);
/** What LINEAR kernels may take as a prologue besides reshapes
 *  (FSL_PROLOGUE_* flags: views such as permute, expand, slice; int8
 *  operand widening); none in a new workspace. */
void fsl_kernel_ws_set_prologue(fsl_kernel_ws *ws, unsigned flags);
/** Whether node nd is a step an int8 library reads through
 *  (FSL_PROLOGUE_INT8, fsl_device.linear_int8): an 8-bit value cast to
 *  int32, an int32 difference (operand minus zero point), or a cast or
 *  expand of a one-element value (the zero point's broadcast).  The
 *  library takes an operand only in the forms backend/cpu/onednn_int8.c
 *  matches; the lowering generates the prologue otherwise. */
bool fsl_kernel_int8_widening(const fsl_node *nd);
/** Checks the node set like fsl_kernel_make and sets *verdict; with
 *  `build`, a legal set also yields the kernel in *out (else *out NULL). */
fsl_status fsl_kernel_ws_make(fsl_kernel_ws *ws, fsl_node *const *nodes, int n, bool build,
                              fsl_kernel **out, const char **why, int *verdict);

#endif
