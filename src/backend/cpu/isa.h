/*
 * isa.h — the instruction set the CPU backend targets: one setting for the
 * generated C (the compiler's -march flag) and for oneDNN (its maximal
 * ISA), so that a machine with AVX-512 can run, test and measure what an
 * AVX2-only machine would (docs/cpu-backend.md, "Target ISA").
 *
 * The setting is the environment variable FSL_CPU_ISA:
 *     native   (default, also when unset or empty) -march=native, oneDNN
 *              dispatches to the best ISA of the machine;
 *     avx2     -march=haswell (AVX2 + FMA + F16C), oneDNN limited to
 *              dnnl_cpu_isa_avx2;
 *     avx512   -march=skylake-avx512 (AVX-512 F/CD/BW/DQ/VL), oneDNN
 *              limited to dnnl_cpu_isa_avx512_core.
 * Names are case-insensitive.  A named ISA the machine lacks is an error
 * (generated code would die of SIGILL), as is an unknown name.
 */
#ifndef FSL_CPU_ISA_H
#define FSL_CPU_ISA_H

#include "core/core.h"

/** The resolved target. */
typedef struct fsl_cpu_isa {
  const char *name;      /* "native", "avx2" or "avx512" */
  const char *march;     /* the compiler flag, e.g. "-march=haswell" */
} fsl_cpu_isa;

/**
 * Reads FSL_CPU_ISA (once per process; later changes to the environment
 * are not seen) and, for a named ISA, limits oneDNN to it before its first
 * primitive (dnnl_set_max_cpu_isa: oneDNN documents that the limit must be
 * set before any primitive is created; it is the programmatic form of
 * DNNL_MAX_CPU_ISA).  Every user of oneDNN or of the compiler flags in the
 * CPU backend and its calibration calls this first.
 * Errors: FSL_ERR_ARG for an unknown name (the message lists the valid
 * ones); FSL_ERR_UNSUPPORTED when this CPU lacks the named ISA or oneDNN
 * refuses the limit.  *out is always set (to "native" on error).
 */
fsl_status fsl_cpu_isa_get(fsl_cpu_isa *out);

/** This machine as generated code sees it: the CPU model name (model[len],
 *  "" when unknown) and a hash of its feature flags (0 when unknown), from
 *  the first processor of /proc/cpuinfo. */
void fsl_cpu_machine(char *model, size_t len, uint64_t *flags_hash);

/** What a compiled CPU executable depends on, as one line: CPU model, its
 *  feature flags (hashed), the target ISA (FSL_CPU_ISA) and oneDNN's
 *  version.  A compiled model file (.fsl) made here loads only where this
 *  is the same (backend.h, fingerprint). */
void fsl_cpu_fingerprint(char *buf, size_t len);

#endif
