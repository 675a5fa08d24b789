/* interp.h — the whole-graph reference interpreter as a backend (interp.c). */
#ifndef FSL_BACKEND_REF_INTERP_H
#define FSL_BACKEND_REF_INTERP_H

#include "backend/backend.h"

/** "ref": runs the whole primitive graph on the reference interpreter
 *  (fsl_ref_run, float64 accumulation) and needs no plan (no_plan); the
 *  default backend of a model. */
extern const fsl_backend fsl_backend_interp;

#endif
