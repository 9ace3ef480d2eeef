#include "server/checkpointer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {

Checkpointer::Checkpointer(CheckpointStore* store, CheckpointerOptions options)
    : store_(store), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
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
    Log(absl::StrCat("shard ", options_.shard_id, ": checkpoint v", state.version,
                     " failed: ", path.status().message()));
    return path;
  }
  last_written_ = state.version;
  Log(absl::StrFormat("shard %d: checkpoint v%d written to %s (%d weights, %.1f ms)",
                      options_.shard_id, state.version, *path, state.weights.size(),
                      absl::ToDoubleMilliseconds(absl::Now() - start)));
  return path;
}

absl::StatusOr<std::string> Checkpointer::WriteNow() {
  absl::MutexLock w(&write_mu_);
  std::optional<ShardState> pending;
  {
    absl::MutexLock l(&mu_);
    pending.swap(pending_);
  }
  if (pending.has_value()) WriteLocked(*pending).IgnoreError();  // logged
  absl::StatusOr<ShardState> state = options_.export_state();
  if (!state.ok()) {
    if (absl::IsFailedPrecondition(state.status())) return std::string();
    Log(absl::StrCat("shard ", options_.shard_id, ": cannot export a checkpoint: ",
                     state.status().message()));
    return state.status();
  }
  if (state->version == last_written_) return std::string();
  return WriteLocked(*state);
}

void Checkpointer::Loop() {
  absl::Time next_periodic = options_.period > absl::ZeroDuration()
                                 ? absl::Now() + options_.period
                                 : absl::InfiniteFuture();
  while (true) {
    std::optional<ShardState> state;
    {
      absl::MutexLock l(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || pending_.has_value();
      };
      mu_.AwaitWithDeadline(absl::Condition(&woken), next_periodic);
      if (stop_) return;
      state.swap(pending_);
    }
    if (state.has_value()) {
      absl::MutexLock w(&write_mu_);
      WriteLocked(*state).IgnoreError();  // logged
    } else if (absl::Now() >= next_periodic) {
      WriteNow().IgnoreError();  // logged
      next_periodic = absl::Now() + options_.period;
    }
  }
}

}  // namespace ps
