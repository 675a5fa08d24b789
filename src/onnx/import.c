/*
 * import.c — ONNX ModelProto (protobuf binary) -> fsl_graph of ONNX ops.
 *
 * Order of work: opsets, initializers (constants), graph inputs, then every
 * node output gets a value (so node order in the file need not be
 * topological), then nodes are added with inputs resolved by name, graph
 * outputs are bound, and the nodes are sorted topologically.  Names are
 * looked up in an open-addressing hash table.  Any failure frees the graph.
 */
#include "onnx/onnx_import.h"
#include "onnx/onnx_internal.h"

#include <limits.h>

/* ---- name -> value hash table (keys are the values' own names) ---- */
typedef struct name_map {
  fsl_value **slots;
  size_t mask;
} name_map;

static fsl_status map_init(name_map *m, size_t n) {
  size_t cap = 64;
  while (cap < n * 2 + 1) {
    if (cap > SIZE_MAX / 4) return fsl_errorf(FSL_ERR_NOMEM, "too many names in the model");
    cap *= 2;
  }
  m->slots = calloc(cap, sizeof *m->slots);
  m->mask = cap - 1;
  return m->slots ? FSL_OK : fsl_errorf(FSL_ERR_NOMEM, "out of memory for the name table");
}

static size_t map_slot(const name_map *m, const char *name) {
  size_t i = (size_t)fsl_hash(FSL_HASH_INIT, name, strlen(name)) & m->mask;
  while (m->slots[i] && strcmp(m->slots[i]->name, name) != 0) i = (i + 1) & m->mask;
  return i;
}

static fsl_value *map_get(const name_map *m, const char *name) {
  return m->slots[map_slot(m, name)];
}

/* Inserts v (whose name must be absent); the table was sized for all names. */
static void map_put(name_map *m, fsl_value *v) {
  size_t i = map_slot(m, v->name);
  FSL_ASSERT(!m->slots[i]);
  m->slots[i] = v;
}

/* ---- importer state ---- */
typedef struct importer {
  const Onnx__GraphProto *gp;
  const char *dir;
  fsl_graph *g;
  name_map names;
  bool uses_default_domain;
} importer;

static const char *str_or_empty(const char *s) { return s ? s : ""; }

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

static fsl_status nomem(const char *what) {
  return fsl_errorf(FSL_ERR_NOMEM, "out of memory while importing %s", what);
}

/* Creates a named value; a name already defined is a duplicate definition. */
static fsl_status define_value(importer *im, const char *name, const char *what, fsl_value **out) {
  if (!name || !*name) return fsl_errorf(FSL_ERR_INVALID, "%s has an empty name", what);
  if (map_get(&im->names, name))
    return fsl_errorf(FSL_ERR_INVALID, "%s: the name '%s' is defined twice", what, name);
  fsl_value *v = fsl_graph_add_value(im->g, name);
  if (!v) return nomem(what);
  map_put(&im->names, v);
  *out = v;
  return FSL_OK;
}

/* Decodes TensorProto tp into arena memory (header checked before allocating). */
static fsl_status decode_tensor(importer *im, const Onnx__TensorProto *tp, const char *what,
                                fsl_onnx_tinfo *info, void **data) {
  FSL_TRY(fsl_onnx_tensor_info(tp, what, info));
  FSL_TRY(fsl_onnx_tensor_check(tp, what, im->dir, info));
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    im->g->external_data = true;
  *data = fsl_arena_alloc(&im->g->arena, info->nbytes);
  if (!*data) return fsl_errorf(FSL_ERR_NOMEM, "%s: out of memory for %zu bytes", what, info->nbytes);
  return fsl_onnx_tensor_fill(tp, what, im->dir, info, *data);
}

/* ---- opsets ---- */
static fsl_status import_opsets(importer *im, const Onnx__ModelProto *m) {
  fsl_graph *g = im->g;
  if (m->n_opset_import > INT_MAX) return fsl_errorf(FSL_ERR_INVALID, "too many opset imports");
  g->opsets = fsl_arena_alloc(&g->arena, sizeof *g->opsets * (m->n_opset_import + 1));
  if (!g->opsets) return nomem("opset_import");
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *os = m->opset_import[i];
    const char *d = is_default_domain(os->domain) ? "" : os->domain;
    fsl_opset *o = &g->opsets[g->n_opsets++];
    o->domain = fsl_arena_strdup(&g->arena, d);
    o->version = os->has_version ? os->version : 0;
    if (!o->domain) return nomem("opset_import");
  }
  return FSL_OK;
}

