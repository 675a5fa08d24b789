/*
 * onnx_import.h — ModelProto (protobuf binary) -> fissile graph.
 * Protobuf types never leave src/onnx/.
 */
#ifndef FSL_ONNX_IMPORT_H
#define FSL_ONNX_IMPORT_H

#include "ir/ir.h"

/**
 * Parses an ONNX model from memory into a new graph of ONNX ops
 * (topologically sorted).  Initializers (also those listed as graph
 * inputs) become constant values; graph inputs get dtype and shape, with
 * dim_param names kept in value->dim_param and the dim set to -1.  Nodes of
 * unknown ops are kept with op FSL_OP_NONE and their op_type/domain, so
 * fission can list every unsupported op at once.  External data is read
 * from `dir` (NULL forbids it); a location escaping `dir` is rejected.
 * Errors: FSL_ERR_PARSE (not a ModelProto), FSL_ERR_INVALID (dangling
 * value, duplicate definition, cycle, bad tensor sizes), FSL_ERR_UNSUPPORTED
 * (string/float8/int4 tensors, ...), FSL_ERR_IO, FSL_ERR_NOMEM.
 */
fsl_status fsl_onnx_import(const void *buf, size_t len, const char *dir, fsl_graph **out);

#endif
