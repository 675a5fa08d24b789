/*
 * calibrate.c — measures the roofline's device numbers on this machine
 * (calibrate.h) and caches them per machine in the user's cache folder.
 *
 * Parallel benchmarks run through libgomp, loaded with dlopen (it is
 * already in the process through oneDNN's OpenMP runtime), and its
 * GOMP_parallel entry point — exactly what `#pragma omp parallel` in a
 * generated kernel compiles to — so the numbers describe how generated
 * kernels run without building the library itself with -fopenmp.  Without
 * libgomp every benchmark runs on one thread.
 *
 * The benchmarks run interleaved in CAL_ROUNDS rounds, spread over about
 * a second, and each number is the best of all its runs: a burst of load
 * from elsewhere (another VM on the host, a compiler) slows some runs, not
 * all.  The record also says how busy the machine was meanwhile
 * (fsl_device.busy, from /proc/stat): a calibration measured beside a
 * build or a test run is provisional and measured again later
 * (fsl_device_calibrate).
 */
#include "backend/cpu/calibrate.h"

#include "backend/cpu/compile.h"
#include "backend/cpu/dialect_c.h"
#include "backend/cpu/isa.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#define CAL_VERSION "fissile-device-v4"   /* v3: elem_flops of a SiLU loop compiled like generated kernels;
                                             v4: best of interleaved rounds, busy */
#define CAL_ROUNDS 4                      /* rounds of all four benchmarks */
#define CAL_PAUSE_NS (100 * 1000 * 1000)  /* between rounds */
#define COPY_BYTES ((size_t)64 << 20)     /* memcpy buffer */
#define GEMM_N 1024                       /* sgemm M = N = K */
#define ELEM_TOTAL ((int64_t)16 << 20)    /* elements of the elementwise loop */
#define ELEM_BLOCK 8192                   /* per-thread cache-resident block (floats) */
#define LAUNCH_CALLS 2000

/* ---- libgomp, looked up at run time ---- */

typedef struct gomp {
  void *h;
  void (*parallel)(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
  int (*thread_num)(void);
  int (*num_threads)(void);
  int (*max_threads)(void);
  void (*set_num_threads)(int);
} gomp;

static void gomp_open(gomp *o) {
  memset(o, 0, sizeof *o);
  o->h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!o->h) return;
  o->parallel = (void (*)(void (*)(void *), void *, unsigned, unsigned))dlsym(o->h, "GOMP_parallel");
  o->thread_num = (int (*)(void))dlsym(o->h, "omp_get_thread_num");
  o->num_threads = (int (*)(void))dlsym(o->h, "omp_get_num_threads");
  o->max_threads = (int (*)(void))dlsym(o->h, "omp_get_max_threads");
  o->set_num_threads = (void (*)(int))dlsym(o->h, "omp_set_num_threads");
  if (!o->parallel || !o->thread_num || !o->num_threads || !o->max_threads || !o->set_num_threads) {
    dlclose(o->h);
    memset(o, 0, sizeof *o);
  }
}

static void gomp_close(gomp *o) {
  if (o->h) dlclose(o->h);
  memset(o, 0, sizeof *o);
}

/* A parallel job: fn(job, thread index, team size). */
typedef struct job {
  const gomp *o;
  void (*fn)(struct job *j, int tid, int nthr);
  char *src, *dst;       /* copy: buffers; elementwise: per-thread blocks */
  size_t n;              /* copy: bytes */
  void (*loop)(const float *x, float *y, int64_t todo, int64_t block); /* elementwise */
} job;

static void job_entry(void *p) {
  job *j = p;
  j->fn(j, j->o->thread_num(), j->o->num_threads());
}

static void run_parallel(job *j, int n_threads) {
  if (j->o->h) j->o->parallel(job_entry, j, (unsigned)n_threads, 0);
  else j->fn(j, 0, 1);
}

/* ---- benchmarks ---- */

static void copy_part(job *j, int tid, int nthr) {
  size_t per = (j->n / (size_t)nthr + 63) & ~(size_t)63;
  size_t lo = per * (size_t)tid, hi = lo + per < j->n ? lo + per : j->n;
  if (lo < hi) memcpy(j->dst + lo, j->src + lo, hi - lo);
}

