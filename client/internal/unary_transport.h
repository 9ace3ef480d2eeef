// UnaryTransport: the unary implementation of ShardTransport
// (client/internal/shard_transport.h). Each push, pull and push-pull is one
// unary call per shard on the raw path of rpc/raw_wire.h: gradients are sent
// without a copy, weights are copied once, straight into place (with
// ClientOptions::wire_dtype bf16: gradients narrowed once into the message,
// weights asked for in bf16 and widened as they are copied). Every call
// carries its own deadline. A layer-wise push-pull has no call to append to,
// so it sends everything with its last tensor. Embedding rows are unary
// protobuf PullRows and PushRows calls (client/internal/shard_rows.h).
//
// Thread safety as ShardTransport's. Borrows `state`, which must outlive it;
// owns its stubs.
#ifndef PS_CLIENT_INTERNAL_UNARY_TRANSPORT_H_
#define PS_CLIENT_INTERNAL_UNARY_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "client/internal/shard_rows.h"
#include "client/internal/shard_transport.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"

namespace ps {

class UnaryTransport final : public ShardTransport {
 public:
  // Shard i's calls go over channels[i].
  UnaryTransport(const std::vector<std::shared_ptr<grpc::Channel>>& channels, ClientState* state);

  std::unique_ptr<PendingOp> Pull(int64_t min_version, TensorViews weights) override;
  std::unique_ptr<PendingOp> Push(const ConstTensorViews& grads) override;
  std::unique_ptr<PendingOp> PushPull(const ConstTensorViews& grads, TensorViews weights) override;
  std::unique_ptr<LayerwisePushPull> StartPushPull(const ConstTensorViews* grads,
                                                   TensorViews weights) override;
  absl::Status PullRows(absl::string_view table,
                        const std::vector<std::vector<uint64_t>>& shard_ids,
                        const std::vector<absl::Span<float>>& rows) override;
  absl::Status PushRows(absl::string_view table,
                        const std::vector<std::vector<uint64_t>>& shard_ids,
                        const std::vector<absl::Span<const float>>& grads, int64_t seq,
                        std::vector<PushOutcome>* outcomes) override;
  absl::Status PrefetchRows(absl::string_view table,
                            const std::vector<std::vector<uint64_t>>& shard_ids) override;
  absl::Status PushPullRows(absl::string_view table,
                            const std::vector<std::vector<uint64_t>>& shard_ids,
                            const std::vector<absl::Span<const float>>& grads, int64_t seq,
                            std::vector<PushOutcome>* outcomes,
                            const std::vector<absl::Span<float>>& rows) override;

 private:
  // The async seq of the next push (0 in sync mode).
  int64_t NextSeq();
  class Layerwise;  // StartPushPull's handle
  using Reply = std::function<absl::Status(int, const grpc::ByteBuffer&)>;

  // One raw call of `method` per shard (see StartUnaryCalls in
  // client/internal/pending_calls.h).
  std::unique_ptr<PendingOp> RawCalls(const char* method, absl::Duration timeout,
                                      const std::function<void(int, grpc::ByteBuffer*)>& build,
                                      Reply on_reply);

  // Decodes a shard's raw PullResponse into `weights`, checking it against
  // the partition, and records the shard's version.
  Reply ReadPullInto(TensorViews weights);

  ClientState* const state_;                               // not owned
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // by shard
  ShardRows rows_;  // the rows calls: unary protobuf PullRows and PushRows
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_UNARY_TRANSPORT_H_
