/* attr.c — attribute lookup and construction. */
#include "ir/ir.h"

const fsl_attr *fsl_attr_find(const fsl_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

int64_t fsl_attr_int(const fsl_node *n, const char *name, int64_t def) {
  const fsl_attr *a = fsl_attr_find(n, name);
  if (!a) return def;
  if (a->type == FSL_ATTR_FLOAT) /* a float where an int is expected: truncate, saturating */
    return a->f != a->f ? def : a->f >= 9.2e18 ? INT64_MAX : a->f <= -9.2e18 ? INT64_MIN : (int64_t)a->f;
  return a->type == FSL_ATTR_INT ? a->i : def;
}

double fsl_attr_float(const fsl_node *n, const char *name, double def) {
  const fsl_attr *a = fsl_attr_find(n, name);
  if (!a) return def;
  if (a->type == FSL_ATTR_INT) return (double)a->i;
  return a->type == FSL_ATTR_FLOAT ? a->f : def;
}

const char *fsl_attr_str(const fsl_node *n, const char *name, const char *def) {
  const fsl_attr *a = fsl_attr_find(n, name);
  return a && a->type == FSL_ATTR_STRING ? a->s : def;
}

int fsl_attr_ints(const fsl_node *n, const char *name, const int64_t **v) {
  const fsl_attr *a = fsl_attr_find(n, name);
  if (!a || a->type != FSL_ATTR_INTS) return -1;
  *v = a->ints;
  return a->n;
}

int fsl_attr_floats(const fsl_node *n, const char *name, const double **v) {
  const fsl_attr *a = fsl_attr_find(n, name);
  if (!a || a->type != FSL_ATTR_FLOATS) return -1;
  *v = a->floats;
  return a->n;
}

fsl_attr fsl_attr_make_int(const char *name, int64_t v) {
  fsl_attr a = {0};
  a.name = name;
  a.type = FSL_ATTR_INT;
  a.i = v;
  return a;
}

fsl_attr fsl_attr_make_float(const char *name, double v) {
  fsl_attr a = {0};
  a.name = name;
  a.type = FSL_ATTR_FLOAT;
  a.f = v;
  return a;
}

fsl_attr fsl_attr_make_ints(fsl_graph *g, const char *name, const int64_t *v, int n) {
  fsl_attr a = {0};
  a.name = name;
  a.type = FSL_ATTR_INTS;
  a.n = n;
  a.ints = fsl_arena_memdup(&g->arena, v, sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  return a;
}

/* ---- comparison ---- */
static bool name_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

static bool ctensor_eq(const fsl_ctensor *a, const fsl_ctensor *b) {
  if (!a || !b) return a == b;
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  if (memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank)) return false;
  int64_t nb = fsl_nbytes(a->dtype, a->rank, a->dims);
  if (nb < 0) return false;
  if (!a->data || !b->data) return a->data == b->data;
  return !memcmp(a->data, b->data, (size_t)nb);
}

bool fsl_attr_equal(const fsl_attr *a, const fsl_attr *b) {
  if (a->type != b->type || !name_eq(a->name, b->name)) return false;
  switch (a->type) {
  case FSL_ATTR_INT: return a->i == b->i;
  case FSL_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
  case FSL_ATTR_STRING: return name_eq(a->s, b->s);
  case FSL_ATTR_INTS:
    return a->n == b->n &&
           (a->n <= 0 || !memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n));
  case FSL_ATTR_FLOATS:
    return a->n == b->n &&
           (a->n <= 0 || !memcmp(a->floats, b->floats, sizeof(double) * (size_t)a->n));
  case FSL_ATTR_STRINGS:
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
      if (!name_eq(a->strings[i], b->strings[i])) return false;
    return true;
  case FSL_ATTR_TENSOR: return ctensor_eq(a->t, b->t);
  case FSL_ATTR_GRAPH: return false;  /* subgraphs are never merged */
  }
  return false;
}

bool fsl_attrs_equal(const fsl_node *a, const fsl_node *b) {
  if (a->n_attrs != b->n_attrs) return false;
  for (int i = 0; i < a->n_attrs; i++) {
    const fsl_attr *other = fsl_attr_find(b, a->attrs[i].name);
    if (!other || !fsl_attr_equal(&a->attrs[i], other)) return false;
  }
  return true;
}

/* ---- hashing ---- */

static uint64_t hash_i64(uint64_t h, int64_t x) { return fsl_hash(h, &x, sizeof x); }

static uint64_t hash_str(uint64_t h, const char *s) {
  return s ? fsl_hash(h, s, strlen(s) + 1) : hash_i64(h, -1);
}

uint64_t fsl_value_type_hash(uint64_t h, const fsl_value *v) {
  h = hash_i64(h, v->dtype);
  h = hash_i64(h, v->rank);
  for (int i = 0; i < v->rank && i < FSL_MAX_RANK; i++) h = hash_i64(h, v->dims[i]);
  return h;
}

uint64_t fsl_attr_hash(uint64_t h, const fsl_attr *a) {
  h = hash_str(h, a->name);
  h = hash_i64(h, a->type);
  switch (a->type) {
  case FSL_ATTR_INT: return hash_i64(h, a->i);
  case FSL_ATTR_FLOAT: return fsl_hash(h, &a->f, sizeof a->f);
  case FSL_ATTR_STRING: return hash_str(h, a->s);
  case FSL_ATTR_INTS:
    h = hash_i64(h, a->n);
    return a->n > 0 && a->ints ? fsl_hash(h, a->ints, sizeof *a->ints * (size_t)a->n) : h;
  case FSL_ATTR_FLOATS:
    h = hash_i64(h, a->n);
    return a->n > 0 && a->floats ? fsl_hash(h, a->floats, sizeof *a->floats * (size_t)a->n) : h;
  case FSL_ATTR_STRINGS:
    h = hash_i64(h, a->n);
    for (int i = 0; i < a->n && a->strings; i++) h = hash_str(h, a->strings[i]);
    return h;
  case FSL_ATTR_TENSOR:
    if (a->t) {
      h = hash_i64(h, a->t->dtype);
      h = hash_i64(h, a->t->rank);
      for (int i = 0; i < a->t->rank && i < FSL_MAX_RANK; i++) h = hash_i64(h, a->t->dims[i]);
      int64_t nb = fsl_nbytes(a->t->dtype, a->t->rank, a->t->dims);
      if (nb > 0 && a->t->data) h = fsl_hash(h, a->t->data, (size_t)nb);
    }
    return h;
  case FSL_ATTR_GRAPH: return h;
  }
  return h;
}
