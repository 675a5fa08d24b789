/*
 * rewrite.h — verified algebraic substitutions over the primitive graph
 * (DESIGN.md "rewrite", docs/rewrite.md).
 *
 * A rule is data: a source pattern, a target pattern, conditions and a
 * test instance, written in the small s-expression language of
 * src/rewrite/core.rules (grammar in docs/rewrite.md).  The rule set is
 * parsed once (rules.c); the matcher (match.c) finds a rule's source in a
 * graph with backtracking over commutative operands; the applier
 * (apply.c) builds the target with the fission builder (so constant
 * subexpressions fold) and redirects the uses of the source's roots; the
 * driver (rewrite.c) applies rules until none fires; check.c instantiates
 * every rule on random shapes and proves both sides equal with the
 * reference interpreter (the test suite runs it on every build).
 *
 * Semantics: TASO (Jia et al., SOSP'19) for substitutions as graph pairs
 * verified before use; PET (Wang et al., OSDI'21) for testing multi-linear
 * rules exactly on random integers.
 */
#ifndef FSL_REWRITE_H
#define FSL_REWRITE_H

#include "ir/ir.h"

/* ---- the rule language (rules.c) ---- */
typedef enum fsl_rw_kind {
  FSL_RW_VAR,   /* a name: a value, an attribute or a node label */
  FSL_RW_NODE,  /* (op arg... :attr val...), optionally labelled L=(...) */
  FSL_RW_NUM,   /* an integer or float literal */
  FSL_RW_LIST,  /* [e, e, ...] */
  FSL_RW_CALL,  /* (function arg...): an attribute function or a condition */
  FSL_RW_ARITH  /* a*b+1 inside test shapes: op in name ("*" "+" "-"), two args */
} fsl_rw_kind;

typedef struct fsl_rw_expr fsl_rw_expr;
typedef struct fsl_rw_attr { const char *name; fsl_rw_expr *val; } fsl_rw_attr;

struct fsl_rw_expr {
  fsl_rw_kind kind;
  const char *name;      /* VAR name, CALL function, ARITH operator */
  const char *label;     /* NODE: its label (NULL: none) */
  fsl_op op;             /* NODE */
  fsl_rw_expr **args;    /* NODE operands, CALL/ARITH arguments, LIST items */
  int n_args;
  fsl_rw_attr *attrs;    /* NODE attributes */
  int n_attrs;
  const char *like;      /* NODE in a target: copy the attributes of this source label */
  double num;            /* NUM */
  bool is_int;           /* NUM: written without a fraction */
};

/* How the test instance makes one name of a rule. */
typedef enum fsl_rw_test_kind {
  FSL_RWT_INPUT,   /* x:[dims] or x:float[dims] (x:float+[dims]: positive values) */
  FSL_RWT_CONST,   /* W:const[dims], W:const=1.5[dims] (every element 1.5),
                      W:const@1[dims] (random along axis 1 only: a folded broadcast) */
  FSL_RWT_PERM,    /* p:perm(4): a random permutation of 0..3 */
  FSL_RWT_INTS     /* s=[a*b,c]: an integer list; k=1: one integer */
} fsl_rw_test_kind;

typedef struct fsl_rw_test {
  const char *name;
  fsl_rw_test_kind kind;
  fsl_dtype dtype;
  bool positive;
  bool has_fill;
  double fill;
  int vary_axis;         /* const@AXIS: random along AXIS only, the same along the others; -1: none */
  fsl_rw_expr *dims;     /* LIST of dims expressions; PERM: NUM length */
} fsl_rw_test;

#define FSL_RW_MAX_ROOTS 4

typedef struct fsl_rule {
  const char *name;
  const char *file;       /* where it was written, for messages */
  int line;
  fsl_rw_expr *from[FSL_RW_MAX_ROOTS];
  int n_from;
  fsl_rw_expr *to[FSL_RW_MAX_ROOTS];
  int n_to;
  fsl_rw_expr **when;     /* conditions (CALL), all must hold */
  int n_when;
  fsl_rw_test *tests;
  int n_tests;
  bool multilinear;       /* every op on both sides is multi-linear: tested exactly on integers */
  bool cost;              /* `rule NAME cost`: applied only where the cost model says the plan
                             gets faster (fsl_rewrite_search), never by fsl_rewrite */
} fsl_rule;

