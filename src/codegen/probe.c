/*
 * probe.c — numeric index probes (cg.h): which element of each input of
 * the kernel an output element reads, followed through the kernel's
 * elementwise and movement nodes and its gathers by constant indices at
 * concrete coordinates, and from that
 * the axis along which a LOOP nest should be tiled so that a transposed
 * read walks cache lines instead of striding across them.
 */
#include "codegen/cg.h"

#define PROBE_MAX 16 /* outside reads recorded per probe */

typedef struct probe {
  int n;
  const fsl_value *v[PROBE_MAX];
  int64_t flat[PROBE_MAX];
  bool ok; /* false: a node the probe does not follow (a gather by computed indices, ...) */
} probe;

/* The flat index of v at c, over its axes in the memory order of lay
 * (NULL: row-major). */
static int64_t flat_in(const fsl_value *v, const fsl_cg_layout *lay, const int64_t *c) {
  int64_t f = 0;
  for (int k = 0; k < v->rank; k++) {
    int a = lay ? lay->order[k] : k;
    f = f * v->dims[a] + c[a];
  }
  return f;
}

static void unflat(const fsl_value *v, int64_t f, int64_t *c) {
  for (int i = v->rank - 1; i >= 0; i--) {
    int64_t d = v->dims[i] > 0 ? v->dims[i] : 1;
    c[i] = f % d;
    f /= d;
  }
}

static const int64_t *ints(const fsl_node *n, const char *name) {
  const int64_t *v = NULL;
  return fsl_attr_ints(n, name, &v) >= 0 ? v : NULL;
}

/* The coordinates ic of gather n's data read by its output at c, when the
 * indices are a constant (docs/primitives.md: out[c] = data[c[:axis],
 * indices[c[axis:axis+q]], c[axis+q:]], a negative index counting from the
 * end); false otherwise or out of range. */
static bool gather_coords(const fsl_node *n, const int64_t *c, int64_t *ic) {
  const fsl_value *x = n->in[0], *ix = n->in[1];
  int axis = (int)fsl_attr_int(n, "axis", 0), q = ix->rank;
  if (!ix->data || (ix->dtype != FSL_DT_I64 && ix->dtype != FSL_DT_I32) || axis < 0 || axis >= x->rank) return false;
  int64_t f = 0;
  for (int i = 0; i < q; i++) f = f * ix->dims[i] + c[axis + i];
  if (f < 0 || f >= fsl_value_numel(ix)) return false;
  int64_t k = fsl_load_i64(ix->dtype, ix->data, f);
  if (k < 0) k += x->dims[axis];
  if (k < 0 || k >= x->dims[axis]) return false;
  for (int i = 0; i < x->rank; i++) ic[i] = i < axis ? c[i] : i == axis ? k : c[i + q - 1];
  return true;
}

/* Records the outside reads of v at coordinates c (docs/primitives.md
 * semantics of the views); a padded element outside its input reads
 * nothing. */
static void walk(const em *e, const fsl_value *v, const int64_t *c, probe *p, int depth) {
  if (!p->ok) return;
  if (!e->inside[v->id]) {
    if (p->n == PROBE_MAX) {
      p->ok = false;
      return;
    }
    p->v[p->n] = v;
    p->flat[p->n++] = flat_in(v, fsl_cg_in_layout(e, v), c); /* in memory order */
    return;
  }
  const fsl_node *n = v->producer;
  if (depth > 32) {
    p->ok = false;
    return;
  }
  int64_t ic[FSL_MAX_RANK] = {0};
  const fsl_value *x = n->n_in > 0 ? n->in[0] : NULL;
  switch (fsl_op_get(n->op)->kind == FSL_KIND_ELEMENTWISE ? -1 : (int)n->op) {
  case -1:
    for (int i = 0; i < n->n_in; i++) {
      for (int a = 0; a < n->in[i]->rank; a++) ic[a] = n->in[i]->dims[a] == 1 ? 0 : c[a];
      walk(e, n->in[i], ic, p, depth + 1);
    }
    return;
  case FSL_OP_reshape:
    unflat(x, flat_in(v, NULL, c), ic);
    break;
  case FSL_OP_permute: {
    const int64_t *perm = ints(n, "perm");
    for (int i = 0; perm && i < v->rank; i++) ic[perm[i]] = c[i];
    break;
  }
  case FSL_OP_expand:
    for (int i = 0; i < x->rank; i++) ic[i] = x->dims[i] == 1 ? 0 : c[i];
    break;
  case FSL_OP_slice: {
    const int64_t *st = ints(n, "starts"), *sp = ints(n, "steps");
    for (int i = 0; st && sp && i < x->rank; i++) ic[i] = x->dims[i] == 1 ? 0 : st[i] + sp[i] * c[i];
    break;
  }
  case FSL_OP_pad: {
    const int64_t *pads = ints(n, "pads");
    if (!pads || fsl_attr_int(n, "mode", 0) != 0) {
      p->ok = false;
      return;
    }
    for (int i = 0; i < x->rank; i++) {
      ic[i] = c[i] - pads[i];
      if (ic[i] < 0 || ic[i] >= x->dims[i]) return;
    }
    break;
  }
  case FSL_OP_gather: /* a constant index (Resize's taps, src/fission/resize.c) */
    if (!gather_coords(n, c, ic)) {
      p->ok = false;
      return;
    }
    break;
  case FSL_OP_concat: {
    int axis = (int)fsl_attr_int(n, "axis", 0);
    int64_t off = 0;
    for (int k = 0; k < n->n_in; k++) {
      if (c[axis] < off + n->in[k]->dims[axis]) {
        x = n->in[k];
        for (int i = 0; i < x->rank; i++) ic[i] = i == axis ? c[i] - off : c[i];
        break;
      }
      off += n->in[k]->dims[axis];
    }
    break;
  }
  default:
    p->ok = false;
    return;
  }
  walk(e, x, ic, p, depth + 1);
}

