/*
 * onednn_engine.c — what every oneDNN primitive of the CPU backend shares
 * (onednn_impl.h): the process-wide engine and stream, the OpenMP thread
 * count of the calling thread, the "user" scratchpad mode, reorders, and
 * what oneDNN's implementation names and ISA say.
 */
#include "backend/cpu/onednn_impl.h"

#include "backend/cpu/isa.h"

#include <dlfcn.h>
#include <pthread.h>

#include <oneapi/dnnl/dnnl_debug.h>

/* ---- process-wide engine and stream ---- */

dnnl_engine_t fsl_onednn_engine;
dnnl_stream_t fsl_onednn_stream;
static dnnl_status_t g_init_status = dnnl_success;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_engine(void) {
  g_init_status = dnnl_engine_create(&fsl_onednn_engine, dnnl_cpu, 0);
  if (g_init_status == dnnl_success)
    g_init_status = dnnl_stream_create(&fsl_onednn_stream, fsl_onednn_engine, dnnl_stream_default_flags);
}

fsl_status fsl_onednn_engine_get(void) {
  FSL_TRY(fsl_cpu_isa_get(NULL)); /* the ISA limit precedes oneDNN's first primitive */
  pthread_once(&g_once, init_engine);
  if (g_init_status != dnnl_success)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "oneDNN: creating the CPU engine/stream failed: %s",
                      dnnl_status2str(g_init_status));
  return FSL_OK;
}

/* OpenMP thread count of the calling thread, through the libgomp oneDNN is
 * linked with (found at run time: libfissile itself is not built with
 * -fopenmp). */
typedef void (*omp_set_fn)(int);
typedef int (*omp_get_fn)(void);
static omp_set_fn g_omp_set;
static omp_get_fn g_omp_get;
static pthread_once_t g_omp_once = PTHREAD_ONCE_INIT;

static void init_omp(void) {
  void *self = dlopen(NULL, RTLD_LAZY);
  if (!self) return;
  g_omp_set = (omp_set_fn)dlsym(self, "omp_set_num_threads");
  g_omp_get = (omp_get_fn)dlsym(self, "omp_get_max_threads");
  if (!g_omp_set || !g_omp_get) g_omp_set = NULL, g_omp_get = NULL;
}

void fsl_onednn_omp_init(void) { pthread_once(&g_omp_once, init_omp); }

int fsl_onednn_threads_set(int n) {
  if (n <= 0 || !g_omp_set) return 0;
  int old = g_omp_get();
  g_omp_set(n);
  return old;
}

void fsl_onednn_threads_restore(int old) {
  if (old) g_omp_set(old);
}

/* Scratchpads.  In oneDNN's default ("library") scratchpad mode a primitive
 * shares a per-thread global scratchpad made for the thread that created
 * it, so it must run on that thread and not concurrently with another
 * primitive there (oneDNN developer guide, "Primitive Attributes:
 * Scratchpad").  A host may compile a model on one thread and run it on
 * another, and run two models at once (the Python package does both), so
 * every primitive kept for run time uses the "user" mode, with the
 * scratchpad of the thread that runs it (thread_scratch), and a run-time
 * reorder must need none. */
dnnl_status_t fsl_onednn_user_scratchpad_attr(dnnl_primitive_attr_t *attr) {
  dnnl_status_t s = dnnl_primitive_attr_create(attr);
  if (s == dnnl_success && (s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user)) !=
                               dnnl_success) {
    dnnl_primitive_attr_destroy(*attr);
    *attr = NULL;
  }
  return s;
}

/* A reorder primitive from -> to that needs no scratchpad (dnnl_unimplemented
 * if it would need one; see user_scratchpad_attr). */
dnnl_status_t fsl_onednn_reorder_create(dnnl_primitive_t *r, fsl_cmd from, fsl_cmd to) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_status_t s = fsl_onednn_user_scratchpad_attr(&attr);
  if (s == dnnl_success)
    s = dnnl_reorder_primitive_desc_create(&rpd, from, fsl_onednn_engine, to, fsl_onednn_engine, attr);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success) return s;
  fsl_cmd smd = dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0);
  s = smd && dnnl_memory_desc_get_size(smd) > 0 ? dnnl_unimplemented : dnnl_primitive_create(r, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return s;
}

/* Whether oneDNN may use AVX-512 (its effective ISA: the machine's, or the
 * FSL_CPU_ISA limit isa.c sets before the first primitive). */
bool fsl_onednn_has_vnni(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
         (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

bool fsl_onednn_has_avx512(void) {
  return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

dnnl_status_t fsl_onednn_run_reorder(fsl_cmd from, void *from_data, fsl_cmd to, void *to_data) {
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t rp = NULL;
  dnnl_memory_t a = NULL, b = NULL;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&rpd, from, fsl_onednn_engine, to, fsl_onednn_engine, NULL);
  if (s == dnnl_success) s = dnnl_primitive_create(&rp, rpd);
  if (s == dnnl_success) s = dnnl_memory_create(&a, from, fsl_onednn_engine, from_data);
  if (s == dnnl_success) s = dnnl_memory_create(&b, to, fsl_onednn_engine, to_data);
  if (s == dnnl_success) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    s = dnnl_primitive_execute(rp, fsl_onednn_stream, 2, args);
    if (s == dnnl_success) s = dnnl_stream_wait(fsl_onednn_stream);
  }
  if (a) dnnl_memory_destroy(a);
  if (b) dnnl_memory_destroy(b);
  if (rp) dnnl_primitive_destroy(rp);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  return s;
}

/* Whether oneDNN's implementation name for pd contains word. */
bool fsl_onednn_impl_has(const_dnnl_primitive_desc_t pd, const char *word) {
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
  return strstr(impl, word) != NULL;
}

bool fsl_onednn_impl_is_ref(const_dnnl_primitive_desc_t pd) { return fsl_onednn_impl_has(pd, "ref"); }
