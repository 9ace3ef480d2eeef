// Wire helpers shared by proto_fuzzer.cc (the descriptor walk) and
// proto_fuzzer_values.cc (the value pools). Internal to the ProtoFuzzer
// library; stateless.
#ifndef PS_TESTS_PROTO_FUZZER_WIRE_H_
#define PS_TESTS_PROTO_FUZZER_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "google/protobuf/descriptor.h"
#include "tests/proto_fuzzer.h"

namespace ps {
namespace proto_fuzzer_internal {

using google::protobuf::FieldDescriptor;

inline constexpr int kMaxDepth = 4;  // nesting of random sub-messages

inline void AppendFixed(uint64_t bits, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(bits >> (8 * i)));
}

inline int WireTypeOf(const FieldDescriptor* f) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_FLOAT:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
      return kWireFixed32;
    case FieldDescriptor::TYPE_DOUBLE:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
      return kWireFixed64;
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return kWireLen;
    case FieldDescriptor::TYPE_GROUP:
      return kWireStartGroup;  // not in proto3; never generated here
    default:
      return kWireVarint;
  }
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

// The wire bits of integer `v` in a field of `f`'s type. Values outside the
// type's range are kept on purpose for varint types (a peer may send them).
inline uint64_t IntBits(const FieldDescriptor* f, int64_t v) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SINT64:
      return ZigZag(v);
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
      return static_cast<uint32_t>(v);
    default:
      return static_cast<uint64_t>(v);
  }
}

template <typename T>
inline uint64_t BitsOf(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}


}  // namespace proto_fuzzer_internal
}  // namespace ps

#endif  // PS_TESTS_PROTO_FUZZER_WIRE_H_
