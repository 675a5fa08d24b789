/*
 * ir.h — fissile's one graph type, used at every stage: ONNX ops after
 * import, primitives after fission.  A graph owns everything through its
 * arena.  Nodes are kept in topological order.
 */
#ifndef FSL_IR_H
#define FSL_IR_H

#include "core/core.h"

/* ---- the op table ---- */
typedef enum fsl_op {
  FSL_OP_NONE = 0,
#define PRIM(name, n_in, kind, dtypes, cost, cfn) FSL_OP_##name,
#define ONNX(name, min_in, max_in, kind, since, until) FSL_OP_##name,
#include "ir/ops.def"
#undef PRIM
#undef ONNX
  FSL_OP_COUNT
} fsl_op;

typedef enum fsl_kind {
  FSL_KIND_ELEMENTWISE, FSL_KIND_REDUCE, FSL_KIND_MOVEMENT, FSL_KIND_GATHER,
  FSL_KIND_LINEAR, FSL_KIND_OPAQUE, FSL_KIND_COUNT
} fsl_kind;

/* The dtype rule of an elementwise primitive (ops.def's dtypes column). */
typedef enum fsl_dtype_class {
  FSL_DTC_OWN,              /* a rule of its own in src/ir/infer.c (and every ONNX op) */
  FSL_DTC_FLOAT,            /* float operands; output of their dtype */
  FSL_DTC_FLOAT_TO_BOOL,    /* float operand; bool output */
  FSL_DTC_NUMERIC,          /* numeric (not bool) operands; their dtype */
  FSL_DTC_NUMERIC_TO_BOOL,  /* numeric operands; bool output */
  FSL_DTC_ANY_TO_BOOL,      /* operands of any dtype; bool output */
  FSL_DTC_LOGICAL,          /* bool or integer operands; their dtype */
  FSL_DTC_INT,              /* integer operands; their dtype */
} fsl_dtype_class;

/* One row of ops.def. */
typedef struct fsl_op_info {
  const char *name;
  int min_in, max_in;  /* max_in -1: variadic */
  fsl_kind kind;
  bool primitive;      /* a primitive (true) or an ONNX op (false) */
  /* primitives only (zero for ONNX ops) */
  fsl_dtype_class dtypes;
  int cost;            /* work per element, in adds (src/orchestrate/cost.c) */
  const char *cfn;     /* C function of the generated code on float32; NULL: none */
  /* ONNX ops only (zero for primitives) */
  int since, until;    /* implemented opsets; until 0: no upper bound */
} fsl_op_info;

const fsl_op_info *fsl_op_get(fsl_op op);
const char *fsl_op_name(fsl_op op);
const char *fsl_kind_name(fsl_kind k);
/** ONNX op by op_type in the default domain; FSL_OP_NONE if unknown. */
fsl_op fsl_op_from_onnx(const char *op_type);
static inline bool fsl_op_is_primitive(fsl_op op) { return fsl_op_get(op)->primitive; }
/** Whether op is an elementwise primitive (kind ELEMENTWISE in ops.def). */
static inline bool fsl_op_is_elementwise(fsl_op op) {
  return fsl_op_is_primitive(op) && fsl_op_get(op)->kind == FSL_KIND_ELEMENTWISE;
}
/** Whether an elementwise primitive's dtype class gives a bool output. */
static inline bool fsl_op_bool_out(fsl_op op) {
  fsl_dtype_class c = fsl_op_get(op)->dtypes;
  return c == FSL_DTC_FLOAT_TO_BOOL || c == FSL_DTC_NUMERIC_TO_BOOL || c == FSL_DTC_ANY_TO_BOOL;
}
/** Whether an ONNX op's implemented opset range [since, until] holds opset. */
static inline bool fsl_op_opset_ok(fsl_op op, int64_t opset) {
  const fsl_op_info *i = fsl_op_get(op);
  return opset >= i->since && (i->until == 0 || opset <= i->until);
}

/* ---- attributes ---- */
typedef enum fsl_attr_type {
  FSL_ATTR_INT, FSL_ATTR_FLOAT, FSL_ATTR_STRING, FSL_ATTR_INTS,
  FSL_ATTR_FLOATS, FSL_ATTR_STRINGS, FSL_ATTR_TENSOR, FSL_ATTR_GRAPH
} fsl_attr_type;

/** A constant tensor (attribute payload): row-major, `data` in an arena. */
typedef struct fsl_ctensor {
  fsl_dtype dtype;
  int rank;
  int64_t dims[FSL_MAX_RANK];
  void *data;
} fsl_ctensor;

typedef struct fsl_attr {
  const char *name;
  fsl_attr_type type;
  int64_t i;
  double f;
  const char *s;          /* STRING (NUL-terminated) */
  int n;                  /* element count of INTS / FLOATS / STRINGS */
  int64_t *ints;
  double *floats;
  const char **strings;
  fsl_ctensor *t;         /* TENSOR */
} fsl_attr;

