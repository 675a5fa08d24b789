/*
 * lowering.h — kernel -> steps, written once for every backend that runs
 * generated code (cpu, opencl, cuda).  docs/architecture.md, "Lowering".
 *
 * A kernel of a plan becomes, in order:
 *   - GEN: a function generated in the backend's dialect (src/codegen): a
 *     LOOP or REDUCE kernel whole, or one function per node when the
 *     dialect cannot take it in one piece (a multi-pass reduction on a GPU:
 *     no barrier between work-groups);
 *   - for a LINEAR kernel (codegen/linsplit.h): a GEN prologue when the
 *     linear op's operands are computed by more than reshapes (or views the
 *     generated op reads in place), the linear op itself and a GEN epilogue
 *     for the rest.  The linear op is a LIB step when the backend's library
 *     hook takes it (the CPU: a oneDNN primitive absorbing the longest
 *     usable epilogue chain as post-ops; CUDA: a cuBLASLt matmul), else a
 *     generated matmul or convolution with the longest epilogue the code
 *     generator computes before its store, else a HOST step;
 *   - HOST: the reference interpreter (src/eval) for an opaque kernel (by
 *     design), and as the counted fallback for what neither the code
 *     generator nor the library takes (the first reason kept per kernel).
 * Backend-specific passes run over the steps afterwards (the CPU's layout
 * chaining and generated GEMVs: cpu/lower.h); fsl_lowering_source then
 * joins the GEN steps' functions after the dialect's prelude.
 */
#ifndef FSL_LOWERING_H
#define FSL_LOWERING_H

#include "backend/backend.h"
#include "codegen/codegen.h"
#include "codegen/linsplit.h"
#include "orchestrate/orchestrate.h"

typedef enum {
  FSL_STEP_GEN,  /* a generated function */
  FSL_STEP_LIB,  /* a linear op run by the backend's library (oneDNN, cuBLASLt) */
  FSL_STEP_HOST, /* the reference interpreter on the host */
} fsl_step_kind;

typedef struct fsl_step {
  fsl_step_kind kind;
  int kernel;                  /* the kernel it belongs to (the index given to fsl_lower_kernel) */
  int fn_id;                   /* GEN: the function fsl_k<fn_id>; else -1 */
  const char *part;            /* "loop", "reduce", "node" (a kernel split by node), "prologue", "matmul",
                                  "conv", "epilogue", "host" (static) */
  char *code;                  /* GEN: the function's source (owned) */
  void *fn;                    /* GEN: the function once loaded, where the backend loads it itself
                                  (the CPU's shared object: cpu/lower.h fsl_cpu_step_call) */
  fsl_cg_launch launch;        /* GEN: the work-group size the code assumes, groups with work (GPU dialects) */
  fsl_cg_layout *in_layout;    /* GEN: NULL, or n_in entries: inputs read in a library's layout (cpu/lower.h) */
  fsl_cg_layout *out_layout;   /* GEN: NULL, or n_out entries: outputs written in one */
  void *lib;                   /* LIB: the backend's object for it (owned; hooks->lib_free), or NULL */
  int n_in, n_out;
  fsl_value **in, **out;       /* values read and written (LIB: source, weights, then the absorbed
                                  nodes' operands, NULL for unary ones) */
  int n_nodes;
  fsl_node **nodes;            /* HOST: evaluated in this order; GEN: the nodes it computes, in order;
                                  LIB: the linear node, then the epilogue nodes it absorbed */
} fsl_step;

typedef struct fsl_lowering fsl_lowering;

/** What a backend adds to the shared lowering.  Every member may be NULL
 *  (false): no library, the dialect's generated code for every linear op. */
typedef struct fsl_lowering_hooks {
  /** The linear op of split sp (kernel k, labelled ki) through the
   *  backend's library: appends a LIB step (fsl_lowering_add) and sets *z
   *  to the value it writes and *n_abs to the chain nodes it absorbed.
   *  FSL_ERR_UNSUPPORTED (nothing added, error cleared by the caller): not
   *  taken.  Other errors are the lowering's (FSL_ERR_NOMEM). */
  fsl_status (*library)(fsl_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp, fsl_value **z,
                        int *n_abs);
  /** The same for a split whose prologue is more than views, tried
   *  before the prologue is generated: a library op that reads the
   *  prologue's sources itself (the CPU: oneDNN int8 primitives reading
   *  the 8-bit values an int32 prologue widens, minus their zero point),
   *  so that no prologue step runs.  NULL: none. */
  fsl_status (*library_through)(fsl_lowering *L, int ki, const fsl_kernel *k, const fsl_linear_split *sp,
                                fsl_value **z, int *n_abs);
  /** Whether the library will take linear node lin (decided before the
   *  prologue, which it reads plain): no prologue views then. */
  bool (*library_takes)(const fsl_lowering *L, const fsl_node *lin);
  /** Whether the dialect's generated linear op reads a prologue of views
   *  (permute, expand, slice) in place (fsl_linear_split_views). */
  bool views;
  /** Whether generated code takes linear node lin at all (NULL: always
   *  try; the CPU: matmuls, and the convolutions fsl_codegen_conv_rows or
   *  fsl_codegen_conv_dot take). */
  bool (*generates_linear)(const fsl_dialect *d, const fsl_node *lin);
  /** Whether a kernel the dialect cannot take whole is tried node by node
   *  (GPU dialects: multi-pass reductions) before the host fallback. */
  bool split_by_node;
  /** The library's name in fallback messages ("oneDNN"), or NULL. */
  const char *library_name;
  /** Frees a LIB step's object. */
  void (*lib_free)(void *lib);
} fsl_lowering_hooks;

