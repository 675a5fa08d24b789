/*
 * rulegen.c — `fissile_rulegen [OUT.rules]`: generates rewrite rules the
 * way TASO does (Jia et al., SOSP'19, section 3): enumerate every
 * primitive expression up to MAX_OPS ops over a small op set and up to
 * three inputs, fingerprint each on random integer inputs with the
 * reference interpreter, group the expressions with equal fingerprints,
 * and emit "larger -> smallest of its group" as rules in the language of
 * core.rules (docs/rewrite.md).  The output is checked in as
 * src/rewrite/generated.rules (`make rules`); the test suite proves every
 * rule of it again, on random shapes, on every build.
 *
 * Two families, each with the shapes under which its ops compose:
 *   elementwise  neg, add, sub, mul over x, y, z of one shape: the rules
 *                hold at any shape (elementwise primitives take operands
 *                of equal shape);
 *   matrix       matmul, transpose (permute [1,0]), add, sub, neg over
 *                square matrices: the rules carry (square ...).
 * All of these ops are multi-linear, so integer fingerprints are exact
 * (PET, OSDI'21: different multi-linear programs disagree on random
 * integers with overwhelming probability).
 *
 * Pruning (TASO's "redundant substitutions"): an expression is a source
 * only when each of its proper subexpressions is the smallest of its own
 * group (otherwise a smaller rule rewrites it first), its inputs appear in
 * the order x, y, z (a renaming of a kept rule is the same rule), a
 * commutative op's operands are in enumeration order (the matcher tries
 * both orders), and no rule kept before it (nor a hand-written rule of
 * core.rules) matches anywhere in it: then that rule, with its variables
 * bound to subexpressions, already does the rewrite.  A rule must shrink
 * the op count (the driver then ends) and its target may use only inputs
 * of its source.
 */
#include "eval/eval.h"
#include "fission/builder.h"
#include "ir/ir.h"
#include "rewrite/rewrite.h"

#include <stdio.h>

#define MAX_OPS 3
#define N 3           /* fingerprint matrices are N x N */
#define ELEMS (N * N)
#define SEEDS 2       /* fingerprints from two independent input draws */
#define MAX_EXPR 200000

typedef struct expr {
  fsl_op op;        /* FSL_OP_NONE: input `leaf` */
  bool transpose;   /* permute [1,0] */
  int leaf;         /* 0..2: x, y, z */
  int a, b;         /* operands (expression ids), -1 */
  int ops;          /* op count */
  unsigned vars;    /* bit mask of inputs used */
  float val[SEEDS][ELEMS];
  uint64_t fp;
  int cls;          /* the smallest expression with the same fingerprint */
} expr;

typedef struct family {
  const char *name;
  const fsl_op *unary;
  int n_unary;
  bool transpose;
  const fsl_op *binary;
  int n_binary;
  bool square;
} family;

static expr *g_e;
static int g_n;
static float g_in[SEEDS][3][ELEMS];

static bool commutative(fsl_op op) { return op == FSL_OP_add || op == FSL_OP_mul; }

/* Evaluates one op on N x N float32 operands with the reference interpreter. */
static void eval_op(expr *e) {
  fsl_graph *g = fsl_graph_new();
  int64_t dims[2] = {N, N};
  for (int s = 0; s < SEEDS; s++) {
    fsl_value *in[2] = {NULL, NULL};
    const float *src[2] = {g_e[e->a].val[s], e->b >= 0 ? g_e[e->b].val[s] : NULL};
    int n_in = e->b >= 0 ? 2 : 1;
    for (int i = 0; i < n_in; i++) {
      in[i] = fsl_graph_add_value(g, NULL);
      in[i]->dtype = FSL_DT_F32;
      fsl_value_set_shape(in[i], 2, dims);
    }
    fsl_value *out = fsl_graph_add_value(g, NULL);
    out->dtype = FSL_DT_F32;
    fsl_value_set_shape(out, 2, dims);
    int64_t perm[2] = {1, 0};
    fsl_attr a = fsl_attr_make_ints(g, "perm", perm, 2);
    fsl_node *n = fsl_graph_add_node(g, e->transpose ? FSL_OP_permute : e->op, NULL, in, n_in, &out, 1,
                                     e->transpose ? &a : NULL, e->transpose ? 1 : 0);
    void *outp = e->val[s];
    if (!n || fsl_ref_eval(n, (const void *const *)src, &outp) != FSL_OK) {
      fprintf(stderr, "rulegen: %s\n", fsl_last_error());
      exit(1);
    }
  }
  fsl_graph_free(g);
}

