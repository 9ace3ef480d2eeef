// ParameterServerService: the gRPC face of one Shard.
//
// A thin callback service: each handler translates the request proto into a
// core call on the Shard and the result back into a response, converting
// absl::Status to grpc::Status only here. Handlers never block: a pull that
// must wait hands the shard a callback that finishes the RPC later, so no
// server thread is parked per waiting worker.
//
// Thread-safe. Borrows the Shard, which must outlive the grpc::Server this
// service is registered with.
#ifndef PS_SERVER_SERVICE_H_
#define PS_SERVER_SERVICE_H_

#include "proto/ps.grpc.pb.h"
#include "server/shard.h"

namespace ps {

class ParameterServerService final : public v1::ParameterServer::CallbackService {
 public:
  explicit ParameterServerService(Shard* shard) : shard_(shard) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const v1::RegisterRequest* req,
                                     v1::RegisterResponse* resp) override;
  grpc::ServerUnaryReactor* InitParams(grpc::CallbackServerContext* ctx,
                                       const v1::InitRequest* req,
                                       v1::InitResponse* resp) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const v1::PushRequest* req,
                                 v1::PushResponse* resp) override;
  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const v1::PullRequest* req,
                                 v1::PullResponse* resp) override;
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* ctx,
                                     const v1::PushPullRequest* req,
                                     v1::PullResponse* resp) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::StatusRequest* req,
                                      v1::StatusResponse* resp) override;

 private:
  Shard* const shard_;  // not owned
};

}  // namespace ps

#endif  // PS_SERVER_SERVICE_H_