typedef struct fsl_ruleset {
  fsl_arena arena;
  fsl_rule *rules;
  int n_rules, cap_rules;
} fsl_ruleset;

/**
 * Parses rule text (the language of docs/rewrite.md) into `rs` (which must
 * be zeroed or hold earlier rules: rules are appended).  `file` names the
 * text in messages.  Errors: FSL_ERR_PARSE naming file:line and what was
 * expected (unknown op, function, attribute syntax, a name of the target
 * or the conditions that the source does not bind, a rule without a test
 * instance), FSL_ERR_NOMEM.
 */
fsl_status fsl_ruleset_parse(fsl_ruleset *rs, const char *text, const char *file);
void fsl_ruleset_free(fsl_ruleset *rs);
/** The built-in rule set (core.rules, then generated.rules: compiled into
 *  the library), parsed
 *  once per process; NULL with the error set if it fails to parse (a
 *  build defect that the test suite catches). */
const fsl_ruleset *fsl_ruleset_builtin(void);

/* ---- matching and applying (match.c, apply.c) ---- */
/* An integer attribute value: one integer (INT) or a list (INTS). */
#define FSL_RW_MAX_INTS (2 * FSL_MAX_RANK + 4)
typedef struct fsl_rw_ints {
  bool list;
  int n;
  int64_t v[FSL_RW_MAX_INTS];
} fsl_rw_ints;

#define FSL_RW_MAX_BIND 48
#define FSL_RW_MAX_NODES 32

typedef struct fsl_rw_bind {
  const char *name;
  fsl_value *v;          /* a value (or a label's output) */
  fsl_node *n;           /* a label's node */
  bool is_attr;          /* an attribute variable: its value in ints */
  fsl_rw_ints ints;
} fsl_rw_bind;

typedef struct fsl_rw_match {
  const fsl_rule *rule;
  fsl_rw_bind bind[FSL_RW_MAX_BIND];
  int n_bind;
  fsl_node *nodes[FSL_RW_MAX_NODES];  /* every node the source matched */
  int n_nodes;
  fsl_value *roots[FSL_RW_MAX_ROOTS];  /* the values the source roots matched */
} fsl_rw_match;

/**
 * Whether rule r's source matches with its first root at node n (other
 * roots among the consumers of values the first root bound) and its
 * conditions hold; fills *m.  Commutative operands (add, mul, max, min,
 * and, or, xor, eq) are tried in both orders.  Never fails: a condition
 * that cannot be evaluated (a shape it does not fit) is false.
 */
bool fsl_rw_match_at(const fsl_rule *r, fsl_node *n, fsl_rw_match *m);

/** Whether binary op `op` is commutative (add, mul, max, min, and, or,
 *  xor, eq): the matcher tries both operand orders, the search's
 *  structural hash ignores the order. */
bool fsl_rw_commutative(fsl_op op);

/** Whether the match's intermediate values (every matched node but the
 *  roots) are used only inside the match, so that applying it removes
 *  them: the rewrite then never duplicates work.  Views (movement
 *  primitives) may be shared: keeping one costs no work. */
bool fsl_rw_match_is_closed(const fsl_rw_match *m);

/**
 * Builds the target of match m into g and makes every use of the source's
 * roots read the target's values instead (a root that is a graph output
 * passes its name to the new value).  New nodes are appended: call
 * fsl_graph_toposort and fsl_pass_dce afterwards.  Returns FSL_OK;
 * FSL_ERR_UNSUPPORTED (nothing changed but dead nodes, no message kept)
 * when the target cannot replace a graph output by an existing value or
 * does not type-check at the matched shapes; FSL_ERR_INVALID
 * naming the rule when the target's shape or dtype differs from the
 * source's (a defect of the rule), FSL_ERR_NOMEM.
 */
fsl_status fsl_rw_apply(fsl_graph *g, const fsl_rw_match *m);

/** Makes every use of `old` read `to`; when old is a graph output, `to`
 *  takes its name and its place among the outputs (old is renamed
 *  NAME~replaced and dies at the next dead-code pass). */
void fsl_rw_replace_root(fsl_graph *g, fsl_value *old, fsl_value *to);

/* ---- rewrites written in C (sink.c, linmerge.c) ---- */
/* Their names in fsl_rewrite's statistics: their counts are
 * stats->fired[n_rules] and [n_rules + 1], after the rules'. */
#define FSL_RW_SINK_NAME "conv1x1-before-resample"
#define FSL_RW_LINMERGE_NAME "conv1x1-into-matmul"
#define FSL_RW_N_CODED 2