/* Bytes/s of memcpy (read + write), best of 3. */
static fsl_status bench_copy(const gomp *o, int n_threads, double *out) {
  char *src = malloc(COPY_BYTES), *dst = malloc(COPY_BYTES);
  if (!src || !dst) {
    free(src);
    free(dst);
    return fsl_errorf(FSL_ERR_NOMEM, "calibration: out of memory for two %zu-byte copy buffers", COPY_BYTES);
  }
  memset(src, 1, COPY_BYTES);  /* fault the pages in before timing */
  memset(dst, 0, COPY_BYTES);
  job j = {o, copy_part, src, dst, COPY_BYTES, NULL};
  double best = INFINITY;
  for (int r = 0; r < 3; r++) {
    double t = fsl_now_s();
    run_parallel(&j, n_threads);
    t = fsl_now_s() - t;
    if (t < best) best = t;
  }
  *out = 2.0 * (double)COPY_BYTES / best;
  free(src);
  free(dst);
  return FSL_OK;
}

/* The elementwise benchmark's loop, compiled like a generated kernel
 * (compile.c: -O3, -march of the target ISA, the C dialect's prelude and
 * the shared helpers): per element v = y * c + x, y = v * sigmoid(v), the
 * SiLU epilogue that dominates the elementwise work of convolutional
 * models.  ELEM_UNITS units of cost.c's work (ops.def's cost column:
 * multiply 1, add 1, sigmoid 16, multiply 1).  Each pass reads the previous
 * one's result, so no pass can be skipped. */
#define ELEM_UNITS 19.0
static const char elem_loop_src[] =
    "void fsl_calibration_elem_loop(const float *restrict x, float *restrict y, int64_t todo,\n"
    "                               int64_t block) {\n"
    "  for (int64_t done = 0; done < todo; done += block)\n"
    "    for (int64_t i = 0; i < block; i++) {\n"
    "      const float v = y[i] * 0.999f + x[i];\n"
    "      y[i] = v * fsl_sigmoidf(v);\n"
    "    }\n"
    "}\n";
typedef void (*elem_loop_fn)(const float *x, float *y, int64_t todo, int64_t block);

/* The same loop compiled with the library's flags: the fallback when the C
 * compiler cannot build elem_loop_src (then no generated kernel can run
 * either, and every plan falls back to the reference interpreter). */
static void elem_loop_lib(const float *x, float *y, int64_t todo, int64_t block) {
  for (int64_t done = 0; done < todo; done += block)
    for (int64_t i = 0; i < block; i++) {
      const float v = y[i] * 0.999f + x[i];
      y[i] = v / (1.0f + expf(-v));
    }
}

static void elem_part(job *j, int tid, int nthr) {
  const float *x = (const float *)j->src + (size_t)tid * ELEM_BLOCK;
  float *y = (float *)j->dst + (size_t)tid * ELEM_BLOCK;
  j->loop(x, y, ELEM_TOTAL / nthr, ELEM_BLOCK);
}

/* Units/s of cost.c's elementwise work: elem_loop_src's loop on
 * cache-resident blocks, ELEM_TOTAL elements split over the threads, best
 * of 2 (after one untimed run that faults in the pages and the code). */
static fsl_status bench_elem(const gomp *o, int n_threads, double *out) {
  size_t n = (size_t)ELEM_BLOCK * (size_t)n_threads;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  fsl_sbuf src = {0};
  fsl_codegen_prelude(&fsl_dialect_c, &src);
  fsl_sbuf_puts(&src, elem_loop_src);
  if (!x || !y || src.oom) {
    free(x);
    free(y);
    fsl_sbuf_free(&src);
    return fsl_errorf(FSL_ERR_NOMEM, "calibration: out of memory for the elementwise benchmark");
  }
  fsl_cpu_so so = {0};
  elem_loop_fn loop = elem_loop_lib;
  if (fsl_cpu_so_load(src.p, NULL, &so) == FSL_OK) {
    void *f = dlsym(so.handle, "fsl_calibration_elem_loop");
    if (f) memcpy(&loop, &f, sizeof loop);
  }
  fsl_error_clear();
  fsl_sbuf_free(&src);
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(i % 1000) * 1e-3f - 0.5f;
    y[i] = 0;
  }
  job j = {o, elem_part, (char *)x, (char *)y, 0, loop};
  double best = INFINITY;
  for (int r = 0; r < 3; r++) {
    double t = fsl_now_s();
    run_parallel(&j, n_threads);
    t = fsl_now_s() - t;
    if (r > 0 && t < best) best = t;
  }
  fsl_cpu_so_close(&so);
  /* every thread did ELEM_TOTAL / team elements, rounded up to whole blocks */
  double sink = 0;
  for (size_t i = 0; i < n; i += 997) sink += y[i];
  *out = sink == sink ? ELEM_UNITS * (double)ELEM_TOTAL / best : 0;
  free(x);
  free(y);
  return FSL_OK;
}

