/*
 * compile.c — generated C -> cached shared object -> dlopen (compile.h).
 * The compiler runs through posix_spawnp with its output captured in a
 * pipe; cache entries appear only through rename(2), and only after the
 * new object has been loaded, so readers never see a partial or unloadable
 * object.
 */
#define _GNU_SOURCE /* memfd_create */
#include "backend/cpu/compile.h"

#include "backend/cpu/isa.h"
#include "backend/cpu/objcheck.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The compiler flags of generated code: the one place they are set.
 * flags[1] is the target ISA's -march (isa.h). */
#define N_FLAGS 7
static fsl_status cc_flags(const char *flags[N_FLAGS]) {
  fsl_cpu_isa isa;
  FSL_TRY(fsl_cpu_isa_get(&isa));
  const char *f[N_FLAGS] = {"-O3", isa.march, "-fno-math-errno", "-fno-trapping-math", "-fopenmp", "-fPIC", "-shared"};
  memcpy(flags, f, sizeof f);
  return FSL_OK;
}

/* Splits FSL_CC (default "cc") into words in `store`; argv points into it. */
static int compiler_argv(char *store, size_t cap, const char **argv, int max) {
  const char *cc = getenv("FSL_CC");
  if (!cc || !*cc) cc = "cc";
  snprintf(store, cap, "%s", cc);
  int n = 0;
  char *save = NULL;
  for (char *p = strtok_r(store, " \t", &save); p && n < max; p = strtok_r(NULL, " \t", &save)) argv[n++] = p;
  return n;
}

/* Progress of one compiler run (fsl_progress_emit, task "compile");
 * detail NULL: silent. */
typedef struct compile_progress {
  const char *detail;
  double t0;
} compile_progress;

static void compile_tick(const compile_progress *pg, bool finished) {
  if (pg && pg->detail) fsl_progress_emit("compile", pg->detail, finished, 1, fsl_now_s() - pg->t0, finished);
}

/* Runs argv, capturing stdout+stderr (trimmed to cap-1 bytes) in out,
 * ticking pg about once a second while it runs.  Returns the exit status,
 * or -1 if it could not be started. */
