/* api_threads.c — thread counts (include/fissile.h): the process-wide one
 * that compiles and runs use (fsl_set_num_threads; fsl_model_threads for
 * the API's files), and the OpenMP thread count of one calling thread
 * (fsl_set_thread_num_threads), for hosts that run models from several
 * threads with different counts (the Python package). */
#include "model.h"
#include <string.h>
#include <dlfcn.h>

/* ---- the process-wide count ---- */
static int g_threads;

fsl_status fsl_set_num_threads(int n) {
  g_threads = n > 0 ? n : 0;
  /* libgomp reads OMP_NUM_THREADS once when it loads: an already loaded
   * runtime (oneDNN pulls libgomp in) is told through its API instead */
  void (*set)(int) = NULL;
  void *sym = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  memcpy(&set, &sym, sizeof set < sizeof sym ? sizeof set : sizeof sym);
  if (g_threads > 0) {
    char buf[16];
    snprintf(buf, sizeof buf, "%d", g_threads);
    setenv("OMP_NUM_THREADS", buf, 1);
    if (set) set(g_threads);
  }
  return FSL_OK;
}

int fsl_num_threads(void) { return g_threads; }

int fsl_model_threads(void) { return g_threads; }

/* ---- the calling thread's count ---- */

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
