/*
 * linsplit.h — how a LINEAR kernel is split for generated code: the CPU
 * backend (backend/cpu/lower.c) and the OpenCL backend
 * (backend/opencl/opencl.c) build their steps from this split, and the CPU
 * kernel profiler (backend/cpu/profile.c) times a kernel the same way.
 *
 *   prologue  the kernel's nodes that feed the matmul/conv: generated code
 *             writing what the linear op and later nodes read, unless they
 *             are only reshape views (then the operands are read through
 *             them: a reshape is the same bytes) or, for a generated tiled
 *             matmul, only movement views that its tile loads evaluate
 *             (fsl_linear_split_views);
 *   linear    the matmul/conv, with a closed prefix of `chain` (the
 *             elementwise, reshape or permute nodes after it that read its
 *             result or each other's) absorbed as oneDNN post-ops (CPU:
 *             onednn.h; no permute)
 *             or computed before the store of a generated matmul or
 *             convolution (GPU dialects: fsl_linear_split_fused);
 *   epilogue  every other node of the kernel, generated over the linear
 *             op's result.
 */
#ifndef FSL_CG_LINSPLIT_H
#define FSL_CG_LINSPLIT_H

#include "codegen/codegen.h"
#include "orchestrate/orchestrate.h"

/** A growable list of distinct pointers (values or nodes), in insertion order. */
typedef struct fsl_vlist {
  int n, cap;
  void **p;
} fsl_vlist;

/** Adds x unless present; false on OOM. */
bool fsl_vl_add(fsl_vlist *l, void *x);
bool fsl_vl_has(const fsl_vlist *l, const void *x);
/** Adds to ins the values the nodes read that none of them produces (the
 *  inputs of a node set); false on OOM. */
bool fsl_vl_add_inputs(fsl_vlist *ins, fsl_node *const *nodes, int n);

#define FSL_LINEAR_CHAIN_MAX 64

typedef struct fsl_linear_split {
  fsl_node *lin;                 /* the kernel's one matmul/conv */
  fsl_value *lin_in[2];          /* its operands, through in-kernel reshapes when the prologue is only those */
  fsl_vlist knodes;              /* the kernel's nodes */
  fsl_vlist anc;                 /* prologue: the nodes feeding lin, in topological order */
  bool gen_prologue;             /* anc holds more than reshapes: generate anc, writing pre_out */
  fsl_vlist pre_out;             /* values of anc read outside anc (by lin or later) or graph outputs */
  bool views;                    /* the generated linear op reads lin_in through anc (fsl_linear_split_views) */
  fsl_node *chain[FSL_LINEAR_CHAIN_MAX];
  int n_chain;                   /* post-op candidates after lin, in topological order
                                    (absorb only closed prefixes: fsl_linear_chain_closed) */
} fsl_linear_split;

/**
 * Splits LINEAR kernel k (see the top of this file).  *s owns its lists
 * (fsl_linear_split_free, also after an error).  Errors:
 * FSL_ERR_UNSUPPORTED when k has no or several matmul/conv nodes,
 * FSL_ERR_NOMEM.
 */
fsl_status fsl_linear_split_make(const fsl_kernel *k, fsl_linear_split *s);

