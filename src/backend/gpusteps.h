/*
 * gpusteps.h — what the GPU backends (OpenCL, CUDA) share: a plan lowered
 * into steps in a GPU dialect of the code generator, the dependencies
 * between those steps, the host steps run through the reference
 * interpreter, and the errors a step's error word reports.
 * docs/gpu-backend.md, "What runs where".
 *
 * Lowering, in plan order, per kernel:
 *   - GEN: a function generated in the dialect: LOOP and REDUCE kernels
 *     whole (one function per node when the dialect cannot take them in
 *     one piece: multi-pass reductions); a LINEAR kernel as a generated
 *     prologue, a generated matmul or convolution and a generated epilogue
 *     (codegen/linsplit.h);
 *   - HOST: the reference interpreter on the host for an opaque kernel (by
 *     design), and as the counted fallback for what the dialect cannot
 *     take (f16/bf16, scatters, integer convolutions).
 * The functions of all GEN steps form one source (fsl_gpu_lowering.src).
 */
#ifndef FSL_GPUSTEPS_H
#define FSL_GPUSTEPS_H

#include "backend/backend.h"
#include "codegen/codegen.h"

typedef enum {
  FSL_GPU_GEN,   /* a generated function */
  FSL_GPU_LIB,   /* a linear op the backend runs through a library (cuBLASLt) */
  FSL_GPU_HOST,  /* the reference interpreter on the host */
} fsl_gpu_step_kind;

typedef struct fsl_gpu_step {
  fsl_gpu_step_kind kind;
  int kernel;              /* the plan kernel it belongs to */
  int fn_id;               /* GEN: the function fsl_k<fn_id>; else -1 */
  const char *part;        /* "loop", "reduce", "node" (a split kernel), "prologue", "matmul", "conv",
                              "epilogue", "host" (static) */
  fsl_cg_launch launch;    /* GEN: the work-group size the code assumes, groups with work */
  int n_in, n_out;
  fsl_value **in, **out;   /* values read and written */
  int n_nodes;
  fsl_node **nodes;        /* HOST: evaluated in this order; GEN, LIB: what it computes (LIB: the linear node) */
} fsl_gpu_step;

/** Whether the backend runs linear node lin (over operands whose bytes
 *  are lin's operands: reshapes only between them) through a library: a
 *  LIB step instead of a generated matmul or convolution. */
typedef bool (*fsl_gpu_library)(const fsl_node *lin);

typedef struct fsl_gpu_lowering {
  const fsl_plan *p;
  const fsl_dialect *dia;
  fsl_gpu_library library; /* NULL: every linear op generated */
  fsl_gpu_step *steps;
  int n_steps, cap_steps;
  fsl_sbuf src;            /* the dialect's prelude and every GEN step's function */
  size_t prelude_len;      /* src's first prelude_len bytes are the prelude */
  int first_fn, n_fn;      /* functions generated: fsl_k<first_fn> .. fsl_k<n_fn - 1> */
  int n_fallback;          /* kernels with a HOST step that is not opaque by design */
  int n_opaque;            /* opaque kernels */
  char why[256];           /* the first fallback: "kernel K (OP 'NODE'): reason"; "" if none */
  char **fallback;         /* kernel -> its first fallback, as `why` (malloc'd); NULL: none */
  bool *avail;             /* internal: value id -> written by an earlier step (or input/constant) */
} fsl_gpu_lowering;

/**
 * Lowers every kernel of plan p into steps in dialect `dia` (which may be
 * a copy of a backend's dialect with its `group` narrowed to the device),
 * filling *out (zeroed first; fsl_gpu_lowering_free also after an error);
 * `library` (may be NULL) picks the linear ops that become LIB steps.
 * Errors: FSL_ERR_NOMEM; a code generator error other than
 * FSL_ERR_UNSUPPORTED (a bug), with the kernel named.
 */
fsl_status fsl_gpu_lower(const fsl_plan *p, const fsl_dialect *dia, fsl_gpu_library library, fsl_gpu_lowering *out);
/** fsl_gpu_lower with the functions numbered from first_fn (>= 0): a
 *  source of several plans (the CUDA emitter, cuda/emit.h). */
fsl_status fsl_gpu_lower_at(const fsl_plan *p, const fsl_dialect *dia, fsl_gpu_library library, int first_fn,
                            fsl_gpu_lowering *out);
void fsl_gpu_lowering_free(fsl_gpu_lowering *l);

/** Whether kernel k of graph g lowers in dialect dia (with `library`) to
 *  no host step (the backends' `supports`; no device is needed). */
bool fsl_gpu_supports(const fsl_dialect *dia, fsl_gpu_library library, const fsl_graph *g, const fsl_kernel *k);

/** Work-items (threads) of a grid-stride GEN step: one per element of its
 *  largest output, at most 2^20; 1 when every output is a scalar (such a
 *  function has no parallel loop: every thread would run it whole, which is
 *  wrong when it writes in place). */
int64_t fsl_gpu_step_items(const fsl_gpu_step *s);

/** Where a value lives on the device, for the dependency analysis: a
 *  buffer (any id; the arena is one) and the byte range [off, off + bytes). */
typedef struct fsl_gpu_range {
  uint64_t buffer;
  int64_t off, bytes;
} fsl_gpu_range;
typedef fsl_gpu_range (*fsl_gpu_where)(void *ctx, const fsl_value *v);

/**
 * The dependencies of steps [lo, hi) of l among themselves, for launching
 * them as a graph (CUDA graphs; OpenCL events): step j depends on an
 * earlier step i of the range when one writes bytes the other reads or
 * writes (true, anti- and output dependencies: the arena reuses memory),
 * with the edges implied by others removed (a transitive reduction).
 * Ranges come from where(ctx, v).  On success deps[j - lo] is a malloc'd
 * array of n_deps[j - lo] step indices (ascending; NULL when none): free
 * each, then the arrays (fsl_gpu_deps_free).  Errors: FSL_ERR_NOMEM.
 */
fsl_status fsl_gpu_step_deps(const fsl_gpu_lowering *l, int lo, int hi, fsl_gpu_where where, void *ctx, int ***deps,
                             int **n_deps);
void fsl_gpu_deps_free(int **deps, int *n_deps, int n);

/** Copies value v between the device and host memory for a HOST step. */
typedef fsl_status (*fsl_gpu_copy)(void *ctx, const fsl_value *v, void *host, int64_t bytes);

/**
 * Runs HOST step s: the values it reads to the host (to_host; constants
 * are read in place), the reference interpreter node by node, the step's
 * outputs back (to_device).  Errors: those of the copies and of
 * fsl_ref_eval, with the kernel named and "on the host"; FSL_ERR_NOMEM.
 */
fsl_status fsl_gpu_run_host(const fsl_graph *g, const fsl_gpu_step *s, fsl_gpu_copy to_host, fsl_gpu_copy to_device,
                            void *ctx, const char *backend);

/** The error a GEN step reports through its error word (FSL_KERR_* bits),
 *  naming the step's kernel and ONNX node; FSL_OK when bits is 0. */
fsl_status fsl_gpu_step_error(const fsl_plan *p, const fsl_gpu_step *s, int bits, const char *backend);

/** "kernel K (from OP 'NODE')" for messages: the ONNX node of kernel ki's
 *  first primitive. */
void fsl_gpu_kernel_label(const fsl_plan *p, int ki, char *buf, size_t len);

#endif
