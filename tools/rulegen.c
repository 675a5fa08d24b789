/*
 * rulegen.c — `fissile_rulegen [OUT.rules]`: generates rewrite rules the
 * way TASO does (Jia et al., SOSP'19, section 3): enumerate every
 * primitive expression up to MAX_OPS ops over a small op set and up to
 * four inputs, fingerprint each on random integer inputs with the
 * reference interpreter, group the expressions with equal fingerprints,
 * and emit "larger -> smallest of its group" as rules in the language of
 * core.rules (docs/rewrite.md).  The output is checked in as
 * src/rewrite/generated.rules (`make rules`); the test suite proves every
 * rule of it again, on random shapes, on every build.
 *
 * Expressions are typed: each family has up to three shape classes (a
 * concrete shape for fingerprints, a symbolic one for the test instance)
 * and each op of it takes and makes values of given classes, so only
 * expressions that type-check are enumerated.  The families:
 *   elementwise  neg, add, sub, mul over x, y, z of one shape: the rules
 *                hold at any shape (elementwise primitives take operands
 *                of equal shape);
 *   matrix       matmul, transpose (permute [1,0]), add, sub, neg over
 *                square matrices: the rules carry (square ...);
 *   minmax       max, min (ReLU's and Clip's primitives), neg, add, sub
 *                over x, y, z of one shape: piecewise linear, not
 *                multi-linear, so equal fingerprints are only evidence
 *                and the check (on floats) decides;
 *   reduce       reduce_sum over axis 1 (keepdims) with neg, add, sub,
 *                mul on [a,b] and on the reduced [a,1];
 *   conv3x3      conv (3x3 kernel, pads 1) with add, sub, neg on the
 *                activations x, y [n,c,h,w], the weights w, v [e,c,3,3]
 *                and the result [n,e,h,w] (the pattern spells out every
 *                conv attribute: the matcher checks only those written);
 *   conv1x1      the same with 1x1 kernels (no padding);
 *   concat       concat on axis 1 of two [a,b] values, the slices that
 *                take either half back, neg, add, sub on both shapes (a
 *                slice's attributes are bound and pinned by conditions);
 *   reshape      reshape of [a,b] to [a*b] and back, neg, add, sub, mul on
 *                both shapes (the shape bound and pinned likewise).
 * The rules of the typed families carry conditions that pin the inputs to
 * their classes (equal shapes within a class, the weights' channels and
 * kernel against the activations'), so a rule never fires at shapes where
 * its target would not type-check or would mean something else.
 * All of these ops but max and min are multi-linear, so integer fingerprints are exact
 * (PET, OSDI'21: different multi-linear programs disagree on random
 * integers with overwhelming probability).
 *
 * Pruning (TASO's "redundant substitutions"): an expression is a source
 * only when each of its proper subexpressions is the smallest of its own
 * group (otherwise a smaller rule rewrites it first), its inputs of each
 * class appear in the order they are named (a renaming of a kept rule is
 * the same rule), a commutative op's operands are in enumeration order
 * (the matcher tries both orders), and no rule kept before it (nor a
 * hand-written rule of core.rules) matches anywhere in it: then that
 * rule, with its variables bound to subexpressions, already does the
 * rewrite.  A rule must shrink the op count (the driver then ends) and its
 * target may use only inputs of its source.  Every candidate is proved
 * with fsl_rule_check (the build's check) before it is emitted; one that
 * fails is dropped and counted.
 */
#include "eval/eval.h"
#include "fission/builder.h"
#include "ir/ir.h"
#include "rewrite/rewrite.h"

#include <stdio.h>
#include <time.h>

#define MAX_OPS 3
#define MAX_LEAF 4
#define MAX_TYPE 3
#define ELEMS 64      /* the largest fingerprint shape's element count */
#define SEEDS 2       /* fingerprints from two independent input draws */
#define CHECK_TRIALS 8

