/*
 * cuda.h — the CUDA backend's executable (cuda.c over the GPU executor,
 * gpuexec.h; the vtable fsl_backend_cuda in backend.h), visible to tests,
 * which check its graphs, tables and arena against the plan.
 * docs/gpu-backend.md.
 */
#ifndef FSL_CUDA_H
#define FSL_CUDA_H

#include "backend/backend.h"
#include "backend/cuda/driver.h"
#include "backend/gpuexec.h"

/** How one step runs (zero for HOST steps): the executor's launch
 *  records of a CUDA executable (fsl_gpu_exe.launch). */
typedef struct fsl_cuda_launch {
  void *lib;                 /* LIB: the library matmul's plan (driver table) */
  void *fn;                  /* GEN: the loaded function fsl_k<fn_id> */
  unsigned grid, block;      /* one-dimensional */
  fsl_cu_ptr in, out;        /* its input and output pointer tables (device arrays of device pointers) */
  fsl_cu_ptr err;            /* its error word */
  void *node;                /* its node in its segment's graph (graphs on) */
} fsl_cuda_launch;

/** A maximal run of device (GEN, LIB) steps [lo, hi) between host steps: one CUDA graph. */
typedef struct fsl_cuda_segment {
  int lo, hi;
  void *graph, *exec;
} fsl_cuda_segment;

/** A CUDA executable: the GPU executor's (gpuexec.h), then what only CUDA has. */
typedef struct fsl_cuda_exe {
  fsl_gpu_exe gpu;           /* plan, steps, arena, buffers; gpu.launch: an fsl_cuda_launch per step */
  const fsl_cu_driver *drv;  /* the driver it was compiled with */
  fsl_cu_device_info info;
  fsl_cuda_segment *seg;     /* graphs, in step order (graphs on) */
  int n_seg, cap_seg;
  bool graphs;               /* CUDA graphs (FSL_CUDA_GRAPHS unset or not "0") */
  fsl_cu_ptr tables;         /* every GEN step's pointer tables */
  void *module;
} fsl_cuda_exe;

/**
 * The GPU's numbers for the roofline cost model (the backend's calibrate;
 * calibrate.c): launch_s seconds per kernel (per node of a CUDA graph, or
 * per stream launch with FSL_CUDA_GRAPHS=0), bandwidth bytes/s of a copy
 * of up to 256 MiB (read + write counted), elem_flops multiply-adds/s (2
 * ops each) over 4 Mi floats, peak_flops FLOP/s of a 1024^3 float32
 * library matmul (no TF32; smaller where a 16th of the device's memory
 * cannot hold it; without a library matmul the default device's).  Cached in fsl_cache_folder(NULL)/device-cuda-
 * <hash of the driver table, device name, architecture, SM count, driver
 * version and graph mode>.txt unless force.  n_threads is ignored.
 * Errors: the driver's (no driver or device: FSL_ERR_UNSUPPORTED),
 * NVRTC's, FSL_ERR_RUNTIME; *d is the default device then.
 */
fsl_status fsl_cuda_calibrate(fsl_device *d, int n_threads, bool force);

#endif