/** The name of the i-th rewrite written in C (0 <= i < FSL_RW_N_CODED, in
 *  the order fsl_rewrite runs them), or NULL. */
const char *fsl_rw_coded_name(int i);

/** Whether n is a 1x1 convolution fsl_rewrite_sink and
 *  fsl_rewrite_linmerge can move: constant [C_out, C_in, 1, 1] weights,
 *  strides and dilations 1, no padding, one group, a rank-4 input. */
bool fsl_rw_pointwise_conv(const fsl_node *n);

/**
 * Moves every 1x1 convolution (strides, dilations 1, no padding, one group,
 * constant [C_out, C_in, 1, 1] weights, float32 NCHW) whose input is a
 * channel concat of per-channel linear resamplings (gathers with constant
 * indices along axes other than the channel axis, products with constants
 * broadcast over channels, add, sub, neg: Resize's linear and cubic modes
 * after fission), or one such resampling, before them: the sum over the
 * concat's operands of the resampling applied to conv(source, W[:, C_i])
 * (linear maps over channels and over positions commute).  Applied only
 * where everything replaced is read by nothing else and the estimated work
 * (2 C_out C_in FLOPs per convolved position, 32 per element the
 * convolutions and the resampling write) drops below 3/4.  New nodes are appended: sort and remove dead
 * nodes afterwards.  Adds the rewrites made to *applied.  Errors:
 * FSL_ERR_NOMEM (g may then be partly rewritten).
 */
fsl_status fsl_rewrite_sink(fsl_graph *g, int *applied);

/**
 * Merges every 1x1 convolution (fsl_rw_pointwise_conv) whose input is a 2-D
 * matmul [P, K] x [K, C] with constant weights, seen through reshapes and
 * permutes that keep the channel axis whole and an add of a constant
 * broadcast along it (a bias), into that matmul: matmul(a, M W') + b W'
 * through the same views with C_out channels, W' = W as [C, C_out], the
 * constant products folded.  Applied only where every value on the way is
 * read by nothing else; then the FLOPs always drop (2 P (K C + C C_out) to
 * 2 P K C_out).  New nodes are appended: sort and remove dead nodes
 * afterwards.  Adds the rewrites made to *applied.  Errors: FSL_ERR_NOMEM;
 * FSL_ERR_INVALID if the rebuilt value's shape differs from the conv's (a
 * defect).
 */
fsl_status fsl_rewrite_linmerge(fsl_graph *g, int *applied);

/* Evaluation of attribute expressions and conditions (apply.c). */
/** Whether constant v varies only along axis ax (0 <= ax < rank): every
 *  element equals the one at its coordinate on ax and 0 elsewhere (a
 *  broadcast of a vector folded into a full-size constant); the condition
 *  `(varies-only CONST AXIS)`.  False for a non-constant or empty v. */
bool fsl_rw_varies_only(const fsl_value *v, int64_t ax);
/** Evaluates an attribute expression of rule r under match m; false when
 *  it does not apply (unknown name, axis out of range). */
bool fsl_rw_eval_ints(const fsl_rw_match *m, const fsl_rw_expr *e, fsl_rw_ints *out);
/** Evaluates condition e; false when it does not hold or cannot be evaluated. */
bool fsl_rw_eval_cond(const fsl_rw_match *m, const fsl_rw_expr *e);
/** Node n's integer attribute `name`, or the op's default for an
 *  optional one (conv: strides, dilations, lhs_dilation 1, pads 0,
 *  group 1); false when absent or not an integer attribute. */
bool fsl_rw_node_ints(const fsl_node *n, const char *name, fsl_rw_ints *out);
bool fsl_rw_ints_equal(const fsl_rw_ints *a, const fsl_rw_ints *b);
/** The binding of `name` in m, or NULL. */
const fsl_rw_bind *fsl_rw_lookup(const fsl_rw_match *m, const char *name);

/* ---- the driver (rewrite.c) ---- */
typedef struct fsl_rewrite_stats {
  int n_applied;            /* rewrites applied */
  int n_rules;              /* rules in the set */
  int *fired;               /* per rule of the set, then the FSL_RW_N_CODED rewrites
                               written in C (index n_rules...): times applied
                               (malloc'd; NULL if none) */
  double seconds;
  int n_evals;              /* fsl_rewrite_search: graphs costed (the caller's not counted) */
  int n_expanded;           /* fsl_rewrite_search: graphs whose neighbours were made */
  int n_regions_solved;     /* fsl_rewrite_search: region BLPs solved to cost the graphs */
  int n_regions_cached;     /* fsl_rewrite_search: region costs taken from the search's cache */
} fsl_rewrite_stats;