/* The outside reads of v at coordinates c. */
static probe probe_c(const em *e, const fsl_value *v, const int64_t *c) {
  probe p = {.ok = true};
  walk(e, v, c, &p, 0);
  return p;
}

/* The outside reads of v at the origin (axis -1) or at coordinate pos
 * along axis (0 elsewhere). */
static probe probe_at(const em *e, const fsl_value *v, int axis, int64_t pos) {
  int64_t c[FSL_MAX_RANK] = {0};
  if (axis >= 0) c[axis] = pos;
  return probe_c(e, v, c);
}

/* Whether read k moves by more than one element from base to in (the
 * same input in both): it strides across cache lines. */
static bool strides(const probe *base, const probe *in, int k) {
  int64_t d = in->flat[k] - base->flat[k];
  return in->v[k] == base->v[k] && (d > 1 || d < -1);
}

int64_t fsl_cg_stride_bytes_along(const em *e, const fsl_value *v, int a) {
  if (a < 0 || a >= v->rank || v->dims[a] < 2) return 0;
  probe base = probe_at(e, v, -1, 0), in = probe_at(e, v, a, 1);
  if (!base.ok || !in.ok || in.n != base.n) return 0;
  int64_t most = 0;
  for (int k = 0; k < base.n; k++) {
    if (!strides(&base, &in, k)) continue;
    int64_t d = in.flat[k] - base.flat[k], b = (d < 0 ? -d : d) * (int64_t)fsl_dtype_size(base.v[k]->dtype);
    if (b > most) most = b;
  }
  return most;
}

bool fsl_cg_strided_along(const em *e, const fsl_value *v, int a) { return fsl_cg_stride_bytes_along(e, v, a) > 0; }

bool fsl_cg_contig_along(const em *e, const fsl_value *v, int a) {
  int r = v->rank;
  if (r < 2 || a < 0 || a >= r - 1) return false;
  probe base = probe_at(e, v, -1, 0), in = probe_at(e, v, r - 1, 1), pa = probe_at(e, v, a, 1);
  if (!base.ok || !in.ok || !pa.ok || base.n == 0 || in.n != base.n || pa.n != base.n) return false;
  for (int k = 0; k < base.n; k++)
    if (strides(&base, &in, k) && pa.v[k] == base.v[k] && pa.flat[k] - base.flat[k] == 1) return true;
  return false;
}

#define ROW_PAIRS 8 /* neighbouring pairs of a row probed */

/* The outer axis of v along which read k of probe a (taken at coordinate
 * j of the innermost axis, 0 elsewhere) moves by one element, -1 for none. */
static int contiguous_axis(const em *e, const fsl_value *v, int64_t j, const probe *a, int k) {
  int r = v->rank;
  for (int ax = r - 2; ax >= 0; ax--) {
    if (v->dims[ax] < 8) continue;
    int64_t c[FSL_MAX_RANK] = {0};
    c[r - 1] = j;
    c[ax] = 1;
    probe pa = probe_c(e, v, c);
    if (pa.ok && pa.n == a->n && pa.v[k] == a->v[k] && pa.flat[k] - a->flat[k] == 1) return ax;
  }
  return -1;
}

/* A read that strides across cache lines along v's innermost axis is
 * looked for between neighbours in the middle of the row, several pairs,
 * since a read through a gather (an upsampling Resize's taps) can stay put
 * for a few steps, and at the row's start its edge clamp holds it still;
 * pairs whose reads differ in number (across a concat's parts, into a
 * pad) are skipped. */
int fsl_cg_tile_axis(const em *e, const fsl_value *v) {
  int r = v->rank;
  if (r < 2 || !e->inside[v->id]) return -1;
  int64_t len = v->dims[r - 1], j0 = len / 2 - ROW_PAIRS / 2;
  if (j0 < 0) j0 = 0;
  for (int64_t j = j0; j < j0 + ROW_PAIRS && j + 1 < len; j++) {
    int64_t c[FSL_MAX_RANK] = {0};
    c[r - 1] = j;
    probe a = probe_c(e, v, c);
    c[r - 1] = j + 1;
    probe b = probe_c(e, v, c);
    if (!a.ok || !b.ok) return -1;
    if (a.n == 0 || a.n != b.n) continue;
    for (int k = 0; k < a.n; k++)
      if (strides(&a, &b, k)) return contiguous_axis(e, v, j, &a, k);
  }
  return -1;
}

int fsl_cg_interleave(const em *e, const fsl_value *v) {
  int r = v->rank;
  if (r < 1 || !e->inside[v->id]) return 1;
  int64_t len = v->dims[r - 1];
  probe base = probe_at(e, v, -1, 0), one = probe_at(e, v, r - 1, 1);
  if (!base.ok || !one.ok || base.n == 0 || one.n != base.n) return 1;
  bool strided = false;
  for (int k = 0; k < base.n; k++) strided = strided || strides(&base, &one, k);
  if (!strided) return 1;
  for (int f = 2; f <= 8; f++) {
    if (len % f || len / f < 8) continue;
    bool good = true;
    for (int j = 0; j < f && good; j++) {
      probe a = probe_at(e, v, r - 1, j), b = probe_at(e, v, r - 1, j + f);
      good = a.ok && b.ok && a.n == base.n && b.n == base.n;
      for (int k = 0; k < base.n && good; k++) {
        int64_t d = b.flat[k] - a.flat[k];
        good = a.v[k] == b.v[k] && (d == 0 || d == 1);
      }
    }
    if (good) return f;
  }
  return 1;
}
