#include "coord/elastic_shares.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/mode.h"
#include "common/status_macros.h"
#include "coord/job_settings.h"
#include "coord/key_wait.h"

namespace ps {

ElasticShares::ElasticShares(EtcdClient* etcd, Registration* registration,
                             ElasticSharesOptions options)
    : etcd_(etcd),
      registration_(registration),
      options_(std::move(options)),
      workers_prefix_(RolePrefix(options_.job, "workers")) {}

absl::StatusOr<std::unique_ptr<ElasticShares>> ElasticShares::ForJob(
    EtcdClient* etcd, Registration* registration, const std::string& job, absl::Duration ttl,
    std::function<void(const std::string&)> log, std::function<absl::Status()> interrupted) {
  ASSIGN_OR_RETURN(const JobSettings settings, ReadJobSettings(etcd, job));
  ElasticSharesOptions o;
  o.job = job;
  o.worker_id = registration->id();
  o.barrier = settings.mode != ModeName(Mode::kAsync);
  o.barrier_timeout = o.wait_slice = ttl;
  o.log = std::move(log);
  o.interrupted = std::move(interrupted);
  return std::make_unique<ElasticShares>(etcd, registration, std::move(o));
}

void ElasticShares::Log(const std::string& line) const {
  if (options_.log) options_.log(absl::StrCat("worker ", options_.worker_id, ": ", line));
}

absl::StatusOr<DataShare> ElasticShares::ShareAt(int64_t step, const EpochShape& shape) {
  ASSIGN_OR_RETURN(const std::vector<EpochRecord> records, ListEpochs(etcd_, options_.job));
  // The last epoch that started at or before `step`.
  const EpochRecord* at = nullptr;
  for (const EpochRecord& r : records) {
    if (r.first_step <= step) at = &r;
  }
  if (at == nullptr) return Enter(records.empty() ? 0 : records.front().epoch, step, shape);
  const int64_t end = at->first_step + shape.steps(static_cast<int>(at->workers.size()));
  if (step < end) return Enter(at->epoch, at->first_step, shape);
  // Past the last record: the next epoch starts at its end, or here if a
  // gap (a checkpoint restored from elsewhere) left steps without a record.
  return Enter(at->epoch + 1, end, shape);
}

absl::StatusOr<DataShare> ElasticShares::Next(const DataShare& done, const EpochShape& shape) {
  return Enter(done.epoch + 1, shape.EndOf(done), shape);
}

bool ElasticShares::OtherReady(const KeyMap& keys) const {
  for (auto it = keys.lower_bound(workers_prefix_);
       it != keys.end() && absl::StartsWith(it->first, workers_prefix_); ++it) {
    int id = 0;
    if (MemberIdOfKey(it->first, workers_prefix_, &id) && id != options_.worker_id &&
        WorkerReady(it->second)) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<EpochRecord> ElasticShares::Record(int64_t epoch, int64_t first_step) {
  // Workers still loading their data are waited for (a while), so that
  // workers started together share the first epoch.
  KeyMap workers;
  ASSIGN_OR_RETURN(const bool loaded, WaitForKeys(
                                          etcd_, workers_prefix_,
                                          [&](const KeyMap& keys) {
                                            workers = keys;
                                            for (const auto& [key, value] : keys) {
                                              if (!WorkerLoaded(value)) return false;
                                            }
                                            return true;
                                          },
                                          absl::Now() + options_.barrier_timeout,
                                          KeyWaitInterrupt{options_.interrupted}));
  (void)loaded;  // those still loading take a share of a later epoch
  EpochRecord proposed;
  proposed.epoch = epoch;
  proposed.first_step = first_step;
  for (const auto& [key, value] : workers) {
    int id = 0;
    if (MemberIdOfKey(key, workers_prefix_, &id) &&
        (id == options_.worker_id || WorkerLoaded(value))) {
      proposed.workers.push_back(id);
    }
  }
  if (proposed.RankOf(options_.worker_id) < 0) {
    // Its key is away (etcd lost it, and the renewal puts it back soon):
    // it still trains this epoch, as the worker that reached it.
    proposed.workers.push_back(options_.worker_id);
    std::sort(proposed.workers.begin(), proposed.workers.end());
  }
  return ClaimEpoch(etcd_, options_.job, proposed);
}

absl::StatusOr<DataShare> ElasticShares::Enter(int64_t epoch, int64_t first_step,
                                               const EpochShape& shape) {
  bool logged_wait = false;
  while (!shape.Past(epoch)) {
    const std::string key = EpochKey(options_.job, epoch);
    ASSIGN_OR_RETURN(const std::optional<EtcdClient::KeyValue> stored, etcd_->Get(key));
    const bool exists = stored.has_value();
    if (!exists && !ready_) {
      // A worker that joins waits for the epoch's workers to make its
      // record, unless none is left to.
      const std::string job_prefix = JobPrefix(options_.job);
      bool made = false;
      ASSIGN_OR_RETURN(const bool met, WaitForKeys(
                                           etcd_, job_prefix,
                                           [&](const KeyMap& keys) {
                                             made = keys.count(key) > 0;
                                             return made || !OtherReady(keys);
                                           },
                                           absl::Now() + options_.wait_slice,
                                           KeyWaitInterrupt{options_.interrupted}));
      if (!met) {
        if (!logged_wait) {
          Log(absl::StrCat("waiting for epoch ", epoch, " (step ", first_step,
                           ") to take a share of the data"));
          logged_wait = true;
        }
        continue;
      }
      if (made) continue;  // read it above
    }
    ASSIGN_OR_RETURN(const EpochRecord record,
                     exists ? ParseEpochRecord(epoch, stored->value) : Record(epoch, first_step));
    const int rank = record.RankOf(options_.worker_id);
    if (rank < 0) {
      if (ready_ || !logged_wait) {
        Log(absl::StrCat("epoch ", epoch, " (", record.Format(),
                         ") does not list this worker; it takes a share from epoch ", epoch + 1,
                         " on"));
        logged_wait = true;
      }
      if (ready_) RETURN_IF_ERROR(SetReady(false));
      epoch += 1;
      first_step = record.first_step + shape.steps(static_cast<int>(record.workers.size()));
      continue;
    }
    if (!ready_) RETURN_IF_ERROR(SetReady(true));
    if (options_.barrier) RETURN_IF_ERROR(Barrier(record));
    Log(absl::StrCat("epoch ", epoch, ": share ", rank, " of ", record.workers.size(),
                     " from step ", record.first_step, " (workers ",
                     absl::StrJoin(record.workers, ","), ")"));
    return DataShare{epoch, record.first_step, rank, static_cast<int>(record.workers.size())};
  }
  return DataShare{epoch, first_step, 0, 1};
}

absl::Status ElasticShares::Barrier(const EpochRecord& record) {
  std::vector<int> late;
  ASSIGN_OR_RETURN(const bool met, WaitForKeys(
                                       etcd_, workers_prefix_,
                                       [&](const KeyMap& keys) {
                                         late.clear();
                                         for (int w : record.workers) {
                                           auto it =
                                               keys.find(MemberKey(options_.job, "workers", w));
                                           if (it != keys.end() && !WorkerReady(it->second)) {
                                             late.push_back(w);
                                           }
                                         }
                                         return late.empty();
                                       },
                                       absl::Now() + options_.barrier_timeout,
                                       KeyWaitInterrupt{options_.interrupted}));
  if (!met) {
    Log(absl::StrCat("epoch ", record.epoch, ": workers [", absl::StrJoin(late, ","),
                     "] are not ready after ", absl::FormatDuration(options_.barrier_timeout),
                     "; going on without waiting for them"));
  }
  return absl::OkStatus();
}

absl::Status ElasticShares::SetReady(bool ready) {
  RETURN_IF_ERROR(ready ? MarkWorkerReady(registration_) : MarkWorkerWaiting(registration_));
  ready_ = ready;
  return absl::OkStatus();
}

}  // namespace ps
