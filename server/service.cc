#include "server/service.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "rpc/auth_processor.h"
#include "rpc/raw_wire.h"
#include "rpc/wire.h"
#include "server/core/pipeline.h"
#include "server/replies.h"
#include "server/service_call.h"
#include "server/stream_reactor.h"

namespace ps {
namespace {

using service_internal::Caller;
using service_internal::CallerOfCall;
using service_internal::CallReactor;
using service_internal::FinishWithException;
using service_internal::MayActAs;
using service_internal::NewCall;

// The request's slices as the shard takes them; `data` views the request,
// which must outlive the result.
std::vector<RawTensorSlice> SlicesFromProto(
    const google::protobuf::RepeatedPtrField<v1::TensorSlice>& slices) {
  std::vector<RawTensorSlice> out;
  out.reserve(slices.size());
  for (const v1::TensorSlice& s : slices) {
    out.push_back(RawTensorSlice{s.name(),
                                 {s.shape().begin(), s.shape().end()},
                                 s.offset(),
                                 s.length(),
                                 {s.data()},
                                 WireDtypeFromWire(s.dtype())});
  }
  return out;
}

absl::Duration Millis(int64_t ms) { return absl::Milliseconds(ms); }

// Decodes a raw request into the call it asks for on `shard`, if `caller`
// may make it, and the type its weights should travel in.
using Decoder = absl::StatusOr<ShardCall> (*)(Shard* shard, const Pieces& bytes,
                                              const Caller& caller, WireDtype* weights_dtype);

// The unary Push, Pull and PushPull: decodes `req`, runs the call through
// the pipeline and finishes `reactor` with its reply in `resp`. `wait` (may
// be null) cancels a waiting pull.
void Serve(Shard* shard, const absl::StatusOr<Caller>& caller, const grpc::ByteBuffer& req,
           Decoder decode, grpc::ByteBuffer* resp, CallReactor* reactor, CallWait* wait,
           const char* method) {
  try {
    ReceivedBytes bytes;
    absl::Status s = caller.ok() ? Receive(req, &bytes) : caller.status();
    WireDtype weights_dtype = WireDtype::kF32;
    absl::StatusOr<ShardCall> call =
        s.ok() ? decode(shard, bytes.pieces, *caller, &weights_dtype) : s;
    if (!call.ok()) {
      reactor->Done(ToGrpcStatus(call.status()));
      return;
    }
    std::move(*call).Complete(wait,
                              [resp, reactor, method, weights_dtype](absl::StatusOr<CallResult> r) {
                                try {
                                  if (r.ok()) *resp = EncodeUnaryReply(*r, weights_dtype);
                                  reactor->Done(ToGrpcStatus(r.status()));
                                } catch (...) {
                                  FinishWithException(reactor, method);
                                }
                              });
  } catch (...) {
    FinishWithException(reactor, method);
  }
}

void HistogramToProto(const Histogram::Snapshot& h, v1::LatencyHistogram* out) {
  for (int64_t b : h.bounds) out->add_bounds_micros(b);
  for (int64_t c : h.counts) out->add_counts(c);
  out->set_count(h.count);
  out->set_sum_micros(h.sum);
}

PushArgs PushArgsOf(const RawPush& push) {
  return PushArgs{static_cast<int>(push.worker_id), push.version, push.seq};
}

PullArgs PullArgsOf(const RawPull& pull, const Caller& caller) {
  return PullArgs{static_cast<int>(pull.worker_id), pull.min_version, Millis(pull.wait_timeout_ms),
                  caller.renews_lease(), pull.weights_dtype};
}

// The decoders of Serve. A push's gradient is assembled here, so the call
// no longer needs the request bytes.
absl::StatusOr<ShardCall> DecodePush(Shard* shard, const Pieces& bytes, const Caller& caller,
                                     WireDtype* /*weights_dtype*/) {
  RawPush push;
  RETURN_IF_ERROR(DecodePushRequest(bytes, &push));
  RETURN_IF_ERROR(caller.MayActAs("Push", static_cast<int>(push.worker_id)));
  ShardCall call(shard, PushArgsOf(push), std::nullopt);
  call.AddMessage(push.gradients);
  return call;
}

absl::StatusOr<ShardCall> DecodePull(Shard* shard, const Pieces& bytes, const Caller& caller,
                                     WireDtype* weights_dtype) {
  RawPull pull;
  RETURN_IF_ERROR(DecodePullRequest(bytes, &pull));
  *weights_dtype = pull.weights_dtype;
  RETURN_IF_ERROR(caller.MayActAs("Pull", static_cast<int>(pull.worker_id)));
  return ShardCall(shard, std::nullopt, PullArgsOf(pull, caller));
}

absl::StatusOr<ShardCall> DecodePushPull(Shard* shard, const Pieces& bytes, const Caller& caller,
                                         WireDtype* weights_dtype) {
  RawPush push;
  RawPull pull;
  RETURN_IF_ERROR(DecodePushPullRequest(bytes, &push, &pull));
  *weights_dtype = pull.weights_dtype;
  RETURN_IF_ERROR(caller.MayActAs("PushPull", static_cast<int>(push.worker_id)));  // pull's too
  ShardCall call(shard, PushArgsOf(push), PullArgsOf(pull, caller));
  call.AddMessage(push.gradients);
  return call;
}

}  // namespace

grpc::ServerUnaryReactor* ParameterServerService::Register(grpc::CallbackServerContext* ctx,
                                                           const v1::RegisterRequest* req,
                                                           v1::RegisterResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kRegister);
  try {
    absl::Status s = MayActAs(checks(), *ctx, "Register", req->worker_id());
    if (s.ok()) s = shard_->Register(req->worker_id(), req->num_workers());
    if (s.ok()) {
      const ShardStats st = shard_->Stats();
      resp->set_mode(ModeToProto(st.mode));
      resp->set_num_workers(st.num_workers);
      resp->set_shard_id(st.shard_id);
      resp->set_num_shards(st.num_shards);
      resp->set_learning_rate(st.learning_rate);
      resp->set_initialized(st.initialized);
      resp->set_version(st.version);
      IncarnationToProto(st.incarnation, resp->mutable_incarnation());
      resp->set_last_seq(shard_->LastSeq(req->worker_id()));
      resp->set_last_row_seq(shard_->LastRowSeq(req->worker_id()));
      resp->set_worker_timeout_ms(absl::ToInt64Milliseconds(shard_->options().worker_timeout));
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
      TablesToProto(shard_->Tables(), resp->mutable_spec());
    }
    reactor->Done(ToGrpcStatus(s));
  } catch (...) {
    FinishWithException(reactor, "Register");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::InitParams(grpc::CallbackServerContext* ctx,
                                                             const v1::InitRequest* req,
                                                             v1::InitResponse* resp) {
  if (absl::Status s = MayActAs(checks(), *ctx, "InitParams", req->worker_id(),
                                /*creates_parameters=*/!req->restore() && req->values_size() > 0);
      !s.ok()) {
    CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kInitParams);
    reactor->Done(ToGrpcStatus(s));
    return reactor;
  }
  // Restore and rollback are answered at once: `created` says whether the
  // shard changed.
  const auto answer_now = [&](const std::function<absl::StatusOr<bool>()>& run) {
    CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kInitParams);
    try {
      absl::StatusOr<bool> changed = run();
      if (changed.ok()) {
        resp->set_created(*changed);
        resp->set_version(shard_->Stats().version);
        IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
      }
      reactor->Done(ToGrpcStatus(changed.status()));
    } catch (...) {
      FinishWithException(reactor, "InitParams");
    }
    return reactor;
  };
  if (req->rollback()) {
    return answer_now([&]() -> absl::StatusOr<bool> {
      if (!options_.rollback) {
        return absl::FailedPreconditionError(
            absl::StrCat("shard ", shard_->options().shard_id,
                         " runs without --checkpoint_dir: it cannot roll back"));
      }
      return options_.rollback(req->worker_id(), req->version());
    });
  }
  // The tables are declared only with a dense spec the shard would take.
  absl::Status s;
  if (req->spec().tables_size() > 0) {
    s = ValidateModelSpec(ModelSpecFromProto(req->spec()), shard_->options().spec_limits);
    if (s.ok()) s = shard_->DeclareTables(TablesFromProto(req->spec()));
  }
  if (!s.ok()) {
    CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kInitParams);
    reactor->Done(ToGrpcStatus(s));
    return reactor;
  }
  if (req->restore()) {
    return answer_now([&] {
      return shard_->AdoptWorkerCopy(req->worker_id(), ModelSpecFromProto(req->spec()),
                                     SlicesFromProto(req->values()), req->version());
    });
  }
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kInitParams);
  try {
    reactor->wait()->Started(
        shard_->Init(req->worker_id(), ModelSpecFromProto(req->spec()),
                     SlicesFromProto(req->values()), Millis(req->wait_timeout_ms()),
                     [this, resp, reactor](absl::StatusOr<int64_t> version, bool created) {
                       if (version.ok()) {
                         resp->set_version(*version);
                         resp->set_created(created);
                         IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
                       }
                       reactor->Done(ToGrpcStatus(version.status()));
                     }));
  } catch (...) {
    FinishWithException(reactor, "InitParams");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                            const v1::HeartbeatRequest* req,
                                                            v1::HeartbeatResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kHeartbeat);
  try {
    absl::Status allowed = MayActAs(checks(), *ctx, "Heartbeat", req->worker_id());
    absl::StatusOr<int64_t> version = allowed.ok() ? shard_->Heartbeat(req->worker_id()) : allowed;
    if (version.ok()) {
      resp->set_version(*version);
      IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
    }
    reactor->Done(ToGrpcStatus(version.status()));
  } catch (...) {
    FinishWithException(reactor, "Heartbeat");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Push(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* req,
                                                       grpc::ByteBuffer* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kPush);
  Serve(shard_, CallerOfCall(checks(), *ctx), *req, DecodePush, resp, reactor,
        /*wait=*/nullptr, "Push");
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::Pull(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* req,
                                                       grpc::ByteBuffer* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kPull);
  Serve(shard_, CallerOfCall(checks(), *ctx), *req, DecodePull, resp, reactor, reactor->wait(),
        "Pull");
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* req,
                                                           grpc::ByteBuffer* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kPushPull);
  Serve(shard_, CallerOfCall(checks(), *ctx), *req, DecodePushPull, resp, reactor, reactor->wait(),
        "PushPull");
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ParameterServerService::Stream(
    grpc::CallbackServerContext* ctx) {
  return NewStreamReactor(
      shard_, options_.call_timeout,
      [caller = CallerOfCall(checks(), *ctx)](int worker_id) {
        return caller.ok() ? caller->MayActAs("Stream", worker_id) : caller.status();
      },
      options_.rpc_metrics.get());
}

