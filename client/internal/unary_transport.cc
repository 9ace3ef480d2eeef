#include "client/internal/unary_transport.h"

#include "client/internal/pending_calls.h"
#include "common/status_macros.h"
#include "rpc/raw_wire.h"

namespace ps {
namespace {

constexpr char kPushMethod[] = "/ps.v1.ParameterServer/Push";
constexpr char kPullMethod[] = "/ps.v1.ParameterServer/Pull";
constexpr char kPushPullMethod[] = "/ps.v1.ParameterServer/PushPull";

}  // namespace

// Everything goes with the last tensor.
class UnaryTransport::Layerwise final : public LayerwisePushPull {
 public:
  Layerwise(UnaryTransport* transport, const ConstTensorViews* grads, TensorViews weights)
      : transport_(transport), grads_(grads), weights_(std::move(weights)) {}

  void Send(const std::vector<bool>& /*now*/, bool last) override {
    if (last) op_ = transport_->PushPull(*grads_, weights_);
  }
  absl::Status Wait() override { return op_->Wait(); }

 private:
  UnaryTransport* const transport_;      // not owned
  const ConstTensorViews* const grads_;  // not owned
  const TensorViews weights_;
  std::unique_ptr<PendingOp> op_;  // once the last tensor was sent
};

UnaryTransport::UnaryTransport(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                               ClientState* state)
    : state_(state), rows_(channels, state) {
  for (const auto& channel : channels) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
}

std::unique_ptr<PendingOp> UnaryTransport::Pull(int64_t min_version, TensorViews weights) {
  const ClientOptions& o = state_->options;
  return RawCalls(
      kPullMethod, o.wait_timeout + o.rpc_timeout,
      [&o, min_version](int, grpc::ByteBuffer* req) {
        *req = EncodePullRequest(o.worker_id, min_version,
                                 absl::ToInt64Milliseconds(o.wait_timeout), o.wire_dtype);
      },
      ReadPullInto(std::move(weights)));
}

std::unique_ptr<PendingOp> UnaryTransport::Push(const ConstTensorViews& grads) {
  return RawCalls(
      kPushMethod, state_->options.rpc_timeout,
      [this, &grads, seq = NextSeq()](int s, grpc::ByteBuffer* req) {
        *req = EncodePushRequest(state_->options.worker_id, state_->shard_version[s], state_->spec,
                                 state_->layouts[s]->slices, TensorValues(grads), seq,
                                 state_->options.wire_dtype);
      },
      [this](int s, const grpc::ByteBuffer& resp) -> absl::Status {
        ReceivedBytes bytes;
        RETURN_IF_ERROR(Receive(resp, &bytes));
        int64_t version = 0;
        return DecodePushResponse(bytes.pieces, &version, &state_->reply[s]);
      });
}

std::unique_ptr<PendingOp> UnaryTransport::PushPull(const ConstTensorViews& grads,
                                                    TensorViews weights) {
  const ClientOptions& o = state_->options;
  return RawCalls(
      kPushPullMethod, o.wait_timeout + o.rpc_timeout,
      [this, &o, &grads, seq = NextSeq()](int s, grpc::ByteBuffer* req) {
        const int64_t version = state_->shard_version[s];
        *req = EncodePushPullRequest(o.worker_id, version, state_->spec, state_->layouts[s]->slices,
                                     TensorValues(grads),
                                     state_->mode == Mode::kSync ? version + 1 : 0,
                                     absl::ToInt64Milliseconds(o.wait_timeout), seq, o.wire_dtype);
      },
      ReadPullInto(std::move(weights)));
}

absl::Status UnaryTransport::PullRows(absl::string_view table,
                                      const std::vector<std::vector<uint64_t>>& shard_ids,
                                      const std::vector<absl::Span<float>>& rows) {
  return rows_.Pull(table, shard_ids, rows);
}

absl::Status UnaryTransport::PushRows(absl::string_view table,
                                      const std::vector<std::vector<uint64_t>>& shard_ids,
                                      const std::vector<absl::Span<const float>>& grads,
                                      int64_t seq, std::vector<PushOutcome>* outcomes) {
  return rows_.Push(table, shard_ids, grads, seq, outcomes);
}

absl::Status UnaryTransport::PrefetchRows(absl::string_view table,
                                          const std::vector<std::vector<uint64_t>>& shard_ids) {
  return rows_.Prefetch(table, shard_ids);
}

absl::Status UnaryTransport::PushPullRows(absl::string_view table,
                                          const std::vector<std::vector<uint64_t>>& shard_ids,
                                          const std::vector<absl::Span<const float>>& grads,
                                          int64_t seq, std::vector<PushOutcome>* outcomes,
                                          const std::vector<absl::Span<float>>& rows) {
  return rows_.PushPull(table, shard_ids, grads, seq, outcomes, rows);
}

int64_t UnaryTransport::NextSeq() { return state_->mode != Mode::kSync ? ++state_->seq : 0; }

std::unique_ptr<LayerwisePushPull> UnaryTransport::StartPushPull(const ConstTensorViews* grads,
                                                                 TensorViews weights) {
  return std::make_unique<Layerwise>(this, grads, std::move(weights));
}

std::unique_ptr<PendingOp> UnaryTransport::RawCalls(
    const char* method, absl::Duration timeout,
    const std::function<void(int, grpc::ByteBuffer*)>& build, Reply on_reply) {
  return StartUnaryCalls<grpc::ByteBuffer, grpc::ByteBuffer>(
      state_->options.servers, timeout, /*wait_for_ready=*/false, &state_->canceller, build,
      [this, method](int s, grpc::ClientContext* ctx, const grpc::ByteBuffer* req,
                     grpc::ByteBuffer* resp, std::function<void(grpc::Status)> done) {
        stubs_[s]->UnaryCall(ctx, method, grpc::StubOptions(), req, resp, std::move(done));
      },
      std::move(on_reply));
}

UnaryTransport::Reply UnaryTransport::ReadPullInto(TensorViews weights) {
  return [this, weights = std::move(weights)](int s, const grpc::ByteBuffer& resp) -> absl::Status {
    ReceivedBytes bytes;
    RETURN_IF_ERROR(Receive(resp, &bytes));
    int64_t version = 0;
    std::vector<RawTensorSlice> slices;
    RETURN_IF_ERROR(DecodePullResponse(bytes.pieces, &version, &slices, &state_->reply[s]));
    WeightReader reader(s, state_->layouts[s], weights);
    RETURN_IF_ERROR(reader.Add(slices));
    RETURN_IF_ERROR(reader.Finish());
    state_->shard_version[s] = version;
    HoldShard(state_, s, weights);
    return absl::OkStatus();
  };
}

}  // namespace ps