/* ---- initializers ---- */
static fsl_status import_initializer(importer *im, const Onnx__TensorProto *tp) {
  char what[320];
  snprintf(what, sizeof what, "initializer '%.256s'", str_or_empty(tp->name));
  fsl_value *v;
  fsl_onnx_tinfo info;
  void *data;
  FSL_TRY(define_value(im, tp->name, what, &v));
  FSL_TRY(decode_tensor(im, tp, what, &info, &data));
  bool shaped = fsl_value_set_shape(v, info.rank, info.dims); /* rank checked by tensor_info */
  FSL_ASSERT(shaped);
  v->dtype = info.dtype;
  v->data = data;
  return FSL_OK;
}

static fsl_status import_initializers(importer *im) {
  const Onnx__GraphProto *gp = im->gp;
  if (gp->n_sparse_initializer > 0)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "sparse initializer '%s' is not supported",
                      str_or_empty(gp->sparse_initializer[0]->values
                                       ? gp->sparse_initializer[0]->values->name : NULL));
  for (size_t i = 0; i < gp->n_initializer; i++) {
    Onnx__TensorProto *tp = gp->initializer[i];
    FSL_TRY(import_initializer(im, tp));
    /* The bytes now live in the arena: release protobuf-c's copy early to
     * cut peak memory on big models.  unpack(NULL allocator) used malloc,
     * and free_unpacked skips a NULL data pointer. */
    if (tp->has_raw_data) {
      free(tp->raw_data.data);
      tp->raw_data.data = NULL;
      tp->raw_data.len = 0;
      tp->has_raw_data = false;
    }
  }
  return FSL_OK;
}

/* ---- graph inputs ---- */
/* Returns the tensor type of a ValueInfo, or an error for other kinds. */
static fsl_status tensor_type(const Onnx__ValueInfoProto *vi, const char *what,
                              const Onnx__TypeProto__Tensor **tt) {
  const Onnx__TypeProto *tp = vi->type;
  *tt = NULL;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return FSL_OK;
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
    const char *kind = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ? "a sequence"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE    ? "a map"
                       : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "an optional"
                                                                                : "a sparse tensor";
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s has %s type; only tensors are supported", what,
                      kind);
  }
  *tt = tp->tensor_type;
  return FSL_OK;
}

static fsl_status input_shape(importer *im, fsl_value *v, const Onnx__TensorShapeProto *sh,
                              const char *what) {
  if (!sh) return FSL_OK;  /* no shape at all: rank unknown */
  if (sh->n_dim > FSL_MAX_RANK)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: rank %zu exceeds the maximum rank %d", what,
                      sh->n_dim, FSL_MAX_RANK);
  int rank = (int)sh->n_dim;
  bool symbolic = false;
  for (int i = 0; i < rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
    v->dims[i] = -1;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      /* some exporters (paddle2onnx) write -1 for a dynamic dimension:
       * unknown, to be bound with --shape, as ONNX Runtime reads it */
      v->dims[i] = d->dim_value < 0 ? -1 : d->dim_value;
    } else {
      symbolic = true;
    }
  }
  v->rank = rank;
  if (!symbolic) return FSL_OK;
  v->dim_param = fsl_arena_alloc(&im->g->arena, sizeof *v->dim_param * (size_t)rank);
  if (!v->dim_param) return nomem(what);
  for (int i = 0; i < rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
        *d->dim_param) {
      v->dim_param[i] = fsl_arena_strdup(&im->g->arena, d->dim_param);
      if (!v->dim_param[i]) return nomem(what);
    }
  }
  return FSL_OK;
}

static fsl_status import_input(importer *im, const Onnx__ValueInfoProto *vi) {
  char what[320];
  snprintf(what, sizeof what, "graph input '%.256s'", str_or_empty(vi->name));
  fsl_value *init = vi->name ? map_get(&im->names, vi->name) : NULL;
  if (init && init->data) return FSL_OK;  /* an initializer: a constant, not a runtime input */
  const Onnx__TypeProto__Tensor *tt;
  FSL_TRY(tensor_type(vi, what, &tt));
  if (!tt || !tt->has_elem_type || tt->elem_type == FSL_DT_UNDEFINED)
    return fsl_errorf(FSL_ERR_INVALID, "%s has no tensor element type", what);
  int32_t et = tt->elem_type;
  if (et < 0 || et >= FSL_DT_COUNT || !fsl_dtype_valid((fsl_dtype)et))
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: dtype %s is not supported", what,
                      et >= 0 && et < FSL_DT_COUNT ? fsl_dtype_name((fsl_dtype)et) : "unknown");
  fsl_value *v = NULL;
  FSL_TRY(define_value(im, vi->name, what, &v));
  v->dtype = (fsl_dtype)et;
  FSL_TRY(input_shape(im, v, tt->shape, what));
  return fsl_graph_add_input(im->g, v);
}

