// Replies: a completed ShardCall's result (server/core/pipeline.h) as the bytes
// of each transport, the only place the server turns results into bytes.
//
// Weights travel as the call asked (`weights_dtype`). As f32 they are never
// copied: the messages point into the snapshot, which they keep alive until
// gRPC has sent them (rpc/raw_wire.h). As bf16 they are narrowed per request
// into buffers the messages own; the shard's weights stay float32.
//
// Stateless functions; thread-safe.
#ifndef PS_SERVER_REPLIES_H_
#define PS_SERVER_REPLIES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/wire_dtype.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/core/pipeline.h"
#include "server/core/shard.h"

namespace ps {

// Unary calls: a PullResponse for a call with a pull, else a PushResponse.
// REQUIRES: IsKnownWireDtype(weights_dtype) (the decoders check it).
grpc::ByteBuffer EncodeUnaryReply(const CallResult& result,
                                  WireDtype weights_dtype = WireDtype::kF32);

// Stream call `call_id`: the weights in chunks, or one StreamResponse with
// the version after the push, or with the error.
std::vector<grpc::ByteBuffer> EncodeStreamReply(uint64_t call_id,
                                                const absl::StatusOr<CallResult>& result,
                                                WireDtype weights_dtype = WireDtype::kF32);

// A stream PushRows call `call_id`'s outcome in one StreamResponse, with
// `incarnation`, or its error. (The rows of a pull or push-pull go out in
// pieces as they are read: server/stream_reactor.cc.)
std::vector<grpc::ByteBuffer> EncodeStreamRowPushReply(uint64_t call_id,
                                                       const absl::StatusOr<PushResult>& push,
                                                       const Incarnation& incarnation);

}  // namespace ps

#endif  // PS_SERVER_REPLIES_H_
