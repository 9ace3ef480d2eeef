// StreamTransport: the stream implementation of ShardTransport
// (client/internal/shard_transport.h). Each shard gets one long-lived
// stream (client/internal/shard_stream.h), opened on first use and reopened
// after it broke, which runs one call at a time. Tensors travel in ~1 MB chunks; pulled
// chunks are copied into the weights while the next is on the wire. With
// ClientOptions::wire_dtype bf16, each gradient chunk is narrowed as it is
// encoded, the calls ask for bf16 weights, and pulled chunks are widened as
// they are copied.
//
// Its layer-wise push-pull opens the call on every shard at once, with the
// header only, and each Send appends the chunks of the tensors it marks, so
// that communication overlaps the rest of the backward pass.
//
// Embedding rows go over the same streams: a PullRows, PushRows or
// PushPullRows is one call per shard with ids (CALL_PULL_ROWS,
// CALL_PUSH_ROWS, CALL_PUSH_PULL_ROWS), its request one message (ids and
// gradients copied into it), the rows answered in ~1 MB pieces copied into
// place as they arrive.
//
// Thread safety as ShardTransport's. Borrows `state`, which must outlive it;
// owns its stubs and streams. The destructor closes the streams.
#ifndef PS_CLIENT_INTERNAL_STREAM_TRANSPORT_H_
#define PS_CLIENT_INTERNAL_STREAM_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/internal/shard_stream.h"
#include "client/internal/shard_transport.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "rpc/raw_wire.h"

namespace ps {

class StreamTransport final : public ShardTransport {
 public:
  // Shard i's stream goes over channels[i].
  StreamTransport(const std::vector<std::shared_ptr<grpc::Channel>>& channels, ClientState* state);
  ~StreamTransport() override;

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
  class Layerwise;  // StartPushPull's handle

  // A push-pull's min_version: sync mode, all shards are at the same step
  // and -1 asks for each shard's next; async mode, whatever it has.
  int64_t NextStep() const;

  // The header of this client's next call to `shard` of `kind`.
  StreamCallHeader NextCall(int shard, StreamCall kind, int64_t min_version);

  // Opens the same call on every shard's stream with `first_requests`
  // (shard -> messages); replies are decoded into `weights` (empty for a
  // push).
  std::unique_ptr<PendingOp> StartCalls(StreamCall kind,
                                        const std::vector<StreamCallHeader>& headers,
                                        std::vector<std::vector<grpc::ByteBuffer>> first_requests,
                                        TensorViews weights);

  // One whole call of `kind` per shard; `grads` is null for pulls.
  std::unique_ptr<PendingOp> FanOut(StreamCall kind, const ConstTensorViews* grads,
                                    TensorViews weights, int64_t min_version);

  // The shard's stream, reopened if it broke.
  ShardStream* StreamTo(int shard);

  // One rows call of `kind` on `table` to every shard with ids (the others
  // are done at once), each one message that `request` makes from the
  // shard's header, and waits for them (the RPC timeout): `on_response`
  // reads each response message of shard s, `finish` checks a call that
  // succeeded.
  using RowsRequest = std::function<grpc::ByteBuffer(int s, const StreamCallHeader&)>;
  using RowsResponse = std::function<absl::Status(int s, const RawStreamResponse&)>;
  absl::Status RowCalls(StreamCall kind, absl::string_view table, int64_t seq,
                        const std::vector<std::vector<uint64_t>>& shard_ids,
                        const RowsRequest& request, RowsResponse on_response,
                        std::function<absl::Status(int s)> finish);

  ClientState* const state_;                               // not owned
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;  // by shard
  std::vector<std::unique_ptr<ShardStream>> streams_;      // by shard; opened lazily
  std::vector<uint64_t> last_call_id_;                     // by shard
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_STREAM_TRANSPORT_H_
