/*
 * isa.c — the CPU backend's target ISA (isa.h).
 */
#include "backend/cpu/isa.h"

#include <pthread.h>
#include <strings.h>

#include "backend/cpu/dnnl_api.h"

typedef struct isa_row {
  const char *name, *march;
  dnnl_cpu_isa_t dnnl;
  bool (*have)(void);
} isa_row;

static bool have_any(void) { return true; }

static bool have_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static bool have_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && have_avx2();
}

static const isa_row k_isas[] = {
    {"native", "-march=native", FSL_CPU_ISA_ALL, have_any},
    {"avx2", "-march=haswell", dnnl_cpu_isa_avx2, have_avx2},
    {"avx512", "-march=skylake-avx512", dnnl_cpu_isa_avx512_core, have_avx512},
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const isa_row *g_row = &k_isas[0];
static fsl_status g_status = FSL_OK;
static char g_msg[256];

static void resolve(void) {
  const char *v = getenv("FSL_CPU_ISA");
  if (!v || !*v) return;
  const isa_row *r = NULL;
  for (size_t i = 0; i < FSL_ARRAY_LEN(k_isas); i++)
    if (!strcasecmp(v, k_isas[i].name)) r = &k_isas[i];
  if (!r) {
    g_status = FSL_ERR_ARG;
    snprintf(g_msg, sizeof g_msg, "FSL_CPU_ISA='%.64s' is not an ISA fissile targets (native, avx2, avx512)", v);
    return;
  }
  if (!r->have()) {
    g_status = FSL_ERR_UNSUPPORTED;
    snprintf(g_msg, sizeof g_msg, "FSL_CPU_ISA=%s: this CPU does not have %s; generated code would not run", r->name,
             r->name);
    return;
  }
  if (r->dnnl != FSL_CPU_ISA_ALL) {
    dnnl_status_t ds = dnnl_set_max_cpu_isa(r->dnnl);
    if (ds != dnnl_success) {
      g_status = FSL_ERR_UNSUPPORTED;
      snprintf(g_msg, sizeof g_msg, "FSL_CPU_ISA=%s: oneDNN refused the ISA limit (status %d; it must be set before "
               "oneDNN's first primitive)", r->name, (int)ds);
      return;
    }
  }
  g_row = r;
}

fsl_status fsl_cpu_isa_get(fsl_cpu_isa *out) {
  pthread_once(&g_once, resolve);
  if (out) {
    out->name = g_row->name;
    out->march = g_row->march;
  }
  if (g_status != FSL_OK) return fsl_errorf(g_status, "%s", g_msg);
  return FSL_OK;
}

void fsl_cpu_machine(char *model, size_t len, uint64_t *flags_hash) {
  if (len) model[0] = 0;
  *flags_hash = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char ln[8192];
  bool have_model = false, have_flags = false;
  while (!(have_model && have_flags) && fgets(ln, sizeof ln, f)) {
    char *colon = strchr(ln, ':');
    if (!colon) continue;
    char *v = colon + 1 + (colon[1] == ' ');
    v[strcspn(v, "\n")] = 0;
    if (!have_model && !strncmp(ln, "model name", 10)) {
      snprintf(model, len, "%s", v);
      have_model = true;
    } else if (!have_flags && !strncmp(ln, "flags", 5)) {
      *flags_hash = fsl_hash(FSL_HASH_INIT, v, strlen(v));
      have_flags = true;
    }
  }
  fclose(f);
}

void fsl_cpu_fingerprint(char *buf, size_t len) {
  char model[160];
  uint64_t flags;
  fsl_cpu_machine(model, sizeof model, &flags);
  fsl_cpu_isa isa;
  fsl_cpu_isa_get(&isa);
  fsl_error_clear();
  const dnnl_version_t *dv = dnnl_version();
  snprintf(buf, len, "%s | cpu flags %016llx | isa %s | oneDNN %d.%d.%d", model[0] ? model : "unknown cpu",
           (unsigned long long)flags, isa.name, dv->major, dv->minor, dv->patch);
}
