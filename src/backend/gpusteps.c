/*
 * gpusteps.c — GPU steps' work-items, dependencies, host steps and errors
 * (gpusteps.h), shared by the OpenCL and CUDA backends.
 */
#include "backend/gpusteps.h"

#include "eval/eval.h"

static fsl_status oom(void) { return fsl_errorf(FSL_ERR_NOMEM, "out of memory (GPU steps)"); }

const fsl_lowering_hooks fsl_gpu_generated = {.views = true, .split_by_node = true};

void fsl_gpu_kernel_label(const fsl_plan *p, int ki, char *buf, size_t len) {
  const fsl_kernel *k = p && ki >= 0 && ki < p->kernels.n ? p->kernels.k[ki] : NULL;
  const fsl_node *n0 = k && k->n_nodes ? k->nodes[0] : NULL;
  snprintf(buf, len, "kernel %d (from %s '%s')", ki, n0 && n0->origin_op ? n0->origin_op : "?",
           n0 && n0->origin_name ? n0->origin_name : "?");
}

int64_t fsl_gpu_step_items(const fsl_step *s) {
  int64_t most = 1;
  bool scalar = true;
  for (int i = 0; i < s->n_out; i++) {
    int64_t ne = fsl_value_numel(s->out[i]);
    if (ne > most) most = ne;
    scalar = scalar && s->out[i]->rank == 0;
  }
  if (scalar) return 1;
  return most < ((int64_t)1 << 20) ? most : ((int64_t)1 << 20);
}

/* ---- dependencies ---- */

static bool overlap(fsl_gpu_range a, fsl_gpu_range b) {
  return a.buffer == b.buffer && a.bytes > 0 && b.bytes > 0 && a.off < b.off + b.bytes && b.off < a.off + a.bytes;
}

/* Whether step a (earlier) and step b of l conflict: one writes bytes the
 * other reads or writes. */
static bool conflict(const fsl_step *a, const fsl_step *b, fsl_gpu_where where, void *ctx) {
  for (int i = 0; i < a->n_in + a->n_out; i++) {
    bool aw = i >= a->n_in;
    fsl_gpu_range ra = where(ctx, aw ? a->out[i - a->n_in] : a->in[i]);
    for (int j = 0; j < b->n_in + b->n_out; j++) {
      bool bw = j >= b->n_in;
      if (!aw && !bw) continue;
      if (overlap(ra, where(ctx, bw ? b->out[j - b->n_in] : b->in[j]))) return true;
    }
  }
  return false;
}

void fsl_gpu_deps_free(int **deps, int *n_deps, int n) {
  for (int i = 0; deps && i < n; i++) free(deps[i]);
  free(deps);
  free(n_deps);
}

fsl_status fsl_gpu_step_deps(const fsl_lowering *l, int lo, int hi, fsl_gpu_where where, void *ctx, int ***deps,
                             int **n_deps) {
  *deps = NULL;
  *n_deps = NULL;
  int n = hi - lo;
  if (n <= 0) return FSL_OK;
  /* direct[i][j]: step lo+j conflicts with earlier step lo+i; reach[i][j]:
   * lo+j is reachable from lo+i through kept edges (j > i) */
  bool *direct = calloc((size_t)n * (size_t)n, sizeof(bool));
  bool *reach = calloc((size_t)n * (size_t)n, sizeof(bool));
  int **d = calloc((size_t)n, sizeof *d);
  int *nd = calloc((size_t)n, sizeof *nd);
  if (!direct || !reach || !d || !nd) {
    free(direct);
    free(reach);
    fsl_gpu_deps_free(d, nd, n);
    return oom();
  }
  for (int j = 0; j < n; j++)
    for (int i = 0; i < j; i++) direct[(size_t)i * n + j] = conflict(&l->steps[lo + i], &l->steps[lo + j], where, ctx);
  /* transitive reduction in topological (step) order: for each j, take the
   * conflicting steps from the latest down; an edge i -> j is needed only
   * when i does not reach j through an edge already kept */
  for (int j = 0; j < n; j++) {
    for (int i = j - 1; i >= 0; i--) {
      if (!direct[(size_t)i * n + j] || reach[(size_t)i * n + j]) continue;
      int *grown = realloc(d[j], sizeof(int) * (size_t)(nd[j] + 1));
      if (!grown) {
        free(direct);
        free(reach);
        fsl_gpu_deps_free(d, nd, n);
        return oom();
      }
      d[j] = grown;
      d[j][nd[j]++] = lo + i;
      /* everything that reaches i (and i) now reaches j */
      reach[(size_t)i * n + j] = true;
      for (int a = 0; a < i; a++)
        if (reach[(size_t)a * n + i]) reach[(size_t)a * n + j] = true;
    }
    /* ascending order */
    for (int a = 0, b = nd[j] - 1; a < b; a++, b--) {
      int t = d[j][a];
      d[j][a] = d[j][b];
      d[j][b] = t;
    }
  }
  free(direct);
  free(reach);
  *deps = d;
  *n_deps = nd;
  return FSL_OK;
}

