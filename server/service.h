// ParameterServerService: the gRPC face of one Shard.
//
// A thin callback service: each handler translates the request proto into a
// core call on the Shard and the result back into a response, converting
// absl::Status to grpc::Status only here. Handlers never block: a pull that
// must wait hands the shard a callback that finishes the RPC later, so no
// server thread is parked per waiting worker.
//
// Push, Pull and PushPull carry tensors and take the raw path of
// rpc/raw_wire.h: each decodes into a ShardCall and goes through the request
// pipeline shared with the stream transport (server/core/pipeline.h), so
// gradients are copied once, from the received bytes into the shard's
// buffer, and pulled weights are sent straight from the shard's immutable
// snapshot without a copy (server/replies.h).
//
// No exception escapes a handler or a callback: one thrown below (e.g.
// std::bad_alloc) finishes the call with RESOURCE_EXHAUSTED or INTERNAL.
//
// Thread-safe. Borrows the Shard, which must outlive the grpc::Server this
// service is registered with.
#ifndef PS_SERVER_SERVICE_H_
#define PS_SERVER_SERVICE_H_

#include "absl/time/time.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/auth_processor.h"
#include "rpc/route.h"
#include "server/checkpoint/checkpointer.h"
#include "server/core/shard.h"
#include "server/rpc_metrics.h"

namespace ps {

// Typed callback methods for the small calls, raw ones for those carrying
// tensors.
using ParameterServerBase = v1::ParameterServer::WithCallbackMethod_PullRows<
    v1::ParameterServer::WithCallbackMethod_PushRows<
        v1::ParameterServer::WithCallbackMethod_PushPullRows<
            v1::ParameterServer::WithCallbackMethod_Register<
                v1::ParameterServer::WithCallbackMethod_InitParams<
                    v1::ParameterServer::WithCallbackMethod_GetStatus<
                        v1::ParameterServer::WithCallbackMethod_Checkpoint<
                            v1::ParameterServer::WithCallbackMethod_Heartbeat<
                                v1::ParameterServer::WithRawCallbackMethod_Push<
                                    v1::ParameterServer::WithRawCallbackMethod_Pull<
                                        v1::ParameterServer::WithRawCallbackMethod_PushPull<
                                            v1::ParameterServer::WithRawCallbackMethod_Stream<
                                                v1::ParameterServer::Service>>>>>>>>>>>>;

namespace service_internal {
// What each handler checks of a call before acting on it (service_call.h
// CallerOfCall): where it was routed, then who made it. Borrowed from the
// service's options; either may be null.
struct CallChecks {
  const Authenticator* authenticator = nullptr;
  const RouteGuard* route = nullptr;
};
}  // namespace service_internal

struct ServiceOptions {
  // Longest time a stream call may take to arrive in full (see
  // server/stream_reactor.h); zero = no limit.
  absl::Duration call_timeout = absl::Seconds(60);
  // Starts a checkpoint write for the Checkpoint RPC (Checkpointer::
  // RequestWrite); null: the server has no checkpoint directory.
  std::function<void(Checkpointer::WriteDone)> checkpoint;
  // Rolls the shard back to its newest valid checkpoint at or below the
  // version, for worker `worker_id` (InitRequest.rollback); true if it did,
  // false if the shard was already there. Null: no --checkpoint_dir.
  std::function<absl::StatusOr<bool>(int worker_id, int64_t max_version)> rollback;
  // Identifies each call's caller, whose AuthProcessor already authorized
  // the method; the handlers check what the request says (the worker id a
  // worker acts as, rpc/authz.h AuthorizeWorker): PERMISSION_DENIED.
  // Null: no authentication, every caller may do everything.
  std::shared_ptr<const Authenticator> authenticator;
  // Refuses a call routed here by mistake or by an old shard map, before
  // anything else (rpc/route.h); null: calls are not checked.
  std::shared_ptr<const RouteGuard> route;
  // Where every call records itself when it ends (by method and status;
  // RpcMetricsInterceptors leaves this service's calls out: see
  // server/rpc_metrics.h); null: not recorded.
  std::shared_ptr<RpcMetrics> rpc_metrics;
};

class ParameterServerService final : public ParameterServerBase {
 public:
  ParameterServerService(Shard* shard, const ServiceOptions& options)
      : shard_(shard), options_(options) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override;
  // With `restore`: Shard::AdoptWorkerCopy, answered at once.
  grpc::ServerUnaryReactor* InitParams(grpc::CallbackServerContext* ctx, const v1::InitRequest* req,
                                       v1::InitResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override;
  // Raw: PushRequest -> PushResponse.
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  // Raw: PullRequest -> PullResponse.
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;
  // Raw: PushPullRequest -> PullResponse.
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;
  // Raw: the streaming transport (server/stream_reactor.h).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* ctx,
                                       const v1::CheckpointRequest* req,
                                       v1::CheckpointResponse* resp) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::StatusRequest* req,
                                      v1::StatusResponse* resp) override;
  // Embedding rows: Shard::PullRows, PushRows and PushPullRows, answered
  // at once.
  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* ctx,
                                     const v1::PullRowsRequest* req,
                                     v1::PullRowsResponse* resp) override;
  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* ctx,
                                     const v1::PushRowsRequest* req,
                                     v1::PushRowsResponse* resp) override;
  grpc::ServerUnaryReactor* PushPullRows(grpc::CallbackServerContext* ctx,
                                         const v1::PushPullRowsRequest* req,
                                         v1::PushPullRowsResponse* resp) override;

 private:
  // What each handler checks of a call before acting on it.
  service_internal::CallChecks checks() const {
    return {options_.authenticator.get(), options_.route.get()};
  }

  Shard* const shard_;  // not owned
  const ServiceOptions options_;
};

}  // namespace ps

#endif  // PS_SERVER_SERVICE_H_
