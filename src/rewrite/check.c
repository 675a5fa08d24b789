/*
 * check.c — proving a rule by random testing (PET's argument for
 * multi-linear rules, a tight float tolerance for the rest).
 *
 * A trial draws the rule's shape symbols (1..5), permutations and data,
 * builds the source as a graph (each root read by a same-shape reshape that
 * is the graph output, so a rule whose target is an existing value can
 * replace it), matches the rule at its first root, applies it and compares
 * the reference interpreter's outputs before and after.
 */
#include "rewrite/rewrite.h"
#include "eval/eval.h"
#include "fission/builder.h"
#include "passes/passes.h"

#include <math.h>

#define MAX_SYMS 16

typedef struct rng {
  uint64_t s;
} rng;
static uint64_t rnd(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}

typedef struct env {
  const char *sym[MAX_SYMS];
  int64_t val[MAX_SYMS];
  int n_sym;
  fsl_rw_match m;   /* names the test made: values and attribute lists */
  rng r;
  int trial;
} env;

static bool sym_value(env *e, const char *name, int64_t *v) {
  for (int i = 0; i < e->n_sym; i++)
    if (!strcmp(e->sym[i], name)) {
      *v = e->val[i];
      return true;
    }
  if (e->n_sym == MAX_SYMS) return false;
  e->sym[e->n_sym] = name;
  /* odd trials avoid 1, so broadcasts and axes of one do not hide errors */
  e->val[e->n_sym] = (int64_t)(rnd(&e->r) % 4) + (e->trial % 2 ? 2 : 1);
  *v = e->val[e->n_sym++];
  return true;
}

static bool eval_dim(env *e, const fsl_rw_expr *x, int64_t *v) {
  int64_t a, b;
  switch (x->kind) {
  case FSL_RW_NUM: *v = (int64_t)x->num; return true;
  case FSL_RW_VAR: return sym_value(e, x->name, v);
  case FSL_RW_ARITH:
    if (!eval_dim(e, x->args[0], &a) || !eval_dim(e, x->args[1], &b)) return false;
    *v = x->name[0] == '+' ? a + b : x->name[0] == '-' ? a - b : a * b;
    return true;
  default: return false;
  }
}

static bool eval_dims(env *e, const fsl_rw_expr *list, fsl_rw_ints *out) {
  memset(out, 0, sizeof *out);
  if (list->kind != FSL_RW_LIST) { /* NAME=N */
    out->n = 1;
    return eval_dim(e, list, &out->v[0]);
  }
  if (list->kind != FSL_RW_LIST || list->n_args > FSL_RW_MAX_INTS) return false;
  out->list = true;
  out->n = list->n_args;
  for (int i = 0; i < list->n_args; i++)
    if (!eval_dim(e, list->args[i], &out->v[i])) return false;
  return true;
}

static double draw(env *e, bool ints, bool positive) {
  double u = (double)(rnd(&e->r) >> 11) / 9007199254740992.0;
  if (ints) return positive ? (double)(1 + rnd(&e->r) % 3) : (double)((int)(rnd(&e->r) % 7) - 3);
  return positive ? 0.25 + 1.75 * u : 4.0 * u - 2.0;
}

static void fill_data(env *e, const fsl_value *v, void *p, bool ints, const fsl_rw_test *t) {
  int64_t n = fsl_value_numel(v), inner = 1;
  int ax = t && t->vary_axis >= 0 && t->vary_axis < v->rank ? t->vary_axis : -1;
  for (int i = ax + 1; ax >= 0 && i < v->rank; i++) inner *= v->dims[i];
  for (int64_t i = 0; i < n; i++) {
    if (ax >= 0) { /* a broadcast along every axis but ax: repeat the element at coordinate c of ax */
      int64_t c = (i / inner) % v->dims[ax];
      if (i != c * inner) {
        if (fsl_dtype_is_float(v->dtype)) fsl_store_f64(v->dtype, p, i, fsl_load_f64(v->dtype, p, c * inner));
        else fsl_store_i64(v->dtype, p, i, fsl_load_i64(v->dtype, p, c * inner));
        continue;
      }
    }
    double x = t && t->has_fill ? t->fill : draw(e, ints || !fsl_dtype_is_float(v->dtype), t && t->positive);
    if (fsl_dtype_is_float(v->dtype)) fsl_store_f64(v->dtype, p, i, x);
    else fsl_store_i64(v->dtype, p, i, (int64_t)x);
  }
}

