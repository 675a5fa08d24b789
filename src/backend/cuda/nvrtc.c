/*
 * nvrtc.c — CUDA C to CUBIN with NVRTC, and the resources of every kernel
 * (emit.h): ptxas's -v report from NVRTC's log, constant banks from the
 * CUBIN's ELF section headers.
 */
#include "backend/cuda/emit.h"

#include <ctype.h>
#include <elf.h>
#include <nvrtc.h>

#define LOG_SHOWN 4096 /* bytes of NVRTC's log an error message shows */

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (NVRTC)"); }

static bool starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* The entry `name` of b, added (usage unknown: -1) when absent; NULL on OOM. */
static fsl_cuda_kernel_usage *entry(fsl_cuda_build *b, int *cap, const char *name, size_t len) {
  for (int i = 0; i < b->n; i++)
    if (strlen(b->k[i].name) == len && !strncmp(b->k[i].name, name, len)) return &b->k[i];
  if (len >= sizeof b->k->name || !fsl_grow((void **)&b->k, cap, b->n + 1, sizeof *b->k)) return NULL;
  fsl_cuda_kernel_usage *k = &b->k[b->n++];
  memset(k, 0, sizeof *k);
  memcpy(k->name, name, len);
  k->u = (fsl_cuda_usage){.registers = -1, .barriers = -1, .stack_bytes = -1, .spill_store_bytes = -1,
                          .spill_load_bytes = -1, .shared_bytes = -1, .const_bytes = 0};
  return k;
}

/* The name between the first pair of quotes after `after` in line, or NULL. */
static const char *quoted(const char *line, const char *after, size_t *len) {
  const char *p = strstr(line, after);
  const char *q = p ? strchr(p, '\'') : NULL;
  const char *r = q ? strchr(q + 1, '\'') : NULL;
  if (!r) return NULL;
  *len = (size_t)(r - q - 1);
  return q + 1;
}

/* The integer right before `word` in the comma-separated piece list of
 * line ("..., 1024 bytes smem"), or -1. */
static long long before(const char *line, const char *word) {
  const char *w = strstr(line, word);
  if (!w) return -1;
  const char *d = w;
  while (d > line && d[-1] == ' ') d--;
  const char *e = d;
  while (d > line && isdigit((unsigned char)d[-1])) d--;
  if (d == e) return -1;
  return strtoll(d, NULL, 10);
}

/*
 * Reads ptxas's -v lines of log into b; false (and *bad the first other
 * line) when the log holds anything else: a warning of the front end or
 * of ptxas.  The lines (CUDA 12-13):
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
 *   ptxas info    : Function properties for NAME
 *   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem
 *   ptxas info    : Compile time = 2.229 ms      (and "0 bytes gmem")
 */
static fsl_status parse_log(char *log, fsl_cuda_build *b, int *cap, const char **bad) {
  fsl_cuda_kernel_usage *cur = NULL;
  *bad = NULL;
  for (char *line = log, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    size_t len;
    const char *name;
    if (!*line || !strcmp(line, "\r")) continue;
    if (starts(line, "ptxas info    : Compiling entry function") && (name = quoted(line, "function", &len))) {
      if (!(cur = entry(b, cap, name, len))) return oom();
    } else if (starts(line, "ptxas info    : Function properties for ")) {
      /* a non-entry function (not inlined) has properties but no entry line */
      name = line + strlen("ptxas info    : Function properties for ");
      cur = NULL;
      for (int i = 0; i < b->n; i++)
        if (!strcmp(b->k[i].name, name)) cur = &b->k[i];
    } else if (starts(line, "ptxas         .")) {
      if (cur) {
        cur->u.stack_bytes = before(line, "bytes stack frame");
        cur->u.spill_store_bytes = before(line, "bytes spill stores");
        cur->u.spill_load_bytes = before(line, "bytes spill loads");
      }
    } else if (starts(line, "ptxas info    : Used ")) {
      if (cur) {
        cur->u.registers = (int)before(line, "registers");
        long long bar = before(line, "barriers");
        cur->u.barriers = bar < 0 ? 0 : (int)bar;
        long long smem = before(line, "bytes smem");
        cur->u.shared_bytes = smem < 0 ? 0 : smem;
      }
    } else if (!starts(line, "ptxas info    : ") || strstr(line, "arning")) {
      if (!*bad) *bad = line;
    }
  }
  return FSL_OK;
}

/* Adds the sizes of the CUBIN's .nv.constant<N>.<function> sections to the
 * functions' const_bytes; false when the image is not a well-formed ELF64
 * (every header, offset and name checked against its size). */
