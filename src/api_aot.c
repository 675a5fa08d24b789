/*
 * api_aot.c — ahead-of-time compiled model files (.fsl): fsl_model_save
 * writes a compiled model, fsl_model_load (and _bytes) reads one back and
 * runs it without orchestrating again and without a C compiler.
 * Format and design: docs/aot.md.
 *
 *   magic        8 bytes  "\x89FSL\r\n\x1a\n" (PNG-style: catches text-mode
 *                         transfers and truncation at the first bytes)
 *   u32          format version (FSL_AOT_FORMAT)
 *   u32          number of sections, then each section:
 *   u32 tag, u64 length, the section's bytes
 *
 * Sections (each exactly once; all integers little-endian, strings a u32
 * length and the bytes):
 *   VERSION  the fissile version that wrote the file
 *   BACKEND  the backend's name and its fingerprint (backend.h)
 *   ONNX     the source model's bytes (graph and initializers)
 *   CONSTS   inputs frozen to constants: name, dtype, rank, dims, bytes
 *   SHAPES   every input's bound shape: name, rank, dims
 *   PLAN     strategy, flags (bit 0 optimal, 1 profiled, 2-3 the rewrite
 *            mode), predicted and orchestration seconds, the rewrite
 *            search's cost evaluations (u32) and alpha (f64), a hash of
 *            the primitive graph, and each kernel: kind, cost, the
 *            positions of its primitives in the primitive graph
 *   EXE      the backend's exported executable (its compiled kernels)
 *
 * Loading re-imports the ONNX bytes and runs fission (deterministic: the
 * same primitive graph, checked against the hash; a rewrite search is
 * replayed with the file's alpha and number of evaluations and no time
 * limit, so neither $FSL_REWRITE_ALPHA nor a slower machine changes it), rebuilds the kernels
 * from their primitives and verifies the plan, and lets the backend rebuild
 * its executable from EXE (the CPU backend checks that the code it would
 * generate hashes as the code the object was built from, and loads the
 * object from memory).  Every length is checked against what is left of
 * the file before it is used.
 */
#include "pipeline.h"
#include "core/bytes.h"

#define FSL_AOT_FORMAT 3u /* 2: the rewrite search's evaluations and alpha; 3: the search costs optimal plans by region */
static const unsigned char k_magic[8] = {0x89, 'F', 'S', 'L', '\r', '\n', 0x1a, '\n'};

enum { SEC_VERSION = 1, SEC_BACKEND, SEC_ONNX, SEC_CONSTS, SEC_SHAPES, SEC_PLAN, SEC_EXE, SEC_COUNT };
static const char *const k_sec_names[SEC_COUNT] = {"", "VERSION", "BACKEND", "ONNX", "CONSTS", "SHAPES", "PLAN", "EXE"};

#define NAME_CAP 1024

bool fsl_aot_is_file(const void *buf, size_t len) { return buf && len >= 8 && !memcmp(buf, k_magic, 8); }

/* ---- writing ---- */

static void put_section(fsl_bytes *file, uint32_t tag, const fsl_bytes *body) {
  fsl_bytes_u32(file, tag);
  fsl_bytes_u64(file, body->len);
  fsl_bytes_put(file, body->p, body->len);
}

static void put_dims(fsl_bytes *b, int rank, const int64_t *dims) {
  fsl_bytes_u32(b, (uint32_t)rank);
  for (int d = 0; d < rank; d++) fsl_bytes_u64(b, (uint64_t)dims[d]);
}

/* The ONNX bytes the model was loaded from. */
static fsl_status source_bytes(const fsl_model *m, void **owned, const void **buf) {
  *owned = NULL;
  if (m->src) {
    *buf = m->src;
    return FSL_OK;
  }
  if (!m->src_path) return fsl_errorf(FSL_ERR_ARG, "the model's source bytes are not available");
  size_t len;
  FSL_TRY(fsl_read_file(m->src_path, m->src_len + 1, owned, &len));
  if (len != m->src_len || fsl_hash(FSL_HASH_INIT, *owned, len) != m->src_hash) {
    free(*owned);
    *owned = NULL;
    return fsl_errorf(FSL_ERR_IO, "'%s' changed since the model was loaded; load it again", m->src_path);
  }
  *buf = *owned;
  return FSL_OK;
}

