/* api_threads.c — the OpenMP thread count of one calling thread
 * (fsl_set_thread_num_threads, include/fissile.h), for hosts that run
 * models from several threads with different counts (the Python package). */
#include "core/core.h"
#include <string.h>
#include <dlfcn.h>

/* omp_set_num_threads of the OpenMP runtime in the process: in the global
 * scope (an executable linked with oneDNN), else libgomp.so.1 if it is
 * already loaded by a module loaded RTLD_LOCAL (a Python extension module
 * linking oneDNN).  NULL when no runtime is loaded. */
static void (*omp_setter(void))(int) {
  void *sym = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  if (!sym) {
    void *h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      sym = dlsym(h, "omp_set_num_threads");
      dlclose(h); /* NOLOAD took a reference; the library stays loaded */
    }
  }
  void (*set)(int) = NULL;
  memcpy(&set, &sym, sizeof set < sizeof sym ? sizeof set : sizeof sym);
  return set;
}

fsl_status fsl_set_thread_num_threads(int n) {
  if (n <= 0) return FSL_OK;
  void (*set)(int) = omp_setter();
  if (!set) return fsl_errorf(FSL_ERR_UNSUPPORTED, "no OpenMP runtime is loaded: the thread count cannot be set");
  set(n);
  return FSL_OK;
}
