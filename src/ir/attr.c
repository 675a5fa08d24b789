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