struct fsl_lowering {
  const fsl_graph *g;
  const fsl_dialect *dia;
  const fsl_lowering_hooks *hooks;
  const void *ctx;             /* the backend's, for its hooks (its capabilities) */
  fsl_step *steps;
  int n_steps, cap_steps;
  fsl_sbuf src;                /* the dialect's prelude, then (fsl_lowering_source) every GEN step's function */
  size_t prelude_len;          /* src's first prelude_len bytes are the prelude */
  int next_fn;                 /* the next function's number (functions from first_fn given to init) */
  int n_generated, n_lib;      /* GEN and LIB steps */
  int n_lib_int8;              /* LIB steps on 8-bit integers (of n_lib) */
  int n_lib_requant;           /* of those, writing 8-bit integers (the requantize absorbed) */
  int n_fallback;              /* kernels with a HOST step that is not opaque by design */
  int n_opaque;                /* opaque kernels */
  char why[256];               /* the first fallback: "kernel K (OP 'NODE'): reason"; "" if none */
  char **fallback;             /* kernel -> its first fallback (fsl_lowering_fallback); cap_fallback entries */
  int cap_fallback;
  bool *avail;                 /* value id -> readable by the next step (inputs, constants, written values) */
};

/** Starts a lowering of graph g into dialect dia (a backend's, or a copy
 *  with its work-group size narrowed to the device) with the backend's
 *  hooks (may be NULL) and their context; functions are numbered from
 *  first_fn (>= 0: a source of several plans, the CUDA emitter).  The
 *  prelude goes into src; graph inputs and constants are available.
 *  Errors: FSL_ERR_ARG, FSL_ERR_NOMEM (free with fsl_lowering_free). */
fsl_status fsl_lowering_init(fsl_lowering *L, const fsl_graph *g, const fsl_dialect *dia,
                             const fsl_lowering_hooks *hooks, const void *ctx, int first_fn);

/** Makes only the constants and the values vals[0..n) available (a kernel
 *  lowered on its own reads nothing else: the profiler, `supports`). */
void fsl_lowering_avail_only(fsl_lowering *L, fsl_value *const *vals, int n);

/** Appends the steps of kernel k (labelled ki >= 0).  What cannot be
 *  generated or run by the library becomes a HOST step (counted in
 *  n_fallback, the reason in `why` and fallback[ki]).  Errors:
 *  FSL_ERR_NOMEM; a code generator error other than FSL_ERR_UNSUPPORTED
 *  (a bug). */
fsl_status fsl_lower_kernel(fsl_lowering *L, int ki, const fsl_kernel *k);

/** Lowers every kernel of plan p in order (the kernel named in an
 *  error) and joins the source (fsl_lowering_source). */
fsl_status fsl_lower_plan(fsl_lowering *L, const fsl_plan *p);

/** Appends a step of kind `kind` for kernel ki with copies of the value
 *  and node lists, and marks its outputs available; NULL when out of
 *  memory (for hooks adding LIB steps). */
fsl_step *fsl_lowering_add(fsl_lowering *L, fsl_step_kind kind, int ki, const char *part, fsl_value *const *ins,
                           int n_in, fsl_value *const *outs, int n_out, fsl_node *const *nodes, int n);

/** Appends the GEN steps' functions to src after the prelude, in step
 *  order: once, after the last fsl_lower_kernel and the backend's passes.
 *  Errors: FSL_ERR_NOMEM. */
fsl_status fsl_lowering_source(fsl_lowering *L);

/** Whether kernel k of graph g lowers (with its inputs alone available)
 *  to no HOST step: the backends' `supports`.  No device is needed. */
bool fsl_lowering_supports(const fsl_graph *g, const fsl_dialect *dia, const fsl_lowering_hooks *hooks,
                           const void *ctx, const fsl_kernel *k);

/** Kernel ki's first fallback reason ("kernel K (OP 'NODE'): reason"), or
 *  NULL when it has none. */
const char *fsl_lowering_fallback(const fsl_lowering *L, int ki);

/** The kernel counts and first fallback of exe_info (backend.h) from a
 *  lowering of all n_kernels kernels of a plan: native, through the
 *  fallback, opaque; arena_bytes is left to the backend. */
void fsl_lowering_exe_info(const fsl_lowering *L, int n_kernels, fsl_backend_exe_info *out);

/** Frees the steps (LIB objects through hooks->lib_free), the source and
 *  the maps; L is zeroed. */
void fsl_lowering_free(fsl_lowering *L);

#endif