/* FLOP/s of oneDNN sgemm, 1024^3, best of up to 2 after a warm-up call. */
static fsl_status bench_sgemm(const gomp *o, int n_threads, double *out) {
  size_t n = (size_t)GEMM_N * GEMM_N;
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
  fsl_status st = FSL_OK;
  if (!a || !b || !c) {
    st = fsl_errorf(FSL_ERR_NOMEM, "calibration: out of memory for the sgemm benchmark");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    a[i] = (float)(i % 17) * 0.01f;
    b[i] = (float)(i % 13) * 0.01f;
    c[i] = 0;
  }
  int saved = o->h ? o->max_threads() : 0;
  if (o->h) o->set_num_threads(n_threads);
  double best = INFINITY;
  for (int r = 0; r < 3; r++) {
    double t = fsl_now_s();
    dnnl_status_t ds = dnnl_sgemm('N', 'N', GEMM_N, GEMM_N, GEMM_N, 1.0f, a, GEMM_N, b, GEMM_N, 0.0f, c, GEMM_N);
    t = fsl_now_s() - t;
    if (ds != dnnl_success) {
      st = fsl_errorf(FSL_ERR_RUNTIME, "calibration: dnnl_sgemm failed (status %d)", (int)ds);
      break;
    }
    if (r > 0 && t < best) best = t;
    if (r > 0 && best > 0.15) break;  /* a slow machine: one timed run is enough */
  }
  if (o->h) o->set_num_threads(saved);
  if (st == FSL_OK) *out = 2.0 * (double)GEMM_N * GEMM_N * GEMM_N / best;
done:
  free(a);
  free(b);
  free(c);
  return st;
}

static void empty_region(void *p) { (void)p; }
static void (*volatile g_empty_fn)(void *) = empty_region;

/* Seconds per empty parallel region (fork/join), best of 2 rounds. */
static double bench_launch(const gomp *o, int n_threads) {
  double best = INFINITY;
  for (int r = 0; r < 3; r++) {
    double t = fsl_now_s();
    for (int i = 0; i < LAUNCH_CALLS; i++) {
      if (o->h) o->parallel(empty_region, NULL, (unsigned)n_threads, 0);
      else g_empty_fn(NULL);
    }
    t = (fsl_now_s() - t) / LAUNCH_CALLS;
    if (r > 0 && t < best) best = t;  /* round 0 starts the threads */
  }
  return best > 0 ? best : 1e-9;
}

/* ---- machine identity and the cache file ---- */

void fsl_cpu_model_name(char *buf, size_t len) {
  snprintf(buf, len, "unknown cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5) && strncmp(line, "cpu model", 9)) continue;
    char *c = strchr(line, ':');
    if (!c) continue;
    c++;
    while (*c == ' ' || *c == '\t') c++;
    size_t n = strcspn(c, "\r\n");
    if (n == 0) continue;
    snprintf(buf, len, "%.*s", (int)n, c);
    break;
  }
  fclose(f);
}

typedef struct cpu_cal {
  gomp *o;
  int n_threads;
  const char *model, *isa;
} cpu_cal;

/* CPU seconds since boot: the whole machine's busy time (every CPU's
 * user, nice, system, irq, softirq and steal time, from /proc/stat's "cpu"
 * line; guest time is inside user) and this process's own (its threads and
 * the children it waited for: the C compiler of bench_elem), with the wall
 * clock. */
typedef struct cpu_times {
  double wall, machine, self;
  bool ok;
} cpu_times;

