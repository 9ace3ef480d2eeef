// ProtoFuzzer: random and malformed protobuf wire bytes for any message type,
// driven by the message's descriptor, for fuzzing the servers that parse them.
//
// Bytes are written by hand (not by SerializeToString) so that they can be
// anything a peer could send: a field with a value outside its type's range
// or with the wrong wire type, a length prefix that claims more or fewer
// bytes than follow, a bytes field cut short or padded, an unterminated
// varint, unknown fields, or no protobuf at all.
//
//   Mutate(valid, rate)   re-encodes a valid message field by field, walking
//                         its descriptor with reflection; each field is
//                         changed with probability `rate` (0: the exact
//                         encoding, 1: every field). What is not changed
//                         stays valid, so the result gets past the parser
//                         into the server's own checks.
//   Random(descriptor)    a message of that type with every field changed
//                         from the empty message (Mutate at rate 1).
//   Garble(bytes)         damages a whole encoded message: truncation, byte
//                         flips, trailing or inserted junk.
//   NotProtobuf()         bytes that do not parse as any message.
//
// Values come from pools of extremes per field type (INT64_MIN/MAX,
// INT32_MIN/MAX, 0, -1, 2^62, 2^63-1, out-of-range enums, NaN/Inf floats,
// invalid UTF-8, ...) mixed with the plausible values the caller registers
// per field (AddInts/AddStrings), e.g. the real tensor names.
//
// Deterministic for a given seed and call sequence. Not thread-safe: use one
// per thread (the tests use one per fuzz case).
#ifndef PS_TESTS_PROTO_FUZZER_H_
#define PS_TESTS_PROTO_FUZZER_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"

namespace ps {

// Plausible values per field, keyed by the field's full name (e.g.
// "ps.v1.TensorSlice.name"). Shared read-only by the ProtoFuzzers of a run.
struct FieldHints {
  absl::flat_hash_map<std::string, std::vector<int64_t>> ints;
  absl::flat_hash_map<std::string, std::vector<std::string>> strings;
  // `bytes` fields that hold little-endian float32 values: their mutations
  // also plant NaN and +-Inf at element boundaries.
  absl::flat_hash_set<std::string> float_data;

  void AddInts(const std::string& field, std::vector<int64_t> v) {
    auto& to = ints[field];
    to.insert(to.end(), v.begin(), v.end());
  }
  void AddStrings(const std::string& field, std::vector<std::string> v) {
    auto& to = strings[field];
    to.insert(to.end(), v.begin(), v.end());
  }
};

class ProtoFuzzer {
 public:
  // `hints` is borrowed and must outlive this object.
  ProtoFuzzer(uint64_t seed, const FieldHints* hints);

  ProtoFuzzer(const ProtoFuzzer&) = delete;
  ProtoFuzzer& operator=(const ProtoFuzzer&) = delete;

  // `valid` re-encoded with each field changed with probability `rate`.
  std::string Mutate(const google::protobuf::Message& valid, double rate);

  // A message of type `d` with random fields.
  std::string Random(const google::protobuf::Descriptor* d);

  // `bytes` damaged as a whole (never returned unchanged).
  std::string Garble(std::string bytes);

  // Bytes that fail to parse as any protobuf message.
  std::string NotProtobuf();

  // Whether the last Mutate/Random changed anything (Mutate at a low rate
  // often changes nothing: then its bytes are the valid message's).
  bool changed() const { return changed_; }

  // Random helpers for the callers' own choices, from the same stream.
  std::mt19937_64& rng() { return rng_; }
  bool Chance(double p);
  int Uniform(int n);  // in [0, n)
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Uniform(static_cast<int>(v.size()))];
  }
  // An extreme or ordinary int64 (the pool of TYPE_INT64 fields).
  int64_t ExtremeInt64();

 private:
  using FieldDescriptor = google::protobuf::FieldDescriptor;

  // Appends `m`'s fields, each mutated with probability `rate`.
  void EncodeMessage(const google::protobuf::Message& m, double rate, int depth, std::string* out);
  void EncodeSingular(const google::protobuf::Message& m, const FieldDescriptor* f, double rate,
                      int depth, std::string* out);
  void EncodeRepeated(const google::protobuf::Message& m, const FieldDescriptor* f, double rate,
                      int depth, std::string* out);
  // One value of `f` (index -1: singular) as its payload: the varint or
  // fixed bits for scalars, the content for length-delimited fields.
  uint64_t ScalarBits(const google::protobuf::Message& m, const FieldDescriptor* f, int index);
  std::string Content(const google::protobuf::Message& m, const FieldDescriptor* f, int index,
                      double rate, int depth);
  // Emits one value of `f`, valid or (with `mutate`) damaged.
  void EmitScalar(const FieldDescriptor* f, uint64_t bits, bool mutate, std::string* out);
  void EmitContent(const FieldDescriptor* f, std::string content, bool mutate, int depth,
                   std::string* out);
  // A field whose value was replaced by a random one, or left out.
  void EmitRandom(const FieldDescriptor* f, int depth, std::string* out);

  uint64_t RandomScalarBits(const FieldDescriptor* f);
  std::string RandomContent(const FieldDescriptor* f, int depth);
  std::string RandomString(const FieldDescriptor* f);
  std::string MutateBytes(const FieldDescriptor* f, std::string v);
  uint32_t RandomFloatBits();
  uint64_t RandomDoubleBits();
  void EmitWrongWireType(const FieldDescriptor* f, std::string* out);
  void EmitUnknownField(std::string* out);

  std::mt19937_64 rng_;
  const FieldHints* const hints_;
  google::protobuf::DynamicMessageFactory factory_;  // empty messages for Random()
  bool changed_ = false;
};

// Wire-format writing, for callers that build messages by hand.
void AppendVarint(uint64_t v, std::string* out);
void AppendTag(int field, int wire_type, std::string* out);
void AppendLengthDelimited(int field, absl::string_view content, std::string* out);

// Wire types.
inline constexpr int kWireVarint = 0, kWireFixed64 = 1, kWireLen = 2, kWireStartGroup = 3,
                     kWireEndGroup = 4, kWireFixed32 = 5;

}  // namespace ps

#endif  // PS_TESTS_PROTO_FUZZER_H_
