/*
 * compile.h — turning generated C source into loaded code, with a cache
 * (docs/cpu-backend.md), and the CPU backend's statistics.
 *
 * The source is compiled with
 *     $FSL_CC -O3 -march=M -fno-math-errno -fno-trapping-math -fopenmp -fPIC -shared -o X.so X.c -lm
 * (M from the target ISA, FSL_CPU_ISA: native by default; isa.h)
 * (FSL_CC default "cc"; it may hold extra words, e.g. "ccache gcc") into
 *     $FSL_CACHE_DIR/<hash>.so, or ($XDG_CACHE_HOME or ~/.cache)/fissile/kernels/<hash>.so
 * where <hash> covers the source, the compiler command, its --version
 * output, the flags and the CPU model and flags (-march=native code is only
 * reused on the machine kind it was built for).  The object is built under a
 * temporary name in the same folder, checked to be a whole ELF object
 * (objcheck.h), loaded, and only then renamed into place, so a failed or
 * interrupted compile, a compiler that writes something dlopen rejects or
 * a linker that exits 0 after cutting its output short leaves no entry; a
 * cache hit (checked the same way; a cut-short entry is rebuilt) skips the
 * compiler.  The source of a failed compile is kept as <hash>.failed.c.
 */
#ifndef FSL_CPU_COMPILE_H
#define FSL_CPU_COMPILE_H

#include "core/core.h"

/** A loaded shared object of generated kernels. */
typedef struct fsl_cpu_so {
  void *handle;          /* dlopen handle */
  char path[1024];       /* the cache entry */
  bool cache_hit;        /* loaded without running the compiler */
  double compile_s;      /* seconds spent in the compiler (0 on a hit) */
  /* a compiled model file's object: the memfd it was loaded from, open
   * while it is loaded (glibc's dlopen finds loaded objects by path: were
   * the fd number reused, /proc/self/fd/N would name the old object) */
  int memfd;
  bool has_memfd;
} fsl_cpu_so;

/**
 * Compiles (or finds in the cache) the C source `src` (NUL-terminated) and
 * loads it.  On a cache miss with `what` not NULL, the compiler run is
 * reported as progress task "compile" with `what` as its detail.  Errors: FSL_ERR_RUNTIME when the cache folder cannot be made
 * or written (read-only, full: the message names the file and the errno
 * text), the compiler cannot be started or fails (its trimmed output is in
 * the message), the object it made is cut short (fsl_cpu_elf_check's
 * message), or dlopen fails; FSL_ERR_NOMEM.  Entries already in the
 * cache are never modified by a failure.
 */
fsl_status fsl_cpu_so_load(const char *src, const char *what, fsl_cpu_so *so);

/**
 * Loads a shared object from memory (the bytes of an object that
 * fsl_cpu_so_load built, kept in a compiled model file): no compiler, no
 * cache entry (an anonymous memory file, memfd_create).  The bytes are
 * untrusted input only in the sense that dlopen must accept them; the
 * compiled model file's fingerprint (fsl_cpu_fingerprint) decides whether
 * they are for this machine.  Errors: FSL_ERR_RUNTIME (the bytes are not a
 * whole ELF shared object of this machine, fsl_cpu_elf_check; memfd or
 * dlopen failed: the message has dlerror's text), FSL_ERR_ARG.
 */
fsl_status fsl_cpu_so_load_object(const void *object, size_t len, fsl_cpu_so *so);

/** The generated function fsl_k<id>, or NULL (with an error set) if the
 *  object lacks it. */
void *fsl_cpu_so_kernel(const fsl_cpu_so *so, int id);

/** dlcloses the object (NULL-safe; the cache entry stays). */
void fsl_cpu_so_close(fsl_cpu_so *so);

/** What the CPU backend made of a plan (cpu.c). */
typedef struct fsl_cpu_stats {
  int n_kernels;         /* kernels of the plan */
  int n_generated;       /* generated C functions */
  int n_onednn;          /* linear ops run by oneDNN */
  int n_winograd;        /* of those, convolutions run as fissile's Winograd (winograd.h) */
  int n_chained;         /* values passed between them in a oneDNN layout (lower.h) */
  int n_sum_in_place;    /* convolutions writing over the residual they add as oneDNN's sum post-op */
  int n_fallback;        /* kernels with a part run by the reference interpreter (lowering.h) */
  int n_opaque;          /* opaque kernels (always the reference interpreter) */
  bool cache_hit;        /* the shared object came from the cache */
  double compile_s;      /* seconds in the C compiler */
  char so_path[1024];    /* the shared object ("" when nothing was generated) */
} fsl_cpu_stats;

/** Statistics of an executable made by fsl_backend_cpu.compile. */
void fsl_cpu_exe_stats(const void *exe, fsl_cpu_stats *out);

#endif
