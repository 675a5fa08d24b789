/*
 * emu_build.h — the generated CUDA C compiled against the CPU emulation of
 * CUDA's device side (cuda_emu.h, launch.cc) into a shared object, for the
 * unit tests that run generated functions without a GPU
 * (test_cuda_codegen.c, test_cuda_backend.c).  Include after cmocka.h.
 */
#ifndef FSL_EMU_BUILD_H
#define FSL_EMU_BUILD_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A generated function (fissile's CUDA ABI) and fsl_emu_launch (launch.cc). */
typedef void (*emu_kernel)(const void *const *in, void *const *out, int *err);
typedef int (*emu_launch_fn)(emu_kernel k, unsigned grid, unsigned block, const void *const *in, void *const *out,
                             int *err, int *bad);

/* Compiles src (CUDA C of the generated functions) with the host's C++
 * compiler against cuda_emu/ into a shared object in dir and loads it;
 * NULL when there is no C++ compiler (the caller skips, `who` says so on
 * stderr), failing the test on any other error. */
static inline void *emu_build(const char *dir, const char *src, const char *who) {
  if (system("c++ --version > /dev/null 2>&1") != 0) {
    fprintf(stderr, "%s: no C++ compiler (c++): the emulated runs are skipped\n", who);
    return NULL;
  }
  char path[512], lib[512], cmd[2048];
  snprintf(path, sizeof path, "%s/k.cc", dir);
  snprintf(lib, sizeof lib, "%s/k.so", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#include \"cuda_emu.h\"\n%s", src);
  assert_int_equal(fclose(f), 0);
  snprintf(cmd, sizeof cmd,
           "c++ -std=c++17 -O1 -w -shared -fPIC -pthread -I%s/tests/unit/cuda_emu %s %s/tests/unit/cuda_emu/launch.cc -o %s",
           FSL_SOURCE_DIR, path, FSL_SOURCE_DIR, lib);
  if (system(cmd) != 0) fail_msg("the emulation does not compile: %s", cmd);
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("dlopen %s: %s", lib, dlerror());
  unlink(path);
  unlink(lib);
  return h;
}

#endif
