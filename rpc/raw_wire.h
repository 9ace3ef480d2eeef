// Raw wire path for the tensor-carrying messages (PushRequest,
// PushPullRequest, PullResponse of proto/ps.proto).
//
// The bytes are exactly the protobuf encoding of those messages, so the wire
// stays a valid, documented, reflectable ps.v1 message and generated stubs
// interoperate. But tensor data never passes through a protobuf object:
//   - ProtoWriter builds a grpc::ByteBuffer from small header slices and data
//     slices that point at the caller's floats (borrowed, or kept alive by a
//     shared owner), so sending copies nothing in user space;
//   - ProtoReader walks a received ByteBuffer's slices in place, handing out
//     the data fields as lists of pieces that are copied once, straight into
//     their destination.
//
// Not thread-safe; each object belongs to one call.
#ifndef PS_RPC_RAW_WIRE_H_
#define PS_RPC_RAW_WIRE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/float_bytes.h"
#include "common/incarnation.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace ps {

// Builds a ByteBuffer holding one protobuf message.
class ProtoWriter {
 public:
  // Field headers and scalar fields go into owned header bytes.
  void Varint(uint64_t v);
  void Tag(int field, int wire_type);
  void VarintField(int field, uint64_t v);  // proto int32/int64 (negative as 10 bytes)
  void LengthPrefix(int field, uint64_t len);
  void BytesField(int field, absl::string_view bytes);  // copied
  // Appends `len` bytes at `data` without copying. `owner` (may be null: then
  // the caller keeps the bytes alive until the call completes) is released
  // when gRPC is done with them.
  void Data(const void* data, size_t len, std::shared_ptr<const void> owner);

  grpc::ByteBuffer Finish();

 private:
  void FlushHeader();
  std::string header_;
  std::vector<grpc::Slice> slices_;
};

// Encoded size of a varint.
size_t VarintSize(uint64_t v);

// Size of TensorSlice{name, shape, offset, length, data} for slice `r` of `t`,
// without its own tag and length prefix.
size_t TensorSliceSize(const TensorSpec& t, const SliceRange& r);

// Writes field `field` = TensorSlice for slice `r` of `t`, whose values are
// the r.length floats at `values` (borrowed; see ProtoWriter::Data).
void WriteTensorSlice(ProtoWriter* w, int field, const TensorSpec& t, const SliceRange& r,
                      const float* values, std::shared_ptr<const void> owner);

// Reads one protobuf message in place from a sequence of pieces.
class ProtoReader {
 public:
  explicit ProtoReader(Pieces pieces) : pieces_(std::move(pieces)) {}

  // True once every byte was consumed.
  bool done() {
    Normalize();
    return piece_ == pieces_.size();
  }
  // Each returns false on truncated or malformed input.
  bool ReadVarint(uint64_t* v);
  bool ReadTag(int* field, int* wire_type);
  // The next `len` bytes, as views into the pieces.
  bool ReadPieces(uint64_t len, Pieces* out);
  bool ReadString(uint64_t len, std::string* out);
  // Skips a field of `wire_type` whose tag was just read.
  bool SkipField(int wire_type);

 private:
  // Moves past exhausted (or empty) pieces.
  void Normalize() {
    while (piece_ < pieces_.size() && pos_ == pieces_[piece_].size()) {
      ++piece_;
      pos_ = 0;
    }
  }

  Pieces pieces_;
  size_t piece_ = 0;  // current piece
  size_t pos_ = 0;    // offset in it
};

// A received ByteBuffer, kept alive with views of its slices.
struct ReceivedBytes {
  std::vector<grpc::Slice> slices;
  Pieces pieces;
};
absl::Status Receive(const grpc::ByteBuffer& buffer, ReceivedBytes* out);

// Limits of the decoders, whatever the message size: a shape has at most
// kMaxWireRank dimensions and a message at most kMaxSlicesPerMessage slices
// (so a message of tiny slices cannot make the decoded form many times its
// own size). Past them a message is malformed.
inline constexpr size_t kMaxWireRank = 8;
inline constexpr size_t kMaxSlicesPerMessage = 1 << 16;

// Decodes a TensorSlice message from `bytes`.
absl::Status ReadTensorSlice(const Pieces& bytes, RawTensorSlice* out);

// ---- Whole messages of proto/ps.proto.

// Where slice `r`'s r.length floats are (borrowed until the call completes).
using SliceValues = std::function<const float*(const SliceRange& r)>;

// The values of a flat buffer in layout order (SliceRange::flat_offset):
// how shards and clients hold their slices.
inline SliceValues FlatValues(const float* flat) {
  return [flat](const SliceRange& r) { return flat + r.flat_offset; };
}

struct RawPush {
  int64_t worker_id = 0;
  int64_t version = 0;
  int64_t seq = 0;  // async push number; 0 = none
  std::vector<RawTensorSlice> gradients;
};

// What every reply to a push or pull also carries: the shard's incarnation
// and, for calls with a push, what became of it.
struct ReplyInfo {
  Incarnation incarnation;
  PushOutcome outcome = PushOutcome::kApplied;
};

