/* memplan.c — liveness-based arena planning for a plan's kernel outputs
 * (contract and rules: memplan.h). */
#include "runtime/memplan.h"

void fsl_memplan_free(fsl_memplan *mp) {
  if (!mp) return;
  free(mp->offset);
  free(mp->size);
  free(mp->first);
  free(mp->last);
  free(mp->alias);
  memset(mp, 0, sizeof *mp);
}

static bool is_external(const fsl_value *v) { return v->is_input || v->data != NULL; }

static bool same_shape(const fsl_value *a, const fsl_value *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

/* Rounds n up to the alignment; false on overflow. */
static bool align_up(int64_t n, int64_t *out) {
  int64_t a = FSL_MEMPLAN_ALIGN;
  if (n > INT64_MAX - (a - 1)) return false;
  *out = (n + a - 1) / a * a;
  return true;
}

/* A kernel whose output may overwrite a dying input element by element:
 * LOOP kind, one output, every node an elementwise primitive whose operands
 * and result all have the output's shape. */
static bool inplace_kernel(const fsl_kernel *k) {
  if (k->kind != FSL_KERNEL_LOOP || k->n_out != 1 || k->n_nodes < 1) return false;
  const fsl_value *y = k->out[0];
  for (int i = 0; i < k->n_nodes; i++) {
    const fsl_node *n = k->nodes[i];
    if (!fsl_op_is_primitive(n->op) || fsl_op_get(n->op)->kind != FSL_KIND_ELEMENTWISE) return false;
    for (int j = 0; j < n->n_in; j++)
      if (!n->in[j] || !same_shape(n->in[j], y)) return false;
    for (int j = 0; j < n->n_out; j++)
      if (!same_shape(n->out[j], y)) return false;
  }
  return true;
}

typedef struct slot {
  int root;          /* value id of the group's first value */
  int first, last;   /* group interval */
  int64_t size;      /* aligned bytes */
  int64_t offset;
} slot;

static int cmp_slot_size(const void *a, const void *b) {
  const slot *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return (x->root > y->root) - (x->root < y->root);
}

/* Greedy by size: slots[] sorted largest first; each takes the lowest
 * offset that does not collide with an already placed, time-overlapping
 * slot.  `placed` holds indices of placed slots sorted by offset. */
static fsl_status place_slots(slot *slots, int n, int64_t *peak) {
  int *placed = malloc(sizeof *placed * (size_t)(n + 1));
  if (!placed) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  int n_placed = 0;
  *peak = 0;
  for (int s = 0; s < n; s++) {
    slot *c = &slots[s];
    int64_t cur = 0;
    for (int j = 0; j < n_placed; j++) {
      const slot *p = &slots[placed[j]];
      if (p->last < c->first || p->first > c->last || p->size == 0) continue;
      if (p->offset >= cur + c->size) break;
      if (p->offset + p->size > cur) cur = p->offset + p->size;
    }
    c->offset = cur;
    if (cur + c->size > *peak) *peak = cur + c->size;
    int at = n_placed;
    while (at > 0 && slots[placed[at - 1]].offset > cur) at--;
    memmove(&placed[at + 1], &placed[at], sizeof *placed * (size_t)(n_placed - at));
    placed[at] = s;
    n_placed++;
  }
  free(placed);
  return FSL_OK;
}

static fsl_status alloc_arrays(fsl_memplan *mp, int n_ids) {
  size_t n = (size_t)n_ids + 1;
  mp->offset = malloc(sizeof *mp->offset * n);
  mp->size = calloc(n, sizeof *mp->size);
  mp->first = malloc(sizeof *mp->first * n);
  mp->last = malloc(sizeof *mp->last * n);
  mp->alias = malloc(sizeof *mp->alias * n);
  if (!mp->offset || !mp->size || !mp->first || !mp->last || !mp->alias)
    return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    mp->offset[i] = -1;
    mp->first[i] = mp->last[i] = mp->alias[i] = -1;
  }
  mp->n_ids = n_ids;
  return FSL_OK;
}

static int max_value_id(const fsl_plan *p) {
  int m = p->g ? p->g->n_values : 0;
  for (int i = 0; i < p->kernels.n; i++) {
    const fsl_kernel *k = p->kernels.k[i];
    for (int j = 0; j < k->n_in; j++)
      if (k->in[j] && k->in[j]->id >= m) m = k->in[j]->id + 1;
    for (int j = 0; j < k->n_out; j++)
      if (k->out[j] && k->out[j]->id >= m) m = k->out[j]->id + 1;
  }
  return m;
}

