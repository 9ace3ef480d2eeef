#include "client/admin_client.h"

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "proto/ps.grpc.pb.h"

namespace ps {

absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout) {
  std::vector<v1::StatusResponse> out(servers.size());
  for (size_t s = 0; s < servers.size(); ++s) {
    auto stub = v1::ParameterServer::NewStub(MakeChannel(servers[s], absl::ZeroDuration()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::Status st = stub->GetStatus(&ctx, v1::StatusRequest(), &out[s]);
    if (!st.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                          absl::StrCat(servers[s], ": ", st.error_message()));
    }
  }
  return out;
}

}  // namespace ps
