/*
 * backend.h — backends behind one vtable (ggml's ggml_backend_i style).
 * A backend compiles a plan (src/orchestrate/orchestrate.h) into an
 * executable and runs it.  Backends see primitives and kernels, never ONNX
 * ops (opaque kernels keep their op and attributes).
 */
#ifndef FSL_BACKEND_H
#define FSL_BACKEND_H

#include "orchestrate/orchestrate.h"

typedef struct fsl_backend {
  const char *name;
  /** Compiles plan p (which must outlive the executable) into *exe. */
  fsl_status (*compile)(const fsl_plan *p, void **exe);
  /** Runs the executable.  inputs[i] holds the data of p->g->inputs[i];
   *  on success outputs[i] receives a malloc'd buffer with the data of
   *  p->g->outputs[i].  On error nothing is allocated. */
  fsl_status (*run)(void *exe, const void *const *inputs, void **outputs);
  void (*free_exe)(void *exe);
} fsl_backend;

/** Executes a plan kernel by kernel with the reference interpreter (the
 *  oracle for plans: checks that a plan computes what the graph computes). */
extern const fsl_backend fsl_backend_ref;
/** Generated C per kernel, compiled to one shared object; oneDNN for linear ops. */
extern const fsl_backend fsl_backend_cpu;

#endif
