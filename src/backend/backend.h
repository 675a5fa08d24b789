/*
 * backend.h — backends behind one vtable (ggml's ggml_backend_i style),
 * registered in one table (registry.c).
 *
 * A backend owns its device: it measures the numbers the orchestrator's
 * cost model needs (calibrate), times candidate kernels as it would run
 * them (profiler_init), compiles a plan (src/orchestrate/orchestrate.h)
 * into an executable, runs it, and says how much of the executable runs on
 * its own code and how much falls back to the host reference interpreter
 * (exe_info).  Backends see primitives and kernels, never ONNX ops (opaque
 * kernels keep their op and attributes), and never include each other.
 * docs/architecture.md, "How to add a backend".
 */
#ifndef FSL_BACKEND_H
#define FSL_BACKEND_H

#include "core/bytes.h"
#include "orchestrate/orchestrate.h"
#include "runtime/memplan.h"

/** What an executable runs natively and what falls back (exe_info). */
typedef struct fsl_backend_exe_info {
  int n_kernels;          /* kernels of the plan */
  int n_native;           /* kernels run entirely by the backend's own code */
  int n_fallback;         /* kernels with a part the backend cannot run, run
                             by the host reference interpreter instead */
  int n_opaque;           /* opaque kernels (TopK, CumSum, ...): host reference by design */
  int n_library;          /* linear ops run by the backend's library (oneDNN, cuBLASLt) */
  int n_library_int8;     /* of those, integer ones run on 8-bit data (oneDNN int8) */
  int n_library_requant;  /* of those, ones whose library step writes the requantized 8-bit output */
  char fallback_why[256]; /* the first fallback: kernel, ONNX node and reason; "" if none */
  int64_t arena_bytes;    /* bytes of the one allocation holding the kernels' outputs
                             (graph outputs excepted); -1: the backend has no arena */
} fsl_backend_exe_info;

/** What a backend can do on this machine, read once when a model chooses
 *  it (fsl_backend_caps_get) and handed to its compile: environment
 *  variables and drivers are read there, never per kernel. */
typedef struct fsl_backend_caps {
  bool linear_views;      /* its linear kernels read permute, expand and slice views of their operands in
                             place (fsl_device.linear_views: orchestration lets LINEAR kernels take them) */
  bool linear_int8;       /* its library runs int32 matmuls/convs of 8-bit values cast to int32 minus a
                             per-tensor zero point on the 8-bit data (fsl_device.linear_int8; oneDNN int8 on
                             the CPU, any int8 weights: backend/cpu/onednn_int8.c); the QDQ pass
                             (passes/qdq.c) rewrites float convs/matmuls to integer ones for it */
  bool winograd_3x3;      /* it runs the dense 3x3 stride-1 convolutions fsl_device.winograd_3x3 describes
                             as Winograd F(2x2,3x3) (the cost model charges them so) */
  bool library;           /* linear ops may run through its library: oneDNN on the CPU (off with
                             FSL_NO_ONEDNN set), cuBLASLt with CUDA (off with FSL_CUDA_CUBLASLT=0, or
                             where the driver has none) */
} fsl_backend_caps;

/** What compile and import_exe get besides the plan. */
typedef struct fsl_compile_ctx {
  fsl_backend_caps caps;  /* the backend's (fsl_backend_caps_get) */
  const fsl_memplan *mem; /* the plan's memory plan, built once with the backend's options
                             (fsl_backend_memplan_options; it must outlive the executable), or NULL:
                             the backend builds its own */
} fsl_compile_ctx;

