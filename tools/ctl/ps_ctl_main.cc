// ps_ctl: operator tool for running parameter servers.
//
//   ps_ctl status --servers=h:p,h:p   one JSON object per shard, per line
//   ps_ctl health --servers=h:p,h:p   grpc.health.v1 check; exit 0 iff all SERVING
//   ps_ctl checkpoint --servers=h:p,...  each server writes a checkpoint now
//   ps_ctl top --servers=h:p,...   live view, every --interval (tools/ctl/top.h)
//
// Its flags: --timeout, --interval and --iterations (top), client/client_flags.h
// and the security flags of common/client_security_flags.h.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "client/admin_client.h"
#include "client/client_flags.h"
#include "common/command_line.h"
#include "common/flag_lists.h"
#include "google/protobuf/util/json_util.h"
#include "proto/health.grpc.pb.h"
#include "client/channel.h"
#include "rpc/credentials.h"
#include "tools/ctl/top.h"

ABSL_FLAG(double, timeout, 10, "Seconds to wait for each server.");

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

// ps_ctl top: 0 after --iterations polls or on Ctrl-C (SIGINT, SIGTERM); 1
// once a shard refuses the caller's identity.
int Top(const std::vector<std::string>& servers, const ps::SecurityOptions& security) {
  absl::StatusOr<ps::TopOptions> options = ps::TopOptionsFromFlags();
  if (!options.ok()) {
    std::cerr << "ps_ctl: " << options.status().message() << std::endl;
    return 2;
  }
  absl::Notification stop;
  // Before the poller: gRPC's threads must inherit the blocked signals.
  ps::StopOnSignals signals(stop);
  absl::StatusOr<std::unique_ptr<ps::StatusPoller>> poller =
      ps::StatusPoller::Create(servers, security);
  if (!poller.ok()) {
    std::cerr << "ps_ctl: " << poller.status().message() << std::endl;
    return 2;
  }
  const absl::Status st =
      ps::RunTop(**poller, servers, *options, /*redraw=*/isatty(STDOUT_FILENO) == 1, std::cout, stop);
  if (!st.ok()) {
    std::cerr << "ps_ctl: top needs the admin or reader identity: " << st << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = ps::ParseCommandLine(
      argc, argv,
      "Operator tool for parameter servers.\n"
      "  ps_ctl status --servers=HOST:PORT,...   print each shard's status as JSON, one "
      "object per line\n"
      "  ps_ctl health --servers=HOST:PORT,...   gRPC health check of each server; exit 0 "
      "iff all are SERVING\n"
      "  ps_ctl checkpoint --servers=HOST:PORT,...   each server (run with --checkpoint_dir) "
      "writes a checkpoint now; prints one JSON object per shard\n"
      "  ps_ctl top --servers=HOST:PORT,... [--interval=1] [--iterations=0]   live view, "
      "polled every --interval seconds until Ctrl-C (or --iterations polls); redrawn in place "
      "on a terminal, else one block of plain lines per poll.\n"
      "    Per shard: SHARD SERVER MODE VERSION STEPS/S LIVE DROPPED WAITING (calls waiting "
      "for a version) PUSH_P50 PUSH_P99 PULL_P50 PULL_P99 (latency over the last interval, "
      "as the upper bound of the server's histogram bucket) IN_B/S OUT_B/S (tensor bytes "
      "received and sent per second); a shard that does not answer is DOWN with its error.\n"
      "    Per worker: WORKER STATE (live, dropped, seen) STEP (lowest over the shards) LAG "
      "(steps behind the newest worker). Needs the admin or reader identity.");
  const std::string cmd = args.size() == 2 ? args[1] : "";
  if (cmd != "status" && cmd != "health" && cmd != "checkpoint" && cmd != "top") {
    std::cerr << "usage: ps_ctl status|health|checkpoint|top --servers=HOST:PORT,... (see --help)"
              << std::endl;
    return 2;
  }
  const ps::ClientOptions client = ps::ClientOptionsFromFlags();
  const std::vector<std::string>& servers = client.servers;
  if (servers.empty()) {
    std::cerr << "ps_ctl: --servers is empty" << std::endl;
    return 2;
  }
  const absl::StatusOr<absl::Duration> timeout =
      ps::SecondsFromFlag("timeout", absl::GetFlag(FLAGS_timeout));
  if (!timeout.ok()) {
    std::cerr << "ps_ctl: " << timeout.status().message() << std::endl;
    return 2;
  }
  const ps::SecurityOptions& security = client.security;
  if (cmd == "health") return Health(servers, *timeout, security);
  if (cmd == "top") return Top(servers, security);
  if (cmd == "checkpoint") {
    return PrintJson(servers, ps::RequestCheckpoints(servers, *timeout, security));
  }
  return PrintJson(servers, ps::QueryStatus(servers, *timeout, security));
}