typedef struct vtype {
  int rank;
  int64_t dims[4];  /* the fingerprint shape */
  const char *test; /* the test instance's shape */
} vtype;

typedef struct fop {
  fsl_op op;
  int arity;
  int in[2], out;   /* classes */
  const char *attr; /* attribute name, NULL: none */
  int n_attr;       /* -1: one integer */
  int64_t attr_v[4];
  const char *text; /* the attribute as the rule language writes it */
  int half;         /* slices: 1 the first half of axis 1, 2 the second (class out's shape); 3: a
                     * reshape to class out's shape */
} fop;

typedef struct family {
  const char *name;
  int n_type;
  vtype type[MAX_TYPE];
  int n_leaf;
  const char *leaf[MAX_LEAF];
  int leaf_type[MAX_LEAF];
  int n_op;
  fop op[12];  /* unary ops are enumerated before binary ones, each in list order */
  bool square; /* the matrix family's (square ...) condition */
  bool pin;    /* conditions pinning the inputs to their classes */
  int conv_k;  /* conv families: the kernel size */
} family;

typedef struct expr {
  int fo;           /* index into the family's ops; -1: input `leaf` */
  int leaf;
  int a, b;         /* operands (expression ids), -1 */
  int ops;          /* op count */
  int type;
  unsigned vars;    /* bit mask of inputs used */
  float val[SEEDS][ELEMS];
  uint64_t fp;
  int cls;          /* the smallest expression with the same fingerprint */
} expr;

static expr *g_e;
static int g_n, g_cap;
static const family *g_f;
static float g_in[SEEDS][MAX_LEAF][ELEMS];

static int64_t type_numel(int t) {
  int64_t n = 1;
  for (int i = 0; i < g_f->type[t].rank; i++) n *= g_f->type[t].dims[i];
  return n;
}

static fsl_value *typed_value(fsl_graph *g, int t) {
  fsl_value *v = fsl_graph_add_value(g, NULL);
  v->dtype = FSL_DT_F32;
  fsl_value_set_shape(v, g_f->type[t].rank, g_f->type[t].dims);
  return v;
}

/* the attributes of op o at the fingerprint shapes */
static int op_attrs(fsl_graph *g, const fop *o, fsl_attr *a) {
  if (o->half == 3) {
    a[0] = fsl_attr_make_ints(g, "shape", g_f->type[o->out].dims, g_f->type[o->out].rank);
    return 1;
  }
  if (o->half) {
    const vtype *t = &g_f->type[o->out];
    int64_t st[4] = {0}, sp[4], sz[4];
    for (int i = 0; i < t->rank; i++) {
      sp[i] = 1;
      sz[i] = t->dims[i];
    }
    if (o->half == 2) st[1] = t->dims[1];
    a[0] = fsl_attr_make_ints(g, "starts", st, t->rank);
    a[1] = fsl_attr_make_ints(g, "steps", sp, t->rank);
    a[2] = fsl_attr_make_ints(g, "sizes", sz, t->rank);
    return 3;
  }
  if (!o->attr) return 0;
  a[0] = o->n_attr < 0 ? fsl_attr_make_int(o->attr, o->attr_v[0]) : fsl_attr_make_ints(g, o->attr, o->attr_v, o->n_attr);
  return 1;
}

/* Evaluates one op on its fingerprint operands with the reference interpreter. */
static void eval_op(expr *e) {
  const fop *o = &g_f->op[e->fo];
  fsl_graph *g = fsl_graph_new();
  for (int s = 0; s < SEEDS; s++) {
    fsl_value *in[2] = {NULL, NULL};
    const float *src[2] = {g_e[e->a].val[s], e->b >= 0 ? g_e[e->b].val[s] : NULL};
    for (int i = 0; i < o->arity; i++) in[i] = typed_value(g, o->in[i]);
    fsl_value *out = typed_value(g, o->out);
    fsl_attr a[3];
    int n_a = op_attrs(g, o, a);
    fsl_node *n = fsl_graph_add_node(g, o->op, NULL, in, o->arity, &out, 1, n_a ? a : NULL, n_a);
    void *outp = e->val[s];
    if (!n || fsl_ref_eval(n, (const void *const *)src, &outp) != FSL_OK) {
      fprintf(stderr, "rulegen: %s\n", fsl_last_error());
      exit(1);
    }
  }
  fsl_graph_free(g);
}

