#include "client/admin_client.h"

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "proto/ps.grpc.pb.h"

namespace ps {
namespace {

// Calls `method` on each server in turn, with `timeout` each.
template <typename Resp, typename Req, typename Method>
absl::StatusOr<std::vector<Resp>> AskEach(const std::vector<std::string>& servers,
                                          absl::Duration timeout,
                                          const SecurityOptions& security, Method method) {
  std::vector<Resp> out(servers.size());
  for (size_t s = 0; s < servers.size(); ++s) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(servers[s], absl::ZeroDuration(), security);
    if (!channel.ok()) return channel.status();
    auto stub = v1::ParameterServer::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::Status st = ((*stub).*method)(&ctx, Req(), &out[s]);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat(servers[s], ": ", st.error_message()));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout,
    const SecurityOptions& security) {
  return AskEach<v1::StatusResponse, v1::StatusRequest>(
      servers, timeout, security, &v1::ParameterServer::Stub::GetStatus);
}

absl::StatusOr<std::vector<v1::CheckpointResponse>> RequestCheckpoints(
    const std::vector<std::string>& servers, absl::Duration timeout,
    const SecurityOptions& security) {
  return AskEach<v1::CheckpointResponse, v1::CheckpointRequest>(
      servers, timeout, security, &v1::ParameterServer::Stub::Checkpoint);
}

}  // namespace ps