static bool read_cubin(const unsigned char *img, size_t n, fsl_cuda_build *b) {
  Elf64_Ehdr eh;
  if (n < sizeof eh) return false;
  memcpy(&eh, img, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > n || eh.e_shnum > (n - eh.e_shoff) / sizeof(Elf64_Shdr) ||
      eh.e_shstrndx >= eh.e_shnum)
    return false;
  Elf64_Shdr strs;
  memcpy(&strs, img + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof strs, sizeof strs);
  if (strs.sh_offset > n || strs.sh_size > n - strs.sh_offset) return false;
  const char *names = (const char *)img + strs.sh_offset;
  for (int i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, img + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
    if (sh.sh_name >= strs.sh_size || !memchr(names + sh.sh_name, 0, strs.sh_size - sh.sh_name)) return false;
    const char *nm = names + sh.sh_name;
    if (!starts(nm, ".nv.constant")) continue;
    const char *p = nm + strlen(".nv.constant");
    while (isdigit((unsigned char)*p)) p++;
    if (*p != '.' || p == nm + strlen(".nv.constant")) continue; /* a bank of the module, not a function's */
    for (int j = 0; j < b->n; j++)
      if (!strcmp(b->k[j].name, p + 1)) b->k[j].u.const_bytes += (int64_t)sh.sh_size;
  }
  return true;
}

static bool valid_arch(const char *arch) {
  if (!starts(arch, "sm_") || !isdigit((unsigned char)arch[3]) || strlen(arch) > 12) return false;
  const char *p = arch + 3;
  while (isdigit((unsigned char)*p)) p++;
  return !*p || (islower((unsigned char)*p) && !p[1]);
}

/* NVRTC's log (malloc'd, "" when empty), or NULL on OOM. */
static char *program_log(nvrtcProgram prog) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n == 0) n = 1;
  char *log = calloc(n + 1, 1);
  if (log && n > 1 && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS) log[0] = 0;
  return log;
}

fsl_status fsl_cuda_compile(const char *src, const char *arch, fsl_cuda_build *out) {
  if (!src || !arch || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_cuda_compile: NULL argument");
  memset(out, 0, sizeof *out);
  if (!valid_arch(arch))
    return fsl_errorf(FSL_ERR_ARG, "CUDA architecture '%s': expected a real one such as sm_90 or sm_80", arch);
  double t0 = fsl_now_s();
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, src, "fissile.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) return fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s): %s", arch, nvrtcGetErrorString(r));
  char opt_arch[64];
  snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
  /* -v: ptxas's resource report; error numbers make a warning easy to look
   * up.  Every warning is an error but #177 ("declared but never
   * referenced"): the generator declares every coordinate of an index
   * decomposition and the prelude every helper; the unused ones cost
   * nothing (the compiler drops them). */
  const char *opts[] = {opt_arch,         "--std=c++17", "-default-device", "--ptxas-options=-v", "--display-error-number",
                        "--diag-suppress=177"};
  r = nvrtcCompileProgram(prog, (int)FSL_ARRAY_LEN(opts), opts);
  char *log = program_log(prog);
  fsl_status st = log ? FSL_OK : oom();
  if (st == FSL_OK && r != NVRTC_SUCCESS)
    st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s) rejected the generated source: %s\n%.*s", arch,
                    nvrtcGetErrorString(r), LOG_SHOWN, log);
  const char *bad = NULL;
  int cap = 0;
  if (st == FSL_OK) {
    char *copy = strdup(log);
    st = copy ? parse_log(copy, out, &cap, &bad) : oom();
    if (st == FSL_OK && bad)
      st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s) warned about the generated source (warnings are errors): %s\n%.*s",
                      arch, bad, LOG_SHOWN, log);
    free(copy);
  }
  size_t n = 0;
  if (st == FSL_OK && (nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || n == 0))
    st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s): no CUBIN", arch);
  if (st == FSL_OK && !(out->cubin = malloc(n))) st = oom();
  if (st == FSL_OK && nvrtcGetCUBIN(prog, out->cubin) != NVRTC_SUCCESS)
    st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s): cannot read the CUBIN", arch);
  if (st == FSL_OK) out->cubin_bytes = n;
  if (st == FSL_OK && !read_cubin(out->cubin, n, out))
    st = fsl_errorf(FSL_ERR_RUNTIME, "NVRTC (%s): the CUBIN is not a well-formed ELF image", arch);
  free(log);
  nvrtcDestroyProgram(&prog);
  out->compile_s = fsl_now_s() - t0;
  return st;
}

void fsl_cuda_build_free(fsl_cuda_build *b) {
  if (!b) return;
  free(b->cubin);
  free(b->k);
  memset(b, 0, sizeof *b);
}

const fsl_cuda_usage *fsl_cuda_build_find(const fsl_cuda_build *b, const char *name) {
  for (int i = 0; b && name && i < b->n; i++)
    if (!strcmp(b->k[i].name, name)) return &b->k[i].u;
  return NULL;
}
