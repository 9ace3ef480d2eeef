#include "worker/job.h"

#include <unistd.h>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"

namespace ps {
namespace {

std::string HostAndPid() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, " pid ", getpid());
}

// The registered servers in shard order; FAILED_PRECONDITION unless they
// are shards 0..S-1.
absl::StatusOr<std::vector<std::string>> Servers(EtcdClient* etcd, const std::string& job) {
  ASSIGN_OR_RETURN(const std::vector<Member> members, ListMembers(etcd, job));
  std::vector<std::string> servers;
  for (const Member& m : members) {
    if (m.role != "servers") continue;
    if (m.id != static_cast<int>(servers.size())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job, " in etcd has server ", m.id, " but not server ", servers.size(),
          ": start the missing ones, or name the servers with --servers"));
    }
    servers.push_back(m.value);
  }
  if (servers.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no server of job ", job, " is registered in etcd ", etcd->endpoint(),
        " (start ps_server with the same --coordinator and --job, or pass --servers)"));
  }
  return servers;
}

}  // namespace

absl::StatusOr<JobMembership> JoinJob(WorkerConfig* config) {
  JobMembership m;
  const CoordinatorFlags& coordinator = config->coordinator;
  if (coordinator.address.empty() || config->standalone) return m;
  ASSIGN_OR_RETURN(const CoordinatorAddress where, ParseCoordinatorAddress(coordinator.address));
  ASSIGN_OR_RETURN(m.etcd, EtcdClient::Connect(where));
  ClientOptions& client = config->client;
  if (client.servers.empty()) {
    ASSIGN_OR_RETURN(client.servers, Servers(m.etcd.get(), coordinator.registration.job));
    RETURN_IF_ERROR(ValidateClientOptions(client));
  }
  RegistrationOptions ro = coordinator.registration;
  if (std::ostream* out = config->report.log; out != nullptr) {
    ro.log = [out](const std::string& line) { *out << "ps_worker: " << line << std::endl; };
  }
  const int num_workers = config->run.num_workers;
  if (config->worker_id_given) {
    ASSIGN_OR_RETURN(m.registration, Registration::Join(m.etcd.get(), "workers",
                                                        config->run.worker_id, HostAndPid(), ro));
  } else {
    ASSIGN_OR_RETURN(m.registration, Registration::JoinFreeId(m.etcd.get(), "workers", num_workers,
                                                              HostAndPid(), ro));
  }
  const int id = m.registration->id();
  config->run.worker_id = id;
  config->workload.worker_id = id;
  config->client.worker_id = id;
  config->report.worker_id = id;
  config->report.metrics_file =
      absl::StrReplaceAll(config->metrics_file_template, {{"{worker_id}", absl::StrCat(id)}});
  return m;
}

}  // namespace ps