/**
 * The epilogue once the linear step absorbed chain[0 .. n_abs) and writes
 * z: post gets the kernel's nodes outside lin, the absorbed chain and the
 * prologue; post_out the kernel outputs those nodes produce, except z and
 * prologue outputs that written(ctx, v) reports as already written.
 * Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_linear_split_epilogue(const fsl_kernel *k, const fsl_linear_split *s, int n_abs, const fsl_value *z,
                                     bool (*written)(const void *ctx, const fsl_value *v), const void *ctx,
                                     fsl_vlist *post, fsl_vlist *post_out);

/**
 * The epilogue a generated matmul or convolution computes before its
 * store (codegen.h, fsl_cg_epilogue): the longest closed prefix
 * chain[0 .. *n_abs) of elementwise nodes and reshapes (each element of
 * its value comes from the linear output's element at the same flat
 * index), optionally ending in a tail, a path of permutes and reshapes
 * from the first permute on (it only moves the elements: the store writes
 * each at its place in the last value, e.g. attention's heads transposed
 * after a projection), whose other operands are kernel inputs, prologue outputs, or
 * values of kernel nodes a generated loop takes (elementwise, movement,
 * gather) that read neither the linear output nor the chain.  nodes
 * (empty on entry) receives those nodes and the prefix in the kernel's
 * order, ins what they read besides the linear output.  *n_abs = 0 when
 * no prefix qualifies.  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_linear_split_fused(const fsl_kernel *k, const fsl_linear_split *s, int *n_abs, fsl_vlist *nodes,
                                  fsl_vlist *ins);

/**
 * Whether the generated linear op of dialect d can read its operands
 * through split s's prologue instead of a prologue function writing them:
 * a matmul that d tiles (fsl_cg_tiles_fit) whose prologue is only
 * movement views (each operand a path of one-input movement nodes, e.g. the
 * permute of attention's K^T or the expand of a broadcast operand, from a
 * value outside the paths) with no prologue value read elsewhere or a graph
 * output.  When so, s becomes that split: lin_in[i] are the paths'
 * sources, views true, gen_prologue false and pre_out empty; the linear
 * function then loads each tile element through the views' index
 * expressions (fsl_codegen_linear).  The CPU backend does not ask: oneDNN
 * reads plain operands.
 */
bool fsl_linear_split_views(fsl_linear_split *s, const fsl_dialect *d);

/** The value the linear step writes once it absorbed chain[0 .. n_abs):
 *  the last absorbed node's output, lin's when n_abs is 0. */
fsl_value *fsl_linear_split_out(const fsl_linear_split *s, int n_abs);

/**
 * The linear op of split s of kernel k (of graph g), a matmul or
 * convolution, appended to b as function fsl_k<id> in dialect d
 * (codegen.h) with the longest epilogue the generator takes before its
 * store (fsl_linear_split_fused; else none).  On success *n_abs chain
 * nodes are absorbed: the function reads in = {s->lin_in[0],
 * s->lin_in[1], ins..} (through the prologue's views when s->views) and writes chain[*n_abs - 1]'s output (lin's when
 * *n_abs is 0); nodes (empty on entry) holds the epilogue's nodes; the
 * caller frees both lists.  Errors: FSL_ERR_UNSUPPORTED when the op has
 * no generated code in d (another op, a dtype), FSL_ERR_NOMEM.
 */
fsl_status fsl_codegen_linear(const fsl_dialect *d, int id, const fsl_graph *g, const fsl_kernel *k,
                              const fsl_linear_split *s, int *n_abs, fsl_vlist *nodes, fsl_vlist *ins, fsl_sbuf *b,
                              fsl_cg_launch *launch);

void fsl_linear_split_free(fsl_linear_split *s);

/** What the reference interpreter runs for linear op lin over operands
 *  lin_in (fsl_linear_split.lin_in): the in-kernel reshapes between
 *  lin_in and lin's operands, then lin, in topological order, into
 *  nodes[2 * FSL_MAX_RANK + 1]; returns their number. */
int fsl_linear_ref_nodes(fsl_node *lin, fsl_value *const *lin_in, fsl_node **nodes);

/** Whether kernel k holds an opaque node (not a primitive, or an opaque
 *  op: the whole kernel runs on the host reference) and a linear node
 *  (matmul/conv: split as above); the backends lower by these. */
void fsl_kernel_classes(const fsl_kernel *k, bool *opaque, bool *linear);

/** *dst = a malloc'd copy of src[0..count) (at least one slot), *n = count;
 *  false on OOM.  For the value and node lists of backend steps. */
bool fsl_ptrs_dup(void ***dst, int *n, void *const *src, int count);

#endif
