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
#include "proto/health.grpc.pb.h"
#include "client/channel.h"
#include "rpc/credentials.h"

ABSL_FLAG(std::string, servers, "", "Comma-separated HOST:PORT of the shards to query.");
ABSL_FLAG(double, timeout, 10, "Seconds to wait for each server.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s) that signed the servers' certificates: connect with TLS and "
          "verify each server's certificate against it and the address's host name (or "
          "--tls_server_name).");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS; its Subject CN is this client's identity on "
          "the servers: admin (every command) or reader (status). Re-read when it changes on "
          "disk.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "The name the servers' certificates carry, when the addresses in --servers are not "
          "it (e.g. IP addresses).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding this client's bearer token ('TOKEN' or 'IDENTITY TOKEN'), sent with "
          "every call; needs --tls_ca.");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext connections (no --tls_ca) to non-loopback servers: anyone on the "
          "path can read the traffic and impersonate the servers.");


namespace {

// Prints "HOST:PORT STATUS" per server; 0 iff every server is SERVING.
int Health(const std::vector<std::string>& servers, absl::Duration timeout,
           const ps::SecurityOptions& security) {
  int rc = 0;
  for (const std::string& s : servers) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        ps::MakeChannel(s, absl::ZeroDuration(), security);
    if (!channel.ok()) {
      std::cerr << "ps_ctl: " << channel.status().message() << std::endl;
      return 2;
    }
    auto stub = grpc::health::v1::Health::NewStub(*channel);
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
  ps::SecurityOptions security;
  security.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  security.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  security.tls_key = absl::GetFlag(FLAGS_tls_key);
  security.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  security.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  security.insecure = absl::GetFlag(FLAGS_insecure);
  if (cmd == "health") return Health(servers, timeout, security);
  if (cmd == "checkpoint") {
    return PrintJson(servers, ps::RequestCheckpoints(servers, timeout, security));
  }
  return PrintJson(servers, ps::QueryStatus(servers, timeout, security));
}
