// JobMember: a Python worker's place in its job's membership in etcd, for
// ps.Client(coordinator=...) (python/src/ps/__init__.py; docs/elastic.md):
// the same registration ps_worker --coordinator makes (coord/): the worker
// key workers/<id> under a lease renewed while it lives (`worker_id` -1:
// the lowest free id below `num_workers`; `num_workers` -1: the job's,
// coord/job_settings.h), and, asked for, the servers
// registered in etcd in shard order. leave() (or destruction) revokes the
// lease. With `waiting` it registers as waiting for an epoch and takes each
// epoch's data share by the job's membership (coord/elastic_shares.h) for
// ps.torch.ElasticSampler. Network calls run with the GIL released. For
// one thread.
#ifndef PS_PYTHON_EXT_JOB_MEMBER_H_
#define PS_PYTHON_EXT_JOB_MEMBER_H_

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "client/client_options.h"
#include "common/data_share.h"
#include "coord/elastic_shares.h"
#include "coord/etcd_client.h"
#include "coord/job_settings.h"
#include "coord/registration.h"
#include "coord/shard_map.h"

namespace ps {

void ThrowIfError(const absl::Status& s);  // ps_module.cc

class JobMember {
 public:
  // `tls_*` and `insecure`: the client's own (EtcdClient::Connect).
  JobMember(const std::string& coordinator, const std::string& job, double ttl, int worker_id,
            int num_workers, bool find_servers, const std::string& tls_cert,
            const std::string& tls_key, const std::string& tls_ca, bool insecure, bool waiting)
      : job_(job), ttl_(absl::Seconds(ttl)) {
    pybind11::gil_scoped_release release;
    absl::StatusOr<CoordinatorAddress> where = ParseCoordinatorAddress(coordinator);
    ThrowIfError(where.status());
    SecurityOptions security;
    security.tls_cert = tls_cert;
    security.tls_key = tls_key;
    security.tls_ca = tls_ca;
    security.insecure = insecure;
    absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = EtcdClient::Connect(*where, security);
    ThrowIfError(etcd.status());
    etcd_ = *std::move(etcd);
    if (find_servers) {
      absl::StatusOr<ShardMap> map = ServersOfJob(etcd_.get(), job);
      ThrowIfError(map.status());
      servers_ = std::move(map->servers);
      map_version_ = map->version;
    }
    num_workers_ = num_workers;
    if (num_workers_ < 0) {
      absl::StatusOr<JobSettings> settings = ReadJobSettings(etcd_.get(), job);
      ThrowIfError(settings.status());
      num_workers_ = settings->num_workers;
    }
    RegistrationOptions o;
    o.job = job;
    o.ttl = absl::Seconds(ttl);
    absl::StatusOr<std::unique_ptr<Registration>> r =
        JoinAsWorker(etcd_.get(), worker_id, num_workers_, o);
    ThrowIfError(r.status());
    registration_ = *std::move(r);
    if (waiting) ThrowIfError(MarkWorkerWaiting(registration_.get()));
  }
  ~JobMember() { Leave(); }

  int worker_id() const { return registration_->id(); }
  int num_workers() const { return num_workers_; }
  const std::vector<std::string>& servers() const { return servers_; }
  // The version of the shard map `servers` came from.
  int64_t map_version() const { return map_version_; }
  // ClientOptions::find_servers for a client connected to `servers`: the
  // job's shard map read again (owning the etcd client with this member).
  std::function<absl::StatusOr<ServersAt>()> ServerFinder() const {
    return [etcd = etcd_, job = job_]() -> absl::StatusOr<ServersAt> {
      absl::StatusOr<ShardMap> map = ServersOfJob(etcd.get(), job);
      if (!map.ok()) return map.status();
      return ServersAt{std::move(map->servers), map->version};
    };
  }
  void Leave() {
    if (registration_ == nullptr) return;
    pybind11::gil_scoped_release release;
    shares_.reset();
    registration_.reset();
  }

  // (epoch, first_step, rank, workers, steps): ElasticShares::ShareAt(step),
  // and ::Next of the share `done` (its epoch, first_step, workers), for a
  // dataset of `examples` cut into batches of `batch_size` trained for
  // `epochs`; `steps` is the share's epoch's steps, the one rule of
  // Shape (the Python sampler has no copy of it).
  using Share = std::tuple<int64_t, int64_t, int, int, int64_t>;
  // Every wait (for an epoch, the workers' data, the barrier) ends with
  // KeyboardInterrupt on Ctrl-C within 0.1 s (ForJob's `interrupted`).
  Share ShareAt(int64_t step, int64_t examples, int batch_size, int64_t epochs) {
    const EpochShape shape = Shape(examples, batch_size, epochs);
    absl::StatusOr<DataShare> s;
    {
      pybind11::gil_scoped_release release;
      s = Shares()->ShareAt(step, shape);
    }
    return Tuple(s, shape);
  }
  Share NextShare(int64_t epoch, int64_t first_step, int workers, int64_t examples, int batch_size,
                  int64_t epochs) {
    const EpochShape shape = Shape(examples, batch_size, epochs);
    const DataShare done{epoch, first_step, 0, workers};
    absl::StatusOr<DataShare> s;
    {
      pybind11::gil_scoped_release release;
      s = Shares()->Next(done, shape);
    }
    return Tuple(s, shape);
  }

 private:
  // An epoch of n workers: examples / n / batch_size steps, at least 1.
  static EpochShape Shape(int64_t examples, int batch_size, int64_t epochs) {
    EpochShape shape;
    shape.steps = [examples, batch_size](int n) {
      return std::max<int64_t>(1, examples / n / batch_size);
    };
    shape.epochs = epochs;
    return shape;
  }
  // REQUIRES: the GIL held.
  static Share Tuple(const absl::StatusOr<DataShare>& s, const EpochShape& shape) {
    if (!s.ok() && PyErr_Occurred() != nullptr) throw pybind11::error_already_set();
    ThrowIfError(s.status());
    return {s->epoch, s->first_step, s->rank, s->workers, shape.steps(s->workers)};
  }
  ElasticShares* Shares() {
    if (registration_ == nullptr) ThrowIfError(absl::FailedPreconditionError("left the job"));
    if (shares_ == nullptr) {
      absl::StatusOr<std::unique_ptr<ElasticShares>> shares =
          ElasticShares::ForJob(etcd_.get(), registration_.get(), job_, ttl_, /*log=*/nullptr, [] {
            pybind11::gil_scoped_acquire gil;
            return PyErr_CheckSignals() == 0 ? absl::OkStatus()
                                             : absl::CancelledError("interrupted");
          });
      ThrowIfError(shares.status());
      shares_ = *std::move(shares);
    }
    return shares_.get();
  }

  std::shared_ptr<EtcdClient> etcd_;  // shared with ServerFinder's clients
  std::vector<std::string> servers_;
  int64_t map_version_ = 0;
  int num_workers_ = 0;
  const std::string job_;
  const absl::Duration ttl_;
  std::unique_ptr<Registration> registration_;  // null once left
  std::unique_ptr<ElasticShares> shares_;       // made at the first share
};

}  // namespace ps

#endif  // PS_PYTHON_EXT_JOB_MEMBER_H_
