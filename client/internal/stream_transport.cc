#include "client/internal/stream_transport.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "client/internal/pending_calls.h"
#include "common/float_bytes.h"
#include "common/model_spec.h"
#include "common/status_macros.h"

namespace ps {

// The calls are opened with their headers; each Send appends the chunks of
// its tensors to every shard's call.
class StreamTransport::Layerwise final : public LayerwisePushPull {
 public:
  Layerwise(StreamTransport* transport, const ConstTensorViews* grads,
            std::vector<uint64_t> call_ids, std::unique_ptr<PendingOp> op)
      : transport_(transport), grads_(grads), call_ids_(std::move(call_ids)), op_(std::move(op)) {}

  void Send(const std::vector<bool>& now, bool last) override {
    const ClientState& state = *transport_->state_;
    for (int s = 0; s < state.num_shards(); ++s) {
      std::vector<SliceRange> slices;
      for (const SliceRange& r : state.layouts[s]->slices) {
        if (now[r.tensor_index]) slices.push_back(r);
      }
      if (slices.empty() && !last) continue;
      StreamCallHeader h;
      h.call_id = call_ids_[s];
      transport_->streams_[s]->Append(
          h.call_id,
          EncodeStreamRequests(h, /*first=*/false, last, state.spec, slices, TensorValues(*grads_),
                               kStreamChunkBytes, state.options.wire_dtype));
    }
  }

  absl::Status Wait() override { return op_->Wait(); }

