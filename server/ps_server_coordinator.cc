// PsServer's side in an elastic cluster (see ps_server.h: Coordinator):
// the job's settings, this server's registration and place in the shard
// map, and the watch on the workers that sync and SSP steps wait by.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coord/epoch_record.h"
#include "coord/job_settings.h"
#include "coord/shard_map.h"
#include "server/ps_server.h"

namespace ps {

absl::Status PsServer::JoinCoordinator() {
  ASSIGN_OR_RETURN(const CoordinatorAddress where,
                   ParseCoordinatorAddress(options_.coordinator.address));
  ASSIGN_OR_RETURN(etcd_, EtcdClient::Connect(where, options_.security));
  RegistrationOptions ro = options_.coordinator.registration;
  if (!ro.log) ro.log = options_.shard.log;
  const ShardOptions& so = options_.shard;
  JobSettings settings;
  settings.num_shards = so.num_shards;
  settings.num_workers = so.num_workers;
  settings.mode = ModeName(so.mode);
  RETURN_IF_ERROR(PublishJobSettings(etcd_.get(), ro.job, settings));
  // etcd restarted without its data: the settings and this server's place
  // in the shard map go back with the key.
  ro.on_registered_again = [etcd = etcd_.get(), job = ro.job, settings, log = ro.log,
                            shard = so.shard_id, address = address_, route = route_] {
    if (absl::Status p = PublishJobSettings(etcd, job, settings); !p.ok() && log) {
      log(absl::StrCat("cannot write the job's settings again: ", p.message()));
    }
    absl::StatusOr<ShardMap> m = PublishShardServer(etcd, job, shard, settings.num_shards, address);
    // The map started over: calls routed by its new versions are this
    // server's (rpc/route.h).
    if (m.ok()) route->set_owned_since(m->version);
    if (!m.ok() && log) {
      log(absl::StrCat("cannot write this server into the shard map again: ",
                       m.status().message()));
    }
  };
  // The first server of a run from step 0 starts the record of its epochs
  // over (coord/epoch_record.h); a run that resumes keeps it.
  if (shard_->Stats().version == 0) {
    ASSIGN_OR_RETURN(const std::vector<EtcdClient::KeyValue> servers,
                     etcd_->List(RolePrefix(ro.job, "servers")));
    if (servers.empty()) RETURN_IF_ERROR(ClearEpochs(etcd_.get(), ro.job));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Registration> registration,
                   Registration::Join(etcd_.get(), "servers", so.shard_id, address_, ro));
  // Two servers that started at once with other settings: the second to
  // register sees the first's record.
  ASSIGN_OR_RETURN(const JobSettings registered, ReadJobSettings(etcd_.get(), ro.job));
  if (!(registered == settings)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", ro.job, " runs with ", registered.Format(), " (etcd ",
                     JobSettingsKey(ro.job), "), but this server has ", settings.Format(),
                     ": start it with the job's flags, or under another --job"));
  }
  // Clients find the servers by the shard map (coord/shard_map.h): this
  // server, which holds its shard's key now, takes its place there.
  ASSIGN_OR_RETURN(const ShardMap map,
                   PublishShardServer(etcd_.get(), ro.job, so.shard_id, so.num_shards, address_));
  // A call routed by an older map meant another server (rpc/route.h).
  route_->set_owned_since(map.version);
  absl::MutexLock l(&coordinator_mu_);
  registration_ = std::move(registration);
  if (so.log) {
    so.log(absl::StrCat(
        "shard ", so.shard_id, ": registered as ", registration_->key(), " in etcd ",
        etcd_->endpoint(), " (job settings ", settings.Format(), "; shard map version ",
        map.version, ", ",
        map.complete() ? "complete" : absl::StrCat("waiting for shard(s) ", map.Missing()), ")"));
  }
  // Taken over (the map gives this shard to another address: this
  // server's lease ran out while it was cut off, and a new server took
  // the shard): refuse every request from then on, naming the new server.
  ShardMapWatchOptions mo;
  mo.job = ro.job;
  mo.ttl = ro.ttl;
  mo.retry = ro.ttl / 3;
  mo.log = ro.log;
  map_watch_ = ShardMapWatch::Start(
      etcd_.get(), mo,
      [this, shard = so.shard_id, num_shards = so.num_shards, job = ro.job](const ShardMap& m) {
        if (static_cast<int>(m.servers.size()) == num_shards && m.servers[shard] == address_) {
          return;
        }
        const std::string now =
            static_cast<int>(m.servers.size()) == num_shards
                ? absl::StrCat("to ", m.servers[shard].empty() ? "no server" : m.servers[shard])
                : absl::StrCat("away: the map has ", m.servers.size(), " shards");
        const absl::Status why = absl::FailedPreconditionError(
            absl::StrCat("shard ", shard, " of job ", job, " moved from ", address_, " ", now,
                         " (shard map version ", m.version,
                         "): this server was taken over and takes no more requests; connect to the "
                         "shard map's server"));
        if (!fenced_.exchange(true)) {
          if (options_.shard.log) options_.shard.log(std::string(why.message()));
          shard_->Close(why);
        }
      });
  if (so.mode != Mode::kAsync) {
    if (so.log) {
      so.log(absl::StrCat("shard ", so.shard_id, ": ", ModeName(so.mode),
                          " steps wait for the workers registered in etcd under ",
                          RolePrefix(ro.job, "workers"), " (docs/elastic.md)"));
    }
    MemberWatchOptions wo;
    wo.job = ro.job;
    wo.role = "workers";
    wo.ttl = ro.ttl;
    wo.retry = ro.ttl / 3;
    wo.log = ro.log;
    wo.counts = WorkerReady;  // not loading its data, nor waiting for an epoch
    Shard* shard = shard_.get();
    worker_watch_ = MemberWatch::Start(etcd_.get(), wo, [shard](const WatchedMembers& m) {
      shard->SetRegisteredWorkers(m.counted, m.held);
    });
  }
  return absl::OkStatus();
}

bool PsServer::CoordinatorReachable() const {
  absl::MutexLock l(&coordinator_mu_);
  if (registration_ == nullptr || !registration_->renewing()) return false;
  return worker_watch_ == nullptr || worker_watch_->watching();
}

}  // namespace ps
