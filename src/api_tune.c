/*
 * api_tune.c — the measured plan choice (fsl_model_set_autotune): the
 * optimal plan and the baselines' plans compiled by the backend, timed end
 * to end in interleaved rounds on the same fresh random inputs, the fastest
 * kept; the medians cached in the profile cache (table plan_time,
 * orchestrate/profcache.h).  docs/orchestration.md, "Measured plan choice".
 *
 * The solver minimises the plan's predicted cost, a sum of per-kernel
 * costs; what runs inside a plan also depends on what no per-kernel cost
 * sees (a layout kept between two oneDNN primitives, the caches a kernel
 * finds warm).  Timing the few final candidates end to end is cheap next to
 * compiling them, and bounds the damage of a wrong prediction: the kept
 * plan is never measured slower than a baseline's beyond the spread.
 */
#include "pipeline.h"
#include "orchestrate/profcache.h"

#include <math.h>
#include <unistd.h>

#define TUNE_WARMUP 2      /* rounds before timing: caches, page faults, lazy loads */
#define TUNE_MIN_ROUNDS 7  /* timed rounds at least ... */
#define TUNE_MAX_ROUNDS 31 /* ... and at most */
#define TUNE_TARGET_S 1.0  /* stop after the first round past this many seconds of timed runs */
#define TUNE_SEED 0x7475u  /* the random inputs of round r use seed TUNE_SEED + r */
#define TUNE_MARGIN 0.02   /* a baseline replaces the optimal plan only when its median is lower by more
                              than this fraction (less is within the noise of a shared machine) */

/* One candidate plan (a baseline's: the optimal plan stays in the model,
 * whose executable points at m->plan).  Heap-allocated so that its
 * executable's pointer to its plan stays valid. */
typedef struct candidate {
  bool live;
  fsl_plan plan;
  void *exe;
  uint64_t hash;
  double *times;
  int n_times;
} candidate;

/* What the times depend on besides the plans: the backend, its machine and
 * libraries, the thread count, the fissile version. */
static uint64_t device_key(const fsl_model *m, char *desc, size_t len) {
  char fp[512] = "";
  if (m->be->fingerprint) m->be->fingerprint(fp, sizeof fp);
  int32_t threads[2] = {fsl_model_threads(), (int32_t)sysconf(_SC_NPROCESSORS_ONLN)};
  snprintf(desc, len, "autotune: backend %s, %s, threads %d of %d, fissile %s", m->be->name, fp, threads[0],
           threads[1], fsl_version());
  return fsl_hash(FSL_HASH_INIT, desc, strlen(desc));
}

static void warn(const char *what) {
  const char *e = fsl_last_error();
  fprintf(stderr, "fissile: warning: autotune: %s; %s\n", e && *e ? e : "error", what);
  fsl_error_clear();
}

/* Builds and compiles strategy s's plan into *c (c->live false when it
 * cannot be: a baseline that fails is left out of the choice). */
static void build_candidate(fsl_model *m, fsl_strategy s, const fsl_plan_options *popt, candidate *c) {
  if (fsl_plan_build_opt(m->prim, s, &m->dev, popt, &c->plan) != FSL_OK) {
    fsl_error_clear();
    return;
  }
  fsl_compile_ctx ctx = {.caps = *fsl_model_caps(m, m->be), .mem = NULL}; /* the backend plans its own arena */
  if (m->be->compile(&c->plan, &ctx, &c->exe) != FSL_OK) {
    fsl_error_clear();
    fsl_plan_free(&c->plan);
    c->exe = NULL;
    return;
  }
  c->hash = fsl_plan_hash(&c->plan);
  c->live = true;
}

