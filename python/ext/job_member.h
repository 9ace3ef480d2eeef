// JobMember: a Python worker's place in its job's membership in etcd, for
// ps.Client(coordinator=...) (python/src/ps/__init__.py; docs/elastic.md):
// the same registration ps_worker --coordinator makes (coord/): the worker
// key workers/<id> under a lease renewed while it lives (`worker_id` -1:
// the lowest free id below `num_workers`; `num_workers` -1: the job's,
// coord/job_settings.h), and, asked for, the servers
// registered in etcd in shard order. leave() (or destruction) revokes the
// lease. Network calls run with the GIL released. For one thread.
#ifndef PS_PYTHON_EXT_JOB_MEMBER_H_
#define PS_PYTHON_EXT_JOB_MEMBER_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coord/etcd_client.h"
#include "coord/job_settings.h"
#include "coord/registration.h"

namespace ps {

void ThrowIfError(const absl::Status& s);  // ps_module.cc

class JobMember {
 public:
  // `tls_*` and `insecure`: the client's own (EtcdClient::Connect).
  JobMember(const std::string& coordinator, const std::string& job, double ttl, int worker_id,
            int num_workers, bool find_servers, const std::string& tls_cert,
            const std::string& tls_key, const std::string& tls_ca, bool insecure) {
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
      absl::StatusOr<std::vector<std::string>> servers = RegisteredServers(etcd_.get(), job);
      ThrowIfError(servers.status());
      servers_ = *std::move(servers);
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
  }
  ~JobMember() { Leave(); }

  int worker_id() const { return registration_->id(); }
  int num_workers() const { return num_workers_; }
  const std::vector<std::string>& servers() const { return servers_; }
  void Leave() {
    if (registration_ == nullptr) return;
    pybind11::gil_scoped_release release;
    registration_.reset();
  }

 private:
  std::unique_ptr<EtcdClient> etcd_;
  std::vector<std::string> servers_;
  int num_workers_ = 0;
  std::unique_ptr<Registration> registration_;  // null once left
};

}  // namespace ps

#endif  // PS_PYTHON_EXT_JOB_MEMBER_H_