static fsl_status plan_section(const fsl_model *m, fsl_bytes *b) {
  const fsl_plan *p = &m->plan;
  const fsl_graph *g = m->prim;
  int *pos = fsl_graph_topo_index(g);
  if (!pos) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  fsl_bytes_u32(b, (uint32_t)p->strategy);
  fsl_bytes_u32(b, (uint32_t)p->optimal | (uint32_t)p->profiled << 1 | (uint32_t)m->rewrite << 2);
  fsl_bytes_f64(b, p->predicted_s);
  fsl_bytes_f64(b, p->orchestrate_s);
  bool search = m->rewrite == FSL_REWRITE_SEARCH;
  fsl_bytes_u32(b, search ? (uint32_t)m->search_evals : 0u);
  fsl_bytes_f64(b, search ? m->search_alpha : 0.0);
  fsl_bytes_u64(b, fsl_model_graph_hash(g));
  fsl_bytes_u32(b, (uint32_t)p->kernels.n);
  for (int i = 0; i < p->kernels.n; i++) {
    const fsl_kernel *k = p->kernels.k[i];
    fsl_bytes_u32(b, (uint32_t)k->kind);
    fsl_bytes_f64(b, k->cost_s);
    fsl_bytes_u32(b, (uint32_t)k->n_nodes);
    for (int j = 0; j < k->n_nodes; j++) fsl_bytes_u32(b, (uint32_t)pos[k->nodes[j]->id]);
  }
  free(pos);
  return FSL_OK;
}

static fsl_status build_file(const fsl_model *m, fsl_bytes *file) {
  fsl_bytes sec[SEC_COUNT];
  memset(sec, 0, sizeof sec);
  fsl_status st = FSL_OK;
  fsl_bytes_str(&sec[SEC_VERSION], fsl_version());
  char fp[512] = "";
  const fsl_backend *be = fsl_backend_find(m->backend);
  if (be && be->fingerprint) be->fingerprint(fp, sizeof fp);
  fsl_bytes_str(&sec[SEC_BACKEND], m->backend);
  fsl_bytes_str(&sec[SEC_BACKEND], fp);
  void *owned;
  const void *src = NULL;
  st = source_bytes(m, &owned, &src);
  if (st == FSL_OK) fsl_bytes_put(&sec[SEC_ONNX], src, m->src_len);
  free(owned);
  fsl_bytes_u32(&sec[SEC_CONSTS], (uint32_t)m->n_frozen);
  for (int i = 0; i < m->n_frozen; i++) {
    const fsl_value *v = m->frozen[i];
    int64_t nb = fsl_nbytes(v->dtype, v->rank, v->dims);
    fsl_bytes_str(&sec[SEC_CONSTS], v->name);
    fsl_bytes_u32(&sec[SEC_CONSTS], (uint32_t)v->dtype);
    put_dims(&sec[SEC_CONSTS], v->rank, v->dims);
    fsl_bytes_u64(&sec[SEC_CONSTS], (uint64_t)nb);
    fsl_bytes_put(&sec[SEC_CONSTS], v->data, (size_t)nb);
  }
  const fsl_graph *g = m->prim;
  fsl_bytes_u32(&sec[SEC_SHAPES], (uint32_t)g->n_inputs);
  for (int i = 0; i < g->n_inputs; i++) {
    fsl_bytes_str(&sec[SEC_SHAPES], g->inputs[i]->name);
    put_dims(&sec[SEC_SHAPES], g->inputs[i]->rank, g->inputs[i]->dims);
  }
  if (st == FSL_OK && m->has_plan) st = plan_section(m, &sec[SEC_PLAN]);
  if (st == FSL_OK && m->be && m->exe && m->be->export_exe) st = m->be->export_exe(m->exe, &sec[SEC_EXE]);
  if (st == FSL_OK) {
    file->len = 0;
    fsl_bytes_put(file, k_magic, sizeof k_magic);
    fsl_bytes_u32(file, FSL_AOT_FORMAT);
    fsl_bytes_u32(file, SEC_COUNT - 1);
    for (uint32_t t = 1; t < SEC_COUNT; t++) put_section(file, t, &sec[t]);
  }
  bool oom = file->oom;
  for (int t = 0; t < SEC_COUNT; t++) {
    oom = oom || sec[t].oom;
    fsl_bytes_free(&sec[t]);
  }
  if (st == FSL_OK && oom) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  return st;
}

