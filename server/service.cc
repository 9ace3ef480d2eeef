#include "server/service.h"

#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/status_macros.h"
#include "rpc/raw_wire.h"
#include "rpc/wire.h"
#include "server/stream_reactor.h"

namespace ps {
namespace {

// The request's slices as the shard takes them; `data` views the request,
// which must outlive the result.
std::vector<RawTensorSlice> SlicesFromProto(
    const google::protobuf::RepeatedPtrField<v1::TensorSlice>& slices) {
  std::vector<RawTensorSlice> out;
  out.reserve(slices.size());
  for (const v1::TensorSlice& s : slices) {
    out.push_back(RawTensorSlice{s.name(), {s.shape().begin(), s.shape().end()}, s.offset(),
                                 s.length(), {s.data()}});
  }
  return out;
}

// Finishes `reactor` with the status of the exception being handled.
void FinishWithException(grpc::ServerUnaryReactor* reactor, const char* method) {
  reactor->Finish(ToGrpcStatus(StatusFromCurrentException(method)));
}

// The snapshot as PullResponse bytes that point into it; the slices keep it
// alive until gRPC has sent them.
grpc::ByteBuffer SnapshotToBytes(const WeightsSnapshot& snap) {
  return EncodePullResponse(snap.version, snap.layout->spec, snap.layout->slices,
                            FlatValues(snap.weights->data()), snap.weights);
}

absl::Duration Millis(int64_t ms) { return absl::Milliseconds(ms); }

// Reactor of a call that may wait in the shard: when the client cancels or
// goes away, the shard drops the wait instead of holding it to its deadline.
class WaitingReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit WaitingReactor(Shard* shard) : shard_(shard) {}

  // Records the shard's ticket (0: the call did not wait). Cancellation may
  // arrive before or after; either way the wait is dropped once. CancelWait
  // runs unlocked since it finishes this reactor.
  void SetTicket(uint64_t ticket) {
    bool cancelled;
    {
      absl::MutexLock l(&mu_);
      ticket_ = ticket;
      cancelled = cancelled_;
    }
    if (cancelled && ticket != 0) shard_->CancelWait(ticket);
  }

  void OnCancel() override {
    uint64_t ticket;
    {
      absl::MutexLock l(&mu_);
      cancelled_ = true;
      ticket = ticket_;
    }
    if (ticket != 0) shard_->CancelWait(ticket);
  }

  void OnDone() override { delete this; }

