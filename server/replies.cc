#include "server/replies.h"

#include <memory>
#include <utility>

#include "rpc/raw_wire.h"

namespace ps {

grpc::ByteBuffer EncodeUnaryReply(const CallResult& result, WireDtype weights_dtype) {
  if (!result.weights.has_value()) {
    return EncodePushResponse(result.version, result.outcome, result.incarnation);
  }
  const WeightsSnapshot& snap = *result.weights;
  return EncodePullResponse(snap.version, snap.layout->spec, snap.layout->slices,
                            FlatValues(snap.weights->data()), snap.weights,
                            ReplyInfo{result.incarnation, result.outcome}, weights_dtype);
}

std::vector<grpc::ByteBuffer> EncodeStreamReply(uint64_t call_id,
                                                const absl::StatusOr<CallResult>& result,
                                                WireDtype weights_dtype) {
  if (!result.ok()) return {EncodeStreamDone(call_id, 0, result.status())};
  const ReplyInfo info{result->incarnation, result->outcome};
  if (!result->weights.has_value()) {
    return {EncodeStreamDone(call_id, result->version, absl::OkStatus(), info)};
  }
  const WeightsSnapshot& snap = *result->weights;
  return EncodeStreamWeights(call_id, snap.version, snap.layout->spec, snap.layout->slices,
                             FlatValues(snap.weights->data()), snap.weights, kStreamChunkBytes,
                             info, weights_dtype);
}

std::vector<grpc::ByteBuffer> EncodeStreamRowPushReply(uint64_t call_id,
                                                       const absl::StatusOr<PushResult>& push,
                                                       const Incarnation& incarnation) {
  if (!push.ok()) return {EncodeStreamDone(call_id, 0, push.status())};
  return {EncodeStreamDone(call_id, push->version, absl::OkStatus(),
                           ReplyInfo{incarnation, push->outcome})};
}

}  // namespace ps
