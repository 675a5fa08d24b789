/*
 * launch.cc — the host side of cuda_emu.h: fsl_emu_launch runs a
 * generated function with `grid` blocks of `block` threads (blocks in
 * order, a POSIX thread per thread of a block) and reports misuse of a
 * shuffle (a member mask without this lane, a lane mask or width beyond
 * the block) in *bad.
 */
#include <pthread.h>
#include <string.h>

struct fsl_emu_dim3 {
  unsigned x, y, z;
};
thread_local fsl_emu_dim3 threadIdx, blockIdx;
fsl_emu_dim3 blockDim, gridDim;

typedef void (*fsl_emu_kernel)(const void *const *in, void *const *out, int *err);

static pthread_barrier_t bar;
static unsigned char xbuf[1024][8];
static int misuse;

extern "C" void fsl_emu_sync(void) { pthread_barrier_wait(&bar); }

extern "C" void fsl_emu_xor(const void *v, void *r, unsigned bytes, int lane_mask, unsigned members, int width) {
  unsigned t = threadIdx.x, lane = t % 32, partner = t ^ (unsigned)lane_mask;
  if (!(members >> lane & 1u) || width < 1 || width > 32 || (width & (width - 1)) || lane_mask >= width ||
      partner >= blockDim.x || bytes > 8)
    __atomic_store_n(&misuse, 1, __ATOMIC_SEQ_CST);
  memcpy(xbuf[t], v, bytes);
  pthread_barrier_wait(&bar);
  memcpy(r, xbuf[partner < 1024 ? partner : t], bytes);
  pthread_barrier_wait(&bar);
}

typedef struct arg {
  fsl_emu_kernel k;
  unsigned t, b;
  const void *const *in;
  void *const *out;
  int *err;
} arg;

static void *run_thread(void *p) {
  arg *a = (arg *)p;
  threadIdx = {a->t, 0, 0};
  blockIdx = {a->b, 0, 0};
  a->k(a->in, a->out, a->err);
  return NULL;
}

/* 0, or -1 when a thread cannot be started; *bad = 1 after a misused shuffle. */
extern "C" int fsl_emu_launch(fsl_emu_kernel k, unsigned grid, unsigned block, const void *const *in, void *const *out,
                              int *err, int *bad) {
  if (block < 1 || block > 1024) return -1;
  blockDim = {block, 1, 1};
  gridDim = {grid, 1, 1};
  misuse = 0;
  static pthread_t th[1024];
  static arg args[1024];
  int rc = 0;
  for (unsigned b = 0; b < grid && rc == 0; b++) {
    pthread_barrier_init(&bar, NULL, block);
    unsigned started = 0;
    for (unsigned t = 0; t < block; t++) {
      args[t] = arg{k, t, b, in, out, err};
      if (pthread_create(&th[t], NULL, run_thread, &args[t]) != 0) {
        rc = -1;
        break;
      }
      started++;
    }
    for (unsigned t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&bar);
  }
  *bad = misuse;
  return rc;
}
