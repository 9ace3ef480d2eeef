#include "server/consistency.h"

#include "absl/strings/str_cat.h"

namespace ps {

namespace {

// Keeps one gradient per worker for the current step; when all W are in,
// releases them in worker-id order, so the mean is summed deterministically.
class SyncPolicy final : public ConsistencyPolicy {
 public:
  explicit SyncPolicy(int num_workers) : pending_(num_workers), received_(num_workers, false) {}

  Mode mode() const override { return Mode::kSync; }

  absl::StatusOr<bool> OnPush(int worker_id, int64_t computed_version, int64_t current_version,
                              std::vector<float> grad,
                              std::vector<std::vector<float>>* to_apply) override {
    to_apply->clear();
    if (computed_version != current_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sync push from worker ", worker_id, " is for step ", computed_version,
          " but the shard is at step ", current_version));
    }
    if (received_[worker_id]) {
      return absl::AlreadyExistsError(absl::StrCat(
          "worker ", worker_id, " already pushed its gradient for step ", current_version));
    }
    received_[worker_id] = true;
    pending_[worker_id] = std::move(grad);
    ++count_;
    if (count_ < static_cast<int>(pending_.size())) return false;

    // All in: hand them over in worker-id order.
    *to_apply = std::move(pending_);
    pending_.assign(received_.size(), {});
    received_.assign(received_.size(), false);
    count_ = 0;
    return true;
  }

  int64_t PullReadyVersion(int /*worker_id*/, int64_t min_version) const override {
    return min_version;
  }

  std::vector<int> MissingWorkers() const override {
    std::vector<int> missing;
    for (size_t w = 0; w < received_.size(); ++w) {
      if (!received_[w]) missing.push_back(static_cast<int>(w));
    }
    return missing;
  }

 private:
  std::vector<std::vector<float>> pending_;  // by worker id
  std::vector<bool> received_;               // by worker id
  int count_ = 0;                            // number of true entries in received_
};

// Releases every gradient at once.
class AsyncPolicy final : public ConsistencyPolicy {
 public:
  Mode mode() const override { return Mode::kAsync; }

  absl::StatusOr<bool> OnPush(int worker_id, int64_t computed_version, int64_t current_version,
                              std::vector<float> grad,
                              std::vector<std::vector<float>>* to_apply) override {
    if (computed_version > current_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "async push from worker ", worker_id, " claims version ", computed_version,
          " but the shard is only at version ", current_version));
    }
    to_apply->clear();
    to_apply->push_back(std::move(grad));
    return true;
  }

  int64_t PullReadyVersion(int /*worker_id*/, int64_t min_version) const override {
    return min_version;
  }

  std::vector<int> MissingWorkers() const override { return {}; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> CreateConsistencyPolicy(Mode mode,
                                                                           int num_workers) {
  if (num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1, got ", num_workers));
  }
  switch (mode) {
    case Mode::kSync:
      return std::unique_ptr<ConsistencyPolicy>(new SyncPolicy(num_workers));
    case Mode::kAsync:
      return std::unique_ptr<ConsistencyPolicy>(new AsyncPolicy());
  }
  return absl::InvalidArgumentError(absl::StrCat("no consistency policy for mode ",
                                                 ModeName(mode), " (known: ", KnownModeNames(),
                                                 ")"));
}

}  // namespace ps