fsl_status fsl_model_save(const fsl_model *m, const char *path) {
  if (!m || !path) return fsl_errorf(FSL_ERR_ARG, "fsl_model_save: NULL argument");
  if (!m->compiled || !m->prim)
    return fsl_errorf(FSL_ERR_ARG, "fsl_model_save: compile the model first (fsl_model_compile)");
  if (m->onnx->external_data)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "the model keeps tensors in external data files, which a compiled model "
                      "file cannot carry yet");
  fsl_bytes file = {0};
  fsl_status st = build_file(m, &file);
  if (st == FSL_OK) st = fsl_write_bytes_atomic(path, file.p, file.len);
  fsl_bytes_free(&file);
  return st;
}

/* ---- reading ---- */

typedef struct aot_file {
  fsl_reader sec[SEC_COUNT];  /* each section's bytes */
} aot_file;

static fsl_status bad_file(const char *fmt, const char *arg) {
  return fsl_errorf(FSL_ERR_PARSE, "not a valid compiled model file: %s%s", fmt, arg ? arg : "");
}

static fsl_status parse_sections(const void *buf, size_t len, aot_file *f) {
  memset(f, 0, sizeof *f);
  fsl_reader r = {buf, (const unsigned char *)buf + len, false};
  fsl_read_take(&r, sizeof k_magic);
  uint32_t format = fsl_read_u32(&r), n = fsl_read_u32(&r);
  if (r.bad) return bad_file("truncated header", NULL);
  if (format != FSL_AOT_FORMAT)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "compiled model file format %u; this fissile (%s) reads format %u: "
                      "compile the ONNX model again", format, fsl_version(), FSL_AOT_FORMAT);
  bool seen[SEC_COUNT] = {false};
  for (uint32_t i = 0; i < n; i++) {
    uint32_t tag = fsl_read_u32(&r);
    uint64_t sl = fsl_read_u64(&r);
    const unsigned char *body = fsl_read_take(&r, sl);
    if (r.bad) return bad_file("truncated section", NULL);
    if (tag == 0 || tag >= SEC_COUNT) return bad_file("unknown section", NULL);
    if (seen[tag]) return bad_file("section repeated: ", k_sec_names[tag]);
    seen[tag] = true;
    f->sec[tag] = (fsl_reader){body, body + sl, false};
  }
  if (r.p != r.end) return bad_file("bytes after the last section", NULL);
  for (int t = 1; t < SEC_COUNT; t++)
    if (!seen[t]) return bad_file("missing section ", k_sec_names[t]);
  return FSL_OK;
}

static fsl_status read_dims(fsl_reader *r, int *rank, int64_t *dims) {
  uint32_t rk = fsl_read_u32(r);
  if (r->bad || rk > FSL_MAX_RANK) return bad_file("a rank out of range", NULL);
  *rank = (int)rk;
  for (uint32_t d = 0; d < rk; d++) {
    dims[d] = (int64_t)fsl_read_u64(r);
    if (dims[d] < 0) return bad_file("a negative dimension", NULL);
  }
  return r->bad ? bad_file("truncated shape", NULL) : FSL_OK;
}

/* Checks the version and the backend before anything is built. */
static fsl_status check_target(aot_file *f, char *backend, size_t cap) {
  char version[128], fp[512], here[512] = "";
  fsl_read_str(&f->sec[SEC_VERSION], version, sizeof version);
  fsl_read_str(&f->sec[SEC_BACKEND], backend, cap);
  fsl_read_str(&f->sec[SEC_BACKEND], fp, sizeof fp);
  if (f->sec[SEC_VERSION].bad || f->sec[SEC_BACKEND].bad) return bad_file("malformed VERSION or BACKEND", NULL);
  if (strcmp(version, fsl_version()))
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "compiled by fissile %s; this is fissile %s: compile the ONNX model "
                      "again (fissile compile MODEL.onnx -o FILE.fsl)", version, fsl_version());
  const fsl_backend *be = fsl_backend_find(backend);
  if (!be)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "compiled for backend '%s', which this build of fissile does not have",
                      backend);
  if (be->fingerprint) be->fingerprint(here, sizeof here);
  if (strcmp(fp, here))
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "compiled for another machine: the file's backend %s targets '%s', this "
                      "machine is '%s'; compile the ONNX model again here", backend, fp, here);
  return FSL_OK;
}

