/*
 * tensor.c — TensorProto decoding, shared by initializers, TENSOR
 * attributes and .pb tensor files (fsl_tensor_load_pb).
 *
 * Data lives in exactly one place (onnx.proto, TensorProto):
 *   - external data (data_location == EXTERNAL), see external.c;
 *   - raw_data: little-endian, row-major, numel * elem size bytes;
 *   - a typed field, by ONNX's packing rules: float_data (float),
 *     double_data (double), int64_data (int64), uint64_data (uint32, uint64),
 *     int32_data (int32, int16, int8, uint16, uint8, bool, and the bit
 *     patterns of float16 / bfloat16).
 */
#include "onnx/onnx_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fissile assumes a little-endian host (ONNX raw_data is little-endian)"
#endif

/** Where the payload of a TensorProto is. */
typedef enum {
  SRC_EXTERNAL, SRC_RAW, SRC_FLOAT, SRC_DOUBLE, SRC_INT32, SRC_INT64, SRC_UINT64
} data_src;

/* The typed field ONNX's packing rules use for a dtype. */
static data_src typed_src(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_F32: return SRC_FLOAT;
  case FSL_DT_F64: return SRC_DOUBLE;
  case FSL_DT_I64: return SRC_INT64;
  case FSL_DT_U32: case FSL_DT_U64: return SRC_UINT64;
  default: return SRC_INT32;  /* i32 i16 i8 u16 u8 bool f16 bf16 */
  }
}

static data_src tensor_src(const Onnx__TensorProto *tp, fsl_dtype dt) {
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return SRC_EXTERNAL;
  if (tp->has_raw_data) return SRC_RAW;
  return typed_src(dt);
}

static size_t typed_count(const Onnx__TensorProto *tp, data_src src) {
  switch (src) {
  case SRC_FLOAT: return tp->n_float_data;
  case SRC_DOUBLE: return tp->n_double_data;
  case SRC_INT32: return tp->n_int32_data;
  case SRC_INT64: return tp->n_int64_data;
  case SRC_UINT64: return tp->n_uint64_data;
  default: return 0;
  }
}

static const char *src_name(data_src src) {
  switch (src) {
  case SRC_FLOAT: return "float_data";
  case SRC_DOUBLE: return "double_data";
  case SRC_INT32: return "int32_data";
  case SRC_INT64: return "int64_data";
  case SRC_UINT64: return "uint64_data";
  case SRC_RAW: return "raw_data";
  default: return "external data";
  }
}

fsl_status fsl_onnx_tensor_info(const Onnx__TensorProto *tp, const char *what,
                                fsl_onnx_tinfo *info) {
  memset(info, 0, sizeof *info);
  int32_t dt = tp->has_data_type ? tp->data_type : 0;
  if (dt == FSL_DT_UNDEFINED)
    return fsl_errorf(FSL_ERR_INVALID, "%s: data_type is undefined", what);
  if (dt < 0 || dt >= FSL_DT_COUNT)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: unknown data_type %d", what, (int)dt);
  if (!fsl_dtype_valid((fsl_dtype)dt))
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: dtype %s is not supported", what,
                      fsl_dtype_name((fsl_dtype)dt));
  if (tp->segment)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: segmented tensors are not supported", what);
  if (tp->n_dims > FSL_MAX_RANK)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: rank %zu exceeds the maximum rank %d", what,
                      tp->n_dims, FSL_MAX_RANK);
  info->dtype = (fsl_dtype)dt;
  info->rank = (int)tp->n_dims;
  for (int i = 0; i < info->rank; i++) {
    if (tp->dims[i] < 0)
      return fsl_errorf(FSL_ERR_INVALID, "%s: dimension %d is negative (%lld)", what, i,
                        (long long)tp->dims[i]);
    info->dims[i] = tp->dims[i];
  }
  info->numel = fsl_numel(info->rank, info->dims);
  int64_t nb = fsl_nbytes(info->dtype, info->rank, info->dims);
  if (info->numel < 0 || nb < 0 || (uint64_t)nb > (uint64_t)SIZE_MAX)
    return fsl_errorf(FSL_ERR_INVALID, "%s: the element count of its dims overflows", what);
  info->nbytes = (size_t)nb;
  return FSL_OK;
}

/* Opens external data and checks offset/length against the file size. */
static fsl_status open_external(const Onnx__TensorProto *tp, const char *what, const char *dir,
                                const fsl_onnx_tinfo *info, FILE **f, int64_t *offset) {
  fsl_onnx_extref ref;
  int64_t size, end;
  FSL_TRY(fsl_onnx_extref_parse(tp, what, &ref));
  if (ref.length >= 0 && (uint64_t)ref.length != (uint64_t)info->nbytes)
    return fsl_errorf(FSL_ERR_INVALID,
                      "%s: external data length %lld does not match the %zu bytes its dims and dtype need",
                      what, (long long)ref.length, info->nbytes);
  FSL_TRY(fsl_onnx_extfile_open(dir, ref.location, what, f, &size));
  if (__builtin_add_overflow(ref.offset, (int64_t)info->nbytes, &end) || end > size) {
    fclose(*f);
    *f = NULL;
    return fsl_errorf(FSL_ERR_INVALID,
                      "%s: external data '%s' has %lld bytes, needs %zu at offset %lld", what,
                      ref.location, (long long)size, info->nbytes, (long long)ref.offset);
  }
  *offset = ref.offset;
  return FSL_OK;
}