/* Liveness: first write and last use of every kernel output; writes[] counts writers. */
static fsl_status liveness(const fsl_plan *p, fsl_memplan *mp, int *writes) {
  int n = p->kernels.n;
  for (int i = 0; i < n; i++) {
    const fsl_kernel *k = p->kernels.k[i];
    for (int j = 0; j < k->n_in; j++) {
      const fsl_value *v = k->in[j];
      if (!v || is_external(v)) continue;
      if (mp->first[v->id] < 0)
        return fsl_errorf(FSL_ERR_INVALID, "memory plan: kernel %d reads value '%s' before any kernel writes it", i,
                          v->name);
      mp->last[v->id] = i;
    }
    for (int j = 0; j < k->n_out; j++) {
      const fsl_value *v = k->out[j];
      if (!v) continue;
      if (is_external(v))
        return fsl_errorf(FSL_ERR_INVALID, "memory plan: kernel %d writes graph input or constant '%s'", i, v->name);
      int64_t nb = fsl_value_nbytes(v);
      if (!fsl_value_has_shape(v) || nb < 0)
        return fsl_errorf(FSL_ERR_INVALID, "memory plan: value '%s' written by kernel %d has no static size", v->name, i);
      if (mp->first[v->id] < 0) mp->first[v->id] = i;
      mp->last[v->id] = i;
      mp->size[v->id] = nb;
      writes[v->id]++;
    }
  }
  const fsl_graph *g = p->g;
  for (int i = 0; g && i < g->n_outputs; i++) {
    const fsl_value *v = g->outputs[i];
    if (is_external(v)) continue;
    if (v->id >= mp->n_ids || mp->first[v->id] < 0)
      return fsl_errorf(FSL_ERR_INVALID, "memory plan: graph output '%s' is written by no kernel", v->name);
    mp->last[v->id] = n;
  }
  return FSL_OK;
}

/* In place: y (the one output of an elementwise kernel at step i, written
 * once, or of a kernel the executor's may_alias allows) takes the buffer of
 * an input x that dies at step i. */
static void find_inplace(const fsl_plan *p, const fsl_memplan_options *opt, fsl_memplan *mp, const int *writes,
                         int *root) {
  for (int i = 0; i < p->kernels.n; i++) {
    const fsl_kernel *k = p->kernels.k[i];
    bool elementwise = inplace_kernel(k);
    if (!elementwise && !(opt->may_alias && k->n_out == 1 && k->out[0])) continue;
    const fsl_value *y = k->out[0];
    if (writes[y->id] != 1 || mp->first[y->id] != i) continue;
    for (int j = 0; j < k->n_in; j++) {
      const fsl_value *x = k->in[j];
      if (!x || is_external(x) || mp->last[x->id] != i || mp->size[x->id] != mp->size[y->id] ||
          fsl_dtype_size(x->dtype) != fsl_dtype_size(y->dtype) || !same_shape(x, y) ||
          (!elementwise && !opt->may_alias(opt->alias_ctx, i, k, y, x)))
        continue;
      mp->alias[y->id] = x->id;
      root[y->id] = root[x->id];
      mp->n_inplace++;
      break;
    }
  }
}

const fsl_memplan_options fsl_memplan_executor = {.inplace = true, .external_outputs = true};

