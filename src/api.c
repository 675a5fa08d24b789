/* api.c — the public model API: load, bind, compile (fission, then the
 * plan of a strategy and a backend's executable), run, inspect. */
#include "pipeline.h"
#include "backend/ref/interp.h"
#include "rewrite/rewrite.h"
#include "onnx/input_range.h"
#include <libgen.h>
#include <math.h>
#include <pthread.h>

#define MODEL_FILE_LIMIT ((size_t)4 << 30)

fsl_status fsl_strategy_from_name(const char *name, fsl_strategy *out) {
  if (!name || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_strategy_from_name: NULL argument");
  for (int s = 0; s < FSL_STRATEGY_COUNT; s++)
    if (!strcmp(name, fsl_strategy_name((fsl_strategy)s))) {
      *out = (fsl_strategy)s;
      return FSL_OK;
    }
  return fsl_errorf(FSL_ERR_ARG, "unknown strategy '%s' (expected unfused, opfuse, greedy or optimal)", name);
}

const char *fsl_version(void) { return FSL_VERSION; }

bool fsl_model_is_compiled(const fsl_model *m) {
  return m && m->compiled && (m->from_file || m->compiled_threads == fsl_model_threads());
}

fsl_status fsl_model_load_bytes(const void *buf, size_t len, const char *dir, fsl_model **out) {
  if (!buf || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_model_load_bytes: NULL argument");
  *out = NULL;
  if (fsl_aot_is_file(buf, len)) return fsl_aot_load(buf, len, out);
  fsl_model *m;
  FSL_TRY(fsl_model_from_onnx(buf, len, dir, &m));
  /* kept for fsl_model_save */
  if (!(m->src = malloc(len ? len : 1))) {
    fsl_model_free(m);
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  }
  memcpy(m->src, buf, len);
  *out = m;
  return FSL_OK;
}

fsl_status fsl_model_load(const char *path, fsl_model **out) {
  if (!path || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_model_load: NULL argument");
  *out = NULL;
  void *buf;
  size_t len;
  FSL_TRY(fsl_read_file(path, MODEL_FILE_LIMIT, &buf, &len));
  char *pcopy = strdup(path), *pkeep = strdup(path);
  fsl_status st = !pcopy || !pkeep                ? fsl_errorf(FSL_ERR_NOMEM, "out of memory")
                  : fsl_aot_is_file(buf, len) ? fsl_aot_load(buf, len, out)
                                                  : fsl_model_from_onnx(buf, len, dirname(pcopy), out);
  free(pcopy);
  free(buf);
  if (st != FSL_OK) {
    free(pkeep);
    return fsl_error_context(st, "%s", path);
  }
  /* an ONNX file is read again (and checked) by fsl_model_save */
  if ((*out)->src) free(pkeep);
  else (*out)->src_path = pkeep;
  return FSL_OK;
}

void fsl_model_free(fsl_model *m) {
  if (!m) return;
  fsl_model_drop_plan(m);
  free(m->src);
  free(m->src_path);
  free(m->frozen);
  free(m->rewrite_fired);
  fsl_graph_free(m->prim);
  fsl_graph_free(m->onnx);
  for (int i = 0; i < m->n_dims; i++) free(m->dims[i].name);
  free(m->dims);
  free(m);
}

static fsl_value *find_input(const fsl_model *m, const char *name, int *idx) {
  for (int i = 0; i < m->onnx->n_inputs; i++)
    if (!strcmp(m->onnx->inputs[i]->name, name)) {
      if (idx) *idx = i;
      return m->onnx->inputs[i];
    }
  return NULL;
}

static fsl_status no_input(const fsl_model *m, const char *name) {
  char list[1024] = "";
  size_t o = 0;
  for (int i = 0; i < m->onnx->n_inputs && o < sizeof list - 1; i++) {
    int w = snprintf(list + o, sizeof list - o, "%s'%s'", i ? ", " : "", m->onnx->inputs[i]->name);
    if (w > 0) o += (size_t)w;
  }
  return fsl_errorf(FSL_ERR_ARG, "the model has no input '%s' (inputs: %s)", name, list);
}


fsl_status fsl_model_bind_dim(fsl_model *m, const char *dim_param, int64_t size) {
  if (!m || !dim_param) return fsl_errorf(FSL_ERR_ARG, "fsl_model_bind_dim: NULL argument");
  if (size < 0) return fsl_errorf(FSL_ERR_ARG, "dimension '%s' bound to negative size %lld", dim_param, (long long)size);
  for (int i = 0; i < m->n_dims; i++)
    if (!strcmp(m->dims[i].name, dim_param)) {
      if (m->dims[i].size != size) fsl_model_invalidate(m);
      m->dims[i].size = size;
      return FSL_OK;
    }
  dim_binding *nd = realloc(m->dims, sizeof *nd * (size_t)(m->n_dims + 1));
  if (!nd) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  m->dims = nd;
  nd[m->n_dims].name = strdup(dim_param);
  nd[m->n_dims].size = size;
  if (!nd[m->n_dims].name) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  m->n_dims++;
  fsl_model_invalidate(m);
  return FSL_OK;
}

static fsl_status check_shape_agrees(const fsl_value *v, int rank, const int64_t *dims) {
  if (rank < 0 || rank > FSL_MAX_RANK)
    return fsl_errorf(FSL_ERR_SHAPE, "input '%s': rank %d is not supported", v->name, rank);
  if (v->rank >= 0 && v->rank != rank)
    return fsl_errorf(FSL_ERR_SHAPE, "input '%s' has rank %d in the model, got rank %d", v->name, v->rank, rank);
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return fsl_errorf(FSL_ERR_SHAPE, "input '%s': dimension %d is negative", v->name, i);
    if (v->rank >= 0 && v->dims[i] >= 0 && v->dims[i] != dims[i])
      return fsl_errorf(FSL_ERR_SHAPE, "input '%s': dimension %d is %lld in the model, got %lld", v->name, i,
                        (long long)v->dims[i], (long long)dims[i]);
  }
  if (fsl_numel(rank, dims) < 0)
    return fsl_errorf(FSL_ERR_SHAPE, "input '%s': the element count overflows", v->name);
  return FSL_OK;
}

fsl_status fsl_model_bind_shape(fsl_model *m, const char *input, int rank, const int64_t *dims) {
  if (!m || !input || (rank > 0 && !dims)) return fsl_errorf(FSL_ERR_ARG, "fsl_model_bind_shape: NULL argument");
  fsl_value *v = find_input(m, input, NULL);
  if (!v) return no_input(m, input);
  FSL_TRY(check_shape_agrees(v, rank, dims));
  bool same = v->rank == rank && (rank == 0 || !memcmp(v->dims, dims, sizeof(int64_t) * (size_t)rank));
  fsl_value_set_shape(v, rank, dims);
  if (!same) fsl_model_invalidate(m);
  return FSL_OK;
}

fsl_status fsl_model_freeze_input(fsl_model *m, const fsl_tensor *t) {
  if (!m || !t || (!t->data && fsl_tensor_numel(t) > 0)) return fsl_errorf(FSL_ERR_ARG, "fsl_model_freeze_input: NULL argument");
  int idx;
  fsl_value *v = find_input(m, t->name, &idx);
  if (!v) return no_input(m, t->name);
  if (v->dtype != t->dtype)
    return fsl_errorf(FSL_ERR_SHAPE, "input '%s' has dtype %s, got %s", v->name, fsl_dtype_name(v->dtype),
                      fsl_dtype_name(t->dtype));
  FSL_TRY(check_shape_agrees(v, t->rank, t->dims));
  int64_t nb = fsl_nbytes(t->dtype, t->rank, t->dims);
  void *data = fsl_arena_memdup(&m->onnx->arena, t->data, (size_t)(nb > 0 ? nb : 0));
  if (!data) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  fsl_value **fr = realloc(m->frozen, sizeof *fr * (size_t)(m->n_frozen + 1));
  if (!fr) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  m->frozen = fr;
  fr[m->n_frozen++] = v;
  fsl_value_set_shape(v, t->rank, t->dims);
  v->data = data;
  v->is_input = false;
  memmove(&m->onnx->inputs[idx], &m->onnx->inputs[idx + 1], sizeof(fsl_value *) * (size_t)(m->onnx->n_inputs - idx - 1));
  m->onnx->n_inputs--;
  fsl_model_invalidate(m);
  return FSL_OK;
}

/* ---- strategies, plans and backends ---- */

fsl_status fsl_model_set_strategy(fsl_model *m, fsl_strategy strategy) {
  if (!m) return fsl_errorf(FSL_ERR_ARG, "fsl_model_set_strategy: NULL model");
  if ((int)strategy < 0 || strategy >= FSL_STRATEGY_COUNT)
    return fsl_errorf(FSL_ERR_ARG, "unknown strategy %d (expected 0..%d: unfused, opfuse, greedy, optimal)",
                      (int)strategy, FSL_STRATEGY_COUNT - 1);
  if (m->strategy != (int)strategy) fsl_model_invalidate(m);
  m->strategy = (int)strategy;
  return FSL_OK;
}

/* The registered backends (src/backend/registry.c), the whole-graph
 * interpreter "ref" first. */
#define MAX_NAMES 16
static const char *g_names[MAX_NAMES + 1], *g_summaries[MAX_NAMES + 1];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void fill_names(void) {
  for (int i = 0; i < fsl_backend_count() && i < MAX_NAMES; i++) {
    g_names[i] = fsl_backend_at(i)->name;
    g_summaries[i] = fsl_backend_at(i)->summary;
  }
}

const char *const *fsl_backend_names(const char *const **summary) {
  pthread_once(&g_names_once, fill_names);
  if (summary) *summary = g_summaries;
  return g_names;
}

const char *fsl_backend_default(void) {
  const fsl_backend *b = fsl_backend_best();
  return b ? b->name : fsl_backend_interp.name;
}

fsl_status fsl_model_set_backend(fsl_model *m, const char *name) {
  if (!m || !name) return fsl_errorf(FSL_ERR_ARG, "fsl_model_set_backend: NULL argument");
  const char *const *names = fsl_backend_names(NULL);
  char list[256] = "";
  for (int i = 0; names[i]; i++) {
    if (!strcmp(name, names[i])) {
      if (strcmp(m->backend, name)) fsl_model_invalidate(m);
      snprintf(m->backend, sizeof m->backend, "%s", name);
      return FSL_OK;
    }
    size_t l = strlen(list);
    snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", names[i]);
  }
  return fsl_errorf(FSL_ERR_ARG, "unknown backend '%s' (expected one of: %s)", name, list);
}

fsl_status fsl_model_set_profile(fsl_model *m, bool on) {
  if (!m) return fsl_errorf(FSL_ERR_ARG, "fsl_model_set_profile: NULL model");
  if (m->profile != on) fsl_model_invalidate(m);
  m->profile = on;
  return FSL_OK;
}

fsl_status fsl_model_set_autotune(fsl_model *m, bool on) {
  if (!m) return fsl_errorf(FSL_ERR_ARG, "fsl_model_set_autotune: NULL model");
  if (m->autotune != on) fsl_model_invalidate(m);
  m->autotune = on;
  return FSL_OK;
}

fsl_status fsl_model_set_rewrite(fsl_model *m, fsl_rewrite_mode mode) {
  if (!m) return fsl_errorf(FSL_ERR_ARG, "fsl_model_set_rewrite: NULL model");
  if ((int)mode < 0 || mode >= FSL_REWRITE_MODE_COUNT) return fsl_errorf(FSL_ERR_ARG, "unknown rewrite mode %d", (int)mode);
  if (m->rewrite != (int)mode) fsl_model_invalidate(m);
  m->rewrite = (int)mode;
  return FSL_OK;
}

const char *fsl_rewrite_mode_name(fsl_rewrite_mode mode) {
  static const char *const names[FSL_REWRITE_MODE_COUNT] = {"off", "rules", "search"};
  return (int)mode >= 0 && mode < FSL_REWRITE_MODE_COUNT ? names[mode] : NULL;
}

int fsl_model_rewrite_fired(const fsl_model *m, int i, const char **rule) {
  const fsl_ruleset *rs = fsl_ruleset_builtin();
  if (!m || !m->prim || !m->rewrite_fired || !rs || i < 0) return -1;
  for (int k = 0; k < rs->n_rules + FSL_RW_N_CODED; k++) {
    if (!m->rewrite_fired[k] || i-- > 0) continue;
    if (rule) *rule = k < rs->n_rules ? rs->rules[k].name : fsl_rw_coded_name(k - rs->n_rules);
    return m->rewrite_fired[k];
  }
  return -1;
}

/* Whether compile builds a plan: with a strategy set, or for a backend
 * that runs one (backend.h, no_plan). */
static bool wants_plan(const fsl_model *m) {
  const fsl_backend *be = fsl_backend_find(m->backend);
  return m->strategy >= 0 || (be && !be->no_plan);
}

/* Plan of the chosen strategy over m->prim on the calibrated device, its
 * memory plan, and the chosen backend's executable. */
static fsl_status build_plan(fsl_model *m) {
  fsl_strategy s = m->strategy >= 0 ? (fsl_strategy)m->strategy : FSL_STRATEGY_OPTIMAL;
  const fsl_backend *be = fsl_backend_find(m->backend);
  /* the device the plan is costed for: the backend's own, else the host's */
  const fsl_backend *dev = be && be->calibrate ? be : fsl_backend_host();
  /* calibration failing is not fatal: the documented default device is used;
   * FSL_DEVICE=default asks for it (predictions then are the same on every
   * machine: the device the rewrite search costs graphs on) */
  const char *want = getenv("FSL_DEVICE");
  bool use_default = want && !strcmp(want, "default");
  if (use_default || !dev || dev->calibrate(&m->dev, fsl_model_threads(), false) != FSL_OK) {
    fsl_device_default(&m->dev);
    fsl_error_clear();
  }
  /* what the backend's linear kernels can take, calibrated or not (its caps, read once) */
  const fsl_backend_caps *caps = fsl_model_caps(m, be);
  m->dev.linear_views = caps->linear_views;
  m->dev.linear_int8 = caps->linear_int8;
  m->dev.winograd_3x3 = caps->winograd_3x3;
  fsl_profiler prof;
  fsl_plan_options popt = {.profiler = NULL};
  if (m->profile && dev && dev->profiler_init) {
    /* kernels are timed as the device's backend runs them */
    dev->profiler_init(&prof, fsl_model_threads());
    popt.profiler = &prof;
  }
  FSL_TRY(fsl_plan_build_opt(m->prim, s, &m->dev, &popt, &m->plan));
  m->has_plan = true;
  FSL_TRY(fsl_model_finish_plan(m, NULL, 0));
  /* the measured choice needs the backend's runs of the plans */
  return m->autotune && s == FSL_STRATEGY_OPTIMAL && !m->be->no_plan ? fsl_model_autotune(m, &popt) : FSL_OK;
}

fsl_status fsl_model_plan_info(const fsl_model *m, fsl_plan_info *info) {
  if (!m || !info) return fsl_errorf(FSL_ERR_ARG, "fsl_model_plan_info: NULL argument");
  if (!m->has_plan)
    return fsl_errorf(FSL_ERR_ARG, "the model has no plan: set a strategy (or a plan backend) and compile first");
  memset(info, 0, sizeof *info);
  const fsl_plan *p = &m->plan;
  info->strategy = p->strategy;
  snprintf(info->backend, sizeof info->backend, "%s", m->backend);
  snprintf(info->device, sizeof info->device, "%s", m->dev.name);
  info->device_bandwidth = m->dev.bandwidth;
  info->device_peak_flops = m->dev.peak_flops;
  info->device_launch_s = m->dev.launch_s;
  info->n_primitives = m->prim->n_nodes;
  info->n_kernels = p->kernels.n;
  int executed = 0;
  for (int i = 0; i < p->kernels.n; i++) {
    const fsl_kernel *k = p->kernels.k[i];
    if ((unsigned)k->kind < FSL_PLAN_KINDS) info->n_by_kind[k->kind]++;
    executed += k->n_nodes;
  }
  /* distinct nodes executed: recomputation is the excess */
  int max_id = 0;
  for (int i = 0; i < p->kernels.n; i++)
    for (int j = 0; j < p->kernels.k[i]->n_nodes; j++)
      if (p->kernels.k[i]->nodes[j]->id >= max_id) max_id = p->kernels.k[i]->nodes[j]->id + 1;
  bool *seen = calloc((size_t)max_id + 1, 1);
  if (!seen) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  int distinct = 0;
  for (int i = 0; i < p->kernels.n; i++)
    for (int j = 0; j < p->kernels.k[i]->n_nodes; j++) {
      int id = p->kernels.k[i]->nodes[j]->id;
      if (!seen[id]) distinct++;
      seen[id] = true;
    }
  free(seen);
  info->n_recomputed = executed - distinct;
  info->predicted_s = p->predicted_s;
  info->orchestrate_s = p->orchestrate_s;
  info->backend_s = m->backend_s;
  info->runs_plan = m->be && !m->be->no_plan;
  int64_t arena = -1; /* what the backend allocates, when it runs from an arena */
  if (m->be && m->exe && m->be->exe_info) {
    fsl_backend_exe_info ei;
    m->be->exe_info(m->exe, &ei);
    info->n_native = ei.n_native;
    info->n_fallback = ei.n_fallback;
    info->n_opaque = ei.n_opaque;
    info->n_library = ei.n_library;
    info->n_library_int8 = ei.n_library_int8;
    info->n_library_requant = ei.n_library_requant;
    snprintf(info->fallback_why, sizeof info->fallback_why, "%s", ei.fallback_why);
    arena = ei.arena_bytes;
  }
  info->rewrite = (fsl_rewrite_mode)m->rewrite;
  info->n_rewrites = m->n_rewrites;
  info->n_lut_tables = m->n_lut_tables;
  info->n_qdq_lifted = m->n_qdq_lifted;
  if (m->rewrite == FSL_REWRITE_SEARCH) {
    info->search_graphs = m->search_evals;
    info->search_regions_solved = m->search_regions_solved;
    info->search_regions_cached = m->search_regions_cached;
  }
  info->rewrite_s = m->rewrite_s;
  info->optimal = p->optimal;
  info->plan_hash = fsl_plan_hash(p);
  info->profiled = p->profiled;
  info->n_cost_cached = p->n_cost_cached;
  info->n_cost_measured = p->n_cost_measured;
  info->n_cost_analytic = p->n_cost_analytic;
  info->n_plan_measured = p->n_plan_measured;
  info->profile_s = p->profile_s;
  info->tuned = m->tune.tuned;
  info->tune_cached = m->tune.cached;
  info->tune_candidates = m->tune.n_candidates;
  info->tune_rounds = m->tune.rounds;
  info->tune_s = m->tune.seconds;
  for (int i = 0; i < FSL_STRATEGY_COUNT; i++) {
    info->tune_median_s[i] = m->tune.tuned ? m->tune.median_s[i] : NAN;
    info->tune_same_as[i] = m->tune.tuned ? m->tune.same_as[i] : -1;
  }
  info->peak_bytes = arena >= 0 ? arena : m->mem.peak_bytes;
  info->total_bytes = m->mem.total_bytes;
  return FSL_OK;
}

fsl_status fsl_model_write_plan_dot(const fsl_model *m, FILE *f) {
  if (!m || !f) return fsl_errorf(FSL_ERR_ARG, "fsl_model_write_plan_dot: NULL argument");
  if (!m->has_plan)
    return fsl_errorf(FSL_ERR_ARG, "the model has no plan: set a strategy (or a plan backend) and compile first");
  fsl_plan_print_dot(&m->plan, f);
  return FSL_OK;
}

fsl_status fsl_model_compile(fsl_model *m) {
  if (!m) return fsl_errorf(FSL_ERR_ARG, "fsl_model_compile: NULL model");
  if (fsl_model_is_compiled(m)) return FSL_OK;
  FSL_TRY(fsl_model_fission(m));
  fsl_status st = wants_plan(m) ? build_plan(m) : fsl_model_finish_plan(m, NULL, 0);
  if (st != FSL_OK) {
    fsl_model_invalidate(m);
    return st;
  }
  m->compiled = true;
  m->compiled_threads = fsl_model_threads();
  return FSL_OK;
}

int fsl_model_num_inputs(const fsl_model *m) { return m ? m->onnx->n_inputs : 0; }
int fsl_model_num_outputs(const fsl_model *m) { return m ? m->onnx->n_outputs : 0; }

static void describe(const fsl_value *v, const fsl_value *shape_from, fsl_tensor *info) {
  memset(info, 0, sizeof *info);
  snprintf(info->name, sizeof info->name, "%s", v->name);
  info->dtype = shape_from->dtype ? shape_from->dtype : v->dtype;
  info->rank = shape_from->rank;
  for (int i = 0; i < shape_from->rank && i < FSL_MAX_RANK; i++) info->dims[i] = shape_from->dims[i];
}

fsl_status fsl_model_input_info(const fsl_model *m, int i, fsl_tensor *info) {
  if (!m || !info || i < 0 || i >= m->onnx->n_inputs) return fsl_errorf(FSL_ERR_ARG, "input index %d out of range", i);
  const fsl_value *v = m->onnx->inputs[i];
  describe(v, m->prim ? m->prim->inputs[i] : v, info);
  return FSL_OK;
}

const char *fsl_model_input_dim_param(const fsl_model *m, int i, int d) {
  if (!m || i < 0 || i >= m->onnx->n_inputs) return NULL;
  const fsl_value *v = m->onnx->inputs[i];
  if (!v->dim_param || d < 0 || d >= v->rank) return NULL;
  return v->dim_param[d];
}

fsl_status fsl_model_input_int_range(const fsl_model *m, int i, int64_t *lo, int64_t *hi, const char **kind) {
  if (!m || !lo || !hi || i < 0 || i >= m->onnx->n_inputs)
    return fsl_errorf(FSL_ERR_ARG, "fsl_model_input_int_range: NULL argument or input %d out of range", i);
  int64_t len = 0;
  fsl_input_use use = fsl_onnx_input_use(m->onnx->inputs[i], &len);
  *lo = 0;
  *hi = use == FSL_INPUT_USE_INDEX ? len : use == FSL_INPUT_USE_MASK ? 2 : 10;
  if (kind) *kind = use == FSL_INPUT_USE_INDEX ? "index" : use == FSL_INPUT_USE_MASK ? "mask" : "other";
  return FSL_OK;
}

/* splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014): one stream per input. */
static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Element i of a random tensor: floats in [-1,1), ints in [lo, lo + span),
 * bools from the top bit. */
static void store_random(fsl_dtype dt, void *p, int64_t i, uint64_t r, int64_t lo, uint64_t span) {
  if (fsl_dtype_is_float(dt)) fsl_store_f64(dt, p, i, (double)(r >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  else if (dt == FSL_DT_BOOL) fsl_store_u64(dt, p, i, r >> 63);
  else fsl_store_i64(dt, p, i, lo + (int64_t)(r % span));
}

fsl_status fsl_model_random_input(const fsl_model *m, int i, uint64_t seed, fsl_tensor *out) {
  if (!out) return fsl_errorf(FSL_ERR_ARG, "fsl_model_random_input: NULL argument");
  FSL_TRY(fsl_model_input_info(m, i, out));
  int64_t lo = 0, hi = 10;
  if (fsl_model_input_int_range(m, i, &lo, &hi, NULL) != FSL_OK) fsl_error_clear();
  uint64_t span = hi > lo ? (uint64_t)(hi - lo) : 1;
  size_t es = fsl_dtype_size(out->dtype);
  int64_t n = fsl_tensor_numel(out);
  if (es == 0)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "input '%s': no random data for type %s", out->name,
                      fsl_dtype_name(out->dtype));
  if (n < 0 || (uint64_t)n > SIZE_MAX / es || !(out->data = malloc(n > 0 ? (size_t)n * es : 1)))
    return fsl_errorf(FSL_ERR_NOMEM, "input '%s': out of memory for random data", out->name);
  uint64_t s = seed * 0x100000001B3ULL + (uint64_t)i * 0x9E3779B97F4A7C15ULL + 1;
  bool nonzero = false;
  for (int64_t k = 0; k < n; k++) {
    store_random(out->dtype, out->data, k, splitmix64(&s), lo, span);
    nonzero = nonzero || fsl_load_f64(out->dtype, out->data, k) != 0;
  }
  if (n > 0 && !nonzero) store_random(out->dtype, out->data, 0, 1, lo, span); /* lo + 1 (or lo when span is 1) */
  return FSL_OK;
}

fsl_status fsl_model_output_info(const fsl_model *m, int i, fsl_tensor *info) {
  if (!m || !info || i < 0 || i >= m->onnx->n_outputs) return fsl_errorf(FSL_ERR_ARG, "output index %d out of range", i);
  const fsl_value *v = m->onnx->outputs[i];
  describe(v, m->prim ? m->prim->outputs[i] : v, info);
  return FSL_OK;
}

fsl_status fsl_model_run(fsl_model *m, const fsl_tensor *inputs, int n_inputs, fsl_tensor *outputs, int n_outputs) {
  if (!m || (n_inputs && !inputs) || !outputs) return fsl_errorf(FSL_ERR_ARG, "fsl_model_run: NULL argument");
  if (!m->prim || !m->be) return fsl_errorf(FSL_ERR_ARG, "fsl_model_run: the model is not compiled");
  const fsl_graph *g = m->prim;
  if (n_outputs != g->n_outputs)
    return fsl_errorf(FSL_ERR_ARG, "the model has %d outputs, %d requested", g->n_outputs, n_outputs);
  const void **in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  void **out = calloc((size_t)g->n_outputs + 1, sizeof *out);
  fsl_status st = FSL_OK;
  if (!in || !out) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  for (int i = 0; i < n_inputs; i++) {
    int idx;
    if (!find_input(m, inputs[i].name, &idx)) { st = no_input(m, inputs[i].name); goto done; }
    const fsl_value *v = g->inputs[idx];
    char a[256], b[256];
    if (inputs[i].dtype != v->dtype || inputs[i].rank != v->rank ||
        memcmp(inputs[i].dims, v->dims, sizeof(int64_t) * (size_t)v->rank)) {
      st = fsl_errorf(FSL_ERR_SHAPE, "input '%s' must be %s[%s], got %s[%s]", v->name, fsl_dtype_name(v->dtype),
                      fsl_shape_str(v->rank, v->dims, a, sizeof a), fsl_dtype_name(inputs[i].dtype),
                      fsl_shape_str(inputs[i].rank, inputs[i].dims, b, sizeof b));
      goto done;
    }
    if (!inputs[i].data && fsl_value_numel(v) > 0) { st = fsl_errorf(FSL_ERR_ARG, "input '%s' has no data", v->name); goto done; }
    in[idx] = inputs[i].data;
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (!in[i] && fsl_value_numel(g->inputs[i]) > 0) {
      st = fsl_errorf(FSL_ERR_ARG, "input '%s' is not given", g->inputs[i]->name);
      goto done;
    }
  st = m->be->run(m->exe, in, out);
  if (st != FSL_OK) goto done;
  for (int i = 0; i < g->n_outputs; i++) {
    describe(m->onnx->outputs[i], g->outputs[i], &outputs[i]);
    outputs[i].data = out[i];
  }
done:
  free(in);
  free(out);
  return st;
}

/* ---- inspection ---- */

static const fsl_graph *stage_graph(const fsl_model *m, fsl_stage stage) {
  return stage == FSL_STAGE_ONNX ? m->onnx : m->prim;
}

fsl_status fsl_model_write_graph(const fsl_model *m, fsl_stage stage, bool dot, FILE *f) {
  const fsl_graph *g = m ? stage_graph(m, stage) : NULL;
  if (!g) return fsl_errorf(FSL_ERR_ARG, "the graph after fission exists only after a successful compile");
  if (dot) fsl_graph_print_dot(g, f);
  else fsl_graph_print(g, f);
  return FSL_OK;
}

fsl_status fsl_model_op_histogram(const fsl_model *m, fsl_stage stage,
                                  void (*fn)(void *ctx, const char *op, const char *kind, int count), void *ctx) {
  const fsl_graph *g = m ? stage_graph(m, stage) : NULL;
  if (!g) return fsl_errorf(FSL_ERR_ARG, "the graph after fission exists only after a successful compile");
  int counts[FSL_OP_COUNT] = {0};
  int n_unknown = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i]->op == FSL_OP_NONE) n_unknown++;
    else counts[g->nodes[i]->op]++;
  }
  for (int op = 1; op < FSL_OP_COUNT; op++)
    if (counts[op]) fn(ctx, fsl_op_name((fsl_op)op), fsl_kind_name(fsl_op_get((fsl_op)op)->kind), counts[op]);
  /* unknown ops: one entry per distinct op_type */
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *n = g->nodes[i];
    if (n->op != FSL_OP_NONE) continue;
    bool seen = false;
    int c = 0;
    for (int j = 0; j < g->n_nodes; j++) {
      const fsl_node *o = g->nodes[j];
      if (o->op != FSL_OP_NONE || strcmp(o->op_type, n->op_type)) continue;
      if (j < i) { seen = true; break; }
      c++;
    }
    if (!seen) fn(ctx, n->op_type, "unsupported", c);
  }
  (void)n_unknown;
  return FSL_OK;
}

int fsl_model_num_opsets(const fsl_model *m) { return m ? m->onnx->n_opsets : 0; }

void fsl_model_opset(const fsl_model *m, int i, const char **domain, int64_t *version) {
  *domain = m->onnx->opsets[i].domain ? m->onnx->opsets[i].domain : "";
  *version = m->onnx->opsets[i].version;
}

int fsl_model_unsupported(const fsl_model *m,
                          void (*fn)(void *ctx, const char *op, const char *domain, int64_t opset, const char *node),
                          void *ctx) {
  int count = 0;
  for (int i = 0; m && i < m->onnx->n_nodes; i++) {
    const fsl_node *n = m->onnx->nodes[i];
    if (n->op != FSL_OP_NONE) continue;
    count++;
    if (fn) fn(ctx, n->op_type, n->domain ? n->domain : "", fsl_graph_opset(m->onnx, n->domain), n->name);
  }
  return count;
}