typedef struct fsl_backend {
  const char *name;       /* the name users pass (fsl_model_set_backend, --backend) */
  const char *summary;    /* one line for help texts */
  /** True for a backend that runs the whole primitive graph and needs no
   *  plan (the reference interpreter, "ref"): compile reads only p->g (a
   *  plan of no kernels when no strategy is set; with one, the plan is
   *  built for its numbers alone), and no measured plan choice runs on it.
   *  False (zero): a plan backend. */
  bool no_plan;
  /** Fills *d with this backend's device numbers for the roofline cost
   *  model for n_threads host threads (<= 0: the default); cached per
   *  device unless force.  NULL: the plan is costed for the host CPU (the
   *  first registered backend with a calibrate). */
  fsl_status (*calibrate)(fsl_device *d, int n_threads, bool force);
  /** Fills *p with a profiler that times kernels as this backend runs them
   *  (measured costs, fsl_model_set_profile).  NULL: as calibrate. */
  void (*profiler_init)(fsl_profiler *p, int n_threads);
  /** Whether the backend runs kernel k of graph g entirely with its own
   *  code (false: part of it would run through the reference interpreter
   *  on the host, as a counted fallback).  NULL: every kernel. */
  bool (*supports)(const fsl_graph *g, const fsl_kernel *k);
  /** Fills *out with what the backend can do here (fsl_backend_caps).
   *  NULL: nothing beyond generated code. */
  void (*caps)(fsl_backend_caps *out);
  /** True when graph outputs live in the arena too (the GPU backends copy
   *  them out after a run); false: they are external, written straight
   *  into the caller's buffers (fsl_memplan_options.external_outputs). */
  bool arena_outputs;
  /** Compiles plan p (which must outlive the executable) into *exe; ctx
   *  may be NULL (the backend's caps, its own memory plan). */
  fsl_status (*compile)(const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe);
  /** One line naming what this backend's executables depend on (machine,
   *  target ISA, library versions): a compiled model file made on one
   *  machine loads only where the line is the same.  NULL: anywhere. */
  void (*fingerprint)(char *buf, size_t len);
  /** Appends to *out what import_exe needs to rebuild exe without a
   *  compiler (the CPU backend: its shared object).  NULL: import compiles
   *  the plan again (a backend that needs no compiler). */
  fsl_status (*export_exe)(const void *exe, fsl_bytes *out);
  /** Rebuilds the executable of plan p from export_exe's bytes (untrusted:
   *  bounds-checked; FSL_ERR_INVALID when they do not fit the plan). */
  fsl_status (*import_exe)(const fsl_plan *p, const fsl_compile_ctx *ctx, const void *data, size_t len, void **exe);
  /** Runs the executable.  inputs[i] holds the data of p->g->inputs[i];
   *  on success outputs[i] receives a malloc'd buffer with the data of
   *  p->g->outputs[i].  On error nothing is allocated. */
  fsl_status (*run)(void *exe, const void *const *inputs, void **outputs);
  /** Native and fallback kernel counts of an executable. */
  void (*exe_info)(const void *exe, fsl_backend_exe_info *out);
  void (*free_exe)(void *exe);
} fsl_backend;

/** The capabilities of backend be (NULL: none) on this machine: zeroed,
 *  then be->caps. */
void fsl_backend_caps_get(const fsl_backend *be, fsl_backend_caps *out);
/** The memory plan options backend be (NULL: the CPU's) runs with: in
 *  place, graph outputs external unless be->arena_outputs. */
fsl_memplan_options fsl_backend_memplan_options(const fsl_backend *be);

/** The backend registered under `name`, or NULL. */
const fsl_backend *fsl_backend_find(const char *name);
/** Registered backends: i in [0, fsl_backend_count()); NULL outside. */
int fsl_backend_count(void);
const fsl_backend *fsl_backend_at(int i);
/** The backend whose device numbers and profiler a backend without its
 *  own uses: the first registered one with a calibrate (the host CPU), or
 *  NULL when none is built. */
const fsl_backend *fsl_backend_host(void);

/** The most preferred registered plan backend (no_plan false) that is not
 *  the plan oracle (fsl_backend_ref), or NULL when the build has none (the
 *  users' default, fsl_backend_default). */
const fsl_backend *fsl_backend_best(void);

/** Executes a plan kernel by kernel with the reference interpreter (the
 *  oracle for plans: checks that a plan computes what the graph computes). */
extern const fsl_backend fsl_backend_ref;
/** Generated C per kernel, compiled to one shared object; oneDNN for linear ops. */
extern const fsl_backend fsl_backend_cpu;
/** Generated OpenCL C on an OpenCL device (backend/opencl/opencl.c; built
 *  with CMake option FSL_BACKEND_OPENCL). */
extern const fsl_backend fsl_backend_opencl;
/** Generated CUDA C on an NVIDIA GPU through the driver API (backend/cuda/cuda.c;
 *  built with the CUDA toolkit, CMake option FSL_CUDA_CODEGEN; libcuda is
 *  loaded at run time). */
extern const fsl_backend fsl_backend_cuda;

#endif
