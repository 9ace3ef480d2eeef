#include "worker/job.h"

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "coord/elastic_shares.h"
#include "coord/job_settings.h"
#include "coord/shard_map.h"

namespace ps {

absl::StatusOr<JobMembership> JoinJob(WorkerConfig* config) {
  JobMembership m;
  const CoordinatorFlags& coordinator = config->coordinator;
  if (coordinator.address.empty() || config->standalone) return m;
  ASSIGN_OR_RETURN(const CoordinatorAddress where, ParseCoordinatorAddress(coordinator.address));
  ClientOptions& client = config->client;
  ASSIGN_OR_RETURN(m.etcd, EtcdClient::Connect(where, client.security));
  if (!config->num_workers_given) {
    ASSIGN_OR_RETURN(const JobSettings settings,
                     ReadJobSettings(m.etcd.get(), coordinator.registration.job));
    config->run.num_workers = settings.num_workers;
    config->workload.num_workers = settings.num_workers;
    client.num_workers = settings.num_workers;
    RETURN_IF_ERROR(config->run.Validate());
  }
  if (client.servers.empty()) {
    ASSIGN_OR_RETURN(const ShardMap map, ServersOfJob(m.etcd.get(), coordinator.registration.job));
    client.servers = map.servers;
    client.shard_map_version = map.version;
    // Recovery follows a server that moved (JobMembership outlives the
    // client: worker/job.h).
    client.find_servers = [etcd = m.etcd.get(),
                           job = coordinator.registration.job]() -> absl::StatusOr<ServersAt> {
      ASSIGN_OR_RETURN(ShardMap now, ServersOfJob(etcd, job));
      return ServersAt{std::move(now.servers), now.version};
    };
    RETURN_IF_ERROR(ValidateClientOptions(client));
  }
  RegistrationOptions ro = coordinator.registration;
  if (std::ostream* out = config->report.log; out != nullptr) {
    ro.log = [out](const std::string& line) { *out << "ps_worker: " << line << std::endl; };
  }
  ASSIGN_OR_RETURN(m.registration,
                   JoinAsWorker(m.etcd.get(), config->worker_id_given ? config->run.worker_id : -1,
                                config->run.num_workers, ro, /*joining=*/true));
  const int id = m.registration->id();
  config->run.worker_id = id;
  config->workload.worker_id = id;
  config->client.worker_id = id;
  config->report.worker_id = id;
  config->report.metrics_file =
      absl::StrReplaceAll(config->metrics_file_template, {{"{worker_id}", absl::StrCat(id)}});
  return m;
}

absl::StatusOr<std::unique_ptr<DataShares>> JobDataShares(const WorkerConfig& config,
                                                          const JobMembership& job) {
  if (job.registration == nullptr) return nullptr;
  const RegistrationOptions& ro = config.coordinator.registration;
  RETURN_IF_ERROR(MarkWorkerWaiting(job.registration.get()));
  std::function<void(const std::string&)> log;
  if (std::ostream* out = config.report.log; out != nullptr) {
    log = [out](const std::string& line) { *out << line << std::endl; };
  }
  return ElasticShares::ForJob(job.etcd.get(), job.registration.get(), ro.job, ro.ttl,
                               std::move(log));
}

}  // namespace ps
