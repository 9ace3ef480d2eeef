// The fields that the raw messages of rpc/raw_wire.h share: TensorSlice,
// written from the caller's floats without a copy and read as views of the
// received bytes, and what every reply to a push or pull carries (the
// shard's incarnation and the push's outcome).
//
// Field numbers come from the generated code (proto/ps.pb.h), so ps.proto
// stays their one source; raw_wire_test checks the bytes against the
// generated parsers. Stateless functions; thread-compatible.
#ifndef PS_RPC_RAW_FIELDS_H_
#define PS_RPC_RAW_FIELDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/incarnation.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "common/wire_dtype.h"
#include "rpc/proto_codec.h"

namespace ps {

// Limits of the decoders, whatever the message size: a shape has at most
// kMaxWireRank dimensions and a message at most kMaxSlicesPerMessage slices
// (so a message of tiny slices cannot make the decoded form many times its
// own size). Past them a message is malformed.
inline constexpr size_t kMaxWireRank = 8;
inline constexpr size_t kMaxSlicesPerMessage = 1 << 16;

// Size of TensorSlice{name, shape, offset, length, data, dtype} for slice
// `r` of `t` with its data as `dtype`, without its own tag and length prefix.
size_t TensorSliceSize(const TensorSpec& t, const SliceRange& r,
                       WireDtype dtype = WireDtype::kF32);

// Writes field `field` = TensorSlice for slice `r` of `t`, whose values are
// the r.length floats at `values`. As f32 the values are borrowed (see
// ProtoWriter::Data; `owner` keeps them alive); as bf16 they are narrowed
// (common/bf16.h) into a buffer that the message owns. REQUIRES:
// IsKnownWireDtype(dtype).
void WriteTensorSlice(ProtoWriter* w, int field, const TensorSpec& t, const SliceRange& r,
                      const float* values, std::shared_ptr<const void> owner,
                      WireDtype dtype = WireDtype::kF32);

// Decodes a TensorSlice message from `bytes`. Its dtype is kept as sent
// (the SliceAssembler rejects an unknown one, naming the tensor).
absl::Status ReadTensorSlice(const Pieces& bytes, RawTensorSlice* out);

// Reads the TensorSlice value of `field` (length-delimited) into a new
// element of `out`, at most kMaxSlicesPerMessage per message. A truncated
// value is malformed: "truncated <what>".
absl::Status ReadSliceField(FieldReader& field, absl::string_view what,
                            std::vector<RawTensorSlice>* out);

// Where slice `r`'s r.length floats are (borrowed until the call completes).
using SliceValues = std::function<const float*(const SliceRange& r)>;

// The values of a flat buffer in layout order (SliceRange::flat_offset):
// how shards and clients hold their slices.
inline SliceValues FlatValues(const float* flat) {
  return [flat](const SliceRange& r) { return flat + r.flat_offset; };
}

// What every reply to a push or pull also carries: the shard's incarnation
// and, for calls with a push, what became of it.
struct ReplyInfo {
  Incarnation incarnation;
  PushOutcome outcome = PushOutcome::kApplied;
};

// Incarnation{run_id, start} as field `field` (nothing when unknown).
void WriteIncarnation(ProtoWriter* w, int field, const Incarnation& inc);
// Reads the Incarnation value of `field`; malformed: "bad incarnation".
absl::Status ReadIncarnation(FieldReader& field, Incarnation* out);

// A PushOutcome as field `field` (nothing for kApplied, the default).
void WriteOutcome(ProtoWriter* w, int field, PushOutcome outcome);
// Reads the PushOutcome value of `field`; malformed or unknown: `what`.
absl::Status ReadOutcome(FieldReader& field, absl::string_view what, PushOutcome* out);

// A request's weights_dtype as field `field` (nothing for kF32, the default).
void WriteWeightsDtype(ProtoWriter* w, int field, WireDtype dtype);
// Reads a request's weights_dtype; malformed or unknown: "unknown
// weights_dtype N".
absl::Status ReadWeightsDtype(FieldReader& field, WireDtype* out);

}  // namespace ps

#endif  // PS_RPC_RAW_FIELDS_H_
