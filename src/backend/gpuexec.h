/*
 * gpuexec.h — the GPU executor: compile, run, exe_info, free_exe and
 * fingerprint of every GPU backend (CUDA, OpenCL), written once over a
 * small table of what differs per backend (fsl_gpu_ops) and the device
 * memory calls of its driver table (gpumem.h).  docs/gpu-backend.md.
 *
 * compile:
 *   - opens the device (ops->open) and narrows the backend's dialect to
 *     it: work-groups no larger than the device allows, within its local
 *     memory;
 *   - lowers the plan into steps in that dialect (backend/lowering.h): GEN
 *     (generated functions), LIB (a library matmul: ops->hooks) and HOST
 *     (the reference interpreter on the host);
 *   - device memory: every kernel output in one arena laid out by the
 *     plan's memory plan (the compile context's, else built here; graph
 *     outputs included: arena_outputs); graph inputs, constants
 *     (uploaded once) and values internal to a kernel in buffers of their
 *     own; one 32-bit error word per step; host staging memory for the
 *     inputs, outputs and error words;
 *   - the program of the GEN steps' source (ops->build; the source is
 *     written to the file $<ops->source_env> when that is set), each device
 *     step's launch (ops->prepare), then whatever the backend builds over
 *     the whole (ops->finish: CUDA's pointer tables and graphs).
 * run: inputs to the staging memory and the device, error words cleared,
 * each maximal run of device steps queued (ops->launch) with the host steps
 * between them, outputs and error words back, one wait at the end.
 */
#ifndef FSL_GPUEXEC_H
#define FSL_GPUEXEC_H

#include "backend/backend.h"
#include "backend/gpumem.h"
#include "backend/gpusteps.h"
#include "runtime/memplan.h"

/** The device an executable runs on, as the executor needs it. */
typedef struct fsl_gpu_device {
  const fsl_gpu_mem *mem;  /* the memory calls of the driver table that opened it */
  char name[256];          /* the device's name, for messages */
  char id[512];            /* what tells its generated code apart: the fingerprint after "<backend>: " */
  int max_group;           /* work-items (threads) a work-group (block) may have */
  long long local_bytes;   /* bytes of local (shared) memory generated code may use per work-group */
} fsl_gpu_device;

typedef struct fsl_gpu_ops fsl_gpu_ops;

/** An executable of a GPU backend.  A backend's own executable begins
 *  with one (ops->exe_bytes in all) and keeps its device objects after
 *  it. */
typedef struct fsl_gpu_exe {
  const fsl_plan *p;
  const fsl_gpu_ops *ops;
  fsl_gpu_device dev;
  fsl_dialect dia;         /* ops->dialect, its work-groups narrowed to the device */
  fsl_cg_group grp;        /* dia.group */
  fsl_backend_caps caps;   /* the backend's capabilities (the compile context's, else ops->caps) */
  fsl_lowering low;        /* the plan's steps and program source */
  void *launch;            /* per step, ops->launch_bytes each, zeroed: the backend's launch records */
  const fsl_memplan *mem;  /* the arena's layout: the compile context's, or &own_plan */
  fsl_memplan own_plan;    /* built here when the context has none */
  fsl_gpu_buf arena;       /* plan.peak_bytes bytes; 0 when empty */
  fsl_gpu_buf *own;        /* value id -> a buffer of its own (not in the arena), or 0 */
  fsl_gpu_buf errs;        /* one 32-bit word of FSL_KERR_* bits per step */
  void *staging;           /* host staging (mem->host_alloc): inputs, then outputs, then error words */
} fsl_gpu_exe;

/** What differs per GPU backend.  Functions return FSL_OK or an error
 *  whose message names the backend. */