static cpu_times cpu_times_now(void) {
  cpu_times t = {fsl_now_s(), 0, 0, false};
  FILE *f = fopen("/proc/stat", "r");
  long tick = sysconf(_SC_CLK_TCK);
  unsigned long long v[8] = {0};
  if (f) {
    t.ok = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                  &v[7]) == 8 && tick > 0;
    fclose(f);
  }
  /* v: user nice system idle iowait irq softirq steal */
  t.machine = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)(tick > 0 ? tick : 100);
  struct timespec ts;
  struct rusage ch;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0 || getrusage(RUSAGE_CHILDREN, &ch) != 0) t.ok = false;
  else
    t.self = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + (double)ch.ru_utime.tv_sec +
             1e-6 * (double)ch.ru_utime.tv_usec + (double)ch.ru_stime.tv_sec + 1e-6 * (double)ch.ru_stime.tv_usec;
  return t;
}

/* The share of the calibration's n_threads CPUs that other work took
 * between a and b: the CPUs busy with anything but this process, less the
 * ones the calibration leaves free (ncpu - n_threads), over n_threads,
 * clamped to [0, 1]; 0 when /proc/stat cannot be read. */
double fsl_cpu_busy_share(double wall_s, double machine_s, double self_s, int ncpu, int n_threads) {
  if (!(wall_s > 0) || ncpu < 1 || n_threads < 1) return 0;
  double others = (machine_s - self_s) / wall_s - (double)(ncpu > n_threads ? ncpu - n_threads : 0);
  double share = others / (double)n_threads;
  return share < 0 ? 0 : share > 1 ? 1 : share;
}

static fsl_status measure(void *ctx, fsl_device *m) {
  cpu_cal *c = ctx;
  snprintf(m->name, sizeof m->name, "cpu: %.96s, %d thread%s, isa %s", c->model, c->n_threads,
           c->n_threads == 1 ? "" : "s", c->isa);
  double bw = 0, elem = 0, peak = 0, launch = INFINITY;
  cpu_times t0 = cpu_times_now();
  for (int r = 0; r < CAL_ROUNDS; r++) {
    if (r > 0) {
      struct timespec pause = {0, CAL_PAUSE_NS};
      nanosleep(&pause, NULL);
    }
    double v;
    FSL_TRY(bench_copy(c->o, c->n_threads, &v));
    bw = fmax(bw, v);
    FSL_TRY(bench_elem(c->o, c->n_threads, &v));
    elem = fmax(elem, v);
    FSL_TRY(bench_sgemm(c->o, c->n_threads, &v));
    peak = fmax(peak, v);
    launch = fmin(launch, bench_launch(c->o, c->n_threads));
  }
  cpu_times t1 = cpu_times_now();
  m->bandwidth = bw, m->elem_flops = elem, m->peak_flops = peak, m->launch_s = launch;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  m->busy = t0.ok && t1.ok ? fsl_cpu_busy_share(t1.wall - t0.wall, t1.machine - t0.machine, t1.self - t0.self,
                                                (int)(ncpu > 0 ? ncpu : 1), c->n_threads)
                           : 0;
  return FSL_OK;
}

fsl_status fsl_cpu_calibrate(fsl_device *d, int n_threads, bool force) {
  if (!d) return fsl_errorf(FSL_ERR_ARG, "fsl_cpu_calibrate: NULL device");
  fsl_device_default(d);
  fsl_cpu_isa isa; /* before the sgemm benchmark: oneDNN's ISA limit comes first */
  FSL_TRY(fsl_cpu_isa_get(&isa));
  gomp o;
  gomp_open(&o);
  if (n_threads <= 0) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = o.h ? o.max_threads() : (int)(ncpu > 0 ? ncpu : 1);
  }
  if (!o.h) n_threads = 1;
  if (n_threads > 1024) n_threads = 1024;

  char model[256], file[64];
  fsl_cpu_model_name(model, sizeof model);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t h = fsl_hash(FSL_HASH_INIT, CAL_VERSION, strlen(CAL_VERSION));
  h = fsl_hash(h, model, strlen(model));
  h = fsl_hash(h, &ncpu, sizeof ncpu);
  h = fsl_hash(h, &n_threads, sizeof n_threads);
  h = fsl_hash(h, isa.name, strlen(isa.name));
  snprintf(file, sizeof file, "device-%016llx.txt", (unsigned long long)h);
  cpu_cal c = {&o, n_threads, model, isa.name};
  fsl_status st = fsl_device_calibrate(file, CAL_VERSION, force, "cpu", measure, &c, d);
  gomp_close(&o);
  return st;
}
