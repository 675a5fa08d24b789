/*
 * wire.c — a pre-pass over protobuf wire format that bounds message
 * nesting depth before protobuf-c unpacks it.
 *
 * protobuf-c unpacks sub-messages recursively with no depth limit, so a
 * few MB of nested GraphProto -> NodeProto -> AttributeProto -> GraphProto
 * overflow the stack.  This scanner walks the bytes with the message
 * descriptors (so it knows which length-delimited fields are messages) and
 * refuses anything nested deeper than a limit.  It recurses at most
 * max_depth levels itself.
 */
#include "onnx/onnx_internal.h"

/* Reads a varint at *p (< end); false if truncated or longer than 10 bytes. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

static bool scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end,
                 int depth) {
  while (p < end) {
    uint64_t tag, len;
    if (!read_varint(&p, end, &tag)) return false;
    switch (tag & 7) {
    case 0: /* varint */
      if (!read_varint(&p, end, &len)) return false;
      break;
    case 1: /* 64-bit */
      if (end - p < 8) return false;
      p += 8;
      break;
    case 5: /* 32-bit */
      if (end - p < 4) return false;
      p += 4;
      break;
    case 2: { /* length-delimited: bytes, string, packed, or a sub-message */
      if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p)) return false;
      uint64_t id = tag >> 3;
      const ProtobufCFieldDescriptor *f =
          id <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)id) : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (depth <= 0 || !scan(f->descriptor, p, p + len, depth - 1)) return false;
      }
      p += len;
      break;
    }
    default: /* groups (3, 4) are not used by onnx.proto; 6, 7 are invalid */
      return false;
    }
  }
  return true;
}

bool fsl_onnx_wire_ok(const ProtobufCMessageDescriptor *d, const void *buf, size_t len,
                      int max_depth) {
  const uint8_t *p = buf;
  return scan(d, p, p + len, max_depth);
}
