#include "tools/ctl/commands.h"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/admin_client.h"
#include "client/channel.h"
#include "coord/etcd_client.h"
#include "coord/registration.h"
#include "coord/shard_map.h"
#include "google/protobuf/util/json_util.h"
#include "proto/health.grpc.pb.h"

namespace ps {
namespace {

// Prints "HOST:PORT STATUS" per server; 0 iff every server is SERVING.
int Health(const CtlOptions& o) {
  int rc = 0;
  for (const std::string& s : o.servers) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(s, absl::ZeroDuration(), o.security);
    if (!channel.ok()) {
      std::cerr << "ps_ctl: " << channel.status().message() << std::endl;
      return 2;
    }
    auto stub = grpc::health::v1::Health::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + o.timeout));
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
int Top(const CtlOptions& o) {
  absl::Notification stop;
  // Before the poller: gRPC's threads must inherit the blocked signals.
  StopOnSignals signals(stop);
  absl::StatusOr<std::unique_ptr<StatusPoller>> poller =
      StatusPoller::Create(o.servers, o.security);
  if (!poller.ok()) {
    std::cerr << "ps_ctl: " << poller.status().message() << std::endl;
    return 2;
  }
  const absl::Status st = RunTop(**poller, o.servers, o.top,
                                 /*redraw=*/isatty(STDOUT_FILENO) == 1, std::cout, stop);
  if (!st.ok()) {
    std::cerr << "ps_ctl: top needs the admin or reader identity: " << st << std::endl;
    return 1;
  }
  return 0;
}

// The job's etcd, or the error (printed).
absl::StatusOr<std::unique_ptr<EtcdClient>> Etcd(const CtlOptions& o) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
      EtcdClient::Connect(*ParseCoordinatorAddress(o.coordinator.address), o.security, o.timeout);
  if (!etcd.ok()) std::cerr << "ps_ctl: " << etcd.status().message() << std::endl;
  return etcd;
}

// The job's live members in etcd, or the error (printed).
absl::StatusOr<std::vector<Member>> Members(EtcdClient* etcd, const CtlOptions& o) {
  absl::StatusOr<std::vector<Member>> members = ListMembers(etcd, o.coordinator.registration.job);
  if (!members.ok()) std::cerr << "ps_ctl: " << members.status().message() << std::endl;
  return members;
}

// ps_ctl members: one JSON object per live member, servers then workers,
// then the shard map (coord/shard_map.h).
int PrintMembers(const CtlOptions& o) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = Etcd(o);
  if (!etcd.ok()) return 1;
  absl::StatusOr<std::vector<Member>> members = Members(etcd->get(), o);
  if (!members.ok()) return 1;
  const std::string& job = o.coordinator.registration.job;
  for (const Member& m : *members) {
    std::cout << "{\"job\":\"" << job << "\",\"role\":\"" << m.role << "\",\"id\":" << m.id
              << ",\"value\":\"" << m.value << "\"}" << std::endl;
  }
  absl::StatusOr<ShardMap> map = ReadShardMap(etcd->get(), job);
  if (!map.ok()) {
    std::cerr << "ps_ctl: " << map.status().message() << std::endl;
    return 1;
  }
  if (map->version == 0) return 0;  // no server has published one
  std::cout << "{\"job\":\"" << job << "\",\"shard_map\":{\"version\":" << map->version
            << ",\"servers\":[";
  for (size_t i = 0; i < map->servers.size(); ++i) {
    std::cout << (i > 0 ? "," : "") << "\"" << map->servers[i] << "\"";
  }
  std::cout << "]}}" << std::endl;
  return 0;
}

}  // namespace

int RunCtl(const CtlOptions& options) {
  if (options.command == CtlCommand::kMembers) return PrintMembers(options);
  CtlOptions o = options;
  if (o.servers.empty()) {  // the live servers of the coordinator's job
    absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = Etcd(o);
    if (!etcd.ok()) return 1;
    absl::StatusOr<std::vector<Member>> members = Members(etcd->get(), o);
    if (!members.ok()) return 1;
    for (const Member& m : *members) {
      if (m.role == "servers") o.servers.push_back(m.value);
    }
    if (o.servers.empty()) {
      std::cerr << "ps_ctl: no server of job " << o.coordinator.registration.job
                << " is registered in etcd" << std::endl;
      return 1;
    }
  }
  switch (o.command) {
    case CtlCommand::kHealth:
      return Health(o);
    case CtlCommand::kTop:
      return Top(o);
    case CtlCommand::kCheckpoint:
      return PrintJson(o.servers, RequestCheckpoints(o.servers, o.timeout, o.security));
    case CtlCommand::kStatus:
    case CtlCommand::kMembers:
      break;
  }
  return PrintJson(o.servers, QueryStatus(o.servers, o.timeout, o.security));
}

}  // namespace ps
