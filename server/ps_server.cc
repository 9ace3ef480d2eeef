#include "server/ps_server.h"

#include <chrono>
#include <climits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  const size_t colon = options.listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", options.listen, "' is not HOST:PORT"));
  }
  std::unique_ptr<PsServer> s(new PsServer());
  ASSIGN_OR_RETURN(s->shard_, Shard::Create(options.shard));
  s->service_ = std::make_unique<ParameterServerService>(s->shard_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  // Tensors can be large; the transport, not a message cap, is the limit.
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  // Clients ping idle connections to notice dead peers (ClientOptions::
  // keepalive, at least 1 s apart); accept them however quiet the connection,
  // e.g. while a sync step waits for a slow worker.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  s->address_ = absl::StrCat(options.listen.substr(0, colon), ":", s->port_);
  return s;
}

PsServer::~PsServer() { Shutdown(); }

void PsServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (shard_ != nullptr) shard_->Close();
  if (server_ == nullptr) return;  // Start() failed before the server ran
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  server_->Wait();
}

}  // namespace ps