/* ---- host steps and errors ---- */

fsl_status fsl_gpu_run_host(const fsl_graph *g, const fsl_step *s, fsl_gpu_copy to_host, fsl_gpu_copy to_device,
                            void *ctx, const char *backend) {
  void **hb = calloc((size_t)g->n_values, sizeof(void *));
  bool *ho = calloc((size_t)g->n_values, sizeof(bool));
  fsl_status st = hb && ho ? FSL_OK : oom();
  for (int i = 0; i < s->n_nodes && st == FSL_OK; i++) {
    const fsl_node *n = s->nodes[i];
    const void *in[32];
    void *out[16];
    if (n->n_in > 32 || n->n_out > 16) {
      st = fsl_node_errorf(n, FSL_ERR_UNSUPPORTED, "too many operands");
      break;
    }
    for (int k = 0; k < n->n_in && st == FSL_OK; k++) {
      in[k] = NULL;
      const fsl_value *v = n->in[k];
      if (!v) continue;
      if (!hb[v->id]) {
        if (v->data) {
          hb[v->id] = (void *)v->data;
        } else {
          int64_t nb = fsl_value_nbytes(v);
          if (!(hb[v->id] = malloc((size_t)(nb > 0 ? nb : 1)))) st = oom();
          ho[v->id] = true;
          if (st == FSL_OK && nb > 0) st = to_host(ctx, v, hb[v->id], nb);
        }
      }
      in[k] = hb[v->id];
    }
    for (int k = 0; k < n->n_out && st == FSL_OK; k++) {
      out[k] = NULL;
      const fsl_value *v = n->out[k];
      if (!v) continue;
      int64_t nb = fsl_value_nbytes(v);
      if (!hb[v->id]) {
        if (!(hb[v->id] = malloc((size_t)(nb > 0 ? nb : 1)))) st = oom();
        ho[v->id] = true;
      }
      out[k] = hb[v->id];
    }
    if (st == FSL_OK) st = fsl_ref_eval(n, in, out);
  }
  for (int j = 0; j < s->n_out && st == FSL_OK; j++) {
    const fsl_value *v = s->out[j];
    int64_t nb = fsl_value_nbytes(v);
    if (nb > 0) st = to_device(ctx, v, hb[v->id], nb);
  }
  for (int i = 0; hb && ho && i < g->n_values; i++)
    if (ho[i]) free(hb[i]);
  free(hb);
  free(ho);
  if (st != FSL_OK) fsl_error_context(st, "%s backend, kernel %d (on the host)", backend, s->kernel);
  return st;
}

fsl_status fsl_gpu_step_error(const fsl_plan *p, const fsl_step *s, int bits, const char *backend) {
  if (!bits) return FSL_OK;
  char label[160];
  fsl_gpu_kernel_label(p, s->kernel, label, sizeof label);
  const char *what = (bits & FSL_KERR_INDEX)     ? "gather index out of range"
                     : (bits & FSL_KERR_DIVZERO) ? "integer division by zero"
                                                 : "out of memory";
  return fsl_errorf(FSL_ERR_RUNTIME, "%s backend, %s: %s", backend, label, what);
}
