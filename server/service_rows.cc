// ParameterServerService's embedding-row calls: PullRows (and its
// prefetch), PushRows and PushPullRows.
#include <vector>

#include "rpc/wire.h"
#include "server/replies.h"
#include "server/service.h"
#include "server/service_call.h"

namespace ps {

using service_internal::Caller;
using service_internal::CallerOfCall;
using service_internal::CallReactor;
using service_internal::FinishWithException;
using service_internal::MayActAs;
using service_internal::NewCall;

grpc::ServerUnaryReactor* ParameterServerService::PullRows(grpc::CallbackServerContext* ctx,
                                                           const v1::PullRowsRequest* req,
                                                           v1::PullRowsResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kPullRows);
  try {
    absl::StatusOr<Caller> caller = CallerOfCall(checks(), *ctx);
    absl::Status s = caller.ok() ? caller->MayActAs("PullRows", req->worker_id()) : caller.status();
    if (s.ok() && req->prefetch()) {  // answered at once, without rows
      s = shard_->PrefetchRows(req->worker_id(), req->table(), req->ids());
      if (s.ok()) IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
      reactor->Done(ToGrpcStatus(s));
      return reactor;
    }
    if (!s.ok()) {
      reactor->Done(ToGrpcStatus(s));
      return reactor;
    }
    // Answered now, or (min_version) when the version comes.
    auto answer = [this, reactor, resp](absl::StatusOr<RowsResult> rows) {
      try {
        if (rows.ok()) {
          EncodeFloats(rows->values, resp->mutable_values());
          resp->set_version(rows->version);
          IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
        }
        reactor->Done(ToGrpcStatus(rows.status()));
      } catch (...) {
        FinishWithException(reactor, "PullRows");
      }
    };
    reactor->wait()->Started(shard_->PullRowsAt(
        req->worker_id(), req->table(), req->ids(), req->min_version(),
        absl::Milliseconds(req->wait_timeout_ms()), std::move(answer), caller->renews_lease()));
  } catch (...) {
    FinishWithException(reactor, "PullRows");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushRows(grpc::CallbackServerContext* ctx,
                                                           const v1::PushRowsRequest* req,
                                                           v1::PushRowsResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kPushRows);
  try {
    absl::Status s = MayActAs(checks(), *ctx, "PushRows", req->worker_id());
    absl::StatusOr<RowGradientFloats> grads =
        s.ok() ? RowGradients(req->table(), {absl::string_view(req->grads())})
               : absl::StatusOr<RowGradientFloats>(s);
    absl::StatusOr<PushResult> r =
        grads.ok() ? shard_->PushRows(req->worker_id(), req->table(), req->version(), req->seq(),
                                      req->ids(), grads->floats())
                   : absl::StatusOr<PushResult>(grads.status());
    if (r.ok()) {
      resp->set_version(r->version);
      resp->set_outcome(static_cast<v1::PushOutcome>(r->outcome));
      IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
    }
    reactor->Done(ToGrpcStatus(r.status()));
  } catch (...) {
    FinishWithException(reactor, "PushRows");
  }
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PushPullRows(grpc::CallbackServerContext* ctx,
                                                               const v1::PushPullRowsRequest* req,
                                                               v1::PushPullRowsResponse* resp) {
  CallReactor* reactor = NewCall(shard_, options_, RpcMetrics::kPushPullRows);
  try {
    absl::Status s = MayActAs(checks(), *ctx, "PushPullRows", req->worker_id());
    absl::StatusOr<RowGradientFloats> grads =
        s.ok() ? RowGradients(req->table(), {absl::string_view(req->grads())})
               : absl::StatusOr<RowGradientFloats>(s);
    if (!grads.ok()) {
      reactor->Done(ToGrpcStatus(grads.status()));
      return reactor;
    }
    // Answered now, or (sync) when the step closes, on the thread that
    // closes it; a client that goes away drops the wait (CallReactor).
    auto answer = [this, reactor, resp](absl::StatusOr<RowsPushPullResult> r) {
      try {
        if (r.ok()) {
          EncodeFloats(r->rows.values, resp->mutable_values());
          resp->set_version(r->rows.version);
          resp->set_outcome(static_cast<v1::PushOutcome>(r->outcome));
          IncarnationToProto(shard_->incarnation(), resp->mutable_incarnation());
        }
        reactor->Done(ToGrpcStatus(r.status()));
      } catch (...) {
        FinishWithException(reactor, "PushPullRows");
      }
    };
    reactor->wait()->Started(shard_->PushPullRows(
        req->worker_id(), req->table(), req->version(), req->seq(), req->ids(), grads->floats(),
        absl::Milliseconds(req->wait_timeout_ms()), std::move(answer)));
  } catch (...) {
    FinishWithException(reactor, "PushPullRows");
  }
  return reactor;
}

}  // namespace ps
