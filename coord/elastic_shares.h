// ElasticShares: each epoch's data shares by the job's membership in etcd
// (docs/elastic.md, "Data shares"): the DataShares (common/data_share.h)
// of ps_worker with --coordinator.
//
// At an epoch's first step the worker reads the epoch's record
// (coord/epoch_record.h), or makes it: the workers whose keys say they have
// loaded their data (ready or waiting, coord/registration.h), itself among
// them. Listed k-th of n, it takes share k of n, from the record's first
// step on. So every worker of an epoch trains the same split of it, and
// while they all train it through no example is skipped or trained twice.
//
//   - Listed: it marks its key ready (the servers' sync steps wait for it,
//     server/core/membership.h). In sync and SSP mode it then waits, at
//     most `barrier_timeout`, until every listed worker's key is ready or
//     gone, so that a worker that joins is counted from the epoch's first
//     step, before the others push it.
//   - Not listed (it joined during the epoch before, or its key was away
//     when the record was made): it marks its key waiting (the servers do
//     not wait for it, and its requests do not bring it in) and waits for
//     the next epoch's record, which the first of its workers to finish the
//     epoch makes. It makes that record itself once no worker of the job is
//     ready (they all left).
//
// Every wait is a watch in etcd (coord/key_wait.h) of at most
// `wait_slice`, taken again while the condition holds; errors are etcd's.
// Borrows the EtcdClient and the Registration (this worker's key), which
// must outlive it. Not thread-safe: the run loop's thread calls it.
#ifndef PS_COORD_ELASTIC_SHARES_H_
#define PS_COORD_ELASTIC_SHARES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data_share.h"
#include "coord/epoch_record.h"
#include "coord/etcd_client.h"
#include "coord/key_wait.h"
#include "coord/registration.h"

namespace ps {

struct ElasticSharesOptions {
  std::string job = "default";
  int worker_id = 0;
  // Sync and SSP: wait at an epoch's start for its workers to be ready.
  bool barrier = true;
  absl::Duration barrier_timeout = absl::Seconds(10);
  // The longest single watch; a wait for an epoch goes on slice by slice.
  absl::Duration wait_slice = absl::Seconds(10);
  std::function<void(const std::string&)> log;  // null: no lines
  // Asked on the calling thread every 0.1 s of every wait (for an epoch,
  // for the workers' data, at the barrier); an error ends the wait with it
  // (the Python package's Ctrl-C; coord/key_wait.h). Null: never.
  std::function<absl::Status()> interrupted;
};

class ElasticShares final : public DataShares {
 public:
  ElasticShares(EtcdClient* etcd, Registration* registration, ElasticSharesOptions options);
  // The shares of the worker `registration` holds in `job`, as ps_worker
  // and ps.torch take them: waiting at each epoch's start unless the job's
  // mode (coord/job_settings.h) is async, every wait at most `ttl` (the
  // members' --coordinator_ttl). With `interrupted`, every wait asks it
  // every 0.1 s. Errors: reading the job's settings.
  static absl::StatusOr<std::unique_ptr<ElasticShares>> ForJob(
      EtcdClient* etcd, Registration* registration, const std::string& job, absl::Duration ttl,
      std::function<void(const std::string&)> log = nullptr,
      std::function<absl::Status()> interrupted = nullptr);

  absl::StatusOr<DataShare> ShareAt(int64_t step, const EpochShape& shape) override;
  absl::StatusOr<DataShare> Next(const DataShare& done, const EpochShape& shape) override;
  bool all_workers() const override { return false; }

 private:
  // The share of `epoch` (which starts at `first_step` unless its record
  // says otherwise) or of the first later epoch that lists this worker.
  absl::StatusOr<DataShare> Enter(int64_t epoch, int64_t first_step, const EpochShape& shape);
  // The record of `epoch`: read, or made from the loaded workers now.
  absl::StatusOr<EpochRecord> Record(int64_t epoch, int64_t first_step);
  // Whether a worker other than this one is ready, in `keys` (the job's).
  bool OtherReady(const KeyMap& keys) const;
  // Waits until the epoch's listed workers are ready or gone.
  absl::Status Barrier(const EpochRecord& record);
  absl::Status SetReady(bool ready);
  void Log(const std::string& line) const;

  EtcdClient* const etcd_;
  Registration* const registration_;
  const ElasticSharesOptions options_;
  const std::string workers_prefix_;
  bool ready_ = false;  // what this worker's key says
};

}  // namespace ps

#endif  // PS_COORD_ELASTIC_SHARES_H_
