/*
 * npy.c — NumPy .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
 *
 * Layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0,
 * uint32 LE for 2.0 and 3.0), then a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and '\n', then the raw data.  Reading accepts
 * versions 1.0-3.0, little-endian (or byte-order-free) numeric and bool
 * dtypes, C order only.  Writing produces version 1.0.  The file is
 * untrusted: every length is bounds-checked.
 */
#include "core/core.h"

#include <ctype.h>
#include <errno.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER (1u << 20)  /* headers are small; refuse huge ones */

typedef struct npy_header {
  fsl_dtype dtype;
  bool fortran;
  int rank;
  int64_t dims[FSL_MAX_RANK];
  bool have_descr, have_order, have_shape;
} npy_header;

/* ---- a tiny parser for the header dict ---- */
typedef struct cursor {
  const char *p, *end;
  const char *path;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && isspace((unsigned char)*c->p)) c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

static fsl_status bad(const cursor *c, const char *what) {
  return fsl_errorf(FSL_ERR_PARSE, "%s: malformed .npy header: expected %s", c->path, what);
}

/* A quoted Python string ('...' or "...", no escapes) into buf. */
static fsl_status parse_str(cursor *c, char *buf, size_t len) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return bad(c, "a quoted string");
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 >= len) return bad(c, "a short string");
    buf[n++] = *c->p++;
  }
  if (c->p >= c->end) return bad(c, "a closing quote");
  c->p++;
  buf[n] = 0;
  return FSL_OK;
}

static fsl_status parse_bool(cursor *c, bool *out) {
  skip_ws(c);
  size_t left = (size_t)(c->end - c->p);
  if (left >= 4 && !memcmp(c->p, "True", 4)) { *out = true; c->p += 4; return FSL_OK; }
  if (left >= 5 && !memcmp(c->p, "False", 5)) { *out = false; c->p += 5; return FSL_OK; }
  return bad(c, "True or False for 'fortran_order'");
}

static fsl_status parse_int(cursor *c, int64_t *out) {
  skip_ws(c);
  int64_t v = 0;
  int digits = 0;
  while (c->p < c->end && isdigit((unsigned char)*c->p)) {
    int d = *c->p++ - '0';
    if (v > (INT64_MAX - d) / 10) return fsl_errorf(FSL_ERR_PARSE, "%s: .npy dimension too large", c->path);
    v = v * 10 + d;
    digits++;
  }
  if (c->p < c->end && *c->p == 'L') c->p++;  /* Python 2 long suffix */
  if (!digits) return bad(c, "a non-negative integer dimension");
  *out = v;
  return FSL_OK;
}

static fsl_status parse_shape(cursor *c, npy_header *h) {
  if (!eat(c, '(')) return bad(c, "a tuple for 'shape'");
  h->rank = 0;
  while (!eat(c, ')')) {
    if (h->rank >= FSL_MAX_RANK)
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: .npy array has rank > %d", c->path, FSL_MAX_RANK);
    FSL_TRY(parse_int(c, &h->dims[h->rank]));
    h->rank++;
    if (!eat(c, ',')) {
      if (!eat(c, ')')) return bad(c, "',' or ')' in 'shape'");
      break;
    }
  }
  return FSL_OK;
}

static fsl_status parse_descr(cursor *c, const char *d, npy_header *h) {
  static const struct { char code[3]; fsl_dtype dt; } k_map[] = {
    {"f2", FSL_DT_F16}, {"f4", FSL_DT_F32}, {"f8", FSL_DT_F64},
    {"i1", FSL_DT_I8},  {"i2", FSL_DT_I16}, {"i4", FSL_DT_I32}, {"i8", FSL_DT_I64},
    {"u1", FSL_DT_U8},  {"u2", FSL_DT_U16}, {"u4", FSL_DT_U32}, {"u8", FSL_DT_U64},
    {"b1", FSL_DT_BOOL},
  };
  char order = d[0];
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is not a simple numeric type", c->path, d);
  for (size_t i = 0; i < FSL_ARRAY_LEN(k_map); i++) {
    if (strcmp(d + 1, k_map[i].code)) continue;
    if (order == '>' && fsl_dtype_size(k_map[i].dt) > 1)
      return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: big-endian .npy dtype '%s' (expected little endian '<')",
                        c->path, d);
    h->dtype = k_map[i].dt;
    return FSL_OK;
  }
  return fsl_errorf(FSL_ERR_UNSUPPORTED,
                    "%s: .npy dtype '%s' is not supported (expected one of <f2 <f4 <f8 "
                    "|i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1)", c->path, d);
}

