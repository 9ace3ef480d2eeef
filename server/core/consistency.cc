#include "server/core/consistency.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/core/ssp_clocks.h"

namespace ps {

namespace {

// The error for an async or ssp push computed at a version the shard has not
// reached; OK otherwise.
absl::Status CheckPushVersion(absl::string_view mode, int worker_id, int64_t computed_version,
                              int64_t current_version) {
  if (computed_version <= current_version) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(mode, " push from worker ", worker_id, " claims version ", computed_version,
                   " but the shard is only at version ", current_version));
}

// Whether push `seq` repeats one already accepted from its worker, whose
// last accepted seq is *last_seq; records a new one there. Seq 0 (an
// unnumbered push) is never a repeat.
bool IsRepeatedSeq(int64_t seq, int64_t* last_seq) {
  if (seq <= 0) return false;
  if (seq <= *last_seq) return true;
  *last_seq = seq;
  return false;
}

// Keeps one gradient per worker for the current step; when the step closes
// (SyncRule), releases those it has in worker-id order, so the mean is
// summed deterministically.
class SyncPolicy final : public ConsistencyPolicy {
 public:
  SyncPolicy(int num_workers, const SyncRule& rule)
      : quorum_(rule.quorum > 0 ? rule.quorum : num_workers),
        min_workers_(rule.min_workers),
        pending_(num_workers),
        received_(num_workers, false),
        live_(num_workers, true),
        last_step_(num_workers, -1) {}

  Mode mode() const override { return Mode::kSync; }

  absl::StatusOr<PushVerdict> OnPush(int worker_id, int64_t computed_version, int64_t /*seq*/,
                                     int64_t current_version, std::vector<float> grad,
                                     std::vector<std::vector<float>>* to_apply) override {
    to_apply->clear();
    if (computed_version > current_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sync push from worker ", worker_id, " is for step ", computed_version,
          " but the shard is at step ", current_version));
    }
    PushVerdict v;
    if (computed_version < current_version) {
      // A closed step: this worker's gradient was in it, or it was not.
      v.outcome = last_step_[worker_id] >= computed_version ? PushOutcome::kDuplicate
                                                            : PushOutcome::kDropped;
      return v;
    }
    if (received_[worker_id]) {
      v.outcome = PushOutcome::kDuplicate;
      return v;
    }
    received_[worker_id] = true;
    pending_[worker_id] = std::move(grad);
    last_step_[worker_id] = current_version;
    ++count_;
    v.apply = TryClose(to_apply);
    return v;
  }

  bool SetLive(int worker_id, bool live, std::vector<std::vector<float>>* to_apply) override {
    to_apply->clear();
    live_[worker_id] = live;
    return TryClose(to_apply);
  }

  int64_t PullReadyVersion(int /*worker_id*/, int64_t min_version) const override {
    return min_version;
  }

  std::vector<int> MissingWorkers() const override {
    std::vector<int> missing;
    for (size_t w = 0; w < received_.size(); ++w) {
      if (!received_[w] && live_[w]) missing.push_back(static_cast<int>(w));
    }
    return missing;
  }

  std::vector<int64_t> LastSeqs() const override { return {}; }
  void SetLastSeqs(const std::vector<int64_t>& /*seqs*/) override {}

 private:
  // Closes the step if its rule is met: hands the gradients over in
  // worker-id order and starts the next step empty.
  bool TryClose(std::vector<std::vector<float>>* to_apply) {
    if (count_ == 0) return false;
    bool all_live_in = true;
    for (size_t w = 0; w < received_.size(); ++w) {
      if (live_[w] && !received_[w]) all_live_in = false;
    }
    if (count_ < quorum_ && !(all_live_in && count_ >= min_workers_)) return false;
    for (size_t w = 0; w < received_.size(); ++w) {
      if (received_[w]) to_apply->push_back(std::move(pending_[w]));
    }
    pending_.assign(received_.size(), {});
    received_.assign(received_.size(), false);
    count_ = 0;
    return true;
  }

  const int quorum_;
  const int min_workers_;
  std::vector<std::vector<float>> pending_;  // by worker id
  std::vector<bool> received_;               // by worker id
  std::vector<bool> live_;                   // by worker id
  // By worker id: the last step whose gradient was accepted (-1: none).
  std::vector<int64_t> last_step_;
  int count_ = 0;  // number of true entries in received_
};

// Releases every gradient at once; drops a repeated push seq.
class AsyncPolicy final : public ConsistencyPolicy {
 public:
  explicit AsyncPolicy(int num_workers) : last_seq_(num_workers, 0) {}

  Mode mode() const override { return Mode::kAsync; }

