/*
 * dialect_opencl.h — the OpenCL C dialect of the code generator
 * (src/codegen/dialect.h), used by the OpenCL backend (opencl.c;
 * docs/gpu-backend.md).
 */
#ifndef FSL_OPENCL_DIALECT_H
#define FSL_OPENCL_DIALECT_H

#include "codegen/codegen.h"

/**
 * The OpenCL C dialect: kernel fsl_k<ID> reading N inputs and writing M
 * outputs is
 *     __kernel void fsl_k<ID>(__global uchar *p0, ulong o0, ...,  (N + M buffers)
 *                             __global int *err_buf, uint err_i)
 * where buffer i starts o<i> bytes into p<i> (a slot of the plan's arena,
 * or offset 0 of a buffer of its own), inputs first, then outputs; the OR
 * of every work-item's FSL_KERR_* bits goes into err_buf[err_i]
 * (atomic_or).  A PARALLEL loop is a grid-stride loop over
 * get_global_id(0) / get_global_size(0), so any global size is correct;
 * SERIAL and SIMD loops run inside a work-item.  Work-groups
 * (fsl_cg_group): a REDUCE row runs with a group of 64 work-items and a
 * tree in __local memory (barrier(CLK_LOCAL_MEM_FENCE)), a matmul or a
 * convolution with 16 x 16 work-items per tile of its result (get_group_id(0) /
 * get_num_groups(0) over rows or tiles, get_local_id(0) within); at most
 * 32 KiB of local memory.  Reductions that need several dependent passes
 * are refused (no barrier across work-groups).
 * f16/bf16 have no type (such kernels fall back to the host).
 */
extern const fsl_dialect fsl_dialect_opencl;

#endif