grpc::ServerUnaryReactor* ParameterServerService::Checkpoint(grpc::CallbackServerContext* ctx,
                                                             const v1::CheckpointRequest* /*req*/,
                                                             v1::CheckpointResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kCheckpoint);
  if (!options_.checkpoint) {
    reactor->Done(ToGrpcStatus(absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_->options().shard_id, " runs without --checkpoint_dir"))));
    return reactor;
  }
  try {
    options_.checkpoint([this, reactor, resp](absl::StatusOr<CheckpointWritten> r) {
      if (r.ok()) {
        IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
        resp->set_version(r->version);
        resp->set_path(r->path);
        resp->set_written(r->written);
      }
      reactor->Done(ToGrpcStatus(r.status()));
    });
  } catch (...) {
    FinishWithException(reactor, "Checkpoint");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::GetStatus(grpc::CallbackServerContext* ctx,
                                                            const v1::StatusRequest* /*req*/,
                                                            v1::StatusResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kGetStatus);
  try {
    const ShardStats st = shard_->Stats();
    resp->set_mode(ModeToProto(st.mode));
    resp->set_shard_id(st.shard_id);
    resp->set_num_shards(st.num_shards);
    resp->set_num_workers(st.num_workers);
    resp->set_initialized(st.initialized);
    resp->set_version(st.version);
    for (int w : st.workers_seen) resp->add_workers_seen(w);
    resp->set_pushes_accepted(st.pushes_accepted);
    resp->set_max_staleness(st.max_staleness);
    resp->set_mean_staleness(st.mean_staleness);
    for (int w : st.waiting_for) resp->add_waiting_for(w);
    resp->set_num_elements(st.num_elements);
    resp->set_learning_rate(st.learning_rate);
    resp->set_waiting_calls(st.waiting_calls);
    resp->set_pending_pushes(st.pending_pushes);
    IncarnationToProto(st.incarnation, resp->mutable_incarnation());
    for (int w : st.live_workers) resp->add_live_workers(w);
    for (int w : st.dropped_workers) resp->add_dropped_workers(w);
    resp->set_sync_quorum(st.sync_quorum);
    resp->set_min_workers(st.min_workers);
    resp->set_worker_timeout_ms(absl::ToInt64Milliseconds(st.worker_timeout));
    resp->set_pushes_dropped(st.pushes_dropped);
    resp->set_pushes_duplicate(st.pushes_duplicate);
    resp->set_staleness_bound(st.staleness_bound);
    for (int64_t step : st.worker_steps) resp->add_worker_steps(step);
    resp->set_max_step_staleness(st.max_step_staleness);
    resp->set_pulls_held(st.pulls_held);
    HistogramToProto(st.push_latency, resp->mutable_push_latency());
    HistogramToProto(st.pull_latency, resp->mutable_pull_latency());
    resp->set_bytes_received(st.bytes_received);
    resp->set_bytes_sent(st.bytes_sent);
    resp->set_pulls_served(st.pulls_served);
    for (int64_t seq : st.worker_last_seq) resp->add_worker_last_seq(seq);
    reactor->Done(grpc::Status::OK);
  } catch (...) {
    FinishWithException(reactor, "GetStatus");
  }
  return reactor;
}

}  // namespace ps