static int add_expr(expr e) {
  if (g_n == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 65536;
    g_e = realloc(g_e, (size_t)g_cap * sizeof *g_e);
    if (!g_e) {
      fprintf(stderr, "rulegen: out of memory\n");
      exit(1);
    }
  }
  if (e.a >= 0) eval_op(&e);
  for (int s = 0; s < SEEDS; s++)
    for (int i = 0; i < ELEMS; i++) e.val[s][i] += 0.0f; /* -0 and 0 are one value */
  uint64_t h = FSL_HASH_INIT;
  h = fsl_hash(h, e.val, sizeof e.val);
  e.fp = fsl_hash(h, &e.type, sizeof e.type);
  g_e[g_n] = e;
  return g_n++;
}

/* Every well-typed expression of the family up to MAX_OPS ops, by op count. */
static void enumerate(const family *f, int first) {
  for (int leaf = 0; leaf < f->n_leaf; leaf++) {
    expr e = {.fo = -1, .leaf = leaf, .a = -1, .b = -1, .type = f->leaf_type[leaf], .vars = 1u << leaf};
    memset(e.val, 0, sizeof e.val);
    for (int s = 0; s < SEEDS; s++) memcpy(e.val[s], g_in[s][leaf], sizeof(float) * (size_t)type_numel(e.type));
    add_expr(e);
  }
  for (int ops = 1; ops <= MAX_OPS; ops++) {
    int end = g_n;
    for (int i = first; i < end; i++) {
      if (g_e[i].ops != ops - 1) continue;
      for (int k = 0; k < f->n_op; k++) {
        if (f->op[k].arity != 1 || f->op[k].in[0] != g_e[i].type) continue;
        expr e = {.fo = k, .a = i, .b = -1, .ops = ops, .type = f->op[k].out, .vars = g_e[i].vars};
        add_expr(e);
      }
    }
    for (int i = first; i < end; i++)
      for (int j = first; j < end; j++) {
        if (g_e[i].ops + g_e[j].ops != ops - 1) continue;
        for (int k = 0; k < f->n_op; k++) {
          const fop *o = &f->op[k];
          if (o->arity != 2 || o->in[0] != g_e[i].type || o->in[1] != g_e[j].type) continue;
          expr e = {.fo = k, .a = i, .b = j, .ops = ops, .type = o->out, .vars = g_e[i].vars | g_e[j].vars};
          add_expr(e);
        }
      }
  }
}

/* inputs in first-use order */
static void first_uses(int i, int *order, int *n) {
  const expr *e = &g_e[i];
  if (e->fo < 0) {
    for (int k = 0; k < *n; k++)
      if (order[k] == e->leaf) return;
    order[(*n)++] = e->leaf;
    return;
  }
  first_uses(e->a, order, n);
  if (e->b >= 0) first_uses(e->b, order, n);
}

/* the k-th input of a class to be used is the k-th of that class (a
 * renaming of another expression otherwise) */
static bool canonical_names(int i) {
  int order[MAX_LEAF], n = 0, seen[MAX_TYPE] = {0};
  first_uses(i, order, &n);
  for (int k = 0; k < n; k++) {
    int t = g_f->leaf_type[order[k]], rank = 0;
    for (int l = 0; l < order[k]; l++) rank += g_f->leaf_type[l] == t;
    if (rank != seen[t]++) return false;
  }
  return true;
}

/* every proper subexpression is the smallest of its group, commutative
 * operands in enumeration order */