 private:
  Shard* const shard_;
  absl::Mutex mu_;
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Pulls into `resp` and finishes `reactor` when the shard calls back.
void PullAndFinish(Shard* shard, const RawPull& pull, grpc::ByteBuffer* resp,
                   WaitingReactor* reactor) {
  reactor->SetTicket(shard->Pull(static_cast<int>(pull.worker_id), pull.min_version,
                                 Millis(pull.wait_timeout_ms),
                                 [resp, reactor](absl::StatusOr<WeightsSnapshot> snap) {
                                   try {
                                     if (snap.ok()) *resp = SnapshotToBytes(*snap);
                                     reactor->Finish(ToGrpcStatus(snap.status()));
                                   } catch (...) {
                                     FinishWithException(reactor, "Pull");
                                   }
                                 }));
}

}  // namespace

grpc::ServerUnaryReactor* ParameterServerService::Register(grpc::CallbackServerContext* ctx,
                                                           const v1::RegisterRequest* req,
                                                           v1::RegisterResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  try {
    absl::Status s = shard_->Register(req->worker_id(), req->num_workers());
    if (s.ok()) {
      const ShardStats st = shard_->Stats();
      resp->set_mode(ModeToProto(st.mode));
      resp->set_num_workers(st.num_workers);
      resp->set_shard_id(st.shard_id);
      resp->set_num_shards(st.num_shards);
      resp->set_learning_rate(st.learning_rate);
      resp->set_initialized(st.initialized);
      resp->set_version(st.version);
      if (st.initialized) {
        std::shared_ptr<const ShardLayout> layout = shard_->Layout();
        ModelSpecToProto(layout->spec, resp->mutable_spec());
        for (const SliceRange& r : layout->slices) {
          v1::ShardRange* p = resp->add_layout();
          p->set_name(layout->spec[r.tensor_index].name);
          p->set_shard(r.shard);
          p->set_offset(r.offset);
          p->set_length(r.length);
        }
      }
    }
    reactor->Finish(ToGrpcStatus(s));
  } catch (...) {
    FinishWithException(reactor, "Register");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::InitParams(grpc::CallbackServerContext* ctx,
                                                             const v1::InitRequest* req,
                                                             v1::InitResponse* resp) {
  auto* reactor = new WaitingReactor(shard_);
  try {
    reactor->SetTicket(shard_->Init(
        req->worker_id(), ModelSpecFromProto(req->spec()), SlicesFromProto(req->values()),
        Millis(req->wait_timeout_ms()),
        [resp, reactor](absl::StatusOr<int64_t> version, bool created) {
          if (version.ok()) {
            resp->set_version(*version);
            resp->set_created(created);
          }
          reactor->Finish(ToGrpcStatus(version.status()));
        }));
  } catch (...) {
    FinishWithException(reactor, "InitParams");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* req,
                                                       grpc::ByteBuffer* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  try {
    ReceivedBytes bytes;
    RawPush push;
    absl::Status s = Receive(*req, &bytes);
    if (s.ok()) s = DecodePushRequest(bytes.pieces, &push);
    if (s.ok()) {
      absl::StatusOr<int64_t> v =
          shard_->Push(static_cast<int>(push.worker_id), push.version, push.gradients);
      if (v.ok()) *resp = EncodePushResponse(*v);
      s = v.status();
    }
    reactor->Finish(ToGrpcStatus(s));
  } catch (...) {
    FinishWithException(reactor, "Push");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* /*ctx*/,
                                                       const grpc::ByteBuffer* req,
                                                       grpc::ByteBuffer* resp) {
  auto* reactor = new WaitingReactor(shard_);
  try {
    ReceivedBytes bytes;
    RawPull pull;
    absl::Status s = Receive(*req, &bytes);
    if (s.ok()) s = DecodePullRequest(bytes.pieces, &pull);
    if (s.ok()) {
      PullAndFinish(shard_, pull, resp, reactor);
    } else {
      reactor->Finish(ToGrpcStatus(s));
    }
  } catch (...) {
    FinishWithException(reactor, "Pull");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* /*ctx*/,
                                                           const grpc::ByteBuffer* req,
                                                           grpc::ByteBuffer* resp) {
  auto* reactor = new WaitingReactor(shard_);
  try {
    ReceivedBytes bytes;
    RawPush push;
    RawPull pull;
    absl::Status s = Receive(*req, &bytes);
    if (s.ok()) s = DecodePushPullRequest(bytes.pieces, &push, &pull);
    if (s.ok()) {
      s = shard_->Push(static_cast<int>(push.worker_id), push.version, push.gradients).status();
    }
    if (s.ok()) {
      PullAndFinish(shard_, pull, resp, reactor);
    } else {
      reactor->Finish(ToGrpcStatus(s));
    }
  } catch (...) {
    FinishWithException(reactor, "PushPull");
  }
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ParameterServerService::Stream(
    grpc::CallbackServerContext* /*ctx*/) {
  return NewStreamReactor(shard_, options_.call_timeout);
}

grpc::ServerUnaryReactor* ParameterServerService::GetStatus(grpc::CallbackServerContext* ctx,
                                                            const v1::StatusRequest* /*req*/,
                                                            v1::StatusResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  try {
    const ShardStats st = shard_->Stats();
    resp->set_mode(ModeToProto(st.mode));
    resp->set_shard_id(st.shard_id);
    resp->set_num_shards(st.num_shards);
    resp->set_num_workers(st.num_workers);
    resp->set_initialized(st.initialized);
    resp->set_version(st.version);
    for (int w : st.workers_seen) resp->add_workers_seen(w);
    resp->set_pushes_applied(st.pushes_applied);
    resp->set_max_staleness(st.max_staleness);
    resp->set_mean_staleness(st.mean_staleness);
    for (int w : st.waiting_for) resp->add_waiting_for(w);
    resp->set_num_elements(st.num_elements);
    resp->set_learning_rate(st.learning_rate);
    resp->set_waiting_calls(st.waiting_calls);
    resp->set_pending_pushes(st.pending_pushes);
    reactor->Finish(grpc::Status::OK);
  } catch (...) {
    FinishWithException(reactor, "GetStatus");
  }
  return reactor;
}

}  // namespace ps