/* ---- values and nodes ---- */
typedef struct fsl_node fsl_node;

typedef struct fsl_value {
  int id;
  const char *name;            /* ONNX name; generated for new values */
  fsl_dtype dtype;
  int rank;                    /* -1: unknown */
  int64_t dims[FSL_MAX_RANK];  /* -1: unknown or symbolic */
  const char **dim_param;      /* per-dim symbolic names (graph inputs), or NULL */
  void *data;                  /* constant payload, NULL for runtime values */
  fsl_node *producer;          /* NULL for graph inputs and constants */
  fsl_node **cons;             /* consumers (a node appears once per use) */
  int n_cons, cap_cons;
  bool is_input, is_output;
} fsl_value;

struct fsl_node {
  int id;
  fsl_op op;
  const char *name;
  const char *domain;          /* ONNX domain ("" = ai.onnx) */
  const char *op_type;         /* ONNX op_type as written in the model */
  int n_in, n_out;
  fsl_value **in;              /* in[i] NULL: optional input omitted */
  fsl_value **out;
  int n_attrs;
  fsl_attr *attrs;
  int origin;                  /* id of the ONNX node a primitive came from */
  const char *origin_name;     /* and its name (for diagnostics) */
  const char *origin_op;       /* and its op_type */
};

typedef struct fsl_opset { const char *domain; int64_t version; } fsl_opset;

typedef struct fsl_graph {
  fsl_arena arena;
  const char *name;
  fsl_value **values; int n_values, cap_values;
  fsl_node **nodes; int n_nodes, cap_nodes;   /* topological order */
  fsl_value **inputs; int n_inputs, cap_inputs;
  fsl_value **outputs; int n_outputs, cap_outputs;
  fsl_opset *opsets; int n_opsets;
  int next_node_id;
  bool external_data;   /* imported with tensors from external data files (ONNX external data) */
  /* a clone (fsl_graph_clone) shares its base's constants, names and
   * attributes: the base must outlive it, and is freed with it when owned */
  struct fsl_graph *base;
  bool owns_base;
} fsl_graph;

/* ---- graph construction (graph.c) ---- */
fsl_graph *fsl_graph_new(void);
void fsl_graph_free(fsl_graph *g);
/** A copy of g's values, nodes (same ids and order), inputs and outputs
 *  whose constant data, names and attributes point into g: g must outlive
 *  the copy (set copy->owns_base to free g with it).  NULL on OOM. */
fsl_graph *fsl_graph_clone(fsl_graph *g);
/** New value (dtype undefined, rank -1); NULL on OOM. */
fsl_value *fsl_graph_add_value(fsl_graph *g, const char *name);
/** New node appended at the end of the node list, consumer lists updated.
 *  attrs are copied by reference (must live in g's arena). */
fsl_node *fsl_graph_add_node(fsl_graph *g, fsl_op op, const char *name,
                             fsl_value *const *in, int n_in,
                             fsl_value *const *out, int n_out,
                             fsl_attr *attrs, int n_attrs);
/** fsl_graph_add_node with one output, no name, and the ONNX origin
 *  (origin, origin_name, origin_op, domain) of node `like` (none when
 *  NULL): how passes add the primitives that stand for an ONNX node's. */
fsl_node *fsl_graph_add_node_as(fsl_graph *g, fsl_op op, fsl_value *const *in, int n_in, fsl_value *out,
                                fsl_attr *attrs, int n_attrs, const fsl_node *like);
/** New value of dtype dt and shape [rank: dims]; NULL on OOM or rank >
 *  FSL_MAX_RANK. */
fsl_value *fsl_graph_new_value(fsl_graph *g, fsl_dtype dt, int rank, const int64_t *dims);
/** New constant of dtype dt, shape [rank: dims], its `bytes` bytes of
 *  data copied into g's arena; NULL on OOM. */
fsl_value *fsl_graph_new_const(fsl_graph *g, fsl_dtype dt, int rank, const int64_t *dims, const void *data,
                               size_t bytes);
/** Appends expand(c) to dims (c of the same rank, each dim 1 or dims'),
 *  with the origin of `like`; its output, or NULL on OOM. */
fsl_value *fsl_graph_add_expand(fsl_graph *g, fsl_value *c, int rank, const int64_t *dims, const fsl_node *like);
/** Moves the nodes from index n0 to the end (those appended since the
 *  node count was n0) to right after index pos, in their order; the
 *  nodes between shift behind them.  How a pass places what it added
 *  next to the node it rewrote (the order stays topological when the new
 *  nodes read only values produced up to pos). */