static bool irreducible_below(int i) {
  const expr *e = &g_e[i];
  if (e->fo < 0) return true;
  if (fsl_rw_commutative(g_f->op[e->fo].op) && e->b >= 0 && e->a > e->b) return false;
  int kids[2] = {e->a, e->b};
  for (int k = 0; k < 2; k++) {
    if (kids[k] < 0) continue;
    if (g_e[kids[k]].cls != kids[k] || !irreducible_below(kids[k])) return false;
  }
  return true;
}

/* printing a rule: a slice of the source binds its attributes (sK, pK,
 * zK: conditions pin them to a half of the concatenated axis); one of the
 * target spells them out from the dims of input `x` (class 0) */
typedef struct pctx {
  bool target;
  const char *x;
  int n_slice;
  int half[8], out[8];
} pctx;

/* the shape of class t from the dims of x (class 0: [a,b]; 1: [a*b]) */
static void print_shape(FILE *f, int t, const char *x) {
  if (t == 0) fprintf(f, "(dims %s)", x);
  else fprintf(f, "[(* (dim %s 0) (dim %s 1))]", x, x);
}

static void print_expr(FILE *f, int i, pctx *c) {
  const expr *e = &g_e[i];
  if (e->fo < 0) {
    fputs(g_f->leaf[e->leaf], f);
    return;
  }
  const fop *o = &g_f->op[e->fo];
  fprintf(f, "(%s ", fsl_op_name(o->op));
  print_expr(f, e->a, c);
  if (e->b >= 0) {
    fputc(' ', f);
    print_expr(f, e->b, c);
  }
  if (o->text) fprintf(f, " %s", o->text);
  if (o->half == 3 && c->target) {
    fputs(" :shape ", f);
    print_shape(f, o->out, c->x);
  } else if (o->half == 3) {
    if (c->n_slice == (int)FSL_ARRAY_LEN(c->half)) exit(1);
    c->out[c->n_slice] = o->out;
    c->half[c->n_slice++] = 3;
    fprintf(f, " :shape r%d", c->n_slice);
  } else if (o->half && c->target) {
    if (o->half == 1) fprintf(f, " :starts [0,0] :steps [1,1] :sizes (dims %s)", c->x);
    else fprintf(f, " :starts [0, (dim %s 1)] :steps [1,1] :sizes (dims %s)", c->x, c->x);
  } else if (o->half) {
    if (c->n_slice == (int)FSL_ARRAY_LEN(c->half)) exit(1);
    c->half[c->n_slice++] = o->half;
    fprintf(f, " :starts s%d :steps p%d :sizes z%d", c->n_slice, c->n_slice, c->n_slice);
  }
  fputc(')', f);
}

typedef struct counts {
  int exprs, classes, pairs, kept, subsumed, failed;
} counts;

static fsl_ruleset g_rs; /* core.rules and the rules kept so far */

static fsl_value *build_expr(fsl_builder *b, fsl_value *const *leaves, int i) {
  const expr *e = &g_e[i];
  if (e->fo < 0) return leaves[e->leaf];
  const fop *o = &g_f->op[e->fo];
  fsl_value *in[2] = {build_expr(b, leaves, e->a), e->b >= 0 ? build_expr(b, leaves, e->b) : NULL};
  fsl_attr a[3];
  int n_a = op_attrs(b->g, o, a);
  return fsl_b_prim(b, o->op, in, o->arity, n_a ? a : NULL, n_a);
}

/* whether a rule of g_rs matches somewhere in expression i */
static bool subsumed(int i) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g};
  fsl_value *leaves[MAX_LEAF];
  for (int k = 0; k < g_f->n_leaf; k++) {
    leaves[k] = typed_value(g, g_f->leaf_type[k]);
    fsl_graph_add_input(g, leaves[k]);
  }
  bool hit = false;
  if (!build_expr(&b, leaves, i)) {
    fprintf(stderr, "rulegen: %s\n", fsl_last_error());
    exit(1);
  }
  fsl_rw_match m;
  for (int n = 0; n < g->n_nodes && !hit; n++)
    for (int r = 0; r < g_rs.n_rules && !hit; r++) hit = fsl_rw_match_at(&g_rs.rules[r], g->nodes[n], &m);
  fsl_graph_free(g);
  return hit;
}