  absl::StatusOr<PushVerdict> OnPush(int worker_id, int64_t computed_version, int64_t seq,
                                     int64_t current_version, std::vector<float> grad,
                                     std::vector<std::vector<float>>* to_apply) override {
    absl::Status s = CheckPushVersion("async", worker_id, computed_version, current_version);
    if (!s.ok()) return s;
    to_apply->clear();
    PushVerdict v;
    if (IsRepeatedSeq(seq, &last_seq_[worker_id])) {
      v.outcome = PushOutcome::kDuplicate;
      return v;
    }
    to_apply->push_back(std::move(grad));
    v.apply = true;
    return v;
  }

  bool SetLive(int, bool, std::vector<std::vector<float>>* to_apply) override {
    to_apply->clear();
    return false;
  }

  int64_t PullReadyVersion(int /*worker_id*/, int64_t min_version) const override {
    return min_version;
  }

  std::vector<int> MissingWorkers() const override { return {}; }

  std::vector<int64_t> LastSeqs() const override { return last_seq_; }
  void SetLastSeqs(const std::vector<int64_t>& seqs) override {
    for (size_t w = 0; w < seqs.size() && w < last_seq_.size(); ++w) last_seq_[w] = seqs[w];
  }

 private:
  std::vector<int64_t> last_seq_;  // by worker id
};

// Applies every gradient as it arrives (dropping a repeated push seq, as
// AsyncPolicy does) and holds the pulls of workers too far ahead
// (SspClocks).
class SspPolicy final : public ConsistencyPolicy {
 public:
  SspPolicy(int num_workers, int staleness)
      : clocks_(num_workers, staleness), last_seq_(num_workers, 0) {}

  Mode mode() const override { return Mode::kSsp; }

  absl::StatusOr<PushVerdict> OnPush(int worker_id, int64_t computed_version, int64_t seq,
                                     int64_t current_version, std::vector<float> grad,
                                     std::vector<std::vector<float>>* to_apply) override {
    absl::Status s = CheckPushVersion("ssp", worker_id, computed_version, current_version);
    if (!s.ok()) return s;
    to_apply->clear();
    version_ = current_version;
    PushVerdict v;
    if (IsRepeatedSeq(seq, &last_seq_[worker_id])) {
      v.outcome = PushOutcome::kDuplicate;
      return v;
    }
    version_ = current_version + 1;
    v.step_staleness = clocks_.OnPush(worker_id, seq, computed_version, version_);
    to_apply->push_back(std::move(grad));
    v.apply = true;
    return v;
  }

  bool SetLive(int worker_id, bool live, std::vector<std::vector<float>>* to_apply) override {
    to_apply->clear();
    clocks_.SetLive(worker_id, live, version_);
    return false;
  }

  int64_t PullReadyVersion(int /*worker_id*/, int64_t min_version) const override {
    return min_version;
  }
  int64_t PullNeedsStep(int worker_id) const override { return clocks_.PullNeeds(worker_id); }
  int64_t SlowestStep() const override { return clocks_.Slowest(); }
  std::vector<int64_t> Steps() const override { return clocks_.clocks(); }

  std::vector<int> MissingWorkers() const override { return clocks_.HoldingBack(); }

  std::vector<int64_t> LastSeqs() const override { return last_seq_; }
  void SetLastSeqs(const std::vector<int64_t>& seqs) override {
    for (size_t w = 0; w < seqs.size() && w < last_seq_.size(); ++w) last_seq_[w] = seqs[w];
    clocks_.Reset(last_seq_, version_);
  }

 private:
  SspClocks clocks_;
  std::vector<int64_t> last_seq_;  // by worker id
  // The shard's version as of the last push offered (the policy of a
  // restored shard starts at 0: see SspClocks on staleness).
  int64_t version_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> CreateConsistencyPolicy(
    Mode mode, int num_workers, const SyncRule& rule, int staleness) {
  if (num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1, got ", num_workers));
  }
  switch (mode) {
    case Mode::kSync:
      if (rule.quorum < 0 || rule.quorum > num_workers) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sync_quorum must be in [1, num_workers=", num_workers, "] (0: all), got ",
            rule.quorum));
      }
      if (rule.min_workers < 1 || rule.min_workers > num_workers) {
        return absl::InvalidArgumentError(absl::StrCat(
            "min_workers must be in [1, num_workers=", num_workers, "], got ", rule.min_workers));
      }
      return std::unique_ptr<ConsistencyPolicy>(new SyncPolicy(num_workers, rule));
    case Mode::kAsync:
      return std::unique_ptr<ConsistencyPolicy>(new AsyncPolicy(num_workers));
    case Mode::kSsp:
      if (staleness < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--staleness must be >= 0, got ", staleness));
      }
      return std::unique_ptr<ConsistencyPolicy>(new SspPolicy(num_workers, staleness));
  }
  return absl::InvalidArgumentError(absl::StrCat("no consistency policy for mode ",
                                                 ModeName(mode), " (known: ", KnownModeNames(),
                                                 ")"));
}

}  // namespace ps