fsl_status fsl_onnx_tensor_check(const Onnx__TensorProto *tp, const char *what,
                                 const char *dir, const fsl_onnx_tinfo *info) {
  data_src src = tensor_src(tp, info->dtype);
  if (src == SRC_EXTERNAL) {
    FILE *f;
    int64_t off;
    FSL_TRY(open_external(tp, what, dir, info, &f, &off));
    fclose(f);
    return FSL_OK;
  }
  if (src == SRC_RAW) {
    if (tp->raw_data.len != info->nbytes)
      return fsl_errorf(FSL_ERR_INVALID,
                        "%s: raw_data has %zu bytes, its dims and dtype (%s) need %zu", what,
                        tp->raw_data.len, fsl_dtype_name(info->dtype), info->nbytes);
    return FSL_OK;
  }
  size_t n = typed_count(tp, src);
  if ((uint64_t)n != (uint64_t)info->numel)
    return fsl_errorf(FSL_ERR_INVALID, "%s: %s has %zu values, its dims need %lld", what,
                      src_name(src), n, (long long)info->numel);
  return FSL_OK;
}

static fsl_status read_external(const Onnx__TensorProto *tp, const char *what, const char *dir,
                                const fsl_onnx_tinfo *info, void *dst) {
  FILE *f;
  int64_t off;
  FSL_TRY(open_external(tp, what, dir, info, &f, &off));
  fsl_status st = FSL_OK;
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 ||
      (info->nbytes && fread(dst, 1, info->nbytes, f) != info->nbytes))
    st = fsl_errorf(FSL_ERR_IO, "%s: short read of %zu bytes of external data at offset %lld",
                    what, info->nbytes, (long long)off);
  fclose(f);
  return st;
}

/* Narrows the int32_data entries into dst by the dtype's packing rule. */
static void fill_from_int32(const Onnx__TensorProto *tp, fsl_dtype dt, void *dst, size_t n) {
  const int32_t *s = tp->int32_data;
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case FSL_DT_I32: ((int32_t *)dst)[i] = s[i]; break;
    case FSL_DT_I16: ((int16_t *)dst)[i] = (int16_t)s[i]; break;
    case FSL_DT_I8: ((int8_t *)dst)[i] = (int8_t)s[i]; break;
    case FSL_DT_U16: case FSL_DT_F16: case FSL_DT_BF16:
      ((uint16_t *)dst)[i] = (uint16_t)s[i]; break;
    case FSL_DT_U8: ((uint8_t *)dst)[i] = (uint8_t)s[i]; break;
    case FSL_DT_BOOL: ((uint8_t *)dst)[i] = s[i] != 0; break;
    default: FSL_ASSERT(!"int32_data for a dtype that does not use it");
    }
  }
}

fsl_status fsl_onnx_tensor_fill(const Onnx__TensorProto *tp, const char *what,
                                const char *dir, const fsl_onnx_tinfo *info, void *dst) {
  data_src src = tensor_src(tp, info->dtype);
  if (src == SRC_EXTERNAL) return read_external(tp, what, dir, info, dst);
  FSL_TRY(fsl_onnx_tensor_check(tp, what, dir, info));
  size_t n = (size_t)info->numel;
  switch (src) {
  case SRC_RAW:
    if (info->nbytes) memcpy(dst, tp->raw_data.data, info->nbytes);
    break;
  case SRC_FLOAT:
    if (n) memcpy(dst, tp->float_data, n * sizeof(float));
    break;
  case SRC_DOUBLE:
    if (n) memcpy(dst, tp->double_data, n * sizeof(double));
    break;
  case SRC_INT64:
    if (n) memcpy(dst, tp->int64_data, n * sizeof(int64_t));
    break;
  case SRC_UINT64:
    for (size_t i = 0; i < n; i++) {
      if (info->dtype == FSL_DT_U64) ((uint64_t *)dst)[i] = tp->uint64_data[i];
      else ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
    }
    break;
  case SRC_INT32:
    fill_from_int32(tp, info->dtype, dst, n);
    break;
  default:
    FSL_ASSERT(!"unreachable data source");
  }
  return FSL_OK;
}

/* Copies the folder part of `path` into buf ("." if it has none). */
static void dir_of(const char *path, char *buf, size_t len) {
  const char *slash = strrchr(path, '/');
  if (!slash) { snprintf(buf, len, "."); return; }
  size_t n = (size_t)(slash - path);
  if (n == 0) n = 1;  /* "/x.pb" -> "/" */
  if (n >= len) n = len - 1;
  memcpy(buf, path, n);
  buf[n] = 0;
}

fsl_status fsl_tensor_load_pb(const char *path, fsl_tensor *out) {
  if (!path || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_tensor_load_pb: NULL argument");
  void *buf = NULL;
  size_t len = 0;
  FSL_TRY(fsl_read_file(path, (size_t)4 << 30, &buf, &len));
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
  free(buf);
  if (!tp) return fsl_errorf(FSL_ERR_PARSE, "'%s' is not a valid ONNX TensorProto", path);

  char what[512], dir[4096];
  snprintf(what, sizeof what, "tensor '%s' in '%s'", tp->name ? tp->name : "", path);
  dir_of(path, dir, sizeof dir);
  fsl_onnx_tinfo info;
  void *data = NULL;
  fsl_status st = fsl_onnx_tensor_info(tp, what, &info);
  if (st == FSL_OK) st = fsl_onnx_tensor_check(tp, what, dir, &info);
  if (st == FSL_OK && !(data = malloc(info.nbytes ? info.nbytes : 1)))
    st = fsl_errorf(FSL_ERR_NOMEM, "%s: out of memory for %zu bytes", what, info.nbytes);
  if (st == FSL_OK) st = fsl_onnx_tensor_fill(tp, what, dir, &info, data);
  if (st != FSL_OK) {
    free(data);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
  }
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", tp->name ? tp->name : "");
  out->dtype = info.dtype;
  out->rank = info.rank;
  memcpy(out->dims, info.dims, sizeof out->dims);
  out->data = data;
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return FSL_OK;
}
