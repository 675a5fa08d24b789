/*
 * hide_avx512.c — an LD_PRELOAD library that makes a process (and the
 * processes it starts) see an AVX2-only x86-64 CPU on an AVX-512 machine, so
 * that ONNX Runtime and numpy (which probe when imported) pick the AVX2 code
 * they would run on an AVX2-only machine (issue 9: compare fissile and ORT with both limited to
 * AVX2; ORT has no switch of its own).
 *
 * How: Linux's CPUID faulting (arch_prctl(ARCH_SET_CPUID, 0), kernel
 * Documentation/arch/x86/cpuid-faulting; the CPU or hypervisor must offer it,
 * /proc/cpuinfo flag `cpuid_fault`) turns every CPUID instruction of the
 * process into a SIGSEGV.  The handler runs the real CPUID with faulting
 * briefly off, clears the AVX-512, AMX and AVX10 feature bits (Intel SDM
 * vol. 2A, CPUID leaf 07H sub-leaves 0 and 1; leaf 0DH's XCR0 mask), and steps
 * over the instruction.  The setting is per thread, inherited by new threads
 * and reset by execve: the constructor sets it again in every process that
 * inherits LD_PRELOAD.  XGETBV cannot be trapped, but both libraries named
 * above require the CPUID bit as well as the XCR0 state.
 *
 * What probes CPUID before the constructor runs is not limited: glibc's own
 * dispatch, and the constructors of libraries the program links (the
 * order of ld.so's initialisers decides; OpenBLAS, linked through CBC's
 * LAPACK, saw AVX-512 under it).  ORT and numpy probe when imported, after.
 *
 * A process that installs its own SIGSEGV handler afterwards (GCC's cc1 does,
 * to report internal errors) loses the emulation: its next CPUID crashes it.
 * bench.py therefore keeps the library out of fissile's processes, which
 * FSL_CPU_ISA=avx2 limits instead.
 *
 * Where CPUID faulting is missing the constructor prints why and exits with
 * status 3: a benchmark that believed it was limited must not run unlimited.
 * FSL_HIDE_AVX512_COUNT=1 prints the number of CPUIDs emulated at exit.
 *
 * Build: cc -O2 -shared -fPIC -o hide_avx512.so hide_avx512.c
 * (bench/bench.py --hide-avx512 builds and uses it).
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define BIT(n) (1u << (n))

static volatile unsigned long g_emulated;
static struct sigaction g_prev;

static int cpuid_faulting(int on) { return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, on ? 0ul : 1ul); }

/* The feature bits an AVX2-only CPU (Haswell .. Alder Lake, Zen 1-3) lacks. */
static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  enum { A, B, C, D };
  if (leaf == 7 && sub == 0) {
    /* EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31 */
    r[B] &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
    /* ECX: VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14 */
    r[C] &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
    /* EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, FP16 23, AMX-TILE 24, AMX-INT8 25 */
    r[D] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
  } else if (leaf == 7 && sub == 1) {
    r[A] &= ~BIT(5);  /* AVX512_BF16 */
    r[D] &= ~BIT(19); /* AVX10 */
  } else if (leaf == 0xd && sub == 0) {
    r[A] &= ~(BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18)); /* opmask, ZMM_Hi256, Hi16_ZMM, XTILECFG, XTILEDATA */
  }
}

static void on_segv(int sig, siginfo_t *si, void *uctx) {
  ucontext_t *uc = uctx;
  greg_t *g = uc->uc_mcontext.gregs;
  const unsigned char *ip = (const unsigned char *)g[REG_RIP];
  /* a CPUID fault is SIGSEGV from the kernel (SI_KERNEL) at a 0F A2 */
  if (si->si_code != SI_KERNEL || ip[0] != 0x0f || ip[1] != 0xa2) {
    if (g_prev.sa_flags & SA_SIGINFO && g_prev.sa_sigaction) {
      g_prev.sa_sigaction(sig, si, uctx);
    } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
      g_prev.sa_handler(sig);
    } else {
      signal(SIGSEGV, SIG_DFL); /* returning re-runs the faulting instruction: a normal crash */
    }
    return;
  }
  uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX], r[4];
  cpuid_faulting(0);
  __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
  cpuid_faulting(1);
  mask(leaf, sub, r);
  g[REG_RAX] = r[0]; /* CPUID zeroes the upper halves, as these stores do */
  g[REG_RBX] = r[1];
  g[REG_RCX] = r[2];
  g[REG_RDX] = r[3];
  g[REG_RIP] += 2;
  g_emulated++;
}

static void report(void) {
  char line[64];
  int n = snprintf(line, sizeof line, "hide_avx512: %lu CPUID emulated in pid %ld\n", g_emulated, (long)getpid());
  if (n > 0 && write(2, line, (size_t)n) < 0) return;
}

__attribute__((constructor)) static void hide_avx512_init(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &g_prev) != 0 || cpuid_faulting(1) != 0) {
    fprintf(stderr, "hide_avx512: CPUID faulting is not available here (arch_prctl ARCH_SET_CPUID failed; "
                    "/proc/cpuinfo needs the cpuid_fault flag), so AVX-512 cannot be hidden\n");
    _exit(3);
  }
  const char *c = getenv("FSL_HIDE_AVX512_COUNT");
  if (c && *c == '1') atexit(report);
}