/* the conditions of a typed family's rule over the inputs in `vars` */
static void print_conditions(FILE *r, const family *f, unsigned vars, const pctx *pc) {
  bool any = false;
  int first[MAX_TYPE] = {-1, -1, -1};
  for (int k = 0; k < f->n_leaf; k++) {
    if (!(vars & (1u << k))) continue;
    int t = f->leaf_type[k];
    if (first[t] < 0) {
      first[t] = k;
      continue;
    }
    fprintf(r, "%s(eq (dims %s) (dims %s))", any ? " " : "  when ", f->leaf[first[t]], f->leaf[k]);
    any = true;
  }
  /* conv families: class 0 the activations, class 1 the weights */
  if (f->conv_k && first[0] >= 0 && first[1] >= 0) {
    const char *x = f->leaf[first[0]], *w = f->leaf[first[1]];
    fprintf(r, "%s(eq (dims %s) [(dim %s 0), (dim %s 1), %d, %d])", any ? " " : "  when ", w, w, x, f->conv_k, f->conv_k);
    any = true;
  }
  for (int k = 0; k < pc->n_slice; k++) {
    if (pc->half[k] == 3) {
      fprintf(r, "%s(eq r%d ", any ? " " : "  when ", k + 1);
      print_shape(r, pc->out[k], pc->x);
      fputc(')', r);
      any = true;
      continue;
    }
    if (pc->half[k] == 1) fprintf(r, "%s(eq s%d [0,0])", any ? " " : "  when ", k + 1);
    else fprintf(r, "%s(eq s%d [0, (dim %s 1)])", any ? " " : "  when ", k + 1, pc->x);
    fprintf(r, " (eq p%d [1,1]) (eq z%d (dims %s))", k + 1, k + 1, pc->x);
    any = true;
  }
  if (any) fputc('\n', r);
}

