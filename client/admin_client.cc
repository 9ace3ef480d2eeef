#include "client/admin_client.h"

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "proto/ps.grpc.pb.h"

namespace ps {
namespace {

// Calls `method` on each server in turn, with `timeout` each.
template <typename Resp, typename Req, typename Method>
absl::StatusOr<std::vector<Resp>> AskEach(const std::vector<std::string>& servers,
                                          absl::Duration timeout, Method method) {
  std::vector<Resp> out(servers.size());
  for (size_t s = 0; s < servers.size(); ++s) {
    auto stub = v1::ParameterServer::NewStub(MakeChannel(servers[s], absl::ZeroDuration()));
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
    const std::vector<std::string>& servers, absl::Duration timeout) {
  return AskEach<v1::StatusResponse, v1::StatusRequest>(
      servers, timeout, &v1::ParameterServer::Stub::GetStatus);
}

absl::StatusOr<std::vector<v1::CheckpointResponse>> RequestCheckpoints(
    const std::vector<std::string>& servers, absl::Duration timeout) {
  return AskEach<v1::CheckpointResponse, v1::CheckpointRequest>(
      servers, timeout, &v1::ParameterServer::Stub::Checkpoint);
}

}  // namespace ps