static int run_capture(const char *const *argv, char *out, size_t cap, const compile_progress *pg) {
  int fd[2];
  out[0] = 0;
  if (pipe(fd) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  if (rc != 0) {
    close(fd[0]);
    snprintf(out, cap, "%s", strerror(rc));
    return -1;
  }
  size_t len = 0;
  char tmp[4096];
  for (;;) {
    struct pollfd pfd = {.fd = fd[0], .events = POLLIN};
    int ready = poll(&pfd, 1, pg && pg->detail ? 1000 : -1);
    if (ready == 0) {
      compile_tick(pg, false);
      continue;
    }
    ssize_t k = read(fd[0], tmp, sizeof tmp);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    size_t c = (size_t)k;
    if (len + c > cap - 1) c = cap - 1 - len;
    memcpy(out + len, tmp, c);
    len += c;
  }
  out[len] = 0;
  close(fd[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Hash of everything that decides the object's contents. */
static uint64_t build_hash(const char *src, const char *const *cc, int ncc, const char *const *flags) {
  uint64_t h = fsl_hash(FSL_HASH_INIT, src, strlen(src));
  for (int i = 0; i < ncc; i++) h = fsl_hash(h, cc[i], strlen(cc[i]) + 1);
  for (int i = 0; i < N_FLAGS; i++) h = fsl_hash(h, flags[i], strlen(flags[i]) + 1);
  static char version[1024];
  static bool have_version = false;
  if (!have_version) {
    const char *argv[18];
    char store[512];
    int n = compiler_argv(store, sizeof store, argv, 16);
    argv[n++] = "--version";
    argv[n] = NULL;
    if (run_capture(argv, version, sizeof version, NULL) == 0) have_version = true;
  }
  h = fsl_hash(h, version, strlen(version));
  char model[160];
  uint64_t cpu_flags;
  fsl_cpu_machine(model, sizeof model, &cpu_flags);
  h = fsl_hash(h, model, strlen(model));
  return fsl_hash(h, &cpu_flags, sizeof cpu_flags);
}

/* Writes the kernel source into the cache folder; a partial file is removed.
 * The message names the folder and how to choose another one. */
static fsl_status write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  int err = f ? 0 : errno;
  if (f) {
    size_t n = strlen(text);
    if (fwrite(text, 1, n, f) != n) err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    if (err) unlink(path);
  }
  if (err)
    return fsl_errorf(FSL_ERR_RUNTIME, "cannot write '%s' in the kernel cache folder: %s (set FSL_CACHE_DIR to a "
                      "writable folder with free space)", path, strerror(err));
  return FSL_OK;
}

/* dlopen of `path` into so->handle. */
static fsl_status open_so(fsl_cpu_so *so, const char *path) {
  so->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so->handle) {
    const char *m = dlerror();
    return fsl_errorf(FSL_ERR_RUNTIME, "dlopen '%s': %s", path, m ? m : "failed");
  }
  return FSL_OK;
}

/* open_so of a file the compiler made (fresh or a cache entry), once its ELF
 * image is seen to be whole (objcheck.h: a truncated object can load). */
static fsl_status open_object_file(fsl_cpu_so *so, const char *path) {
  FSL_TRY(fsl_cpu_elf_check_file(path));
  return open_so(so, path);
}

fsl_status fsl_cpu_so_load(const char *src, const char *what, fsl_cpu_so *so) {
  if (!src || !so) return fsl_errorf(FSL_ERR_ARG, "fsl_cpu_so_load: NULL argument");
  memset(so, 0, sizeof *so);
  char dir[900];
  if (fsl_cache_folder("kernels", dir, sizeof dir) != FSL_OK) return fsl_error_context(FSL_ERR_RUNTIME, "kernel cache");
  const char *cc[16];
  char store[512];
  int ncc = compiler_argv(store, sizeof store, cc, 16);
  if (ncc == 0) return fsl_errorf(FSL_ERR_RUNTIME, "FSL_CC is empty");
  const char *flags[N_FLAGS];
  FSL_TRY(cc_flags(flags));
  uint64_t h = build_hash(src, cc, ncc, flags);
  snprintf(so->path, sizeof so->path, "%s/%016llx.so", dir, (unsigned long long)h);
  if (access(so->path, R_OK) == 0) {
    if (open_object_file(so, so->path) == FSL_OK) {
      so->cache_hit = true;
      return FSL_OK;
    }
    fsl_error_clear(); /* unreadable or cut-short entry: rebuild it */
  }
  static int counter;
  int uniq = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
  char csrc[1024], tmp_so[1024], final_c[1024], failed_c[1024];
  snprintf(csrc, sizeof csrc, "%s/%016llx.%ld.%d.tmp.c", dir, (unsigned long long)h, (long)getpid(), uniq);
  snprintf(tmp_so, sizeof tmp_so, "%s/%016llx.%ld.%d.tmp.so", dir, (unsigned long long)h, (long)getpid(), uniq);
  snprintf(final_c, sizeof final_c, "%s/%016llx.c", dir, (unsigned long long)h);
  snprintf(failed_c, sizeof failed_c, "%s/%016llx.failed.c", dir, (unsigned long long)h);
  FSL_TRY(write_file(csrc, src));
  const char *argv[40];
  int n = 0;
  for (int i = 0; i < ncc; i++) argv[n++] = cc[i];
  for (int i = 0; i < N_FLAGS; i++) argv[n++] = flags[i];
  argv[n++] = "-o";
  argv[n++] = tmp_so;
  argv[n++] = csrc;
  argv[n++] = "-lm";
  argv[n] = NULL;
  char *log = malloc(65536);
  if (!log) {
    unlink(csrc);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  compile_progress pg = {.detail = what && fsl_progress_wanted() ? what : NULL, .t0 = fsl_now_s()};
  compile_tick(&pg, false);
  int rc = run_capture(argv, log, 65536, &pg);
  so->compile_s = fsl_now_s() - pg.t0;
  if (rc == 0) compile_tick(&pg, true);
  if (strlen(log) > 2000) strcpy(log + 1980, " ...(trimmed)");
  /* What the compiler made is loaded before it becomes an entry, so an
   * object that cannot be loaded never does.  The source of a failed
   * compile stays next to the cache for inspection, under a name that is
   * never an entry (one per source, replaced by the next failure). */
  fsl_status st = FSL_OK;
  if (rc < 0) {
    st = fsl_errorf(FSL_ERR_RUNTIME, "cannot run the C compiler '%s' (set FSL_CC): %s", cc[0], log);
    unlink(csrc);
  } else if (rc != 0 || open_object_file(so, tmp_so) != FSL_OK) {
    const char *kept = rename(csrc, failed_c) == 0 ? failed_c : csrc;
    if (rc != 0) st = fsl_errorf(FSL_ERR_RUNTIME, "C compiler '%s' failed (exit %d) on %s:\n%s", cc[0], rc, kept, log);
    else st = fsl_error_context(FSL_ERR_RUNTIME, "the object the C compiler '%s' made from %s", cc[0], kept);
  } else if (rename(tmp_so, so->path) != 0) {
    st = fsl_errorf(FSL_ERR_RUNTIME, "cannot rename '%s' to '%s': %s", tmp_so, so->path, strerror(errno));
    fsl_cpu_so_close(so);
    unlink(csrc);
  } else if (rename(csrc, final_c) != 0) {
    unlink(csrc);
  }
  if (st != FSL_OK) unlink(tmp_so);
  free(log);
  return st;
}

fsl_status fsl_cpu_so_load_object(const void *object, size_t len, fsl_cpu_so *so) {
  if (!object || !so) return fsl_errorf(FSL_ERR_ARG, "fsl_cpu_so_load_object: NULL argument");
  memset(so, 0, sizeof *so);
  FSL_TRY(fsl_cpu_elf_check(object, len, "of the compiled model file"));
  int fd = memfd_create("fissile-kernels", MFD_CLOEXEC);
  if (fd < 0) return fsl_errorf(FSL_ERR_RUNTIME, "memfd_create: %s", strerror(errno));
  const unsigned char *p = object;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, p + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      close(fd);
      return fsl_errorf(FSL_ERR_RUNTIME, "cannot write the kernel object to memory: %s", strerror(err));
    }
    done += (size_t)w;
  }
  snprintf(so->path, sizeof so->path, "/proc/self/fd/%d", fd);
  fsl_status st = open_so(so, so->path);
  /* the fd stays open while the object is loaded, so that its number (the
   * object's name for dlopen) is not given to the next compiled model file */
  if (st == FSL_OK) {
    so->memfd = fd;
    so->has_memfd = true;
  } else {
    close(fd);
  }
  snprintf(so->path, sizeof so->path, "(kernels of a compiled model file)");
  so->cache_hit = true;
  return st;
}

void *fsl_cpu_so_kernel(const fsl_cpu_so *so, int id) {
  char name[32];
  snprintf(name, sizeof name, "fsl_k%d", id);
  dlerror();
  void *p = dlsym(so->handle, name);
  if (!p) fsl_errorf(FSL_ERR_RUNTIME, "'%s' lacks %s", so->path, name);
  return p;
}

void fsl_cpu_so_close(fsl_cpu_so *so) {
  if (!so) return;
  if (so->handle) dlclose(so->handle);
  so->handle = NULL;
  if (so->has_memfd) close(so->memfd);
  so->has_memfd = false;
}
