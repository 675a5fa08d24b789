/*
 * driver.h — what the CUDA backend (cuda.c) asks of the CUDA driver, as a
 * table of fissile-level operations, so that tests can put a recording or
 * emulating driver in its place (tests/unit/test_cuda_backend.c runs whole
 * plans through one on the CPU).  The real table (driver.c) loads
 * libcuda.so.1 (and libcublasLt.so.13, for matmuls) with dlopen and takes every entry point with
 * cuGetProcAddress at the CUDA version of the headers it was built with:
 * libcuda is never linked, so fissile starts on machines without an NVIDIA
 * driver and says so when the CUDA backend is asked for.
 * docs/gpu-backend.md, "The CUDA backend".
 */
#ifndef FSL_CUDA_DRIVER_H
#define FSL_CUDA_DRIVER_H

#include "backend/gpumem.h"

/** A device address (CUdeviceptr): a buffer of the memory calls (gpumem.h) is one. */
typedef fsl_gpu_buf fsl_cu_ptr;

/** The device the driver opened. */
typedef struct fsl_cu_device_info {
  char name[256];            /* cuDeviceGetName, e.g. "NVIDIA H100 80GB HBM3" */
  int sm_major, sm_minor;    /* compute capability: NVRTC compiles for sm_<major><minor> */
  int sm_count;              /* streaming multiprocessors */
  int max_block_threads;     /* threads per block */
  int64_t shared_per_block;  /* bytes of static shared memory a block may use */
  int64_t global_bytes;      /* device memory, bytes */
  int driver_version;        /* cuDriverGetVersion: 1000 * major + 10 * minor */
} fsl_cu_device_info;

/** A float32 matmul in row-major terms, C[batch][m][n] =
 *  A[batch][m][k] B[batch][k][n], every operand contiguous (the matmul
 *  primitive, docs/primitives.md). */
typedef struct fsl_cu_matmul {
  int64_t batch, m, n, k;
  fsl_cu_ptr a, b, c;
} fsl_cu_matmul;

/**
 * The operations, all on the calling thread's context and one stream of
 * the process (in order).  A kernel has fissile's CUDA ABI
 * (dialect_cuda.h): three device pointers, the function's input pointer
 * table, its output pointer table and its error word.  Every function
 * returns FSL_OK or an error whose message names the driver call and the
 * driver's error name.
 */
typedef struct fsl_cu_driver {
  const char *name;          /* "libcuda", or a test driver's name */
  /** Opens the device (FSL_CUDA_DEVICE: an index, default 0) once per
   *  process and fills *info.  FSL_ERR_UNSUPPORTED when there is no driver
   *  or no device, with the reason. */
  fsl_status (*open)(fsl_cu_device_info *info);
  /** Loads a module: `cubin` (NVRTC's image for the device) and, for test
   *  drivers that compile it themselves, the CUDA C `source` it came from. */
  fsl_status (*module_load)(const char *source, const void *cubin, size_t cubin_bytes, void **mod);
  void (*module_unload)(void *mod);
  fsl_status (*function)(void *mod, const char *name, void **fn);
  /** Device memory, copies and the wait, on the stream (gpumem.h; a
   *  buffer is a device address; copies are asynchronous from page-locked
   *  host memory, host_alloc's). */
  fsl_gpu_mem mem;
  /** Launches fn on the stream with a one-dimensional grid and block. */
  fsl_status (*launch)(void *fn, unsigned grid, unsigned block, fsl_cu_ptr in, fsl_cu_ptr out, fsl_cu_ptr err);
  /** CUDA graphs: an empty graph; a kernel node after `deps` (nodes of the
   *  same graph); the executable graph; a launch of it on the stream. */
  fsl_status (*graph_create)(void **graph);
  fsl_status (*graph_add_kernel)(void *graph, void *fn, unsigned grid, unsigned block, fsl_cu_ptr in, fsl_cu_ptr out,
                                 fsl_cu_ptr err, void *const *deps, int n_deps, void **node);
  fsl_status (*graph_instantiate)(void *graph, void **exec);
  fsl_status (*graph_launch)(void *exec);
  void (*graph_destroy)(void *graph, void *exec);
  /** A library matmul (cuBLASLt; NULL matmul_prepare: none): *plan
   *  holds what one needs (descriptors, the algorithm, its workspace);
   *  run on the stream; a node of a graph after `deps`; freed.  Results
   *  within float32 rounding of the matmul primitive (no TF32). */
  fsl_status (*matmul_prepare)(const fsl_cu_matmul *mm, void **plan);
  fsl_status (*matmul_run)(void *plan);
  fsl_status (*graph_add_matmul)(void *graph, void *plan, void *const *deps, int n_deps, void **node);
  void (*matmul_free)(void *plan);
} fsl_cu_driver;

/** The driver over libcuda.so.1 (driver.c). */
extern const fsl_cu_driver fsl_cu_libcuda;

/** The driver the CUDA backend uses from now on (NULL: fsl_cu_libcuda);
 *  for tests.  Executables compiled before keep theirs. */
void fsl_cuda_use_driver(const fsl_cu_driver *d);
/** The driver in use. */
const fsl_cu_driver *fsl_cuda_driver(void);

#endif