struct fsl_gpu_ops {
  const char *name;             /* "cuda", "opencl": messages, and the fingerprint's prefix */
  const fsl_dialect *dialect;   /* before narrowing to the device */
  const fsl_lowering_hooks *hooks; /* the backend's part of the lowering (a library); NULL: none */
  void (*caps)(fsl_backend_caps *out); /* the backend's caps (backend.h); NULL: none */
  const char *source_env;       /* the variable naming a file for the generated source ("FSL_CUDA_SOURCE") */
  size_t exe_bytes;             /* sizeof the backend's executable (fsl_gpu_exe first) */
  size_t launch_bytes;          /* sizeof the backend's launch record of one step */
  /** Opens the device (once per process, then cheap) and fills *dev; with
   *  x (NULL for a fingerprint), also keeps the backend's own device
   *  handles in x.  FSL_ERR_UNSUPPORTED when there is no driver or device. */
  fsl_status (*open)(fsl_gpu_device *dev, fsl_gpu_exe *x);
  /** Builds and loads the program of x->low.src (called when x->low.next_fn > 0). */
  fsl_status (*build)(fsl_gpu_exe *x);
  /** Makes device step i's (GEN or LIB) launch record; every value of
   *  every step is located (fsl_gpu_locate) before. */
  fsl_status (*prepare)(fsl_gpu_exe *x, int i);
  /** After every step is prepared and every graph input located: what
   *  spans steps (CUDA: pointer tables, graphs).  May be NULL. */
  fsl_status (*finish)(fsl_gpu_exe *x);
  /** Queues device steps [lo, hi), a maximal run between host steps. */
  fsl_status (*launch)(fsl_gpu_exe *x, int lo, int hi);
  /** Frees what open, build, prepare and finish made (any of them may not
   *  have run); the executor frees the rest. */
  void (*release)(fsl_gpu_exe *x);
};

/**
 * Where value v lives on the device: the arena at its planned offset, or a
 * buffer of its own, allocated on first use (at least 64 bytes; a constant
 * is uploaded then, and the upload waited for).  *buf and *off (bytes) are
 * 0 on errors.  Errors: FSL_ERR_SHAPE (no static shape), the driver's
 * (with the value named).
 */
fsl_status fsl_gpu_locate(fsl_gpu_exe *x, const fsl_value *v, fsl_gpu_buf *buf, int64_t *off);

/** The end of the maximal run of device (GEN and LIB) steps of l that
 *  starts at step lo: the first HOST step after it, or l->n_steps. */
int fsl_gpu_device_run_end(const fsl_lowering *l, int lo);

/** The backend's compile (backend.h) over ops: *exe is an executable of
 *  ops->exe_bytes bytes.  Errors: FSL_ERR_ARG, FSL_ERR_NOMEM, those of
 *  ops and of the driver; nothing is left allocated then. */
fsl_status fsl_gpu_compile(const fsl_gpu_ops *ops, const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe);
/** run, exe_info and free_exe (backend.h) of any executable fsl_gpu_compile made. */
fsl_status fsl_gpu_run(void *exe, const void *const *inputs, void **outputs);
void fsl_gpu_exe_info(const void *exe, fsl_backend_exe_info *out);
void fsl_gpu_free(void *exe);
/** "<ops->name>: <dev.id>", or "<ops->name>: no device". */
void fsl_gpu_fingerprint(const fsl_gpu_ops *ops, char *buf, size_t len);

/**
 * Defines the vtable `const fsl_backend VAR` (backend.h) of the GPU
 * backend whose ops table is the object OPS: compile and fingerprint are
 * the executor's over OPS, supports lowers a kernel in OPS's dialect with
 * its lowering hooks and caps (fsl_lowering_supports), run, exe_info and
 * free_exe are the executor's, graph outputs live in the arena; the other
 * arguments are the backend's own entries as designated initializers
 * (.name, .summary, .calibrate, and .caps: OPS's caps, which C cannot read
 * out of OPS in a constant initializer).
 */
#define FSL_GPU_BACKEND(VAR, OPS, ...)                                                                                \
  static fsl_status VAR##_compile(const fsl_plan *p, const fsl_compile_ctx *ctx, void **exe) {                        \
    return fsl_gpu_compile(&(OPS), p, ctx, exe);                                                                      \
  }                                                                                                                   \
  static void VAR##_fingerprint(char *buf, size_t len) { fsl_gpu_fingerprint(&(OPS), buf, len); }                    \
  static bool VAR##_supports(const fsl_graph *g, const fsl_kernel *k) {                                               \
    fsl_backend_caps caps = {0};                                                                                      \
    if ((OPS).caps) (OPS).caps(&caps);                                                                                \
    return fsl_lowering_supports(g, (OPS).dialect, (OPS).hooks, &caps, k);                                            \
  }                                                                                                                   \
  const fsl_backend VAR = {__VA_ARGS__,                                                                               \
                           .arena_outputs = true,                                                                     \
                           .supports = VAR##_supports,                                                                \
                           .compile = VAR##_compile,                                                                  \
                           .fingerprint = VAR##_fingerprint,                                                          \
                           .run = fsl_gpu_run,                                                                        \
                           .exe_info = fsl_gpu_exe_info,                                                              \
                           .free_exe = fsl_gpu_free}

#endif