struct RawPull {
  int64_t worker_id = 0;
  int64_t min_version = 0;
  int64_t wait_timeout_ms = 0;
};

// PushRequest{worker_id, version, gradients = `slices`, seq}.
grpc::ByteBuffer EncodePushRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                   const std::vector<SliceRange>& slices,
                                   const SliceValues& values, int64_t seq = 0);
// PushPullRequest{push = PushRequest{...}, min_version, wait_timeout_ms}.
grpc::ByteBuffer EncodePushPullRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                       const std::vector<SliceRange>& slices,
                                       const SliceValues& values, int64_t min_version,
                                       int64_t wait_timeout_ms, int64_t seq = 0);
// PushResponse{version, outcome, incarnation}.
grpc::ByteBuffer EncodePushResponse(int64_t version, PushOutcome outcome = PushOutcome::kApplied,
                                    const Incarnation& incarnation = Incarnation());
// PullResponse{version, weights = `slices`, incarnation, push_outcome};
// `owner` keeps the values alive until gRPC has sent them.
grpc::ByteBuffer EncodePullResponse(int64_t version, const ModelSpec& spec,
                                    const std::vector<SliceRange>& slices,
                                    const SliceValues& values, std::shared_ptr<const void> owner,
                                    const ReplyInfo& info = ReplyInfo());

// ---- The streaming transport (StreamRequest / StreamResponse).

// Call kinds, as CallKind in proto/ps.proto.
enum class StreamCall { kPush = 0, kPull = 1, kPushPull = 2 };

// Chunk size of the streaming transport: tensors are cut into sub-ranges of
// at most this many bytes, packed into messages of about this size.
inline constexpr size_t kStreamChunkBytes = 1 << 20;

struct StreamCallHeader {
  uint64_t call_id = 0;
  StreamCall kind = StreamCall::kPush;
  int worker_id = 0;
  int64_t version = 0;
  int64_t min_version = 0;
  int64_t wait_timeout_ms = 0;
  int64_t seq = 0;  // async push number; 0 = none
};

// Messages of one call carrying the gradient chunks of `slices` (none for
// kPull; then one message): with the header in the first message when
// `first`, and `last` set on the final one when `last`. A call may be sent
// in several such batches, e.g. layer by layer as backward produces them.
std::vector<grpc::ByteBuffer> EncodeStreamRequests(const StreamCallHeader& header, bool first,
                                                   bool last, const ModelSpec& spec,
                                                   const std::vector<SliceRange>& slices,
                                                   const SliceValues& values,
                                                   size_t chunk_bytes = kStreamChunkBytes);

// The weights of `slices` as chunked responses to `call_id`, `info` in the
// first; `owner` keeps the values alive until sent.
std::vector<grpc::ByteBuffer> EncodeStreamWeights(uint64_t call_id, int64_t version,
                                                  const ModelSpec& spec,
                                                  const std::vector<SliceRange>& slices,
                                                  const SliceValues& values,
                                                  std::shared_ptr<const void> owner,
                                                  size_t chunk_bytes = kStreamChunkBytes,
                                                  const ReplyInfo& info = ReplyInfo());

// A call's single last response: its version and `info`, or its error.
grpc::ByteBuffer EncodeStreamDone(uint64_t call_id, int64_t version, const absl::Status& status,
                                  const ReplyInfo& info = ReplyInfo());

struct RawStreamRequest {
  StreamCallHeader header;
  std::vector<RawTensorSlice> gradients;
  bool last = false;
};

struct RawStreamResponse {
  uint64_t call_id = 0;
  int64_t version = 0;
  ReplyInfo info;  // from the message that carries it (zero otherwise)
  std::vector<RawTensorSlice> weights;
  bool last = false;
  absl::Status status;  // from error_code / error_message
};

absl::Status DecodeStreamRequest(const Pieces& bytes, RawStreamRequest* out);
absl::Status DecodeStreamResponse(const Pieces& bytes, RawStreamResponse* out);

// Cuts `slices` into sub-ranges of at most `chunk_bytes` (flat_offset kept
// consistent), grouped into messages of about `chunk_bytes` each.
std::vector<std::vector<SliceRange>> ChunkSlices(const std::vector<SliceRange>& slices,
                                                 size_t chunk_bytes);

// Decoders; INVALID_ARGUMENT naming the message for malformed bytes. The
// decoded data views `bytes`, which must outlive the result.
absl::Status DecodePushRequest(const Pieces& bytes, RawPush* out);
absl::Status DecodePushPullRequest(const Pieces& bytes, RawPush* push, RawPull* pull);
absl::Status DecodePullRequest(const Pieces& bytes, RawPull* out);
absl::Status DecodePullResponse(const Pieces& bytes, int64_t* version,
                                std::vector<RawTensorSlice>* weights, ReplyInfo* info = nullptr);
absl::Status DecodePushResponse(const Pieces& bytes, int64_t* version, ReplyInfo* info);

}  // namespace ps

#endif  // PS_RPC_RAW_WIRE_H_