static void free_candidate(const fsl_model *m, candidate *c) {
  if (!c) return;
  if (c->live) {
    if (c->exe) m->be->free_exe(c->exe);
    fsl_plan_free(&c->plan);
  }
  free(c->times);
  free(c);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One run of exe on the round's inputs; its outputs are freed. */
static fsl_status run_once(const fsl_model *m, void *exe, const void *const *in, double *secs) {
  int n_out = m->prim->n_outputs;
  void **out = calloc((size_t)n_out + 1, sizeof *out);
  if (!out) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  double t0 = fsl_now_s();
  fsl_status st = m->be->run(exe, in, out);
  *secs = fsl_now_s() - t0;
  for (int i = 0; st == FSL_OK && i < n_out; i++) free(out[i]);
  free(out);
  return st;
}

/* Interleaved rounds over the executables exes[0..n): each round draws
 * fresh inputs and runs every executable once on them, starting with a
 * different one each round; times[i] receives executable i's timed runs,
 * *rounds how many there are. */
static fsl_status measure(fsl_model *m, void *const *exes, int n, double **times, int *rounds) {
  int n_in = m->prim->n_inputs;
  fsl_tensor *t = calloc((size_t)n_in + 1, sizeof *t);
  const void **in = calloc((size_t)n_in + 1, sizeof *in);
  if (!t || !in) {
    free(t);
    free(in);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  fsl_status st = FSL_OK;
  int timed = 0;
  double spent = 0, t0 = fsl_now_s(), last = t0;
  char detail[96];
  snprintf(detail, sizeof detail, "timed rounds of %d candidate plans run end to end", n);
  fsl_progress_emit("autotune", detail, 0, 0, 0, false);
  for (int r = 0; st == FSL_OK && timed < TUNE_MAX_ROUNDS; r++) {
    if (r >= TUNE_WARMUP + TUNE_MIN_ROUNDS && spent >= TUNE_TARGET_S) break;
    for (int i = 0; i < n_in && st == FSL_OK; i++) {
      fsl_tensor_free(&t[i]);
      st = fsl_model_random_input(m, i, TUNE_SEED + (uint64_t)r, &t[i]);
      in[i] = t[i].data;
    }
    for (int j = 0; j < n && st == FSL_OK; j++) {
      int i = (j + r) % n;
      double secs = 0;
      st = run_once(m, exes[i], in, &secs);
      if (st == FSL_OK && r >= TUNE_WARMUP) {
        times[i][timed] = secs;
        spent += secs;
      }
    }
    if (st == FSL_OK && r >= TUNE_WARMUP) timed++;
    if (fsl_now_s() - last >= 1.0) { /* about once a second */
      last = fsl_now_s();
      fsl_progress_emit("autotune", detail, timed, 0, last - t0, false);
    }
  }
  fsl_progress_emit("autotune", detail, timed, 0, fsl_now_s() - t0, true);
  for (int i = 0; i < n_in; i++) fsl_tensor_free(&t[i]);
  free(t);
  free(in);
  *rounds = timed;
  return st;
}

/* Times of the distinct candidates: from the cache, else measured (and
 * stored).  slot[i] is candidate i's strategy; med[slot] receives medians. */
static fsl_status choose(fsl_model *m, candidate **cand, uint64_t choice_key, double *med) {
  char desc[768];
  uint64_t dev = device_key(m, desc, sizeof desc);
  fsl_profcache *pc = NULL;
  if (fsl_profcache_open(NULL, &pc) != FSL_OK) warn("the choice is made for this compile only");
  bool found = false;
  if (pc && fsl_profcache_get_plans(pc, dev, choice_key, FSL_STRATEGY_COUNT, med, &found) != FSL_OK) {
    warn("measuring the candidate plans again");
    found = false;
  }
  bool complete = found;
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++)
    if (cand[s] && isnan(med[s])) complete = false;
  if (complete) {
    m->tune.cached = true;
    fsl_profcache_close(pc);
    return FSL_OK;
  }
  void *exes[FSL_STRATEGY_COUNT];
  double *times[FSL_STRATEGY_COUNT];
  int slot[FSL_STRATEGY_COUNT], n = 0;
  fsl_status st = FSL_OK;
  for (int s = 0; s < FSL_STRATEGY_COUNT && st == FSL_OK; s++) {
    med[s] = NAN;
    if (!cand[s]) continue;
    if (!(cand[s]->times = calloc(TUNE_MAX_ROUNDS, sizeof(double)))) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    exes[n] = s == FSL_STRATEGY_OPTIMAL ? m->exe : cand[s]->exe;
    times[n] = cand[s]->times;
    slot[n++] = s;
  }
  int rounds = 0;
  if (st == FSL_OK) st = measure(m, exes, n, times, &rounds);
  if (st != FSL_OK) {
    fsl_profcache_close(pc);
    return st;
  }
  for (int i = 0; i < n; i++) med[slot[i]] = median(times[i], rounds);
  m->tune.rounds = rounds;
  if (pc && fsl_profcache_put_plans(pc, dev, desc, choice_key, FSL_STRATEGY_COUNT, med) != FSL_OK)
    warn("the choice is made for this compile only");
  fsl_profcache_close(pc);
  return FSL_OK;
}

fsl_status fsl_model_autotune(fsl_model *m, const fsl_plan_options *popt) {
  double t0 = fsl_now_s();
  candidate *cand[FSL_STRATEGY_COUNT] = {NULL};
  fsl_tune_result *r = &m->tune;
  *r = (fsl_tune_result){.tuned = false};
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++) r->same_as[s] = -1;
  /* the optimal plan (already compiled into m) first, then the baselines;
   * a plan identical to an earlier one stands in for it */
  uint64_t key = fsl_hash(FSL_HASH_INIT, &(uint64_t){fsl_model_graph_hash(m->prim)}, sizeof(uint64_t));
  uint64_t opt_hash = fsl_plan_hash(&m->plan);
  fsl_status st = FSL_OK;
  if (!(cand[FSL_STRATEGY_OPTIMAL] = calloc(1, sizeof(candidate)))) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  static const fsl_strategy order[] = {FSL_STRATEGY_GREEDY, FSL_STRATEGY_OPFUSE, FSL_STRATEGY_UNFUSED};
  for (int o = 0; o < (int)(sizeof order / sizeof *order) && st == FSL_OK; o++) {
    fsl_strategy s = order[o];
    candidate *c = calloc(1, sizeof *c);
    if (!c) {
      st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
      break;
    }
    build_candidate(m, s, popt, c);
    int same = !c->live ? -2 : c->hash == opt_hash ? FSL_STRATEGY_OPTIMAL : -1;
    for (int p = 0; p < o && same == -1; p++)
      if (cand[order[p]] && cand[order[p]]->hash == c->hash) same = (int)order[p];
    if (same != -1) {
      r->same_as[s] = same >= 0 ? same : -1;
      free_candidate(m, c);
      continue;
    }
    cand[s] = c;
  }
  for (int s = 0; s < FSL_STRATEGY_COUNT && st == FSL_OK; s++) {
    uint64_t h[2] = {(uint64_t)s, !cand[s] ? 0 : s == FSL_STRATEGY_OPTIMAL ? opt_hash : cand[s]->hash};
    key = fsl_hash(key, h, sizeof h);
    r->n_candidates += cand[s] != NULL;
  }
  double med[FSL_STRATEGY_COUNT];
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++) r->median_s[s] = NAN;
  r->tuned = st == FSL_OK && r->n_candidates == 1; /* every strategy made the optimal plan: nothing to time */
  if (st == FSL_OK && r->n_candidates > 1 && (st = choose(m, cand, key, med)) != FSL_OK) {
    /* a run failed (data the model cannot take, a backend error): keep
     * the optimal plan, say why */
    warn("keeping the optimal plan");
    st = FSL_OK;
    r->n_candidates = 0;
  } else if (st == FSL_OK && r->n_candidates > 1) {
    int best = FSL_STRATEGY_OPTIMAL;
    for (int s = 0; s < FSL_STRATEGY_COUNT; s++)
      if (cand[s] && med[s] < med[best]) best = s;
    if (med[best] * (1 + TUNE_MARGIN) >= med[FSL_STRATEGY_OPTIMAL]) best = FSL_STRATEGY_OPTIMAL;
    for (int s = 0; s < FSL_STRATEGY_COUNT; s++)
      if (cand[s]) r->median_s[s] = med[s];
    r->tuned = true;
    if (best != FSL_STRATEGY_OPTIMAL) {
      /* the baseline's plan moves into the model and is compiled there
       * (its executable points at the candidate's plan): the backend's
       * compile cache makes that a load */
      candidate *c = cand[best];
      m->be->free_exe(c->exe);
      c->exe = NULL;
      m->be->free_exe(m->exe);
      m->exe = NULL;
      fsl_memplan_free(&m->mem);
      fsl_plan_free(&m->plan);
      m->plan = c->plan;
      c->live = false;
      st = fsl_model_finish_plan(m, NULL, 0);
    }
  }
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++) free_candidate(m, cand[s]);
  r->seconds = fsl_now_s() - t0;
  return st;
}