static fsl_status apply_consts(fsl_model *m, fsl_reader *r) {
  uint32_t n = fsl_read_u32(r);
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    fsl_tensor t;
    memset(&t, 0, sizeof t);
    fsl_read_str(r, t.name, sizeof t.name);
    t.dtype = (fsl_dtype)fsl_read_u32(r);
    FSL_TRY(read_dims(r, &t.rank, t.dims));
    uint64_t nb = fsl_read_u64(r);
    int64_t want = fsl_dtype_size(t.dtype) ? fsl_nbytes(t.dtype, t.rank, t.dims) : -1;
    if (r->bad || want < 0 || nb != (uint64_t)want) return bad_file("a frozen input's size does not match", NULL);
    t.data = (void *)fsl_read_take(r, nb);
    if (r->bad) return bad_file("truncated CONSTS", NULL);
    FSL_TRY(fsl_model_freeze_input(m, &t));
  }
  return r->bad || r->p != r->end ? bad_file("malformed CONSTS", NULL) : FSL_OK;
}

static fsl_status apply_shapes(fsl_model *m, fsl_reader *r) {
  uint32_t n = fsl_read_u32(r);
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    char name[NAME_CAP];
    int rank;
    int64_t dims[FSL_MAX_RANK];
    fsl_read_str(r, name, sizeof name);
    FSL_TRY(read_dims(r, &rank, dims));
    FSL_TRY(fsl_model_bind_shape(m, name, rank, dims));
  }
  return r->bad || r->p != r->end ? bad_file("malformed SHAPES", NULL) : FSL_OK;
}

/* The fixed fields at the start of PLAN, up to the kernels. */
typedef struct plan_head {
  uint32_t strategy, flags;
  double predicted_s, orchestrate_s;
  uint32_t search_evals;
  double search_alpha;
  uint64_t hash;
} plan_head;

static void read_plan_head(fsl_reader *r, plan_head *h) {
  h->strategy = fsl_read_u32(r);
  h->flags = fsl_read_u32(r);
  h->predicted_s = fsl_read_f64(r);
  h->orchestrate_s = fsl_read_f64(r);
  h->search_evals = fsl_read_u32(r);
  h->search_alpha = fsl_read_f64(r);
  h->hash = fsl_read_u64(r);
}

/* Kernels from their primitives' positions in the primitive graph; r is
 * the rest of PLAN after its head. */
