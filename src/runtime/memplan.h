/*
 * memplan.h — static memory planning for a plan's intermediate values.
 *
 * Every value a kernel of a plan writes (a kernel output: read by a later
 * kernel or a graph output) gets a byte offset into one arena.  Two values
 * share memory only when their live intervals do not overlap.  Liveness is
 * over the plan's kernel order (step i = kernels.k[i]):
 *
 *   first[v] = step of the first kernel that writes v
 *   last[v]  = the latest step that reads or writes v; a graph output lives
 *              to the end (step n_kernels)
 *
 * A kernel's inputs and outputs are live at its step together, so an output
 * never shares memory with an input of the same kernel — except in place
 * (option `inplace`): an output of an elementwise-only LOOP kernel with one
 * output may take over the buffer of an input that dies at that kernel when
 * both have the same byte size and element size.  This is safe for an
 * executor that computes element i of the output after reading element i
 * of the inputs and reads no input after writing the output (a fused loop,
 * or node by node when the output node comes last, which holds for a kernel
 * with one output).  An executor may allow more kernels (`may_alias`):
 * the CPU backend lets a convolution that adds a dying residual as
 * oneDNN's sum post-op write over the residual.
 *
 * Graph inputs and constants are external: not planned (offset -1), and so
 * are values no kernel writes (kernel-internal values are the backend's)
 * and, with `external_outputs`, graph outputs.
 * Placement is greedy by size (largest first, lowest offset that fits among
 * the already placed values whose intervals overlap), offsets and sizes
 * rounded up to FSL_MEMPLAN_ALIGN bytes.  Semantics of liveness-based
 * sharing: as in TensorFlow Lite's "greedy by size" arena planner.
 */
#ifndef FSL_MEMPLAN_H
#define FSL_MEMPLAN_H

#include "orchestrate/orchestrate.h"

/** Alignment of every offset (bytes): a cache line and an AVX-512 vector. */
#define FSL_MEMPLAN_ALIGN 64

typedef struct fsl_memplan_options {
  bool inplace;           /* allow in-place reuse (see above); default false */
  bool external_outputs;  /* graph outputs are not planned: the executor returns them in
                             buffers of their own (handed to the caller, no copy) */
  /* with `inplace`, the executor's own rule for kernels the elementwise
   * rule does not take (NULL: none): whether kernel k, at step `step`,
   * may write its one output y over the buffer of input x.  Asked only
   * where x dies at that step and has y's shape and element size, and y is
   * written once, there (a residual add that the linear op accumulates
   * into: the CPU backend's sum post-op) */
  bool (*may_alias)(const void *ctx, int step, const fsl_kernel *k, const fsl_value *y, const fsl_value *x);
  const void *alias_ctx;
} fsl_memplan_options;

typedef struct fsl_memplan {
  int n_ids;              /* length of the per-value arrays: values are indexed by fsl_value.id */
  int n_steps;            /* kernels in the plan */
  int64_t *offset;        /* byte offset in the arena, -1: not planned (external or kernel-internal) */
  int64_t *size;          /* bytes of the value (0 if not planned); its slot is rounded up to the alignment */
  int *first, *last;      /* live interval in steps (inclusive), -1 if not planned */
  int *alias;             /* id of the value whose buffer it reuses in place, -1 */
  int n_planned;          /* values given an offset */
  int n_inplace;          /* of them, placed in place over an input */
  int64_t peak_bytes;     /* arena size: max(offset + aligned size) */
  int64_t total_bytes;    /* sum of aligned sizes (what no reuse would take) */
  int64_t live_bytes;     /* max over steps of the aligned bytes live at that step (a lower bound of peak) */
} fsl_memplan;

/** The options executors run with, and fsl_plan_info reports: in place,
 *  graph outputs external (the CPU backend's arena). */
extern const fsl_memplan_options fsl_memplan_executor;

/**
 * Plans the arena of plan p (kernels in execution order; p->g gives the
 * graph outputs).  `opt` may be NULL (defaults).  Every value written by a
 * kernel needs a static shape.  On success *out owns malloc'd arrays
 * (fsl_memplan_free).  Errors: FSL_ERR_INVALID (a kernel reads a value no
 * earlier kernel writes that is not a graph input or constant, or a value
 * has no static shape), FSL_ERR_NOMEM (also a size that overflows).
 */
fsl_status fsl_memplan_build(const fsl_plan *p, const fsl_memplan_options *opt, fsl_memplan *out);

/** Frees the arrays of a plan and clears it (NULL-safe, idempotent). */
void fsl_memplan_free(fsl_memplan *mp);

/**
 * Checks mp against p: every planned value's slot lies in [0, peak_bytes),
 * is aligned, and no two planned values whose live intervals overlap share
 * a byte (values placed in place over one another excepted).
 * FSL_ERR_INVALID naming both values otherwise.  For tests and debugging:
 * O(n^2) in the planned values.
 */
fsl_status fsl_memplan_verify(const fsl_plan *p, const fsl_memplan *mp);

#endif
