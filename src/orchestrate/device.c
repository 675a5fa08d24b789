/*
 * device.c — the roofline's device (orchestrate.h, fsl_device): the fixed
 * default, device records (the backends' calibration caches) and
 * fsl_device_calibrate, which measures a device once per machine and cache
 * folder, one process at a time, and again while its record was measured
 * on a busy machine.
 */
#include "orchestrate/orchestrate.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define LOCK_WAIT_S 120.0 /* longest wait for another process's calibration */

/* Default device: a modest, fixed machine so that tests and uncalibrated
 * runs are deterministic.  10 GB/s copy bandwidth (one DDR4 channel, read +
 * write counted), 50 GFLOP/s sgemm (a few AVX2 cores), 8 G elementwise
 * ops/s (two cores, 4-wide SIMD), 5 us per kernel (call + OpenMP
 * fork/join). */
void fsl_device_default(fsl_device *d) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "default (uncalibrated)");
  d->bandwidth = 10e9;
  d->peak_flops = 50e9;
  d->elem_flops = 8e9;
  d->launch_s = 5e-6;
}
static bool positive(double v) { return isfinite(v) && v > 0; }

bool fsl_device_valid(const fsl_device *d) {
  return positive(d->bandwidth) && positive(d->peak_flops) && positive(d->elem_flops) && positive(d->launch_s);
}

bool fsl_device_read(const char *path, const char *version, fsl_device *d) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  fsl_device t;
  memset(&t, 0, sizeof t);
  char line[512];
  bool has_version = false;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    char *eq = strchr(line, '=');
    if (line[0] == '#' && line[1] == ' ' && !strcmp(line + 2, version)) has_version = true;
    if (!eq) continue;
    *eq = 0;
    const char *key = line, *val = eq + 1;
    if (!strcmp(key, "name")) snprintf(t.name, sizeof t.name, "%s", val);
    else if (!strcmp(key, "bandwidth")) t.bandwidth = strtod(val, NULL);
    else if (!strcmp(key, "peak_flops")) t.peak_flops = strtod(val, NULL);
    else if (!strcmp(key, "elem_flops")) t.elem_flops = strtod(val, NULL);
    else if (!strcmp(key, "launch_s")) t.launch_s = strtod(val, NULL);
    else if (!strcmp(key, "busy")) t.busy = strtod(val, NULL);
    else if (!strcmp(key, "measurements")) t.measurements = (int)strtol(val, NULL, 10);
  }
  fclose(f);
  if (!has_version || !fsl_device_valid(&t)) return false;
  if (!(t.busy >= 0 && t.busy <= 1)) t.busy = 1; /* unreadable: provisional */
  if (t.measurements < 1) t.measurements = 1;   /* a record without the key is one measurement */
  *d = t;
  return true;
}

typedef struct {
  const char *version;
  const fsl_device *d;
} device_record;

static int write_device_record(FILE *f, const void *ctx) {
  const device_record *r = ctx;
  const fsl_device *d = r->d;
  int w = fprintf(f,
                  "# %s\nname=%s\nbandwidth=%.9g\npeak_flops=%.9g\nelem_flops=%.9g\nlaunch_s=%.9g\nbusy=%.3f\n"
                  "measurements=%d\n",
                  r->version, d->name, d->bandwidth, d->peak_flops, d->elem_flops, d->launch_s, d->busy,
                  d->measurements);
  return w > 0 ? 0 : EIO;
}

void fsl_device_write(const char *path, const char *version, const fsl_device *d) {
  device_record r = {version, d};
  if (fsl_write_file_atomic(path, write_device_record, &r) != FSL_OK) fsl_error_clear();
}


void fsl_device_merge(fsl_device *rec, const fsl_device *m) {
  if (!rec || !m) return;
  snprintf(rec->name, sizeof rec->name, "%s", m->name);
  rec->bandwidth = fmax(rec->bandwidth, m->bandwidth);
  rec->peak_flops = fmax(rec->peak_flops, m->peak_flops);
  rec->elem_flops = fmax(rec->elem_flops, m->elem_flops);
  rec->launch_s = fmin(rec->launch_s, m->launch_s);
  rec->busy = m->busy;
  rec->measurements += m->measurements;
}

/* An exclusive flock(2) on path, waited for up to LOCK_WAIT_S; -1 when it
 * cannot be had (read-only folder, a holder that does not finish). */
static int lock_file(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  double t0 = fsl_now_s();
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if ((errno != EWOULDBLOCK && errno != EINTR) || fsl_now_s() - t0 > LOCK_WAIT_S) break;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  close(fd);
  return -1;
}

fsl_status fsl_device_calibrate(const char *file, const char *version, bool force, const char *what,
                                fsl_status (*measure)(void *ctx, fsl_device *d), void *ctx, fsl_device *d) {
  if (!file || !version || !what || !measure || !d)
    return fsl_errorf(FSL_ERR_ARG, "fsl_device_calibrate: NULL argument");
  fsl_device_default(d);
  char dir[4096], path[4096 + 256], lock[4096 + 256 + 8];
  bool have_path = fsl_cache_folder(NULL, dir, sizeof dir) == FSL_OK &&
                   (size_t)snprintf(path, sizeof path, "%s/%s", dir, file) < sizeof path;
  if (!have_path) fsl_error_clear(); /* measured, not cached */
  int fd = -1;
  if (have_path) {
    snprintf(lock, sizeof lock, "%s.lock", path);
    fd = lock_file(lock); /* -1: measured without the lock */
  }
  fsl_device rec, m;
  /* a record written while this process waited for the lock is read here */
  bool have_rec = !force && have_path && fsl_device_read(path, version, &rec);
  if (have_rec && (rec.busy <= FSL_DEVICE_BUSY_MAX || rec.measurements >= FSL_DEVICE_MEASUREMENTS)) {
    *d = rec;
    if (fd >= 0) close(fd);
    return FSL_OK;
  }
  fsl_device_default(&m);
  fsl_status st = measure(ctx, &m);
  if (st == FSL_OK && !fsl_device_valid(&m))
    st = fsl_errorf(FSL_ERR_RUNTIME, "%s calibration gave a non-positive number (bandwidth %g B/s, matmul %g FLOP/s, "
                    "elementwise %g op/s, launch %g s)", what, m.bandwidth, m.peak_flops, m.elem_flops, m.launch_s);
  m.busy = m.busy >= 0 && m.busy <= 1 ? m.busy : 1;
  m.measurements = 1;
  if (have_rec) { /* a provisional record, measured again */
    if (st == FSL_OK) fsl_device_merge(&rec, &m);
    else rec.measurements++; /* a failed second look keeps the first, and counts */
    fsl_error_clear();
    st = FSL_OK;
    m = rec;
  }
  if (st == FSL_OK) {
    *d = m;
    if (have_path) fsl_device_write(path, version, d);
  }
  if (fd >= 0) close(fd); /* releases the lock */
  return st;
}