/**
 * Applies the rules of rs (but the cost rules) to g until none fires (at
 * most 16 sweeps over the nodes), only where a match is closed
 * (fsl_rw_match_is_closed), so that
 * each rewrite removes what it replaces; then sorts, removes dead nodes and
 * verifies the graph.  stats may be NULL; else stats->fired is malloc'd
 * (free it).  Errors: those of fsl_rw_apply naming the rule (a rule
 * defect), FSL_ERR_NOMEM; on error g may be partly rewritten (callers drop
 * it).
 */
fsl_status fsl_rewrite(fsl_graph *g, const fsl_ruleset *rs, fsl_rewrite_stats *stats);

/* ---- the cost-guided search (search.c) ---- */
typedef struct fsl_rewrite_search_opts {
  int max_evals;        /* cost evaluations (0: 256; negative: none) */
  double max_seconds;   /* wall seconds (0: 10; negative: no limit).  The
                           result depends on the seconds only where they
                           run out: a compiled model file records n_evals
                           and alpha and replays with max_evals = n_evals
                           and no time limit, which rebuilds the same graph */
  double alpha;         /* relaxation, >= 1 (0: $FSL_REWRITE_ALPHA, else 1.1); capped at 4 */
} fsl_rewrite_search_opts;

/**
 * fsl_rewrite, then TASO's backtracking search over the cost rules
 * (Jia et al., SOSP'19, Algorithm 2): candidate graphs in a priority queue
 * by cost (at most 64; the costliest dropped); the cheapest is taken out
 * and each closed match of a cost rule in it is tried on a clone (the
 * rewrite, then fsl_rewrite's rules), costed as the predicted seconds of
 * the clone's optimal plan on the documented default device, region by
 * region with the region optima cached by region hash for the search
 * (fsl_plan_region_cost: the roofline the optimal strategy uses,
 * fsl_device_default and bounded BLPs, deterministic on every machine so
 * that a compiled model file rebuilds the same graph) and queued when it costs less than alpha times the best
 * cost so far, less 0.1%.  A graph is told apart by a structural hash
 * (ops, attributes, wiring, shapes; not value ids), so one reached twice
 * is costed once.  The answer is the best graph seen, kept only when at
 * least 0.1% cheaper than the previous best; the search stops when the
 * queue is empty or o's budget of cost evaluations or seconds is spent
 * (o may be NULL).  alpha = 1 queues only new best graphs (no
 * relaxation).  On return *g may be a new graph that owns the old one
 * (fsl_graph_free frees both).  stats as fsl_rewrite's, with both phases'
 * counts, n_evals and n_expanded.  Errors: as fsl_rewrite,
 * FSL_ERR_NOMEM; on error *g is the caller's graph (rewritten by
 * fsl_rewrite's rules, in place).
 */
fsl_status fsl_rewrite_search(fsl_graph **g, const fsl_ruleset *rs, const fsl_rewrite_search_opts *o,
                              fsl_rewrite_stats *stats);

/** The alpha fsl_rewrite_search uses under o (may be NULL): o->alpha when
 *  set, else $FSL_REWRITE_ALPHA when it is a number >= 1, else 1.1;
 *  capped at 4. */
double fsl_rewrite_search_alpha(const fsl_rewrite_search_opts *o);

/* ---- verification (check.c) ---- */
/**
 * Proves rule r by testing: `trials` times, draws the rule's test instance
 * (shape symbols in 1..5, random permutations, random data: small integers
 * when the rule is multi-linear, floats otherwise), builds its source as a
 * graph, checks that the rule matches it, applies it and compares the
 * outputs of both graphs under the reference interpreter: exactly for
 * multi-linear rules, else within a relative 1e-5.  seed makes the draws
 * repeatable.  Returns FSL_OK; FSL_ERR_INVALID with a message naming the
 * rule (file:line), the trial's shape symbols and the first differing
 * element (the counterexample), or why the instance could not be built or
 * did not match.
 */
fsl_status fsl_rule_check(const fsl_rule *r, int trials, uint64_t seed);

#endif