static fsl_status rebuild_plan(fsl_model *m, const plan_head *h, fsl_reader *r) {
  fsl_plan *p = &m->plan;
  const fsl_graph *g = m->prim;
  memset(p, 0, sizeof *p);
  p->g = g;
  p->kernels.g = g;
  uint32_t strategy = h->strategy, flags = h->flags;
  p->predicted_s = h->predicted_s;
  p->orchestrate_s = h->orchestrate_s;
  uint32_t nk = fsl_read_u32(r);
  if (r->bad || strategy >= FSL_STRATEGY_COUNT) return bad_file("malformed PLAN", NULL);
  if (h->hash != fsl_model_graph_hash(g))
    return fsl_errorf(FSL_ERR_INVALID, "the primitive graph fission makes from the file's model differs from the one "
                      "its plan was made for: compile the ONNX model again");
  p->strategy = (fsl_strategy)strategy;
  p->optimal = flags & 1;
  p->profiled = flags & 2;
  m->has_plan = true; /* from here on fsl_plan_free releases what was built */
  int *topo = fsl_graph_topo_index(g);
  fsl_node **nodes = malloc(sizeof *nodes * (size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
  fsl_status st = topo && nodes ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  if (st == FSL_OK && nk > (uint32_t)g->n_nodes * 4u + 16u) st = bad_file("too many kernels", NULL);
  for (uint32_t i = 0; i < nk && st == FSL_OK; i++) {
    uint32_t kind = fsl_read_u32(r);
    double cost = fsl_read_f64(r);
    uint32_t n = fsl_read_u32(r);
    if (r->bad || kind >= FSL_KERNEL_KIND_COUNT || n == 0 || n > (uint32_t)g->n_nodes) {
      st = bad_file("malformed kernel in PLAN", NULL);
      break;
    }
    for (uint32_t j = 0; j < n && st == FSL_OK; j++) {
      uint32_t at = fsl_read_u32(r);
      if (r->bad || at >= (uint32_t)g->n_nodes) st = bad_file("a kernel names a primitive out of range", NULL);
      else nodes[j] = g->nodes[at];
    }
    fsl_kernel *k = NULL;
    const char *why = NULL;
    if (st == FSL_OK) st = fsl_kernel_make(g, topo, nodes, (int)n, &k, &why);
    if (st == FSL_OK && (!k || k->kind != (fsl_kernel_kind)kind)) {
      fsl_kernel_free(k);
      st = fsl_errorf(FSL_ERR_INVALID, "kernel %u of the file's plan is not a legal kernel here: %s", i,
                      why ? why : "its kind differs");
      break;
    }
    if (st != FSL_OK) break;
    k->id = (int)i;
    k->cost_s = cost;
    if (!fsl_grow((void **)&p->kernels.k, &p->kernels.cap, p->kernels.n + 1, sizeof *p->kernels.k)) {
      fsl_kernel_free(k);
      st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
      break;
    }
    p->kernels.k[p->kernels.n++] = k;
  }
  free(topo);
  free(nodes);
  if (st == FSL_OK && (r->bad || r->p != r->end)) st = bad_file("malformed PLAN", NULL);
  if (st == FSL_OK) st = fsl_plan_verify(p);
  return st;
}

fsl_status fsl_aot_load(const void *buf, size_t len, fsl_model **out) {
  *out = NULL;
  aot_file f;
  char backend[64];
  FSL_TRY(parse_sections(buf, len, &f));
  FSL_TRY(check_target(&f, backend, sizeof backend));
  fsl_reader *onnx = &f.sec[SEC_ONNX];
  size_t onnx_len = (size_t)(onnx->end - onnx->p);
  fsl_model *m;
  FSL_TRY(fsl_model_from_onnx(onnx->p, onnx_len, NULL, &m));
  fsl_status st = (m->src = malloc(onnx_len ? onnx_len : 1)) ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  if (st == FSL_OK) memcpy(m->src, onnx->p, onnx_len);
  if (st == FSL_OK) st = apply_consts(m, &f.sec[SEC_CONSTS]);
  if (st == FSL_OK) st = apply_shapes(m, &f.sec[SEC_SHAPES]);
  if (st == FSL_OK) st = fsl_model_set_backend(m, backend);
  bool has_plan = f.sec[SEC_PLAN].p != f.sec[SEC_PLAN].end;
  fsl_reader *plan = &f.sec[SEC_PLAN];
  plan_head head = {0};
  if (st == FSL_OK && has_plan) {
    read_plan_head(plan, &head);
    st = fsl_model_set_strategy(m, (fsl_strategy)(head.strategy < FSL_STRATEGY_COUNT ? head.strategy : 0));
    /* the rewrites the plan was made after */
    if (st == FSL_OK) st = fsl_model_set_rewrite(m, (fsl_rewrite_mode)((head.flags >> 2) & 3));
    if (st == FSL_OK && m->rewrite == FSL_REWRITE_SEARCH) {
      /* the same search: its alpha, as many evaluations, no time limit */
      uint32_t evals = head.search_evals;
      double alpha = head.search_alpha;
      if (plan->bad || evals > (uint32_t)INT32_MAX || !(alpha >= 1.0 && alpha <= 4.0))
        st = bad_file("malformed PLAN (rewrite search)", NULL);
      m->search = (fsl_rewrite_search_opts){.max_evals = evals ? (int)evals : -1, .max_seconds = -1, .alpha = alpha};
    }
  }
  if (st == FSL_OK) st = fsl_model_fission(m);
  if (st == FSL_OK && has_plan) st = rebuild_plan(m, &head, plan);
  if (st == FSL_OK) {
    fsl_reader *exe = &f.sec[SEC_EXE];
    st = fsl_model_finish_plan(m, exe->p, (size_t)(exe->end - exe->p));
  }
  if (st != FSL_OK) {
    fsl_model_free(m);
    return st;
  }
  m->compiled = true;
  m->compiled_threads = fsl_model_threads();
  m->from_file = true;
  *out = m;
  return FSL_OK;
}