static void emit_family(FILE *out, const family *f, counts *c, int *rule_no) {
  g_f = f;
  /* inputs: integers in [-9, 9], exact in float32 (one xorshift stream per family) */
  uint64_t s = 0x2545F4914F6CDD1DULL;
  memset(g_in, 0, sizeof g_in);
  for (int k = 0; k < SEEDS; k++)
    for (int i = 0; i < f->n_leaf; i++)
      for (int64_t j = 0; j < type_numel(f->leaf_type[i]); j++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        g_in[k][i][j] = (float)((int)(s % 19) - 9);
      }
  counts before = *c;
  int first = g_n;
  enumerate(f, first);
  /* groups: the first (smallest: enumerated by op count) with a
   * fingerprint, found through an open-addressing table */
  int n = g_n - first;
  size_t cap = 1;
  while (cap < 2 * (size_t)n) cap <<= 1;
  int *tab = malloc(cap * sizeof *tab);
  if (!tab) exit(1);
  memset(tab, -1, cap * sizeof *tab);
  for (int i = first; i < g_n; i++) {
    g_e[i].cls = i;
    for (size_t h = (size_t)g_e[i].fp & (cap - 1);; h = (h + 1) & (cap - 1)) {
      int j = tab[h];
      if (j < 0) {
        tab[h] = i;
        break;
      }
      if (g_e[j].fp == g_e[i].fp && g_e[j].type == g_e[i].type && !memcmp(g_e[j].val, g_e[i].val, sizeof g_e[i].val)) {
        g_e[i].cls = j;
        break;
      }
    }
    c->classes += g_e[i].cls == i;
  }
  free(tab);
  c->exprs += n;
  char *body = NULL;
  size_t body_len = 0;
  FILE *bf = open_memstream(&body, &body_len);
  if (!bf) exit(1);
  for (int i = first; i < g_n; i++) {
    const expr *e = &g_e[i], *t = &g_e[e->cls];
    if (e->cls == i) continue;
    c->pairs++;
    if (e->ops <= t->ops || (t->vars & ~e->vars) || !canonical_names(i) || !irreducible_below(i)) continue;
    if (e->fo < 0) continue;
    if (subsumed(i)) {
      c->subsumed++;
      continue;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *r = open_memstream(&text, &len);
    if (!r) exit(1);
    fprintf(r, "rule gen-%s-%d\n  from ", f->name, *rule_no + 1);
    pctx src = {.target = false}, dst = {.target = true};
    for (int k = f->n_leaf - 1; k >= 0; k--)
      if ((e->vars & (1u << k)) && f->leaf_type[k] == 0) src.x = dst.x = f->leaf[k];
    print_expr(r, i, &src);
    fputs("\n  to   ", r);
    print_expr(r, e->cls, &dst);
    fputc('\n', r);
    if (f->square) {
      fputs("  when (square", r);
      for (int k = 0; k < f->n_leaf; k++)
        if (e->vars & (1u << k)) fprintf(r, " %s", f->leaf[k]);
      fputs(")\n", r);
    }
    if (f->pin) print_conditions(r, f, e->vars, &src);
    fputs("  test", r);
    for (int k = 0; k < f->n_leaf; k++)
      if (e->vars & (1u << k)) fprintf(r, " %s:%s", f->leaf[k], f->type[f->leaf_type[k]].test);
    for (int k = 0; k < src.n_slice; k++)
      if (src.half[k] == 3) fprintf(r, " r%d=%s", k + 1, f->type[src.out[k]].test);
      else fprintf(r, " s%d=[0,%s] p%d=[1,1] z%d=[a,b]", k + 1, src.half[k] == 1 ? "0" : "b", k + 1, k + 1);
    fputc('\n', r);
    fclose(r);
    /* proved as the build proves it (tests/unit/test_rewrite.c), on a few seeds */
    fsl_ruleset one;
    memset(&one, 0, sizeof one);
    bool ok = fsl_ruleset_parse(&one, text, "generated") == FSL_OK && one.n_rules == 1;
    for (uint64_t seed = 1; ok && seed <= 4; seed++) ok = fsl_rule_check(&one.rules[0], CHECK_TRIALS, seed * 7919) == FSL_OK;
    if (!ok) {
      fprintf(stderr, "rulegen: dropped (the check fails: %s):\n%s", fsl_last_error(), text);
      c->failed++;
    }
    fsl_ruleset_free(&one);
    if (ok) {
      c->kept++;
      ++*rule_no;
      fputs(text, bf);
      if (fsl_ruleset_parse(&g_rs, text, "generated") != FSL_OK) {
        fprintf(stderr, "rulegen: %s\n", fsl_last_error());
        exit(1);
      }
    }
    free(text);
  }
  fclose(bf);
  fprintf(out, "\n# ---- %s family: %d expressions up to %d ops, %d rules ----\n", f->name, n, MAX_OPS,
          c->kept - before.kept);
  fputs(body, out);
  free(body);
  fprintf(stderr, "rulegen: %-12s %6d expressions, %5d groups, %6d pairs, %4d subsumed, %3d failed the check, %3d kept\n",
          f->name, n, c->classes - before.classes, c->pairs - before.pairs, c->subsumed - before.subsumed,
          c->failed - before.failed, c->kept - before.kept);
  g_n = first; /* the next family starts afresh */
}

#define UN(o, t) {.op = FSL_OP_##o, .arity = 1, .in = {t, t}, .out = t}
#define BIN(o, t) {.op = FSL_OP_##o, .arity = 2, .in = {t, t}, .out = t}

int main(int argc, char **argv) {
  FILE *out = argc > 1 ? fopen(argv[1], "w") : stdout;
  if (!out) {
    perror(argv[1]);
    return 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const family fams[] = {
      {.name = "elementwise",
       .n_type = 1,
       .type = {{2, {3, 3}, "[a,b]"}},
       .n_leaf = 3,
       .leaf = {"x", "y", "z"},
       .n_op = 4,
       .op = {UN(neg, 0), BIN(add, 0), BIN(sub, 0), BIN(mul, 0)}},
      {.name = "matrix",
       .n_type = 1,
       .type = {{2, {3, 3}, "[a,a]"}},
       .n_leaf = 3,
       .leaf = {"x", "y", "z"},
       .n_op = 5,
       .op = {UN(neg, 0),
              {.op = FSL_OP_permute, .arity = 1, .attr = "perm", .n_attr = 2, .attr_v = {1, 0}, .text = ":perm [1,0]"},
              BIN(matmul, 0), BIN(add, 0), BIN(sub, 0)},
       .square = true},
      /* piecewise linear: max and min (ReLU's and Clip's primitives) with
       * neg, add, sub; not multi-linear, so a shared fingerprint is only
       * evidence: fsl_rule_check proves these on floats */
      {.name = "minmax",
       .n_type = 1,
       .type = {{2, {3, 3}, "[a,b]"}},
       .n_leaf = 3,
       .leaf = {"x", "y", "z"},
       .n_op = 5,
       .op = {UN(neg, 0), BIN(max, 0), BIN(min, 0), BIN(add, 0), BIN(sub, 0)}},
      /* class 0: [a,b]; class 1: its sum over axis 1, [a,1] */
      {.name = "reduce",
       .n_type = 2,
       .type = {{2, {3, 4}, "[a,b]"}, {2, {3, 1}, "[a,1]"}},
       .n_leaf = 3,
       .leaf = {"x", "y", "z"},
       .n_op = 11,
       .op = {UN(neg, 0), UN(neg, 1),
              {.op = FSL_OP_reduce_sum, .arity = 1, .in = {0}, .out = 1, .attr = "axes", .n_attr = 1, .attr_v = {1},
               .text = ":axes [1]"},
              {.op = FSL_OP_reduce_sum, .arity = 1, .in = {1}, .out = 1, .attr = "axes", .n_attr = 1, .attr_v = {1},
               .text = ":axes [1]"},
              BIN(add, 0), BIN(sub, 0), BIN(mul, 0), BIN(add, 1), BIN(sub, 1), BIN(mul, 1)},
       .pin = true},
      /* class 0: activations [n,c,h,w]; 1: weights [e,c,k,k]; 2: the result [n,e,h,w] */
      {.name = "conv3x3",
       .n_type = 3,
       .type = {{4, {1, 2, 4, 4}, "[a,b,c,d]"}, {4, {3, 2, 3, 3}, "[e,b,3,3]"}, {4, {1, 3, 4, 4}, "[a,e,c,d]"}},
       .n_leaf = 4,
       .leaf = {"x", "y", "w", "v"},
       .leaf_type = {0, 0, 1, 1},
       .n_op = 10,
       .op = {UN(neg, 0), UN(neg, 1), UN(neg, 2),
              {.op = FSL_OP_conv, .arity = 2, .in = {0, 1}, .out = 2, .attr = "pads", .n_attr = 4, .attr_v = {1, 1, 1, 1},
               .text = ":pads [1,1,1,1] :strides [1,1] :dilations [1,1] :lhs_dilation [1,1] :group 1"},
              BIN(add, 0), BIN(sub, 0), BIN(add, 1), BIN(sub, 1), BIN(add, 2), BIN(sub, 2)},
       .pin = true,
       .conv_k = 3},
      {.name = "conv1x1",
       .n_type = 3,
       .type = {{4, {1, 2, 3, 3}, "[a,b,c,d]"}, {4, {3, 2, 1, 1}, "[e,b,1,1]"}, {4, {1, 3, 3, 3}, "[a,e,c,d]"}},
       .n_leaf = 4,
       .leaf = {"x", "y", "w", "v"},
       .leaf_type = {0, 0, 1, 1},
       .n_op = 10,
       .op = {UN(neg, 0), UN(neg, 1), UN(neg, 2), {.op = FSL_OP_conv, .arity = 2, .in = {0, 1}, .out = 2,
               .text = ":pads [0,0,0,0] :strides [1,1] :dilations [1,1] :lhs_dilation [1,1] :group 1"},
              BIN(add, 0), BIN(sub, 0), BIN(add, 1), BIN(sub, 1), BIN(add, 2), BIN(sub, 2)},
       .pin = true,
       .conv_k = 1},
      /* class 0: [a,b]; class 1: two of them concatenated on axis 1, [a,2b] */
      {.name = "concat",
       .n_type = 2,
       .type = {{2, {2, 3}, "[a,b]"}, {2, {2, 6}, "[a,2*b]"}},
       .n_leaf = 3,
       .leaf = {"x", "y", "z"},
       .n_op = 9,
       .op = {UN(neg, 0), UN(neg, 1), {.op = FSL_OP_slice, .arity = 1, .in = {1}, .out = 0, .half = 1},
              {.op = FSL_OP_slice, .arity = 1, .in = {1}, .out = 0, .half = 2},
              {.op = FSL_OP_concat, .arity = 2, .in = {0, 0}, .out = 1, .attr = "axis", .n_attr = -1, .attr_v = {1},
               .text = ":axis 1"},
              BIN(add, 0), BIN(sub, 0), BIN(add, 1), BIN(sub, 1)},
       .pin = true},
      /* class 0: [a,b]; class 1: the same flattened, [a*b] */
      {.name = "reshape",
       .n_type = 2,
       .type = {{2, {2, 3}, "[a,b]"}, {1, {6}, "[a*b]"}},
       .n_leaf = 3,
       .leaf = {"x", "y", "z"},
       .n_op = 10,
       .op = {UN(neg, 0), UN(neg, 1), {.op = FSL_OP_reshape, .arity = 1, .in = {0}, .out = 1, .half = 3},
              {.op = FSL_OP_reshape, .arity = 1, .in = {1}, .out = 0, .half = 3},
              BIN(add, 0), BIN(sub, 0), BIN(mul, 0), BIN(add, 1), BIN(sub, 1), BIN(mul, 1)},
       .pin = true},
  };
  fprintf(out, "# generated.rules — written by tools/rulegen.c (`make rules`): do not edit.\n"
               "# Rules found by enumeration and fingerprinting (docs/rewrite.md, \"Generated rules\").\n");
  extern const char fsl_rules_core[];
  if (fsl_ruleset_parse(&g_rs, fsl_rules_core, "core.rules") != FSL_OK) {
    fprintf(stderr, "rulegen: %s\n", fsl_last_error());
    return 1;
  }
  counts c = {0};
  int rule_no = 0;
  for (size_t i = 0; i < FSL_ARRAY_LEN(fams); i++) emit_family(out, &fams[i], &c, &rule_no);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  fprintf(out, "\n# %d expressions, %d fingerprint groups, %d candidate pairs, %d subsumed by earlier rules,\n"
               "# %d failed the check (dropped), %d rules kept\n", c.exprs, c.classes, c.pairs, c.subsumed, c.failed, c.kept);
  fprintf(stderr, "rulegen: %d expressions, %d fingerprint groups, %d candidate pairs, %d subsumed by earlier rules, "
          "%d failed the check, %d rules kept (%.2f s)\n", c.exprs, c.classes, c.pairs, c.subsumed, c.failed, c.kept, secs);
  fsl_ruleset_free(&g_rs);
  if (out != stdout) fclose(out);
  free(g_e);
  return 0;
}
