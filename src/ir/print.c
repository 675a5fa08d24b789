/*
 * print.c — the text form and the Graphviz DOT form of a graph.
 *
 * Text, one line per node:
 *   %5 = add(%3, %4) : float[2x3]  # origin: /encoder/Add_1 (Add)
 *   %7 = permute(%5) {perm=[1,0]} : float[3x2]
 * Graph inputs and the constants the nodes use are listed first.
 */
#include "ir/ir.h"

#define FSL_PRINT_MAX_LIST 16    /* list elements shown before "..." */
#define FSL_DOT_MAX_CONST 64     /* larger constants are omitted from DOT */

static const char *vname(const fsl_value *v) { return v->name ? v->name : "?"; }

/* Op name as shown: primitive name, or ONNX op_type (with its domain). */
static void op_str(const fsl_node *n, char *buf, size_t len) {
  const char *ty = n->op_type ? n->op_type : fsl_op_name(n->op);
  if (n->op != FSL_OP_NONE && fsl_op_is_primitive(n->op)) ty = fsl_op_name(n->op);
  if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
    snprintf(buf, len, "%s::%s", n->domain, ty);
  else
    snprintf(buf, len, "%s", ty);
}

/* Value type with dim_params shown by name: "float[batch x 128]" (with
 * spaces around the x, as names may contain x). */
static char *type_str(const fsl_value *v, char *buf, size_t len) {
  if (!v->dim_param || v->rank <= 0) return fsl_value_type_str(v, buf, len);
  size_t o = (size_t)snprintf(buf, len, "%s[", fsl_dtype_name(v->dtype));
  for (int i = 0; i < v->rank && o < len; i++) {
    const char *sep = i ? " x " : "";
    if (v->dim_param[i] && v->dims[i] < 0)
      o += (size_t)snprintf(buf + o, len - o, "%s%s", sep, v->dim_param[i]);
    else
      o += (size_t)snprintf(buf + o, len - o, "%s%lld", sep, (long long)v->dims[i]);
  }
  if (o < len) snprintf(buf + o, len - o, "]");
  return buf;
}

/* Escapes a string for a DOT label (inside quotes). */
static void dot_label_str(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s < 32) fputc('?', f);
    else fputc(*s, f);
  }
}

/* A string attribute in the text form: quoted, with \" and \\ escaped. */
static void print_str_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc((unsigned char)*s < 32 ? '?' : *s, f);
  }
  fputc('"', f);
}

/* One attribute value (no name). */
static void print_attr_value(FILE *f, const fsl_node *n, const fsl_attr *a, bool dot) {
  int shown = a->n < FSL_PRINT_MAX_LIST ? a->n : FSL_PRINT_MAX_LIST;
  switch (a->type) {
  case FSL_ATTR_INT:
    if (n->op == FSL_OP_cast && a->name && !strcmp(a->name, "to"))
      fprintf(f, "%s", fsl_dtype_name((fsl_dtype)a->i));
    else
      fprintf(f, "%lld", (long long)a->i);
    break;
  case FSL_ATTR_FLOAT: fprintf(f, "%g", a->f); break;
  case FSL_ATTR_STRING:
    if (dot) dot_label_str(f, a->s);
    else print_str_quoted(f, a->s);
    break;
  case FSL_ATTR_INTS:
  case FSL_ATTR_FLOATS:
  case FSL_ATTR_STRINGS:
    fputc('[', f);
    for (int i = 0; i < shown; i++) {
      if (i) fputc(',', f);
      if (a->type == FSL_ATTR_INTS) fprintf(f, "%lld", (long long)a->ints[i]);
      else if (a->type == FSL_ATTR_FLOATS) fprintf(f, "%g", a->floats[i]);
      else if (dot) dot_label_str(f, a->strings[i]);
      else fputs(a->strings[i] ? a->strings[i] : "", f);
    }
    if (shown < a->n) fprintf(f, ",...(%d)", a->n);
    fputc(']', f);
    break;
  case FSL_ATTR_TENSOR:
    if (a->t) {
      char sh[256];
      fprintf(f, "tensor %s[%s]", fsl_dtype_name(a->t->dtype),
              fsl_shape_str(a->t->rank, a->t->dims, sh, sizeof sh));
    } else {
      fputs("tensor", f);
    }
    break;
  case FSL_ATTR_GRAPH: fputs("<graph>", f); break;
  }
}

static void print_attrs(FILE *f, const fsl_node *n, bool dot) {
  if (!n->n_attrs) return;
  fputs(dot ? "\\n" : " {", f);
  for (int i = 0; i < n->n_attrs; i++) {
    const fsl_attr *a = &n->attrs[i];
    if (i) fputs(dot ? "\\n" : ", ", f);
    fprintf(f, "%s=", a->name ? a->name : "?");
    print_attr_value(f, n, a, dot);
  }
  if (!dot) fputc('}', f);
}

/* Scalar constant value, e.g. "0.5" or "3". */
static void print_scalar(FILE *f, const fsl_value *v) {
  if (fsl_dtype_is_float(v->dtype)) fprintf(f, "%g", fsl_load_f64(v->dtype, v->data, 0));
  else if (v->dtype == FSL_DT_U64) fprintf(f, "%llu", (unsigned long long)fsl_load_u64(v->dtype, v->data, 0));
  else if (fsl_dtype_valid(v->dtype)) fprintf(f, "%lld", (long long)fsl_load_i64(v->dtype, v->data, 0));
  else fputs("?", f);
}

static bool is_const(const fsl_value *v) { return v && v->data && !v->producer; }

