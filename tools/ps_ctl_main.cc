// ps_ctl: operator tool for running parameter servers.
//
//   ps_ctl status --servers=h:p,h:p   one JSON object per shard, per line
//   ps_ctl health --servers=h:p,h:p   grpc.health.v1 check; exit 0 iff all SERVING
//   ps_ctl checkpoint --servers=h:p,...  each server writes a checkpoint now
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "client/admin_client.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "proto/health.grpc.pb.h"
#include "rpc/credentials.h"

ABSL_FLAG(std::string, servers, "", "Comma-separated HOST:PORT of the shards to query.");
ABSL_FLAG(double, timeout, 10, "Seconds to wait for each server.");

namespace {

// Prints "HOST:PORT STATUS" per server; 0 iff every server is SERVING.
int Health(const std::vector<std::string>& servers, absl::Duration timeout) {
  int rc = 0;
  for (const std::string& s : servers) {
    auto stub = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(s, ps::MakeChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status st = stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp);
    if (!st.ok()) {
      std::cout << s << " UNREACHABLE (" << st.error_message() << ")" << std::endl;
      rc = 1;
      continue;
    }
    std::cout << s << " "
              << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status())
              << std::endl;
    if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) rc = 1;
  }
  return rc;
}

// Prints each server's reply as one JSON object per line, naming the server
// as its first field; or the error.
template <typename Message>
int PrintJson(const std::vector<std::string>& servers,
              const absl::StatusOr<std::vector<Message>>& replies) {
  if (!replies.ok()) {
    std::cerr << "ps_ctl: " << replies.status() << std::endl;
    return 1;
  }
  google::protobuf::util::JsonPrintOptions json;
  json.always_print_primitive_fields = true;
  json.preserve_proto_field_names = true;
  for (size_t i = 0; i < replies->size(); ++i) {
    std::string line;
    google::protobuf::util::MessageToJsonString((*replies)[i], &line, json);
    std::cout << "{\"server\":\"" << servers[i] << "\"," << line.substr(1) << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Operator tool for parameter servers.\n"
      "  ps_ctl status --servers=HOST:PORT,...   print each shard's status as JSON, one "
      "object per line\n"
      "  ps_ctl health --servers=HOST:PORT,...   gRPC health check of each server; exit 0 "
      "iff all are SERVING\n"
      "  ps_ctl checkpoint --servers=HOST:PORT,...   each server (run with --checkpoint_dir) "
      "writes a checkpoint now; prints one JSON object per shard");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string cmd = args.size() == 2 ? args[1] : "";
  if (cmd != "status" && cmd != "health" && cmd != "checkpoint") {
    std::cerr << "usage: ps_ctl status|health|checkpoint --servers=HOST:PORT,... (see --help)"
              << std::endl;
    return 2;
  }
  std::vector<std::string> servers =
      absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  if (servers.empty()) {
    std::cerr << "ps_ctl: --servers is empty" << std::endl;
    return 2;
  }
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  if (cmd == "health") return Health(servers, timeout);
  if (cmd == "checkpoint") return PrintJson(servers, ps::RequestCheckpoints(servers, timeout));
  return PrintJson(servers, ps::QueryStatus(servers, timeout));
}