void fsl_graph_move_tail_after(fsl_graph *g, int n0, int pos);
fsl_status fsl_graph_add_input(fsl_graph *g, fsl_value *v);
fsl_status fsl_graph_add_output(fsl_graph *g, fsl_value *v);
/** Removes nodes for which keep[node->id] is false; updates consumers. */
void fsl_graph_remove_nodes(fsl_graph *g, const bool *keep);
/** Replaces every use of `from` (node inputs, graph outputs) by `to`. */
void fsl_graph_replace_uses(fsl_graph *g, fsl_value *from, fsl_value *to);
/** Makes node n read `to` wherever it read `from` (consumer lists
 *  updated); false on OOM (n then reads `from` in the slots not yet
 *  changed, consistently). */
bool fsl_node_replace_input(fsl_graph *g, fsl_node *n, fsl_value *from, fsl_value *to);
/** Sets v's shape; returns false if rank > FSL_MAX_RANK. */
bool fsl_value_set_shape(fsl_value *v, int rank, const int64_t *dims);
/** true when the rank and every dim are known. */
bool fsl_value_has_shape(const fsl_value *v);
int64_t fsl_value_numel(const fsl_value *v);
int64_t fsl_value_nbytes(const fsl_value *v);
/** Whether v is a constant of static shape, at least one element, whose
 *  elements are all equal (a per-tensor parameter, perhaps broadcast by
 *  constant folding); then *out is that value. */
bool fsl_value_uniform_const(const fsl_value *v, double *out);
/** fsl_value_uniform_const of v, or of the constant that v is an
 *  expand/reshape view of (through any chain of them). */
bool fsl_value_uniform_view(const fsl_value *v, double *out);
/** Whether a and b have the same rank and dims. */
bool fsl_value_same_shape(const fsl_value *a, const fsl_value *b);
/** Whether n is a table lookup (src/passes/lut.c): a gather from a 1-D
 *  constant by indices of the output's shape, so that output element c
 *  reads index element c only, whatever the layouts. */
bool fsl_node_is_table_lookup(const fsl_node *n);
/** "float[2x3]" into buf. */
char *fsl_value_type_str(const fsl_value *v, char *buf, size_t len);
/** Opset version imported for a domain ("" or "ai.onnx" = default); 0 if none. */
int64_t fsl_graph_opset(const fsl_graph *g, const char *domain);
/** Sorts nodes topologically, keeping the current order wherever it is
 *  valid (depth-first: a node moves only to follow producers listed after
 *  it); FSL_ERR_INVALID naming a node on a cycle. */
fsl_status fsl_graph_toposort(fsl_graph *g);

/** Error naming a node: "op (node 'name'): <msg>" (just "op: <msg>" for an
 *  unnamed node); sets the thread's message and returns s. */
fsl_status fsl_node_errorf(const fsl_node *n, fsl_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- attributes (attr.c) ---- */
const fsl_attr *fsl_attr_find(const fsl_node *n, const char *name);
int64_t fsl_attr_int(const fsl_node *n, const char *name, int64_t def);
double fsl_attr_float(const fsl_node *n, const char *name, double def);
const char *fsl_attr_str(const fsl_node *n, const char *name, const char *def);
/** INTS attribute: returns its count (pointer in *v), or -1 if absent. */
int fsl_attr_ints(const fsl_node *n, const char *name, const int64_t **v);
int fsl_attr_floats(const fsl_node *n, const char *name, const double **v);
/** Whether two attributes have the same name, type and value (tensors by
 *  bytes; subgraph attributes never compare equal). */
bool fsl_attr_equal(const fsl_attr *a, const fsl_attr *b);
/** Whether nodes a and b carry the same attributes (any order). */
bool fsl_attrs_equal(const fsl_node *a, const fsl_node *b);
/** Chains attribute a into hash h (fsl_hash): its name, type and value
 *  (tensors by type and bytes, subgraphs by name only).  The hashes of
 *  candidate kernels (the profile cache's keys) and of graph regions are
 *  built from it. */
uint64_t fsl_attr_hash(uint64_t h, const fsl_attr *a);
/** Chains v's dtype, rank and dims into hash h. */
uint64_t fsl_value_type_hash(uint64_t h, const fsl_value *v);
/** Attribute constructors, allocated in g's arena. */
fsl_attr fsl_attr_make_int(const char *name, int64_t v);
fsl_attr fsl_attr_make_float(const char *name, double v);
fsl_attr fsl_attr_make_ints(fsl_graph *g, const char *name, const int64_t *v, int n);

/* ---- shape rules for primitives (infer.c) ---- */
/** Sets dtype and shape of a primitive node's output from its inputs and
 *  attributes; FSL_ERR_SHAPE naming the op and the mismatch otherwise. */
fsl_status fsl_prim_infer(fsl_node *n);

/* ---- verifier (verify.c) ---- */
/** Checks: topological order, producers/consumers consistent, every input
 *  defined, shapes known and equal to what the shape rules give (for
 *  primitives), no dangling graph outputs. */
fsl_status fsl_graph_verify(const fsl_graph *g);

/* ---- printers (print.c) ---- */
void fsl_graph_print(const fsl_graph *g, FILE *f);
void fsl_graph_print_dot(const fsl_graph *g, FILE *f);

#endif
