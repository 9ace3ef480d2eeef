// The unary messages of the raw path (rpc/raw_wire.h): PushRequest,
// PushPullRequest, PullRequest, PushResponse and PullResponse of
// proto/ps.proto, encoded with the tensor data borrowed (never copied) and
// decoded into views of the received bytes. Stateless functions;
// thread-compatible.
#ifndef PS_RPC_RAW_UNARY_H_
#define PS_RPC_RAW_UNARY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "grpcpp/support/byte_buffer.h"
#include "rpc/raw_fields.h"

namespace ps {

struct RawPush {
  int64_t worker_id = 0;
  int64_t version = 0;
  int64_t seq = 0;  // async push number; 0 = none
  std::vector<RawTensorSlice> gradients;
};

struct RawPull {
  int64_t worker_id = 0;
  int64_t min_version = 0;
  int64_t wait_timeout_ms = 0;
  WireDtype weights_dtype = WireDtype::kF32;  // always a known one
};

// `dtype` below is the call's wire type (REQUIRES: known): the gradients
// travel in it (narrowed into buffers the message owns when bf16) and the
// weights are asked for in it (weights_dtype).

// PushRequest{worker_id, version, gradients = `slices`, seq}.
grpc::ByteBuffer EncodePushRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                   const std::vector<SliceRange>& slices,
                                   const SliceValues& values, int64_t seq = 0,
                                   WireDtype dtype = WireDtype::kF32);
// PushPullRequest{push = PushRequest{...}, min_version, wait_timeout_ms,
// weights_dtype}.
grpc::ByteBuffer EncodePushPullRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                       const std::vector<SliceRange>& slices,
                                       const SliceValues& values, int64_t min_version,
                                       int64_t wait_timeout_ms, int64_t seq = 0,
                                       WireDtype dtype = WireDtype::kF32);
// PullRequest{worker_id, min_version, wait_timeout_ms, weights_dtype}.
grpc::ByteBuffer EncodePullRequest(int worker_id, int64_t min_version, int64_t wait_timeout_ms,
                                   WireDtype weights_dtype = WireDtype::kF32);
// PushResponse{version, outcome, incarnation}.
grpc::ByteBuffer EncodePushResponse(int64_t version, PushOutcome outcome = PushOutcome::kApplied,
                                    const Incarnation& incarnation = Incarnation());
// PullResponse{version, weights = `slices`, incarnation, push_outcome},
// the weights as `dtype`; `owner` keeps the values alive until gRPC has
// sent them.
grpc::ByteBuffer EncodePullResponse(int64_t version, const ModelSpec& spec,
                                    const std::vector<SliceRange>& slices,
                                    const SliceValues& values, std::shared_ptr<const void> owner,
                                    const ReplyInfo& info = ReplyInfo(),
                                    WireDtype dtype = WireDtype::kF32);

// Decoders; INVALID_ARGUMENT naming the message for malformed bytes. The
// decoded data views `bytes`, which must outlive the result.
absl::Status DecodePushRequest(const Pieces& bytes, RawPush* out);
absl::Status DecodePushPullRequest(const Pieces& bytes, RawPush* push, RawPull* pull);
absl::Status DecodePullRequest(const Pieces& bytes, RawPull* out);
absl::Status DecodePullResponse(const Pieces& bytes, int64_t* version,
                                std::vector<RawTensorSlice>* weights, ReplyInfo* info = nullptr);
absl::Status DecodePushResponse(const Pieces& bytes, int64_t* version, ReplyInfo* info);

}  // namespace ps

#endif  // PS_RPC_RAW_UNARY_H_