static int add_expr(expr e) {
  if (g_n == MAX_EXPR) {
    fprintf(stderr, "rulegen: more than %d expressions\n", MAX_EXPR);
    exit(1);
  }
  if (e.a >= 0) eval_op(&e);
  for (int s = 0; s < SEEDS; s++)
    for (int i = 0; i < ELEMS; i++) e.val[s][i] += 0.0f; /* -0 and 0 are one value */
  uint64_t h = FSL_HASH_INIT;
  h = fsl_hash(h, e.val, sizeof e.val);
  e.fp = h;
  g_e[g_n] = e;
  return g_n++;
}

/* Every expression of the family up to MAX_OPS ops, by op count. */
static void enumerate(const family *f, int first) {
  for (int leaf = 0; leaf < 3; leaf++) {
    expr e = {.op = FSL_OP_NONE, .leaf = leaf, .a = -1, .b = -1, .vars = 1u << leaf};
    for (int s = 0; s < SEEDS; s++) memcpy(e.val[s], g_in[s][leaf], sizeof e.val[s]);
    add_expr(e);
  }
  for (int ops = 1; ops <= MAX_OPS; ops++) {
    int end = g_n;
    for (int i = first; i < end; i++) {
      if (g_e[i].ops != ops - 1) continue;
      for (int u = 0; u < f->n_unary + (f->transpose ? 1 : 0); u++) {
        bool tr = u == f->n_unary;
        expr e = {.op = tr ? FSL_OP_permute : f->unary[u], .transpose = tr, .a = i, .b = -1, .ops = ops,
                  .vars = g_e[i].vars};
        add_expr(e);
      }
    }
    for (int i = first; i < end; i++)
      for (int j = first; j < end; j++) {
        if (g_e[i].ops + g_e[j].ops != ops - 1) continue;
        for (int k = 0; k < f->n_binary; k++) {
          expr e = {.op = f->binary[k], .a = i, .b = j, .ops = ops, .vars = g_e[i].vars | g_e[j].vars};
          add_expr(e);
        }
      }
  }
}

/* inputs in first-use order x, y, z (a renaming of another expression otherwise) */
static void first_uses(int i, int *order, int *n) {
  const expr *e = &g_e[i];
  if (e->op == FSL_OP_NONE) {
    for (int k = 0; k < *n; k++)
      if (order[k] == e->leaf) return;
    order[(*n)++] = e->leaf;
    return;
  }
  first_uses(e->a, order, n);
  if (e->b >= 0) first_uses(e->b, order, n);
}

static bool canonical_names(int i) {
  int order[3], n = 0;
  first_uses(i, order, &n);
  for (int k = 0; k < n; k++)
    if (order[k] != k) return false;
  return true;
}

/* every proper subexpression is the smallest of its group, commutative
 * operands in enumeration order */
static bool irreducible_below(int i) {
  const expr *e = &g_e[i];
  if (e->op == FSL_OP_NONE) return true;
  if (commutative(e->op) && e->b >= 0 && e->a > e->b) return false;
  int kids[2] = {e->a, e->b};
  for (int k = 0; k < 2; k++) {
    if (kids[k] < 0) continue;
    if (g_e[kids[k]].cls != kids[k] || !irreducible_below(kids[k])) return false;
  }
  return true;
}

static void print_expr(FILE *f, int i) {
  const expr *e = &g_e[i];
  if (e->op == FSL_OP_NONE) {
    fputc("xyz"[e->leaf], f);
    return;
  }
  fprintf(f, "(%s ", e->transpose ? "permute" : fsl_op_name(e->op));
  print_expr(f, e->a);
  if (e->b >= 0) {
    fputc(' ', f);
    print_expr(f, e->b);
  }
  if (e->transpose) fputs(" :perm [1,0]", f);
  fputc(')', f);
}

typedef struct counts {
  int exprs, classes, pairs, kept, subsumed;
} counts;

static fsl_ruleset g_rs; /* core.rules and the rules kept so far */

static fsl_value *build_expr(fsl_builder *b, fsl_value *const *leaves, int i) {
  const expr *e = &g_e[i];
  if (e->op == FSL_OP_NONE) return leaves[e->leaf];
  fsl_value *in[2] = {build_expr(b, leaves, e->a), e->b >= 0 ? build_expr(b, leaves, e->b) : NULL};
  int64_t perm[2] = {1, 0};
  fsl_attr a = fsl_attr_make_ints(b->g, "perm", perm, 2);
  return fsl_b_prim(b, e->op, in, e->b >= 0 ? 2 : 1, e->transpose ? &a : NULL, e->transpose ? 1 : 0);
}

