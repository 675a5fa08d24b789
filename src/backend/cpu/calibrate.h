/*
 * calibrate.h — measuring the roofline's device numbers (fsl_device,
 * orchestrate.h) on this machine, cached per machine in the user's cache
 * folder.
 */
#ifndef FSL_CPU_CALIBRATE_H
#define FSL_CPU_CALIBRATE_H

#include "orchestrate/orchestrate.h"

/**
 * Fills *d with numbers measured on this machine for `n_threads` threads
 * (<= 0: OpenMP's default, else the online CPU count):
 *   bandwidth   bytes/s of memcpy over 64 MiB buffers (read + write
 *               counted, split over the threads), best of several runs;
 *   peak_flops  FLOP/s of oneDNN dnnl_sgemm on 1024x1024x1024 (2 M N K
 *               flops), best of several;
 *   elem_flops  units/s of cost.c's elementwise work: a SiLU loop
 *               (y = v * sigmoid(v), v = y * c + x: 19 units per element,
 *               ops.def's weights) over cache-resident blocks, 16 Mi
 *               elements split over the threads, compiled like a generated
 *               kernel (compile.c: -O3, -march of the target ISA, so it
 *               vectorizes as they do; the library's own scalar build of
 *               the loop when the C compiler fails);
 *   launch_s    seconds of one empty OpenMP parallel region (libgomp's
 *               GOMP_parallel, what `#pragma omp parallel` compiles to) —
 *               an indirect function call when libgomp cannot be loaded;
 *   busy        the share of the n_threads CPUs other work took meanwhile
 *               (fsl_cpu_busy_share over /proc/stat).
 * The four benchmarks run interleaved in 4 rounds 0.1 s apart, each
 * number the best over all rounds (the lowest for launch_s).
 * Takes about 1-2 s.  The numbers are cached in
 * $XDG_CACHE_HOME/fissile/device-<fingerprint>.txt (~/.cache when
 * XDG_CACHE_HOME is unset), the fingerprint hashing the CPU model name
 * (/proc/cpuinfo), the online CPU count and the thread count; a valid cache
 * file is read instead of measuring unless `force`.  The cache is written
 * atomically (temporary file + rename); failing to write it is not an error.
 * Errors: FSL_ERR_ARG (d NULL), FSL_ERR_NOMEM (benchmark buffers),
 * FSL_ERR_RUNTIME (oneDNN sgemm failed).  On error *d is the default device
 * (fsl_device_default).
 */
fsl_status fsl_cpu_calibrate(fsl_device *d, int n_threads, bool force);

/** The share of a calibration's n_threads CPUs that other work took in a
 *  window of wall_s seconds in which the machine's CPUs were busy for
 *  machine_s CPU-seconds in all (/proc/stat: user, nice, system, irq,
 *  softirq, steal) and the calibrating process for self_s (its threads and
 *  waited-for children): (machine_s - self_s) / wall_s CPUs, less the
 *  ncpu - n_threads the calibration leaves free, over n_threads, clamped to
 *  [0, 1].  0 for a non-positive window, ncpu or n_threads. */
double fsl_cpu_busy_share(double wall_s, double machine_s, double self_s, int ncpu, int n_threads);

/** The CPU model name from /proc/cpuinfo ("model name", "Model" or "cpu
 *  model" line; "unknown cpu" if none), NUL-terminated in buf[len]: part of
 *  the device fingerprints of the calibration and profile caches. */
void fsl_cpu_model_name(char *buf, size_t len);

#endif
