/*
 * gpumem.h — the device memory calls both GPU driver tables begin with
 * (fsl_cu_driver in cuda/driver.h, fsl_ocl_driver in opencl/opencl.h):
 * the part of a driver the GPU executor (gpuexec.h) uses directly, so that
 * it locates, copies and clears device memory the same way for every GPU
 * backend.  docs/gpu-backend.md.
 */
#ifndef FSL_GPUMEM_H
#define FSL_GPUMEM_H

#include "core/core.h"

/** A device buffer: CUDA a device address (CUdeviceptr), OpenCL a cl_mem
 *  handle; 0 is none.  A place in it is the buffer and a byte offset. */
typedef uint64_t fsl_gpu_buf;

/**
 * Buffers, copies and the wait, all on the driver's one in-order queue
 * (CUDA: its stream) of the process.  Sizes and offsets are in bytes.
 * Every function returns FSL_OK or an error whose message names the
 * driver call and the driver's error name (FSL_ERR_NOMEM when the device
 * is out of memory).
 */
typedef struct fsl_gpu_mem {
  /** A device buffer of `bytes` (at least 1) bytes, its contents undefined. */
  fsl_status (*alloc)(int64_t bytes, fsl_gpu_buf *buf);
  void (*free)(fsl_gpu_buf buf);
  /** Host memory the copies below may read and write asynchronously (CUDA:
   *  page-locked; OpenCL: malloc). */
  fsl_status (*host_alloc)(int64_t bytes, void **p);
  void (*host_free)(void *p);
  /** Copies `bytes` bytes from host memory src to buffer dst at byte
   *  offset off, queued: src must stay unchanged until sync. */
  fsl_status (*upload)(fsl_gpu_buf dst, int64_t off, const void *src, int64_t bytes);
  /** Copies `bytes` bytes of buffer src from byte offset off to host
   *  memory dst, queued: dst holds them after sync. */
  fsl_status (*download)(void *dst, fsl_gpu_buf src, int64_t off, int64_t bytes);
  /** Sets the first n 32-bit words of buf to 0, queued. */
  fsl_status (*zero32)(fsl_gpu_buf buf, int64_t n);
  /** Waits for everything queued. */
  fsl_status (*sync)(void);
} fsl_gpu_mem;

#endif