static fsl_status import_inputs(importer *im) {
  for (size_t i = 0; i < im->gp->n_input; i++) FSL_TRY(import_input(im, im->gp->input[i]));
  return FSL_OK;
}

/* ---- nodes ---- */
/* "node 'name' (OpType)" for messages; the name is generated if empty. */
static void node_desc(const Onnx__NodeProto *np, size_t idx, char *buf, size_t len) {
  const char *op = str_or_empty(np->op_type);
  if (np->name && *np->name) snprintf(buf, len, "node '%.200s' (%.100s)", np->name, op);
  else snprintf(buf, len, "node '%.100s_%zu' (%.100s)", op, idx, op);
}

/* Pass 1: every node output gets a value, so inputs can refer forward. */
static fsl_status declare_outputs(importer *im) {
  for (size_t i = 0; i < im->gp->n_node; i++) {
    const Onnx__NodeProto *np = im->gp->node[i];
    char nd[320], what[640];
    node_desc(np, i, nd, sizeof nd);
    for (size_t k = 0; k < np->n_output; k++) {
      if (!*np->output[k]) continue;  /* unnamed: a fresh value in pass 2 */
      fsl_value *v;
      snprintf(what, sizeof what, "%s: output %zu", nd, k);
      FSL_TRY(define_value(im, np->output[k], what, &v));
    }
  }
  return FSL_OK;
}

static Onnx__AttributeProto__AttributeType attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return a->type;
  /* old models (IR < 2) have no type: infer it from the field that is set */
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  if (a->sparse_tensor) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR;
  if (a->tp) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
  if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  if (a->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
  if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
  if (a->n_sparse_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS;
  if (a->n_type_protos) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

/* NUL-terminated arena copy of protobuf bytes. */
static const char *bytes_dup(fsl_arena *a, ProtobufCBinaryData b) {
  char *s = fsl_arena_alloc(a, b.len + 1);
  if (s && b.len) memcpy(s, b.data, b.len);
  return s;
}

static fsl_status attr_count(size_t n, const char *what, int *out) {
  if (n > INT_MAX) return fsl_errorf(FSL_ERR_INVALID, "%s has too many values", what);
  *out = (int)n;
  return FSL_OK;
}

static fsl_status attr_lists(importer *im, const Onnx__AttributeProto *a,
                             Onnx__AttributeProto__AttributeType t, const char *what,
                             fsl_attr *out) {
  fsl_arena *ar = &im->g->arena;
  if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
    out->type = FSL_ATTR_INTS;
    FSL_TRY(attr_count(a->n_ints, what, &out->n));
    out->ints = fsl_arena_memdup(ar, a->ints, sizeof(int64_t) * a->n_ints);
    return out->ints ? FSL_OK : nomem(what);
  }
  if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
    out->type = FSL_ATTR_FLOATS;
    FSL_TRY(attr_count(a->n_floats, what, &out->n));
    out->floats = fsl_arena_alloc(ar, sizeof(double) * a->n_floats);
    if (!out->floats) return nomem(what);
    for (size_t i = 0; i < a->n_floats; i++) out->floats[i] = a->floats[i];
    return FSL_OK;
  }
  /* STRINGS */
  out->type = FSL_ATTR_STRINGS;
  FSL_TRY(attr_count(a->n_strings, what, &out->n));
  out->strings = fsl_arena_alloc(ar, sizeof(char *) * a->n_strings);
  if (!out->strings) return nomem(what);
  for (size_t i = 0; i < a->n_strings; i++)
    if (!(out->strings[i] = bytes_dup(ar, a->strings[i]))) return nomem(what);
  return FSL_OK;
}

static fsl_status attr_tensor(importer *im, const Onnx__AttributeProto *a, const char *what,
                              fsl_attr *out) {
  if (!a->t) return fsl_errorf(FSL_ERR_INVALID, "%s has type TENSOR but no tensor", what);
  fsl_onnx_tinfo info;
  void *data;
  FSL_TRY(decode_tensor(im, a->t, what, &info, &data));
  fsl_ctensor *ct = fsl_arena_alloc(&im->g->arena, sizeof *ct);
  if (!ct) return nomem(what);
  ct->dtype = info.dtype;
  ct->rank = info.rank;
  memcpy(ct->dims, info.dims, sizeof ct->dims);
  ct->data = data;
  out->type = FSL_ATTR_TENSOR;
  out->t = ct;
  return FSL_OK;
}

