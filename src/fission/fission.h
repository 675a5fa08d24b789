/*
 * fission.h — operator fission: each ONNX op becomes primitives.
 *
 * A decomposition fsl_fission_<OpType>(fx) reads the ONNX node fx->node
 * (attributes with fsl_attr_*, opset in fx->opset), its lowered inputs
 * fx->in[i] (NULL for an omitted optional input; shapes static), builds
 * primitives with the fsl_b_* functions on fx->b, and sets fx->out[i] for
 * every output the node has (fx->n_out; an output the node does not name
 * may be left NULL).  It returns FSL_OK or an error (use fsl_fx_fail, which
 * names the node and op).  Semantics: the ONNX operator spec for the
 * node's opset.
 */
#ifndef FSL_FISSION_H
#define FSL_FISSION_H

#include "fission/builder.h"

typedef struct fsl_fctx {
  fsl_builder *b;
  const fsl_node *node;   /* the ONNX node being decomposed */
  int64_t opset;          /* opset version of its domain */
  int n_in, n_out;
  fsl_value **in;         /* lowered inputs */
  fsl_value **out;        /* set by the decomposition */
} fsl_fctx;

typedef fsl_status (*fsl_fission_fn)(fsl_fctx *fx);

/* one decomposition per ONNX op in ops.def */
#define PRIM(name, n_in, kind, dtypes, cost, cfn)
#define ONNX(name, min_in, max_in, kind, since, until) fsl_status fsl_fission_##name(fsl_fctx *fx);
#include "ir/ops.def"
#undef PRIM
#undef ONNX

/** Error naming the node and op: "node 'n' (Op, opset 13): <msg>". */
fsl_status fsl_fx_fail(fsl_fctx *fx, fsl_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Input i or an error if absent ("input 2 ('B') is required"). */
fsl_value *fsl_fx_req(fsl_fctx *fx, int i);
/** Returns the builder status, decorated with the node's name. */
fsl_status fsl_fx_done(fsl_fctx *fx);
/** Keeps the node as an opaque op in the primitive graph (run whole by
 *  the backend); outputs take the given dtypes/shapes. */
fsl_status fsl_fx_opaque(fsl_fctx *fx, const fsl_dtype *dts, const int *ranks,
                         const int64_t (*dims)[FSL_MAX_RANK]);

/**
 * Lowers the ONNX graph `src` (topologically sorted, graph inputs with
 * bound static shapes) into a new primitive graph *out.  Constants are
 * folded as the graph is built, so shape subgraphs vanish.  Constant data
 * may be shared with `src`: keep src alive while *out is used.
 * Errors: FSL_ERR_UNSUPPORTED listing every unsupported (op, opset, node);
 * the first error of a decomposition otherwise.
 */
fsl_status fsl_fission(const fsl_graph *src, fsl_graph **out);

#endif
