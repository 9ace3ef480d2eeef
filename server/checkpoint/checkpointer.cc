#include "server/checkpoint/checkpointer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_delta.h"

namespace ps {

Checkpointer::Checkpointer(CheckpointStore* store, CheckpointerOptions options)
    : store_(store), options_(std::move(options)), timer_(options_.clock->NewTimer()) {
  last_written_ = options_.restored_version;
  last_path_ = options_.restored_path;
  if (options_.period > absl::ZeroDuration()) {
    timer_->Schedule(options_.clock->Now() + options_.period, [this] { Periodic(); });
  }
}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;  // Periodic schedules no more
  }
  timer_.reset();  // drops what has not run, waits for what runs
  // Requests that came with the stop: answered, not dropped.
  std::vector<WriteDone> requests;
  {
    absl::MutexLock l(&mu_);
    requests.swap(requests_);
  }
  for (WriteDone& done : requests) {
    done(absl::UnavailableError(absl::StrCat("shard ", options_.shard_id, " is shutting down")));
  }
}

void Checkpointer::ScheduleWorkLocked() {
  if (work_scheduled_) return;
  work_scheduled_ = true;
  timer_->Schedule(options_.clock->Now(), [this] { Work(); });
}

void Checkpointer::RequestWrite(WriteDone done) {
  absl::MutexLock l(&mu_);
  requests_.push_back(std::move(done));
  ScheduleWorkLocked();
}

void Checkpointer::Offer(ShardState state) {
  absl::MutexLock l(&mu_);
  // A delta waiting behind another is folded into it; one on another base
  // waits as it is (and is dropped at its write).
  if (!pending_.has_value() || state.delta_base < 0 || !ApplyDelta(state, &*pending_).ok()) {
    pending_ = std::move(state);
  }
  ScheduleWorkLocked();
}

int64_t Checkpointer::last_written_version() const {
  absl::MutexLock l(&write_mu_);
  return last_written_;
}

void Checkpointer::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void Checkpointer::RestartChain() const {
  if (options_.restart_chain) options_.restart_chain();
}

absl::StatusOr<std::string> Checkpointer::WriteLocked(const ShardState& state) {
  const bool delta = state.delta_base >= 0;
  if (delta && (state.delta_base != last_written_ || state.delta_base >= state.version)) {
    const std::string why =
        absl::StrCat("shard ", options_.shard_id, ": checkpoint delta v", state.version, " on v",
                     state.delta_base, " dropped: the newest written is v", last_written_,
                     "; the next checkpoint is full");
    Log(why);
    RestartChain();
    return absl::AbortedError(why);
  }
  const absl::Time start = options_.clock->Now();
  absl::StatusOr<std::string> path = store_->Write(state);
  if (!path.ok()) {
    metrics_.writes_failed.Add();
    Log(absl::StrCat("shard ", options_.shard_id, ": checkpoint v", state.version,
                     " failed: ", path.status().message()));
    RestartChain();  // the deltas to come have no base on disk
    return path;
  }
  last_written_ = state.version;
  last_path_ = *path;
  const absl::Time end = options_.clock->Now();
  metrics_.write_duration.Record(end - start);
  metrics_.last_written_unix_micros.Set(absl::ToUnixMicros(end));
  size_t rows = 0;
  for (const EmbeddingTableState& t : state.tables) rows += t.contents.ids.size();
  Log(
      absl::StrFormat("shard %d: checkpoint v%d written to %s (%d weights, %d table rows%s, "
                      "%.1f ms)",
                      options_.shard_id, state.version, *path, state.weights.size(), rows,
                      delta ? absl::StrCat(", delta on v", state.delta_base) : "",
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
  absl::StatusOr<CheckpointWritten> written = ExportAndWriteLocked();
  // A delta dropped (its base is not on disk) made the chain restart: the
  // export now is full.
  if (absl::IsAborted(written.status())) written = ExportAndWriteLocked();
  return written;
}

absl::StatusOr<CheckpointWritten> Checkpointer::ExportAndWriteLocked() {
  absl::StatusOr<ShardState> state = options_.export_state();
  if (!state.ok()) {
    if (absl::IsFailedPrecondition(state.status())) return state.status();
    Log(absl::StrCat("shard ", options_.shard_id, ": cannot export a checkpoint: ",
                     state.status().message()));
    return state.status();
  }
  if (state->version == last_written_) {
    // The checkpoint of this version is on disk. A full export forgot the
    // shard's changes since its last export: the next is full again.
    if (state->delta_base < 0) RestartChain();
    return CheckpointWritten{last_written_, last_path_, false};
  }
  ASSIGN_OR_RETURN(std::string path, WriteLocked(*state));
  return CheckpointWritten{state->version, std::move(path), true};
}

void Checkpointer::Work() {
  std::optional<ShardState> state;
  std::vector<WriteDone> requests;
  {
    absl::MutexLock l(&mu_);
    work_scheduled_ = false;
    state.swap(pending_);
    requests.swap(requests_);
  }
  if (state.has_value()) {
    absl::MutexLock w(&write_mu_);
    WriteLocked(*state).IgnoreError();  // logged
  }
  if (requests.empty()) return;
  absl::StatusOr<CheckpointWritten> result = WriteNow();
  for (WriteDone& done : requests) done(result);
}

void Checkpointer::Periodic() {
  WriteNow().IgnoreError();  // logged
  absl::MutexLock l(&mu_);
  if (stop_) return;
  timer_->Schedule(options_.clock->Now() + options_.period, [this] { Periodic(); });
}

}  // namespace ps
