/*
 * onnx_internal.h — helpers shared by the files of src/onnx/ (tensor
 * decoding, external data).  Includes the protobuf-c bindings, so it must
 * never be included from outside src/onnx/.
 */
#ifndef FSL_ONNX_INTERNAL_H
#define FSL_ONNX_INTERNAL_H

#include "core/core.h"
#include "onnx/onnx.pb-c.h"

/** Header of a decoded TensorProto: what the caller must allocate. */
typedef struct fsl_onnx_tinfo {
  fsl_dtype dtype;
  int rank;
  int64_t dims[FSL_MAX_RANK];
  int64_t numel;
  size_t nbytes;
} fsl_onnx_tinfo;

/**
 * Validates the header of TensorProto `tp` (dtype supported, rank <=
 * FSL_MAX_RANK, dims >= 0, numel * elem size does not overflow) and fills
 * *info.  `what` describes the tensor in messages, e.g. "initializer 'w'".
 * Errors: FSL_ERR_UNSUPPORTED (string, complex, float8, int4, ... dtypes,
 * segments, rank too large), FSL_ERR_INVALID (negative dim, overflow).
 */
fsl_status fsl_onnx_tensor_info(const Onnx__TensorProto *tp, const char *what,
                                fsl_onnx_tinfo *info);

/**
 * Checks that `tp` carries exactly info->nbytes bytes of data (raw_data,
 * the typed field that ONNX's packing rules pick for the dtype, or
 * external data resolved against `dir`) without reading it.  Call it before
 * allocating info->nbytes, so that a lying header cannot make us allocate.
 * Errors: FSL_ERR_INVALID (size mismatch, bad external_data entries),
 * FSL_ERR_IO (external file missing or unreadable).
 */
fsl_status fsl_onnx_tensor_check(const Onnx__TensorProto *tp, const char *what,
                                 const char *dir, const fsl_onnx_tinfo *info);

/**
 * Decodes the data of `tp` into dst (info->nbytes bytes, little-endian
 * row-major, bool one byte per element).  Checks sizes again, so calling
 * fsl_onnx_tensor_check first is an optimisation, not a requirement.
 */
fsl_status fsl_onnx_tensor_fill(const Onnx__TensorProto *tp, const char *what,
                                const char *dir, const fsl_onnx_tinfo *info,
                                void *dst);

/** Looks up "location", "offset" and "length" of an external tensor. */
typedef struct fsl_onnx_extref {
  const char *location;
  int64_t offset;       /* 0 when absent */
  int64_t length;       /* -1 when absent */
} fsl_onnx_extref;

/**
 * Parses the external_data entries of `tp`.  Errors: FSL_ERR_INVALID (no
 * location, offset/length not a non-negative decimal integer).
 */
fsl_status fsl_onnx_extref_parse(const Onnx__TensorProto *tp, const char *what,
                                 fsl_onnx_extref *ref);

/**
 * Opens the external data file `location` relative to `dir`, refusing
 * absolute paths, ".." components and anything whose real path is not
 * inside realpath(dir) (e.g. a symlink out).  On success *f is open for
 * reading and *size is the file size.
 * Errors: FSL_ERR_INVALID (dir NULL, escaping location, not a regular
 * file), FSL_ERR_IO (missing or unreadable).
 */
fsl_status fsl_onnx_extfile_open(const char *dir, const char *location, const char *what,
                                 FILE **f, int64_t *size);

/**
 * Walks protobuf wire format `buf` as message type `d` and returns false if
 * it is malformed at the wire level or nests sub-messages deeper than
 * max_depth (protobuf-c's recursive unpacker would overflow the stack).
 */
bool fsl_onnx_wire_ok(const ProtobufCMessageDescriptor *d, const void *buf, size_t len,
                      int max_depth);

/** Nesting limit for models: ~30 levels of subgraphs, far beyond real models. */
#define FSL_ONNX_MAX_DEPTH 100

#endif