static fsl_status fail(const fsl_rule *r, const env *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static fsl_status fail(const fsl_rule *r, const env *e, const char *fmt, ...) {
  char msg[1024], syms[256] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t k = 0;
  for (int i = 0; i < e->n_sym && k < sizeof syms - 32; i++)
    k += (size_t)snprintf(syms + k, sizeof syms - k, "%s%s=%lld", i ? " " : "", e->sym[i], (long long)e->val[i]);
  return fsl_errorf(FSL_ERR_INVALID, "rule %s (%s:%d), trial %d [%s]: %s", r->name, r->file, r->line, e->trial,
                    e->n_sym ? syms : "no shape symbols", msg);
}

static bool add_bind(env *e, const fsl_rw_bind *b) {
  if (e->m.n_bind == FSL_RW_MAX_BIND) return false;
  e->m.bind[e->m.n_bind++] = *b;
  return true;
}

/* builds source pattern x into b->g from the names the test made */
static fsl_value *build_source(env *e, fsl_builder *b, const fsl_rw_expr *x) {
  if (b->st) return NULL;
  if (x->kind == FSL_RW_VAR) {
    const fsl_rw_bind *bd = fsl_rw_lookup(&e->m, x->name);
    if (!bd || bd->is_attr) return fsl_b_fail(b, FSL_ERR_INVALID, "the test makes no value %s", x->name);
    return bd->v;
  }
  if (x->kind != FSL_RW_NODE) return fsl_b_fail(b, FSL_ERR_INVALID, "a source operand must be a name or a primitive");
  fsl_value *in[FSL_RW_MAX_NODES];
  for (int i = 0; i < x->n_args && i < (int)FSL_ARRAY_LEN(in); i++)
    if (!(in[i] = build_source(e, b, x->args[i]))) return NULL;
  fsl_attr attrs[16];
  int n_attrs = 0;
  for (int i = 0; i < x->n_attrs && i < (int)FSL_ARRAY_LEN(attrs); i++) {
    fsl_rw_ints v;
    if (!fsl_rw_eval_ints(&e->m, x->attrs[i].val, &v))
      return fsl_b_fail(b, FSL_ERR_INVALID, "attribute %s of (%s) does not evaluate", x->attrs[i].name, x->name);
    attrs[n_attrs++] = v.list ? fsl_attr_make_ints(b->g, x->attrs[i].name, v.v, v.n) : fsl_attr_make_int(x->attrs[i].name, v.v[0]);
  }
  fsl_value *v = fsl_b_prim(b, x->op, in, x->n_args, attrs, n_attrs);
  if (v && x->label) {
    fsl_rw_bind nb = {.name = x->label, .v = v};
    if (!add_bind(e, &nb)) return fsl_b_fail(b, FSL_ERR_INVALID, "too many names");
  }
  return v;
}

/* the test's names: inputs, constants, attribute lists */
static fsl_status make_tests(env *e, const fsl_rule *r, fsl_builder *b) {
  for (int i = 0; i < r->n_tests; i++) {
    const fsl_rw_test *t = &r->tests[i];
    fsl_rw_bind nb = {.name = t->name};
    fsl_rw_ints d;
    if (t->kind == FSL_RWT_PERM) {
      int n = (int)t->dims->num;
      nb.is_attr = true;
      nb.ints.list = true;
      nb.ints.n = n;
      for (int k = 0; k < n; k++) nb.ints.v[k] = k;
      for (int k = n - 1; k > 0; k--) {
        int j = (int)(rnd(&e->r) % (uint64_t)(k + 1));
        int64_t tmp = nb.ints.v[k];
        nb.ints.v[k] = nb.ints.v[j];
        nb.ints.v[j] = tmp;
      }
    } else if (!eval_dims(e, t->dims, &d)) {
      return fail(r, e, "test %s: its dimensions do not evaluate", t->name);
    } else if (t->kind == FSL_RWT_INTS) {
      nb.is_attr = true;
      nb.ints = d;
    } else {
      for (int k = 0; k < d.n; k++)
        if (d.v[k] < 0) return fail(r, e, "test %s: negative dimension", t->name);
      if (t->kind == FSL_RWT_CONST) {
        fsl_value tmp = {.dtype = t->dtype};
        if (!fsl_value_set_shape(&tmp, d.n, d.v)) return fail(r, e, "test %s: rank too large", t->name);
        void *data = malloc((size_t)fsl_value_nbytes(&tmp) + 1);
        if (!data) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
        fill_data(e, &tmp, data, r->multilinear, t);
        nb.v = fsl_b_const(b, t->dtype, d.n, d.v, data);
        free(data);
      } else {
        nb.v = fsl_graph_add_value(b->g, t->name);
        if (!nb.v) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
        nb.v->dtype = t->dtype;
        if (!fsl_value_set_shape(nb.v, d.n, d.v)) return fail(r, e, "test %s: rank too large", t->name);
        FSL_TRY(fsl_graph_add_input(b->g, nb.v));
      }
      if (!nb.v) return b->st;
    }
    if (!add_bind(e, &nb)) return fail(r, e, "too many test names");
  }
  return FSL_OK;
}

static fsl_status compare(const fsl_rule *r, const env *e, const fsl_graph *g, void **before, void **after) {
  for (int o = 0; o < g->n_outputs; o++) {
    const fsl_value *v = g->outputs[o];
    int64_t n = fsl_value_numel(v);
    for (int64_t i = 0; i < n; i++) {
      double x = fsl_load_f64(v->dtype, before[o], i), y = fsl_load_f64(v->dtype, after[o], i);
      if (isnan(x) && isnan(y)) continue;
      bool ok = r->multilinear || !fsl_dtype_is_float(v->dtype) ? x == y : fabs(x - y) <= 1e-5 * fmax(1.0, fabs(x));
      if (!ok)
        return fail(r, e, "root %d, element %lld: %.9g before the rewrite, %.9g after (%s)", o, (long long)i, x, y,
                    r->multilinear ? "exact comparison on integer data: a multi-linear rule" : "relative tolerance 1e-5");
    }
  }
  return FSL_OK;
}

static fsl_status trial(const fsl_rule *r, env *e) {
  fsl_graph *g = fsl_graph_new();
  if (!g) return fsl_errorf(FSL_ERR_NOMEM, "out of memory");
  fsl_builder b = {.g = g};
  void *in[64] = {0}, *before[FSL_RW_MAX_ROOTS] = {0}, *after[FSL_RW_MAX_ROOTS] = {0};
  fsl_value *roots[FSL_RW_MAX_ROOTS];
  fsl_rw_match m;
  fsl_status st = make_tests(e, r, &b);
  for (int i = 0; st == FSL_OK && i < r->n_from; i++) {
    roots[i] = build_source(e, &b, r->from[i]);
    if (!roots[i]) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", fsl_last_error());
      st = fail(r, e, "the test instance does not build: %s", msg);
      break;
    }
    /* a same-shape reshape reads each root: the graph outputs */
    fsl_attr shape = fsl_attr_make_ints(g, "shape", roots[i]->dims, roots[i]->rank);
    fsl_value *o = fsl_b_prim(&b, FSL_OP_reshape, &roots[i], 1, &shape, 1);
    if (o) {
      char name[16];
      snprintf(name, sizeof name, "root%d", i);
      o->name = fsl_arena_strdup(&g->arena, name);
      o->is_output = true;
    }
    st = o ? fsl_graph_add_output(g, o) : b.st;
  }
  if (st == FSL_OK && g->n_inputs > (int)FSL_ARRAY_LEN(in)) st = fail(r, e, "too many inputs");
  for (int i = 0; st == FSL_OK && i < g->n_inputs; i++) {
    in[i] = malloc((size_t)fsl_value_nbytes(g->inputs[i]) + 1);
    if (!in[i]) st = fsl_errorf(FSL_ERR_NOMEM, "out of memory");
    else fill_data(e, g->inputs[i], in[i], r->multilinear, NULL);
  }
  /* inputs marked positive in the test */
  for (int i = 0; st == FSL_OK && i < g->n_inputs; i++)
    for (int k = 0; k < r->n_tests; k++)
      if (r->tests[k].positive && !strcmp(r->tests[k].name, g->inputs[i]->name))
        fill_data(e, g->inputs[i], in[i], r->multilinear, &r->tests[k]);
  if (st == FSL_OK) st = fsl_graph_verify(g);
  if (st == FSL_OK) st = fsl_ref_run(g, (const void *const *)in, before);
  if (st == FSL_OK && !fsl_rw_match_at(r, roots[0]->producer, &m))
    st = fail(r, e, "the rule does not match its own test instance (a condition fails or the shapes do not fit)");
  for (int i = 0; st == FSL_OK && i < r->n_from; i++)
    if (m.roots[i] != roots[i]) st = fail(r, e, "source root %d matched another value of the test instance", i);
  if (st == FSL_OK) {
    st = fsl_rw_apply(g, &m);
    if (st == FSL_ERR_UNSUPPORTED) st = fail(r, e, "the rewrite was refused on its own test instance");
    else if (st != FSL_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", fsl_last_error());
      st = fail(r, e, "applying it failed: %s", msg);
    }
  }
  if (st == FSL_OK) st = fsl_graph_toposort(g);
  if (st == FSL_OK) st = fsl_pass_dce(g);
  if (st == FSL_OK) st = fsl_graph_verify(g);
  if (st == FSL_OK) st = fsl_ref_run(g, (const void *const *)in, after);
  if (st == FSL_OK) st = compare(r, e, g, before, after);
  for (int i = 0; i < (int)FSL_ARRAY_LEN(in); i++) free(in[i]);
  for (int i = 0; i < FSL_RW_MAX_ROOTS; i++) {
    free(before[i]);
    free(after[i]);
  }
  fsl_graph_free(g);
  return st;
}

fsl_status fsl_rule_check(const fsl_rule *r, int trials, uint64_t seed) {
  if (!r || trials < 1) return fsl_errorf(FSL_ERR_ARG, "fsl_rule_check: no rule or no trials");
  for (int t = 0; t < trials; t++) {
    env e = {.trial = t, .r = {.s = (seed ^ 0x9e3779b97f4a7c15ULL) * (uint64_t)(2 * t + 1) + 1}};
    e.m.rule = r;
    fsl_status st = trial(r, &e);
    if (st != FSL_OK) {
      if (strstr(fsl_last_error(), r->name)) return st;
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", fsl_last_error());
      return fail(r, &e, "%s", msg);
    }
  }
  return FSL_OK;
}