/* whether a rule of g_rs matches somewhere in expression i */
static bool subsumed(int i) {
  fsl_graph *g = fsl_graph_new();
  fsl_builder b = {.g = g};
  int64_t dims[2] = {N, N};
  fsl_value *leaves[3];
  for (int k = 0; k < 3; k++) {
    leaves[k] = fsl_graph_add_value(g, NULL);
    leaves[k]->dtype = FSL_DT_F32;
    fsl_value_set_shape(leaves[k], 2, dims);
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

static void emit_family(FILE *out, const family *f, counts *c, int *rule_no) {
  int first = g_n;
  enumerate(f, first);
  /* groups: the first (smallest: enumerated by op count) with a fingerprint */
  for (int i = first; i < g_n; i++) {
    g_e[i].cls = i;
    for (int j = first; j < i; j++)
      if (g_e[j].fp == g_e[i].fp && !memcmp(g_e[j].val, g_e[i].val, sizeof g_e[i].val)) {
        g_e[i].cls = g_e[j].cls;
        break;
      }
    c->classes += g_e[i].cls == i;
  }
  c->exprs += g_n - first;
  fprintf(out, "\n# ---- %s family: %d expressions up to %d ops ----\n", f->name, g_n - first, MAX_OPS);
  for (int i = first; i < g_n; i++) {
    const expr *e = &g_e[i], *t = &g_e[e->cls];
    if (e->cls == i) continue;
    c->pairs++;
    if (e->ops <= t->ops || (t->vars & ~e->vars) || !canonical_names(i) || !irreducible_below(i)) continue;
    if (e->op == FSL_OP_NONE) continue;
    if (subsumed(i)) {
      c->subsumed++;
      continue;
    }
    c->kept++;
    char *text = NULL;
    size_t len = 0;
    FILE *r = open_memstream(&text, &len);
    if (!r) exit(1);
    fprintf(r, "rule gen-%s-%d\n  from ", f->name, ++*rule_no);
    print_expr(r, i);
    fputs("\n  to   ", r);
    print_expr(r, e->cls);
    fputc('\n', r);
    const char *names[3] = {"x", "y", "z"};
    if (f->square) {
      fputs("  when (square", r);
      for (int k = 0; k < 3; k++)
        if (e->vars & (1u << k)) fprintf(r, " %s", names[k]);
      fputs(")\n", r);
    }
    fputs("  test", r);
    for (int k = 0; k < 3; k++)
      if (e->vars & (1u << k)) fprintf(r, " %s:[a,%s]", names[k], f->square ? "a" : "b");
    fputc('\n', r);
    fclose(r);
    fputs(text, out);
    if (fsl_ruleset_parse(&g_rs, text, "generated") != FSL_OK) {
      fprintf(stderr, "rulegen: %s\n", fsl_last_error());
      exit(1);
    }
    free(text);
  }
}

int main(int argc, char **argv) {
  FILE *out = argc > 1 ? fopen(argv[1], "w") : stdout;
  if (!out) {
    perror(argv[1]);
    return 1;
  }
  g_e = calloc(MAX_EXPR, sizeof *g_e);
  if (!g_e) return 1;
  uint64_t s = 0x2545F4914F6CDD1DULL;
  for (int k = 0; k < SEEDS; k++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < ELEMS; j++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        g_in[k][i][j] = (float)((int)(s % 19) - 9); /* integers in [-9, 9]: exact in float32 */
      }
  static const fsl_op elem_un[] = {FSL_OP_neg}, elem_bin[] = {FSL_OP_add, FSL_OP_sub, FSL_OP_mul};
  static const fsl_op mat_un[] = {FSL_OP_neg}, mat_bin[] = {FSL_OP_matmul, FSL_OP_add, FSL_OP_sub};
  const family fams[] = {
      {"elementwise", elem_un, 1, false, elem_bin, 3, false},
      {"matrix", mat_un, 1, true, mat_bin, 3, true},
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
  fprintf(out, "\n# %d expressions, %d fingerprint groups, %d candidate pairs, %d subsumed by earlier rules,\n"
               "# %d rules kept\n", c.exprs, c.classes, c.pairs, c.subsumed, c.kept);
  fprintf(stderr, "rulegen: %d expressions, %d fingerprint groups, %d candidate pairs, %d subsumed by earlier rules, "
          "%d rules kept\n", c.exprs, c.classes, c.pairs, c.subsumed, c.kept);
  fsl_ruleset_free(&g_rs);
  if (out != stdout) fclose(out);
  free(g_e);
  return 0;
}
