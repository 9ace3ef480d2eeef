#include "server/checkpoint/checkpointer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ps {

Checkpointer::Checkpointer(CheckpointStore* store, CheckpointerOptions options)
    : store_(store), options_(std::move(options)) {
  last_written_ = options_.restored_version;
  last_path_ = options_.restored_path;
  thread_ = std::thread([this] { Loop(); });
}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Checkpointer::RequestWrite(WriteDone done) {
  absl::MutexLock l(&mu_);
  requests_.push_back(std::move(done));
}

void Checkpointer::Offer(ShardState state) {
  absl::MutexLock l(&mu_);
  pending_ = std::move(state);
}

int64_t Checkpointer::last_written_version() const {
  absl::MutexLock l(&write_mu_);
  return last_written_;
}

void Checkpointer::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

absl::StatusOr<std::string> Checkpointer::WriteLocked(const ShardState& state) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> path = store_->Write(state);
  if (!path.ok()) {
    metrics_.writes_failed.Add();
    Log(absl::StrCat("shard ", options_.shard_id, ": checkpoint v", state.version,
                     " failed: ", path.status().message()));
    return path;
  }
  last_written_ = state.version;
  last_path_ = *path;
  const absl::Time end = absl::Now();
  metrics_.write_duration.Record(end - start);
  metrics_.last_written_unix_micros.Set(absl::ToUnixMicros(end));
  Log(absl::StrFormat("shard %d: checkpoint v%d written to %s (%d weights, %.1f ms)",
                      options_.shard_id, state.version, *path, state.weights.size(),
                      absl::ToDoubleMilliseconds(end - start)));
  return path;
}

absl::StatusOr<CheckpointWritten> Checkpointer::WriteNow() {
  absl::MutexLock w(&write_mu_);
  std::optional<ShardState> pending;
  {
    absl::MutexLock l(&mu_);
    pending.swap(pending_);
  }
  if (pending.has_value()) WriteLocked(*pending).IgnoreError();  // logged
  absl::StatusOr<ShardState> state = options_.export_state();
  if (!state.ok()) {
    if (absl::IsFailedPrecondition(state.status())) return state.status();
    Log(absl::StrCat("shard ", options_.shard_id, ": cannot export a checkpoint: ",
                     state.status().message()));
    return state.status();
  }
  if (state->version == last_written_) return CheckpointWritten{last_written_, last_path_, false};
  ASSIGN_OR_RETURN(std::string path, WriteLocked(*state));
  return CheckpointWritten{state->version, std::move(path), true};
}

void Checkpointer::Loop() {
  absl::Time next_periodic = options_.period > absl::ZeroDuration()
                                 ? absl::Now() + options_.period
                                 : absl::InfiniteFuture();
  std::vector<WriteDone> requests;
  while (true) {
    std::optional<ShardState> state;
    {
      absl::MutexLock l(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || pending_.has_value() || !requests_.empty();
      };
      mu_.AwaitWithDeadline(absl::Condition(&woken), next_periodic);
      if (stop_) break;
      requests.swap(requests_);
      state.swap(pending_);
    }
    if (state.has_value()) {
      absl::MutexLock w(&write_mu_);
      WriteLocked(*state).IgnoreError();  // logged
    }
    if (!requests.empty()) {
      absl::StatusOr<CheckpointWritten> result = WriteNow();
      for (WriteDone& done : requests) done(result);
      requests.clear();
    } else if (!state.has_value() && absl::Now() >= next_periodic) {
      WriteNow().IgnoreError();  // logged
      next_periodic = absl::Now() + options_.period;
    }
  }
  // Requests that came with the stop: answered, not dropped.
  {
    absl::MutexLock l(&mu_);
    requests.swap(requests_);
  }
  for (WriteDone& done : requests) {
    done(absl::UnavailableError(
        absl::StrCat("shard ", options_.shard_id, " is shutting down")));
  }
}

}  // namespace ps
