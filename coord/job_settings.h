// JobSettings: what every process of a job must agree on, kept in etcd as
// one record, /ps/<job>/settings, that the servers write
// ("num_shards=2 num_workers=4 mode=sync"; etcdctl get shows it).
// ps_worker and ps.Client started without a worker count read it there
// (docs/elastic.md).
//
// PublishJobSettings (ps_server, before it registers) creates the record,
// or finds it equal. A record that differs is an earlier run's when no
// server of the job is registered: it is replaced. Otherwise the server
// does not fit the running job: FAILED_PRECONDITION naming both. Writes are
// compare-and-swap (EtcdClient::CompareAndPut), so two servers never
// overwrite each other unseen.
//
// Stateless functions; thread-safe as EtcdClient is.
#ifndef PS_COORD_JOB_SETTINGS_H_
#define PS_COORD_JOB_SETTINGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coord/etcd_client.h"

namespace ps {

struct JobSettings {
  int num_shards = 1;
  int num_workers = 1;
  std::string mode = "sync";  // common/mode.h's names

  // "num_shards=S num_workers=W mode=M".
  std::string Format() const;
  bool operator==(const JobSettings& o) const {
    return num_shards == o.num_shards && num_workers == o.num_workers && mode == o.mode;
  }
};

// INVALID_ARGUMENT naming the text unless it is Format's, with counts >= 1.
absl::StatusOr<JobSettings> ParseJobSettings(const std::string& text);

// The record's key.
std::string JobSettingsKey(const std::string& job);

absl::Status PublishJobSettings(EtcdClient* etcd, const std::string& job,
                                const JobSettings& settings);

// The job's record; FAILED_PRECONDITION when no server has written one yet
// (naming what to start), INVALID_ARGUMENT when it does not parse.
absl::StatusOr<JobSettings> ReadJobSettings(EtcdClient* etcd, const std::string& job);

}  // namespace ps

#endif  // PS_COORD_JOB_SETTINGS_H_