static fsl_status parse_entry(cursor *c, npy_header *h) {
  char key[32], descr[32];
  FSL_TRY(parse_str(c, key, sizeof key));
  if (!eat(c, ':')) return bad(c, "':' after a key");
  if (!strcmp(key, "descr")) {
    FSL_TRY(parse_str(c, descr, sizeof descr));
    FSL_TRY(parse_descr(c, descr, h));
    h->have_descr = true;
  } else if (!strcmp(key, "fortran_order")) {
    FSL_TRY(parse_bool(c, &h->fortran));
    h->have_order = true;
  } else if (!strcmp(key, "shape")) {
    FSL_TRY(parse_shape(c, h));
    h->have_shape = true;
  } else {
    return fsl_errorf(FSL_ERR_PARSE, "%s: unexpected key '%s' in .npy header", c->path, key);
  }
  return FSL_OK;
}

static fsl_status parse_header(const char *path, const char *text, size_t len, npy_header *h) {
  cursor c = {text, text + len, path};
  memset(h, 0, sizeof *h);
  if (!eat(&c, '{')) return bad(&c, "'{'");
  while (!eat(&c, '}')) {
    FSL_TRY(parse_entry(&c, h));
    if (!eat(&c, ',')) {
      if (!eat(&c, '}')) return bad(&c, "',' or '}'");
      break;
    }
  }
  if (!h->have_descr || !h->have_order || !h->have_shape)
    return bad(&c, "the keys 'descr', 'fortran_order' and 'shape'");
  if (h->fortran && h->rank > 1)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: .npy array is in Fortran order (expected C order)", path);
  return FSL_OK;
}

/* ---- reading ---- */
static void set_name_from_path(fsl_tensor *t, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  const char *dot = strrchr(base, '.');
  if (dot && dot != base) n = (size_t)(dot - base);
  if (n >= sizeof t->name) n = sizeof t->name - 1;
  memcpy(t->name, base, n);
  t->name[n] = 0;
}

static fsl_status read_preamble(FILE *f, const char *path, size_t *hlen, size_t *data_off) {
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN))
    return fsl_errorf(FSL_ERR_PARSE, "%s: not a .npy file (expected the \\x93NUMPY magic)", path);
  int major = pre[6];
  if (major == 1) {
    *hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    *data_off = 10 + *hlen;
  } else if (major == 2 || major == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) return fsl_errorf(FSL_ERR_PARSE, "%s: truncated .npy header", path);
    *hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    *data_off = 12 + *hlen;
  } else {
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: .npy format version %d.%d (expected 1.0, 2.0 or 3.0)",
                      path, major, pre[7]);
  }
  if (*hlen > NPY_MAX_HEADER)
    return fsl_errorf(FSL_ERR_PARSE, "%s: .npy header of %zu bytes is too large", path, *hlen);
  return FSL_OK;
}

static fsl_status read_data(FILE *f, const char *path, size_t data_off, const npy_header *h,
                            fsl_tensor *t) {
  int64_t nb = fsl_nbytes(h->dtype, h->rank, h->dims);
  if (nb < 0) return fsl_errorf(FSL_ERR_PARSE, "%s: .npy array size overflows", path);
  if (fseek(f, 0, SEEK_END) != 0) return fsl_errorf(FSL_ERR_IO, "%s: cannot seek", path);
  long fsize = ftell(f);
  if (fsize < 0 || (uint64_t)fsize < (uint64_t)data_off || (uint64_t)fsize - data_off < (uint64_t)nb)
    return fsl_errorf(FSL_ERR_PARSE, "%s: .npy data truncated (expected %lld bytes after the header)",
                      path, (long long)nb);
  if (fseek(f, (long)data_off, SEEK_SET) != 0) return fsl_errorf(FSL_ERR_IO, "%s: cannot seek", path);
  t->data = malloc(nb > 0 ? (size_t)nb : 1);
  if (!t->data) return fsl_errorf(FSL_ERR_NOMEM, "%s: out of memory for %lld bytes", path, (long long)nb);
  if (nb > 0 && fread(t->data, 1, (size_t)nb, f) != (size_t)nb) {
    free(t->data);
    t->data = NULL;
    return fsl_errorf(FSL_ERR_IO, "%s: read error", path);
  }
  if (h->dtype == FSL_DT_BOOL)
    for (int64_t i = 0; i < nb; i++) ((unsigned char *)t->data)[i] = ((unsigned char *)t->data)[i] != 0;
  return FSL_OK;
}

