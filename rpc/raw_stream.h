// The streaming transport's messages on the raw path (rpc/raw_wire.h):
// StreamRequest and StreamResponse of proto/ps.proto, with tensors cut into
// chunks, encoded with the data borrowed (never copied) and decoded into
// views of the received bytes. Stateless functions; thread-compatible.
#ifndef PS_RPC_RAW_STREAM_H_
#define PS_RPC_RAW_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "grpcpp/support/byte_buffer.h"
#include "rpc/raw_fields.h"

namespace ps {

// Call kinds, as CallKind in proto/ps.proto.
enum class StreamCall {
  kPush = 0,
  kPull = 1,
  kPushPull = 2,
  kPullRows = 3,
  kPushRows = 4,
  kPushPullRows = 5,
};

// The embedding-row kinds: one request message, no tensor chunks.
inline bool IsRowsCall(StreamCall kind) {
  return kind == StreamCall::kPullRows || kind == StreamCall::kPushRows ||
         kind == StreamCall::kPushPullRows;
}

// The row kinds that carry gradients.
inline bool IsRowPush(StreamCall kind) {
  return kind == StreamCall::kPushRows || kind == StreamCall::kPushPullRows;
}

// Chunk size of the streaming transport: tensors are cut into sub-ranges of
// at most this many bytes of data as it travels (f32 or bf16), packed into
// messages of about this size.
inline constexpr size_t kStreamChunkBytes = 1 << 20;

struct StreamCallHeader {
  uint64_t call_id = 0;
  StreamCall kind = StreamCall::kPush;
  int worker_id = 0;
  int64_t version = 0;
  int64_t min_version = 0;
  int64_t wait_timeout_ms = 0;
  int64_t seq = 0;                            // async push number; 0 = none
  WireDtype weights_dtype = WireDtype::kF32;  // pull kinds; always a known one
  std::string table;                          // rows kinds
  bool prefetch = false;                      // kPullRows: StreamRequest.prefetch
};

// Messages of one call carrying the gradient chunks of `slices` (none for
// kPull; then one message) as `dtype` (REQUIRES: known): with the header in
// the first message when `first`, and `last` set on the final one when
// `last`. A call may be sent in several such batches, e.g. layer by layer as
// backward produces them.
std::vector<grpc::ByteBuffer> EncodeStreamRequests(const StreamCallHeader& header, bool first,
                                                   bool last, const ModelSpec& spec,
                                                   const std::vector<SliceRange>& slices,
                                                   const SliceValues& values,
                                                   size_t chunk_bytes = kStreamChunkBytes,
                                                   WireDtype dtype = WireDtype::kF32);

// The weights of `slices` as chunked responses to `call_id`, `info` in the
// first, the data as `dtype`; `owner` keeps the values alive until sent.
std::vector<grpc::ByteBuffer> EncodeStreamWeights(
    uint64_t call_id, int64_t version, const ModelSpec& spec, const std::vector<SliceRange>& slices,
    const SliceValues& values, std::shared_ptr<const void> owner,
    size_t chunk_bytes = kStreamChunkBytes, const ReplyInfo& info = ReplyInfo(),
    WireDtype dtype = WireDtype::kF32);

// A rows call (IsRowsCall(header.kind)) as its one message, `last` set:
// the header (`version` and `seq` are the row push's), `header.table`,
// `ids` and, for the push kinds (IsRowPush), `grads`, both copied into the
// message.
grpc::ByteBuffer EncodeStreamRowsRequest(const StreamCallHeader& header,
                                         absl::Span<const uint64_t> ids,
                                         absl::Span<const float> grads);

// A kPullRows or kPushPullRows call's rows (`rows`, kept alive by it until sent) as
// responses to `call_id` of at most `chunk_bytes` (rounded down to whole
// floats) of `rows` each, `info` in the first, `last` on the final one
// (a single message when there are none).
// A call's rows may also go out in several such runs (pieces read one
// after another): `first` says this run starts the call's answer (it
// carries `info`), `last` that it ends it.
std::vector<grpc::ByteBuffer> EncodeStreamRows(uint64_t call_id, int64_t version,
                                               std::shared_ptr<const std::vector<float>> rows,
                                               const ReplyInfo& info,
                                               size_t chunk_bytes = kStreamChunkBytes,
                                               bool first = true, bool last = true);

// A call's single last response: its version and `info`, or its error.
grpc::ByteBuffer EncodeStreamDone(uint64_t call_id, int64_t version, const absl::Status& status,
                                  const ReplyInfo& info = ReplyInfo());

struct RawStreamRequest {
  StreamCallHeader header;
  std::vector<RawTensorSlice> gradients;
  bool last = false;
  // Rows kinds: the ids (copied out) and the gradient bytes (a view).
  std::vector<uint64_t> ids;
  Pieces row_grads;
};

struct RawStreamResponse {
  uint64_t call_id = 0;
  int64_t version = 0;
  ReplyInfo info;  // from the message that carries it (zero otherwise)
  std::vector<RawTensorSlice> weights;
  Pieces rows;  // kPullRows, kPushPullRows: this message's bytes of the rows
  bool last = false;
  absl::Status status;  // from error_code / error_message
};

// Decoders; INVALID_ARGUMENT naming the message for malformed bytes. The
// decoded data views `bytes`, which must outlive the result.
absl::Status DecodeStreamRequest(const Pieces& bytes, RawStreamRequest* out);
absl::Status DecodeStreamResponse(const Pieces& bytes, RawStreamResponse* out);

// Cuts `slices` into sub-ranges of at most `chunk_bytes` of `dtype` data
// (flat_offset kept consistent), grouped into messages of about
// `chunk_bytes` each.
std::vector<std::vector<SliceRange>> ChunkSlices(const std::vector<SliceRange>& slices,
                                                 size_t chunk_bytes,
                                                 WireDtype dtype = WireDtype::kF32);

}  // namespace ps

#endif  // PS_RPC_RAW_STREAM_H_