static fsl_status convert_attr(importer *im, const Onnx__AttributeProto *a, const char *nd,
                               fsl_attr *out) {
  char what[640];
  if (!a->name || !*a->name) return fsl_errorf(FSL_ERR_INVALID, "%s has an attribute without a name", nd);
  snprintf(what, sizeof what, "%s: attribute '%.200s'", nd, a->name);
  if (a->ref_attr_name && *a->ref_attr_name)
    return fsl_errorf(FSL_ERR_INVALID, "%s refers to a function attribute outside a function", what);
  memset(out, 0, sizeof *out);
  if (!(out->name = fsl_arena_strdup(&im->g->arena, a->name))) return nomem(what);
  Onnx__AttributeProto__AttributeType t = attr_type(a);
  switch (t) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    out->type = FSL_ATTR_INT;
    out->i = a->i;
    return FSL_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    out->type = FSL_ATTR_FLOAT;
    out->f = a->f;
    return FSL_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    out->type = FSL_ATTR_STRING;
    out->s = bytes_dup(&im->g->arena, a->s);
    return out->s ? FSL_OK : nomem(what);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    return attr_lists(im, a, t, what, out);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    return attr_tensor(im, a, what, out);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    out->type = FSL_ATTR_GRAPH;  /* subgraphs are not imported */
    return FSL_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED:
    return fsl_errorf(FSL_ERR_INVALID, "%s has no type and no value", what);
  default:
    return fsl_errorf(FSL_ERR_UNSUPPORTED,
                      "%s: attribute type %d (tensors, sparse tensors, type protos) is not supported",
                      what, (int)t);
  }
}

static fsl_status node_attrs(importer *im, const Onnx__NodeProto *np, const char *nd,
                             fsl_attr **attrs, int *n) {
  *attrs = NULL;
  *n = 0;
  if (np->n_attribute == 0) return FSL_OK;
  if (np->n_attribute > INT_MAX) return fsl_errorf(FSL_ERR_INVALID, "%s has too many attributes", nd);
  fsl_attr *a = fsl_arena_alloc(&im->g->arena, sizeof *a * np->n_attribute);
  if (!a) return nomem(nd);
  for (size_t i = 0; i < np->n_attribute; i++) FSL_TRY(convert_attr(im, np->attribute[i], nd, &a[i]));
  *attrs = a;
  *n = (int)np->n_attribute;
  return FSL_OK;
}

/* Resolves input names and output values of np into in[] / out[]. */
static fsl_status node_values(importer *im, const Onnx__NodeProto *np, const char *nd,
                              fsl_value **in, fsl_value **out) {
  for (size_t k = 0; k < np->n_input; k++) {
    const char *name = np->input[k];
    in[k] = NULL;
    if (!*name) continue;  /* omitted optional input */
    if (!(in[k] = map_get(&im->names, name)))
      return fsl_errorf(FSL_ERR_INVALID,
                        "%s: input '%s' is not produced by any node, initializer or graph input",
                        nd, name);
  }
  for (size_t k = 0; k < np->n_output; k++) {
    const char *name = np->output[k];
    out[k] = *name ? map_get(&im->names, name) : fsl_graph_add_value(im->g, NULL);
    if (!out[k]) return nomem(nd);
  }
  return FSL_OK;
}

static fsl_status import_node(importer *im, const Onnx__NodeProto *np, size_t idx) {
  char nd[320];
  node_desc(np, idx, nd, sizeof nd);
  if (!np->op_type || !*np->op_type) return fsl_errorf(FSL_ERR_INVALID, "%s has no op_type", nd);
  if (np->n_input > INT_MAX || np->n_output > INT_MAX)
    return fsl_errorf(FSL_ERR_INVALID, "%s has too many inputs or outputs", nd);
  bool def = is_default_domain(np->domain);
  fsl_op op = def ? fsl_op_from_onnx(np->op_type) : FSL_OP_NONE;
  im->uses_default_domain |= def;

  fsl_attr *attrs;
  int n_attrs;
  FSL_TRY(node_attrs(im, np, nd, &attrs, &n_attrs));
  fsl_value **io = malloc(sizeof *io * (np->n_input + np->n_output + 1));
  if (!io) return nomem(nd);
  fsl_status st = node_values(im, np, nd, io, io + np->n_input);
  if (st != FSL_OK) goto done;

  char gen[160];
  const char *name = np->name;
  if (!name || !*name) {
    snprintf(gen, sizeof gen, "%.100s_%zu", np->op_type, idx);
    name = gen;
  }
  fsl_node *n = fsl_graph_add_node(im->g, op, name, io, (int)np->n_input, io + np->n_input,
                                   (int)np->n_output, attrs, n_attrs);
  if (!n) { st = nomem(nd); goto done; }
  n->op_type = fsl_arena_strdup(&im->g->arena, np->op_type);
  n->domain = fsl_arena_strdup(&im->g->arena, def ? "" : np->domain);
  if (!n->op_type || !n->domain) st = nomem(nd);
done:
  free(io);
  return st;
}