fsl_status fsl_tensor_load_npy(const char *path, fsl_tensor *out) {
  if (!path || !out) return fsl_errorf(FSL_ERR_ARG, "fsl_tensor_load_npy: path and out must not be NULL");
  FILE *f = fopen(path, "rb");
  if (!f) return fsl_errorf(FSL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  fsl_status st;
  char *text = NULL;
  size_t hlen = 0, data_off = 0;
  npy_header h;
  fsl_tensor t;
  memset(&t, 0, sizeof t);
  if ((st = read_preamble(f, path, &hlen, &data_off)) != FSL_OK) goto done;
  text = malloc(hlen + 1);
  if (!text) { st = fsl_errorf(FSL_ERR_NOMEM, "out of memory"); goto done; }
  if (fread(text, 1, hlen, f) != hlen) {
    st = fsl_errorf(FSL_ERR_PARSE, "%s: truncated .npy header", path);
    goto done;
  }
  if ((st = parse_header(path, text, hlen, &h)) != FSL_OK) goto done;
  t.dtype = h.dtype;
  t.rank = h.rank;
  memcpy(t.dims, h.dims, sizeof t.dims);
  set_name_from_path(&t, path);
  if ((st = read_data(f, path, data_off, &h, &t)) != FSL_OK) goto done;
  *out = t;
done:
  free(text);
  fclose(f);
  return st;
}

/* ---- writing ---- */
static const char *npy_descr(fsl_dtype dt) {
  switch (dt) {
  case FSL_DT_F16: return "<f2";
  case FSL_DT_F32: return "<f4";
  case FSL_DT_F64: return "<f8";
  case FSL_DT_I8: return "|i1";
  case FSL_DT_I16: return "<i2";
  case FSL_DT_I32: return "<i4";
  case FSL_DT_I64: return "<i8";
  case FSL_DT_U8: return "|u1";
  case FSL_DT_U16: return "<u2";
  case FSL_DT_U32: return "<u4";
  case FSL_DT_U64: return "<u8";
  case FSL_DT_BOOL: return "|b1";
  default: return NULL;
  }
}

/* Builds the padded 1.0 header (magic included); returns its length or 0. */
static size_t build_header(const fsl_tensor *t, const char *descr, char *buf, size_t cap) {
  char dict[64 + FSL_MAX_RANK * 24];
  size_t o = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < t->rank; i++)
    o += (size_t)snprintf(dict + o, sizeof dict - o, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  o += (size_t)snprintf(dict + o, sizeof dict - o, "%s), }", t->rank == 1 ? "," : "");
  size_t total = 10 + o + 1;              /* magic+version+len, dict, '\n' */
  size_t padded = (total + 63) / 64 * 64;
  if (padded > cap || padded - 10 > 0xffff) return 0;
  memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)((padded - 10) & 0xff);
  buf[9] = (char)((padded - 10) >> 8);
  memcpy(buf + 10, dict, o);
  memset(buf + 10 + o, ' ', padded - 10 - o - 1);
  buf[padded - 1] = '\n';
  return padded;
}

fsl_status fsl_tensor_save_npy(const char *path, const fsl_tensor *t) {
  if (!path || !t) return fsl_errorf(FSL_ERR_ARG, "fsl_tensor_save_npy: path and tensor must not be NULL");
  const char *descr = npy_descr(t->dtype);
  if (!descr)
    return fsl_errorf(FSL_ERR_UNSUPPORTED, "%s: dtype %s has no .npy code (expected a numeric or bool type)",
                      path, fsl_dtype_name(t->dtype));
  if (t->rank < 0 || t->rank > FSL_MAX_RANK)
    return fsl_errorf(FSL_ERR_ARG, "%s: tensor rank %d out of range", path, t->rank);
  int64_t nb = fsl_nbytes(t->dtype, t->rank, t->dims);
  if (nb < 0) return fsl_errorf(FSL_ERR_ARG, "%s: tensor size overflows", path);
  if (nb > 0 && !t->data) return fsl_errorf(FSL_ERR_ARG, "%s: tensor has no data", path);
  char hdr[512];
  size_t hl = build_header(t, descr, hdr, sizeof hdr);
  FSL_ASSERT(hl > 0);
  FILE *f = fopen(path, "wb");
  if (!f) return fsl_errorf(FSL_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  bool ok = fwrite(hdr, 1, hl, f) == hl && (nb == 0 || fwrite(t->data, 1, (size_t)nb, f) == (size_t)nb);
  if (fclose(f) != 0) ok = false;
  if (!ok) {
    remove(path);
    return fsl_errorf(FSL_ERR_IO, "%s: write error", path);
  }
  return FSL_OK;
}