fsl_status fsl_memplan_build(const fsl_plan *p, const fsl_memplan_options *opt, fsl_memplan *out) {
  if (!p || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_memplan_build: NULL argument");
  memset(out, 0, sizeof *out);
  fsl_memplan mp;
  memset(&mp, 0, sizeof mp);
  int n_ids = max_value_id(p);
  int *writes = calloc((size_t)n_ids + 1, sizeof *writes);
  int *root = malloc(sizeof *root * ((size_t)n_ids + 1));
  int *slot_of = malloc(sizeof *slot_of * ((size_t)n_ids + 1));
  int64_t *live = calloc((size_t)p->kernels.n + 2, sizeof *live);
  slot *slots = NULL;
  fsl_status st = FSL_OK;
  if (!writes || !root || !slot_of || !live) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  if ((st = alloc_arrays(&mp, n_ids)) != FSL_OK) goto done;
  mp.n_steps = p->kernels.n;
  if ((st = liveness(p, &mp, writes)) != FSL_OK) goto done;
  for (int v = 0; v < n_ids; v++) root[v] = v;
  if (opt && opt->external_outputs)
    for (int i = 0; p->g && i < p->g->n_outputs; i++) {
      int v = p->g->outputs[i]->id;
      if (v < n_ids) mp.first[v] = mp.last[v] = -1, mp.size[v] = 0;
    }
  if (opt && opt->inplace) find_inplace(p, opt, &mp, writes, root);

  /* one slot per group (a value and the values placed in place over it) */
  slots = malloc(sizeof *slots * ((size_t)n_ids + 1));
  if (!slots) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  int n_slots = 0;
  for (int v = 0; v < n_ids; v++) {
    slot_of[v] = -1;
    if (mp.first[v] < 0) continue;
    int64_t a;
    if (!align_up(mp.size[v], &a) || mp.total_bytes > INT64_MAX - a) {
      st = fsl_errorf(FSL_ERR_NOMEM, "memory plan: the arena size overflows");
      goto done;
    }
    mp.n_planned++;
    mp.total_bytes += a;
    if (root[v] != v) continue;
    slot_of[v] = n_slots;
    slots[n_slots++] = (slot){.root = v, .first = mp.first[v], .last = mp.last[v], .size = a, .offset = 0};
  }
  /* values are visited in id order but a group's members may come before
   * its root: extend group intervals in a second pass */
  for (int v = 0; v < n_ids; v++) {
    if (mp.first[v] < 0 || root[v] == v) continue;
    int r = v;
    while (root[r] != r) r = root[r];
    root[v] = r;
    slot *s = &slots[slot_of[r]];
    if (mp.first[v] < s->first) s->first = mp.first[v];
    if (mp.last[v] > s->last) s->last = mp.last[v];
  }
  qsort(slots, (size_t)n_slots, sizeof *slots, cmp_slot_size);
  if ((st = place_slots(slots, n_slots, &mp.peak_bytes)) != FSL_OK) goto done;
  for (int s = 0; s < n_slots; s++) {
    slot_of[slots[s].root] = s;
    live[slots[s].first] += slots[s].size;
    live[slots[s].last + 1] -= slots[s].size;
  }
  for (int v = 0; v < n_ids; v++)
    if (mp.first[v] >= 0) mp.offset[v] = slots[slot_of[root[v]]].offset;
  int64_t cur = 0;
  for (int i = 0; i <= p->kernels.n; i++) {
    cur += live[i];
    if (cur > mp.live_bytes) mp.live_bytes = cur;
  }
done:
  free(writes);
  free(root);
  free(slot_of);
  free(live);
  free(slots);
  if (st != FSL_OK) {
    fsl_memplan_free(&mp);
    return st;
  }
  *out = mp;
  return FSL_OK;
}

static int group_root(const fsl_memplan *mp, int v) {
  for (int guard = 0; mp->alias[v] >= 0 && guard <= mp->n_ids; guard++) v = mp->alias[v];
  return v;
}

fsl_status fsl_memplan_verify(const fsl_plan *p, const fsl_memplan *mp) {
  if (!p || !mp) return fsl_errorf(FSL_ERR_ARG, "fsl_memplan_verify: NULL argument");
  const fsl_graph *g = p->g;
  for (int a = 0; a < mp->n_ids; a++) {
    if (mp->offset[a] < 0) continue;
    int64_t sa = 0;
    if (!align_up(mp->size[a], &sa) || mp->offset[a] % FSL_MEMPLAN_ALIGN || mp->offset[a] + sa > mp->peak_bytes)
      return fsl_errorf(FSL_ERR_INVALID, "memory plan: value %d at offset %lld (+%lld bytes) is misaligned or past the arena (%lld bytes)",
                        a, (long long)mp->offset[a], (long long)sa, (long long)mp->peak_bytes);
    if (sa == 0) continue;
    for (int b = a + 1; b < mp->n_ids; b++) {
      if (mp->offset[b] < 0 || mp->size[b] == 0) continue;
      if (mp->last[a] < mp->first[b] || mp->last[b] < mp->first[a]) continue;
      if (mp->offset[a] + mp->size[a] <= mp->offset[b] || mp->offset[b] + mp->size[b] <= mp->offset[a]) continue;
      if (group_root(mp, a) == group_root(mp, b)) continue;
      const char *na = g && a < g->n_values ? g->values[a]->name : "?";
      const char *nb = g && b < g->n_values ? g->values[b]->name : "?";
      return fsl_errorf(FSL_ERR_INVALID, "memory plan: values '%s' (steps %d-%d) and '%s' (steps %d-%d) overlap in memory",
                        na, mp->first[a], mp->last[a], nb, mp->first[b], mp->last[b]);
    }
  }
  return FSL_OK;
}