static fsl_status import_nodes(importer *im) {
  FSL_TRY(declare_outputs(im));
  for (size_t i = 0; i < im->gp->n_node; i++) FSL_TRY(import_node(im, im->gp->node[i], i));
  if (im->uses_default_domain && fsl_graph_opset(im->g, "") <= 0)
    return fsl_errorf(FSL_ERR_INVALID,
                      "the model has ai.onnx nodes but no opset_import for the default domain");
  return FSL_OK;
}

/* ---- graph outputs ---- */
static fsl_status import_output(importer *im, const Onnx__ValueInfoProto *vi) {
  char what[320];
  snprintf(what, sizeof what, "graph output '%.256s'", str_or_empty(vi->name));
  if (!vi->name || !*vi->name) return fsl_errorf(FSL_ERR_INVALID, "%s has an empty name", what);
  fsl_value *v = map_get(&im->names, vi->name);
  if (!v)
    return fsl_errorf(FSL_ERR_INVALID,
                      "%s is not produced by any node, initializer or graph input", what);
  const Onnx__TypeProto__Tensor *tt;
  FSL_TRY(tensor_type(vi, what, &tt));
  if (v->dtype == FSL_DT_UNDEFINED && tt && tt->has_elem_type && tt->elem_type > 0 &&
      tt->elem_type < FSL_DT_COUNT)
    v->dtype = (fsl_dtype)tt->elem_type;
  return fsl_graph_add_output(im->g, v);
}

static fsl_status import_outputs(importer *im) {
  for (size_t i = 0; i < im->gp->n_output; i++) FSL_TRY(import_output(im, im->gp->output[i]));
  return FSL_OK;
}

/* Upper bound of the names the model defines (sizes the hash table). */
static size_t count_names(const Onnx__GraphProto *gp) {
  size_t n = gp->n_initializer + gp->n_input;
  for (size_t i = 0; i < gp->n_node; i++) n += gp->node[i]->n_output;
  return n;
}

static fsl_status import_graph(importer *im, const Onnx__ModelProto *m) {
  im->g->name = fsl_arena_strdup(&im->g->arena, str_or_empty(im->gp->name));
  if (!im->g->name) return nomem("the graph name");
  FSL_TRY(map_init(&im->names, count_names(im->gp)));
  FSL_TRY(import_opsets(im, m));
  FSL_TRY(import_initializers(im));
  FSL_TRY(import_inputs(im));
  FSL_TRY(import_nodes(im));
  FSL_TRY(import_outputs(im));
  if (im->g->n_nodes == 0) return FSL_OK;  /* nothing to sort (and no node array yet) */
  return fsl_graph_toposort(im->g);
}

fsl_status fsl_onnx_import(const void *buf, size_t len, const char *dir, fsl_graph **out) {
  static const uint8_t empty[1];
  if (!out || (!buf && len)) return fsl_errorf(FSL_ERR_ARG, "fsl_onnx_import: NULL argument");
  *out = NULL;
  if (!buf) buf = empty;
  if (!fsl_onnx_wire_ok(&onnx__model_proto__descriptor, buf, len, FSL_ONNX_MAX_DEPTH))
    return fsl_errorf(FSL_ERR_PARSE, "not a valid ONNX ModelProto (malformed protobuf, or "
                      "messages nested deeper than %d levels)", FSL_ONNX_MAX_DEPTH);
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
  if (!m) return fsl_errorf(FSL_ERR_PARSE, "not a valid ONNX ModelProto (protobuf parse failed)");
  fsl_status st;
  importer im = {.gp = m->graph, .dir = dir};
  if (!m->graph) {
    st = fsl_errorf(FSL_ERR_INVALID, "the ModelProto has no graph");
    goto done;
  }
  if (!(im.g = fsl_graph_new())) {
    st = nomem("the graph");
    goto done;
  }
  st = import_graph(&im, m);
done:
  free(im.names.slots);
  onnx__model_proto__free_unpacked(m, NULL);
  if (st != FSL_OK) fsl_graph_free(im.g);
  else *out = im.g;
  return st;
}
