// DataShare: the part of an epoch's training data a worker trains on, its
// place among the epoch's workers; DataShares: where the run loop
// (worker/run_loop.h) gets the share of each epoch.
//
// A workload cuts an epoch's examples into `workers` disjoint shares, and
// the worker of share `rank` trains on it from step first_step on: step
// first_step + t is the share's batch t (worker/mlp/data_order.h), for the
// epoch's Workload::StepsPerEpoch(workers) steps. So while the workers of
// an epoch all train it through, each of its examples is trained once.
//
// FixedShares: every epoch is the --num_workers workers', worker w taking
// share w; epoch e starts at step e * StepsPerEpoch(W) (ps_worker without a
// coordinator). ElasticShares (coord/elastic_shares.h): by the job's
// membership in etcd, decided anew at each epoch.
//
// Implementations may block (ElasticShares waits in etcd); not
// thread-safe: the run loop's thread calls them.
#ifndef PS_COMMON_DATA_SHARE_H_
#define PS_COMMON_DATA_SHARE_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"

namespace ps {

struct DataShare {
  int64_t epoch = 0;
  int64_t first_step = 0;  // the epoch's first step
  int rank = 0;            // 0 <= rank < workers
  int workers = 1;         // how many workers share the epoch
};

// What the run loop knows of its workload's epochs.
struct EpochShape {
  // The steps of an epoch shared by `workers` (>= 1) workers; >= 1.
  std::function<int64_t(int workers)> steps;
  int64_t epochs = 0;  // the run ends after this many; 0: not by epochs

  int64_t EndOf(const DataShare& s) const { return s.first_step + steps(s.workers); }
  // Whether `epoch` is past the run's last.
  bool Past(int64_t epoch) const { return epochs > 0 && epoch >= epochs; }
};

class DataShares {
 public:
  virtual ~DataShares() = default;

  // The share of the epoch that holds `step`; when this worker has none
  // there (it joined during that epoch), of the first later epoch where it
  // has one (its first_step > step then), or of the first epoch Past the
  // run's, whichever comes first.
  virtual absl::StatusOr<DataShare> ShareAt(int64_t step, const EpochShape& shape) = 0;
  // The share of the epoch after `done`'s, as ShareAt(shape.EndOf(done)).
  virtual absl::StatusOr<DataShare> Next(const DataShare& done, const EpochShape& shape) = 0;
  // Whether every epoch is shared by all --num_workers workers.
  virtual bool all_workers() const = 0;
};

class FixedShares final : public DataShares {
 public:
  // REQUIRES: 0 <= worker_id < num_workers.
  FixedShares(int worker_id, int num_workers) : worker_id_(worker_id), num_workers_(num_workers) {}

  absl::StatusOr<DataShare> ShareAt(int64_t step, const EpochShape& shape) override {
    const int64_t n = shape.steps(num_workers_);
    return Share(step / n, step / n * n);
  }
  absl::StatusOr<DataShare> Next(const DataShare& done, const EpochShape& shape) override {
    return Share(done.epoch + 1, shape.EndOf(done));
  }
  bool all_workers() const override { return true; }

 private:
  DataShare Share(int64_t epoch, int64_t first_step) const {
    return DataShare{epoch, first_step, worker_id_, num_workers_};
  }

  const int worker_id_;
  const int num_workers_;
};

}  // namespace ps

#endif  // PS_COMMON_DATA_SHARE_H_
