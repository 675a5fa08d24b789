/*
 * gpudialect.h — what the GPU dialects of the code generator (CUDA C,
 * backend/cuda/dialect_cuda.c; OpenCL C, backend/opencl/dialect_opencl.c)
 * print alike: the entries of their dialect tables that every GPU
 * language shares, and loop headers that stride over work-items and
 * work-groups, from a table of the language's index expressions.
 * docs/gpu-backend.md, "The dialect".
 */
#ifndef FSL_GPUDIALECT_H
#define FSL_GPUDIALECT_H

#include "codegen/dialect.h"

/** The fsl_dialect entries every GPU dialect has: <stdint.h> type names
 *  (typedefs in the prelude), C's float math names ("f": the prelude
 *  maps them where the language overloads), nothing after a kernel
 *  without error bits, no multi-pass kernels (the work-groups of one
 *  launch cannot wait for each other) and no serial threshold (every
 *  work-item runs the kernel; PARALLEL loops divide the work). */
#define FSL_GPU_DIALECT_COMMON                                                                                        \
  .type_name = fsl_cg_stdint_type, .f32_math_suffix = "f", .ret_ok = "", .multi_pass = false, .par_min = 0

/** A GPU language's index expressions (int64 expressions) and the
 *  annotation of its loops inside one work-item. */
typedef struct fsl_gpu_loops {
  const char *item, *items;    /* PARALLEL: this work-item's index among all, and how many there are */
  const char *group, *groups;  /* GROUPS: this work-group's index, and how many there are */
  const char *unroll;          /* the line above a LANES, SERIAL or SIMD loop ("" or NULL: none) */
} fsl_gpu_loops;

/**
 * The dialect's loop_header (dialect.h) in the language of t: PARALLEL a
 * grid-stride loop over work-items, GROUPS the same over work-groups
 * (a REDUCE row or matmul tile per group), LANES over the work-items of
 * the group (the work-item's index in its group is the variable l_, the
 * step the group size the code assumes, L->step), SERIAL and SIMD a loop
 * in the work-item.  annot[acap] and head[hcap] as loop_header's.
 */
void fsl_gpu_loop_header(const fsl_gpu_loops *t, const fsl_cg_loop *L, char *annot, size_t acap, char *head,
                         size_t hcap);

#endif
