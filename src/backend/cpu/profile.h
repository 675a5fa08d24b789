/*
 * profile.h — timing candidate kernels as the CPU backend runs them, for
 * the measured cost model (fsl_profiler, orchestrate.h; docs/orchestration.md,
 * "Measured costs").
 */
#ifndef FSL_CPU_PROFILE_H
#define FSL_CPU_PROFILE_H

#include "orchestrate/orchestrate.h"

/**
 * The fsl_profiler.measure of the CPU backend.  Every kernel of ks[0..n)
 * becomes the steps the CPU backend (cpu.c) would make of it: one generated
 * C function for a LOOP or REDUCE kernel; for a LINEAR kernel a generated
 * prologue (when its linear op's inputs are computed by more than
 * reshapes), the oneDNN primitive with the epilogue chain it absorbs (or a
 * generated matmul) and a generated epilogue.  The generated functions of
 * the batch go into one C file compiled once (fsl_cpu_so_load, cached); a
 * batch the compiler rejects is split in halves until the failing kernels
 * are isolated.  Each kernel then runs standalone: one warm-up run, then at
 * least 5 timed runs (more, up to 25, while the timed total is under
 * 2 ms and the wall time with the refills under 10 ms), each on fresh
 * random non-zero inputs (floats uniform in
 * [0.5, 1.5), integers 1, so gathers index in range and no division is by
 * zero; bools false, so computed conditions such as "index < 0" take the
 * common path; constants keep their data); every timed run also
 * allocates and frees the buffers of the values the kernel writes, as the
 * backend's run does; secs[i] is the median.
 * secs[i] is NaN when kernel i cannot be measured: opaque kernels and
 * kernels the emitter or oneDNN cannot handle (the backend runs them with
 * the reference interpreter), and kernels whose run reports an error.
 * `ctx` is unused.  Errors: FSL_ERR_RUNTIME when the C compiler cannot
 * build even an empty file (no kernel can be measured), FSL_ERR_NOMEM.
 */
fsl_status fsl_cpu_profile_measure(void *ctx, const fsl_graph *g, fsl_kernel *const *ks, int n, double *secs);

/**
 * Fills *p with the CPU backend's profiler (measure = fsl_cpu_profile_measure)
 * and the device fingerprint of this machine for `n_threads` threads (<= 0:
 * OpenMP's default): a hash, and its description in p->device_name, of the
 * profile format version, the CPU model name (/proc/cpuinfo), the online
 * CPU count, the thread count, the first line of `$FSL_CC --version`
 * (default cc) and oneDNN's version.  Other fields: batch 128, progress
 * off, default cache path.
 */
void fsl_cpu_profiler_init(fsl_profiler *p, int n_threads);

#endif