 private:
  StreamTransport* const transport_;      // not owned
  const ConstTensorViews* const grads_;   // not owned
  const std::vector<uint64_t> call_ids_;  // by shard
  std::unique_ptr<PendingOp> op_;         // its destructor cancels and waits
};

StreamTransport::StreamTransport(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                 ClientState* state)
    : state_(state), streams_(channels.size()), last_call_id_(channels.size(), 0) {
  for (const auto& channel : channels) {
    stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
}

StreamTransport::~StreamTransport() = default;

std::unique_ptr<PendingOp> StreamTransport::Pull(int64_t min_version, TensorViews weights) {
  return FanOut(StreamCall::kPull, nullptr, std::move(weights), min_version);
}

std::unique_ptr<PendingOp> StreamTransport::Push(const ConstTensorViews& grads) {
  ++state_->seq;
  return FanOut(StreamCall::kPush, &grads, {}, 0);
}

std::unique_ptr<PendingOp> StreamTransport::PushPull(const ConstTensorViews& grads,
                                                     TensorViews weights) {
  ++state_->seq;
  return FanOut(StreamCall::kPushPull, &grads, std::move(weights), NextStep());
}

std::unique_ptr<LayerwisePushPull> StreamTransport::StartPushPull(const ConstTensorViews* grads,
                                                                  TensorViews weights) {
  // Open the calls with their headers; the chunks follow as tensors are sent.
  std::vector<StreamCallHeader> headers;
  std::vector<uint64_t> call_ids;
  std::vector<std::vector<grpc::ByteBuffer>> requests;
  ++state_->seq;
  for (int s = 0; s < state_->num_shards(); ++s) {
    headers.push_back(NextCall(s, StreamCall::kPushPull, NextStep()));
    call_ids.push_back(headers.back().call_id);
    requests.push_back(EncodeStreamRequests(headers.back(), /*first=*/true, /*last=*/false,
                                            state_->spec, {}, SliceValues()));
  }
  std::unique_ptr<PendingOp> op =
      StartCalls(StreamCall::kPushPull, headers, std::move(requests), std::move(weights));
  return std::make_unique<Layerwise>(this, grads, std::move(call_ids), std::move(op));
}

int64_t StreamTransport::NextStep() const { return state_->mode == Mode::kSync ? -1 : 0; }

StreamCallHeader StreamTransport::NextCall(int shard, StreamCall kind, int64_t min_version) {
  const int64_t version = state_->shard_version[shard];
  StreamCallHeader h;
  h.call_id = ++last_call_id_[shard];
  h.kind = kind;
  h.worker_id = state_->options.worker_id;
  h.version = version;
  h.min_version = min_version < 0 ? version + 1 : min_version;
  h.wait_timeout_ms = absl::ToInt64Milliseconds(state_->options.wait_timeout);
  h.seq = kind != StreamCall::kPull && state_->mode != Mode::kSync ? state_->seq : 0;
  h.weights_dtype = state_->options.wire_dtype;
  return h;
}

ShardStream* StreamTransport::StreamTo(int shard) {
  std::unique_ptr<ShardStream>& st = streams_[shard];
  if (st == nullptr || st->broken()) {
    st.reset();  // waits for the broken one to wind down
    st = std::make_unique<ShardStream>(stubs_[shard].get());
  }
  return st.get();
}

std::unique_ptr<PendingOp> StreamTransport::StartCalls(
    StreamCall kind, const std::vector<StreamCallHeader>& headers,
    std::vector<std::vector<grpc::ByteBuffer>> first_requests, TensorViews weights) {
  const ClientOptions& o = state_->options;
  auto op =
      std::make_unique<PendingCalls>(o.servers, absl::Now() + o.wait_timeout + o.rpc_timeout,
                                     "the wait timeout plus the RPC timeout", &state_->canceller);
  for (int s = 0; s < state_->num_shards(); ++s) {
    ShardStream* stream = StreamTo(s);
    op->AddCancel([stream] { stream->Cancel(); });
    // A push reads no weights (`weights` is empty).
    const bool pulls = kind != StreamCall::kPush;
    auto reader = std::make_shared<WeightReader>(s, state_->layouts[s], weights);
    stream->Call(
        headers[s].call_id, std::move(first_requests[s]),
        [this, s, pulls, reader](const RawStreamResponse& r) {
          // The first message carries it (a server's run id is never 0).
          if (r.info.incarnation.run_id != 0) state_->reply[s] = r.info;
          if (!pulls) return absl::OkStatus();
          RETURN_IF_ERROR(reader->Add(r.weights));
          if (r.last) state_->shard_version[s] = r.version;
          return absl::OkStatus();
        },
        [this, op = op.get(), s, pulls, reader, weights](absl::Status st) {
          if (st.ok() && pulls) st = reader->Finish();
          if (st.ok() && pulls) HoldShard(state_, s, weights);
          op->Done(s, st);
        });
  }
  return op;
}

std::unique_ptr<PendingOp> StreamTransport::FanOut(StreamCall kind, const ConstTensorViews* grads,
                                                   TensorViews weights, int64_t min_version) {
  std::vector<StreamCallHeader> headers;
  std::vector<std::vector<grpc::ByteBuffer>> requests;
  for (int s = 0; s < state_->num_shards(); ++s) {
    headers.push_back(NextCall(s, kind, min_version));
    requests.push_back(EncodeStreamRequests(
        headers.back(), /*first=*/true, /*last=*/true, state_->spec,
        grads != nullptr ? state_->layouts[s]->slices : std::vector<SliceRange>(),
        grads != nullptr ? TensorValues(*grads) : SliceValues(), kStreamChunkBytes,
        state_->options.wire_dtype));
  }
  return StartCalls(kind, headers, std::move(requests), std::move(weights));
}

namespace {

// Receives the rows of a stream rows call into rows[s], checking their size.
struct RowsReceiver {
  const std::vector<absl::Span<float>>& rows;
  std::vector<size_t> received;  // bytes, by shard

  explicit RowsReceiver(const std::vector<absl::Span<float>>& into)
      : rows(into), received(into.size(), 0) {}
  absl::Status Add(int s, const RawStreamResponse& r) {
    const size_t want = rows[s].size() * sizeof(float);
    const size_t size = PiecesSize(r.rows);
    if (received[s] + size > want) {
      return absl::InternalError(
          absl::StrCat("answered ", received[s] + size, " bytes of rows or more, expected ", want));
    }
    CopyPieces(r.rows, reinterpret_cast<char*>(rows[s].data()) + received[s]);
    received[s] += size;
    return absl::OkStatus();
  }
  absl::Status Finish(int s) const {
    const size_t want = rows[s].size() * sizeof(float);
    if (received[s] != want) {
      return absl::InternalError(
          absl::StrCat("answered ", received[s], " bytes of rows, expected ", want));
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status StreamTransport::PullRows(absl::string_view table,
                                       const std::vector<std::vector<uint64_t>>& shard_ids,
                                       const std::vector<absl::Span<float>>& rows) {
  RowsReceiver receiver(rows);
  return RowCalls(
      StreamCall::kPullRows, table, /*seq=*/0, shard_ids,
      [&](int s, const StreamCallHeader& h) {
        return EncodeStreamRowsRequest(h, shard_ids[s], {});
      },
      [&receiver](int s, const RawStreamResponse& r) { return receiver.Add(s, r); },
      [&receiver](int s) { return receiver.Finish(s); });
}

absl::Status StreamTransport::PrefetchRows(absl::string_view table,
                                           const std::vector<std::vector<uint64_t>>& shard_ids) {
  return RowCalls(
      StreamCall::kPullRows, table, /*seq=*/0, shard_ids,
      [&](int s, const StreamCallHeader& h) {
        StreamCallHeader prefetch = h;
        prefetch.prefetch = true;
        return EncodeStreamRowsRequest(prefetch, shard_ids[s], {});
      },
      [](int, const RawStreamResponse&) { return absl::OkStatus(); },
      [](int) { return absl::OkStatus(); });
}

absl::Status StreamTransport::PushPullRows(absl::string_view table,
                                           const std::vector<std::vector<uint64_t>>& shard_ids,
                                           const std::vector<absl::Span<const float>>& grads,
                                           int64_t seq, std::vector<PushOutcome>* outcomes,
                                           const std::vector<absl::Span<float>>& rows) {
  outcomes->assign(shard_ids.size(), PushOutcome::kApplied);
  // The outcome is in a call's first reply; char, not bool: shards answer on
  // threads of their own.
  std::vector<char> answered(shard_ids.size(), 0);
  RowsReceiver receiver(rows);
  return RowCalls(
      StreamCall::kPushPullRows, table, seq, shard_ids,
      [&](int s, const StreamCallHeader& h) {
        return EncodeStreamRowsRequest(h, shard_ids[s], grads[s]);
      },
      [&](int s, const RawStreamResponse& r) {
        if (!answered[s]) (*outcomes)[s] = r.info.outcome;
        answered[s] = 1;
        return receiver.Add(s, r);
      },
      [&receiver](int s) { return receiver.Finish(s); });
}

absl::Status StreamTransport::PushRows(absl::string_view table,
                                       const std::vector<std::vector<uint64_t>>& shard_ids,
                                       const std::vector<absl::Span<const float>>& grads,
                                       int64_t seq, std::vector<PushOutcome>* outcomes) {
  outcomes->assign(shard_ids.size(), PushOutcome::kApplied);
  return RowCalls(
      StreamCall::kPushRows, table, seq, shard_ids,
      [&](int s, const StreamCallHeader& h) {
        return EncodeStreamRowsRequest(h, shard_ids[s], grads[s]);
      },
      [outcomes](int s, const RawStreamResponse& r) {
        (*outcomes)[s] = r.info.outcome;
        return absl::OkStatus();
      },
      [](int) { return absl::OkStatus(); });
}

absl::Status StreamTransport::RowCalls(StreamCall kind, absl::string_view table, int64_t seq,
                                       const std::vector<std::vector<uint64_t>>& shard_ids,
                                       const RowsRequest& request, RowsResponse on_response,
                                       std::function<absl::Status(int)> finish) {
  const ClientOptions& o = state_->options;
  // A call still in flight (an async operation not waited for) keeps its
  // stream: refuse before touching any stream, so that it runs on.
  for (int s = 0; s < state_->num_shards(); ++s) {
    if (!shard_ids[s].empty() && streams_[s] != nullptr && !streams_[s]->broken() &&
        streams_[s]->busy()) {
      return absl::FailedPreconditionError(
          absl::StrCat("rows of \"", EscapeName(table),
                       "\" while another operation is in flight on the "
                       "stream to shard ",
                       s, " (", o.servers[s], "); wait for it first"));
    }
  }
  auto op = std::make_unique<PendingCalls>(o.servers, absl::Now() + o.rpc_timeout,
                                           "the RPC timeout", &state_->canceller);
  std::vector<int> called;
  for (int s = 0; s < state_->num_shards(); ++s) {
    if (shard_ids[s].empty()) continue;
    ShardStream* stream = StreamTo(s);
    op->AddCancel([stream] { stream->Cancel(); });
    called.push_back(s);
  }
  for (int s = 0; s < state_->num_shards(); ++s) {
    if (shard_ids[s].empty()) op->Done(s, absl::OkStatus());
  }
  for (int s : called) {
    StreamCallHeader h;
    h.call_id = ++last_call_id_[s];
    h.kind = kind;
    h.worker_id = o.worker_id;
    h.version = state_->shard_version[s];  // a sync row push's step
    h.seq = IsRowPush(kind) && state_->mode != Mode::kSync ? seq : 0;
    h.table = std::string(table);
    std::vector<grpc::ByteBuffer> messages;
    messages.push_back(request(s, h));
    streams_[s]->Call(
        h.call_id, std::move(messages),
        [s, on_response](const RawStreamResponse& r) { return on_response(s, r); },
        [op = op.get(), s, finish](absl::Status st) {
          if (st.ok()) st = finish(s);
          op->Done(s, st);
        });
  }
  return op->Wait();
}

}  // namespace ps