static void print_const_line(FILE *f, const fsl_value *v) {
  char ty[300];
  fprintf(f, "  %s = const %s", vname(v), type_str(v, ty, sizeof ty));
  if (fsl_value_numel(v) == 1) {
    fputs(" = ", f);
    print_scalar(f, v);
  }
  fputc('\n', f);
}

static void print_node_line(FILE *f, const fsl_node *n) {
  char op[160], ty[300];
  fputs("  ", f);
  for (int k = 0; k < n->n_out; k++)
    fprintf(f, "%s%s", k ? ", " : "", n->out[k] ? vname(n->out[k]) : "_");
  if (n->n_out) fputs(" = ", f);
  op_str(n, op, sizeof op);
  fprintf(f, "%s(", op);
  for (int k = 0; k < n->n_in; k++)
    fprintf(f, "%s%s", k ? ", " : "", n->in[k] ? vname(n->in[k]) : "_");
  fputc(')', f);
  print_attrs(f, n, false);
  if (n->n_out) fputs(" :", f);
  for (int k = 0; k < n->n_out; k++)
    fprintf(f, "%s %s", k ? "," : "", n->out[k] ? type_str(n->out[k], ty, sizeof ty) : "_");
  if (n->origin_name)
    fprintf(f, "  # origin: %s (%s)", n->origin_name, n->origin_op ? n->origin_op : "?");
  else if (n->name && *n->name)
    fprintf(f, "  # %s", n->name);
  fputc('\n', f);
}

void fsl_graph_print(const fsl_graph *g, FILE *f) {
  char ty[300];
  fprintf(f, "graph %s (%d nodes)\n", g->name ? g->name : "main", g->n_nodes);
  for (int i = 0; i < g->n_inputs; i++)
    fprintf(f, "  input %s : %s\n", vname(g->inputs[i]), type_str(g->inputs[i], ty, sizeof ty));
  bool *seen = calloc((size_t)g->n_values + 1, sizeof *seen);
  for (int i = 0; i < g->n_nodes; i++) {
    const fsl_node *n = g->nodes[i];
    for (int k = 0; k < n->n_in; k++) {
      const fsl_value *v = n->in[k];
      if (!is_const(v) || v->is_input) continue;
      if (seen && v->id >= 0 && v->id < g->n_values) {
        if (seen[v->id]) continue;
        seen[v->id] = true;
      }
      print_const_line(f, v);
    }
  }
  free(seen);
  for (int i = 0; i < g->n_nodes; i++) print_node_line(f, g->nodes[i]);
  for (int i = 0; i < g->n_outputs; i++)
    fprintf(f, "  output %s : %s\n", vname(g->outputs[i]), type_str(g->outputs[i], ty, sizeof ty));
}

/* ---- Graphviz DOT ---- */

static bool dot_const_shown(const fsl_value *v) {
  int64_t ne = fsl_value_numel(v);
  return ne >= 0 && ne <= FSL_DOT_MAX_CONST;
}

/* The DOT node an edge for value v starts at; false when v is not drawn. */
static bool dot_source(const fsl_value *v, char *buf, size_t len) {
  if (v->producer) snprintf(buf, len, "n%d", v->producer->id);
  else if (v->is_input) snprintf(buf, len, "in%d", v->id);
  else if (is_const(v) && dot_const_shown(v)) snprintf(buf, len, "c%d", v->id);
  else return false;
  return true;
}

static void dot_edge(FILE *f, const fsl_value *v, const char *dst) {
  char src[48], ty[300];
  if (!dot_source(v, src, sizeof src)) return;
  fprintf(f, "  %s -> %s [label=\"", src, dst);
  dot_label_str(f, type_str(v, ty, sizeof ty));
  fputs("\"];\n", f);
}

static void dot_node(FILE *f, const fsl_node *n) {
  char op[160], dst[48];
  op_str(n, op, sizeof op);
  fprintf(f, "  n%d [shape=box, label=\"", n->id);
  dot_label_str(f, op);
  print_attrs(f, n, true);
  fputs("\"];\n", f);
  snprintf(dst, sizeof dst, "n%d", n->id);
  for (int k = 0; k < n->n_in; k++) {
    const fsl_value *v = n->in[k];
    if (!v) continue;
    if (is_const(v) && !v->is_input && dot_const_shown(v)) {
      char ty[300];
      fprintf(f, "  c%d [shape=plaintext, fontsize=9, label=\"", v->id);
      dot_label_str(f, type_str(v, ty, sizeof ty));
      fputs("\"];\n", f);
    }
    dot_edge(f, v, dst);
  }
}

void fsl_graph_print_dot(const fsl_graph *g, FILE *f) {
  fputs("digraph \"", f);
  dot_label_str(f, g->name ? g->name : "main");
  fputs("\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n"
        "  edge [fontname=\"Helvetica\", fontsize=9];\n", f);
  for (int i = 0; i < g->n_inputs; i++) {
    fprintf(f, "  in%d [shape=ellipse, label=\"", g->inputs[i]->id);
    dot_label_str(f, vname(g->inputs[i]));
    fputs("\"];\n", f);
  }
  for (int i = 0; i < g->n_nodes; i++) dot_node(f, g->nodes[i]);
  for (int i = 0; i < g->n_outputs; i++) {
    char dst[48];
    snprintf(dst, sizeof dst, "out%d", i);
    fprintf(f, "  out%d [shape=ellipse, style=bold, label=\"", i);
    dot_label_str(f, vname(g->outputs[i]));
    fputs("\"];\n", f);
    dot_edge(f, g->outputs[i], dst);
  }
  fputs("}\n", f);
}
