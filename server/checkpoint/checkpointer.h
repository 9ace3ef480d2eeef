// Checkpointer: writes a shard's checkpoints on a timer of its own, so
// that the push path only hands over a copy of the state.
//
// States arrive three ways:
//   - Offer: the shard's by-version exports (ShardOptions::on_checkpoint);
//     if the writer is still busy with an earlier one, the newer replaces
//     the one waiting (the written set then skips a version), or, if the
//     newer is a delta, is folded into it (server/checkpoint/
//     checkpoint_delta.h: no delta's rows are skipped);
//   - every `period` (> 0), the timer exports the shard itself (through
//     `export_state`) if its version moved since the last write; such
//     checkpoints are not a consistent cut across sync shards;
//   - WriteNow: an export written on the caller's thread (at shutdown), or
//     RequestWrite: the same on the timer, for an RPC that must not block
//     (ps_ctl checkpoint).
// Each write goes through the CheckpointStore (atomic, durable, pruned), and
// each result is logged as one line: "shard S: checkpoint vV written to PATH
// (W weights, R table rows, T ms)" (", delta on vB" for a delta) or why it
// failed; a failed write leaves the previous checkpoints in place and
// training goes on.
//
// Incremental checkpoints: a delta (ShardState::delta_base) is written only
// on the checkpoint written last (its base); one that is not (a write
// before it failed, or the writer skipped its base) is dropped with a log
// line. After a failed write or a dropped delta the Checkpointer calls
// restart_chain, so that the shard's next export is full; WriteNow then
// exports again at once.
//
// Time is passed in: the period and the write times are read from
// options.clock, and the writes run on a timer it makes (common/clock.h).
// With RealClock() that timer is the writer thread; with a FakeClock
// (common/testing/fake_clock.h) nothing is written until the test advances
// the clock (RunDue for what was offered or requested, past a period for a
// periodic write), and then on the test's thread.
//
// Thread-safe. Owns its timer; the destructor writes nothing more, waits
// for a write under way, and answers the requests left with UNAVAILABLE.
// Borrows the store and the clock, which must outlive it.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINTER_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/core/shard_state.h"
#include "server/core/stats.h"

namespace ps {

// The newest checkpoint after a WriteNow.
struct CheckpointWritten {
  int64_t version = 0;
  std::string path;
  bool written = false;  // false: the newest file already held this version
};

struct CheckpointerOptions {
  int shard_id = 0;  // for the log lines
  // Time-based checkpoints: at most this far apart; zero: none.
  absl::Duration period = absl::ZeroDuration();
  // The shard's current state (Shard::ExportState); FAILED_PRECONDITION
  // before its parameters exist, which is not logged.
  std::function<absl::StatusOr<ShardState>()> export_state;
  // Makes the shard's next export full (Shard::RestartCheckpointChain);
  // null: none needed (every export full).
  std::function<void()> restart_chain;
  // Receives each log line, without a newline; null drops them.
  std::function<void(absl::string_view line)> log;
  // The checkpoint the shard was restored from, if any: its version counts
  // as written, so an unchanged shard is not written again.
  int64_t restored_version = -1;
  std::string restored_path;
  // The time of the period and of the write metrics, and the maker of the
  // timer the writes run on. Borrowed: must outlive the Checkpointer.
  Clock* clock = RealClock();
};

class Checkpointer {
 public:
  Checkpointer(CheckpointStore* store, CheckpointerOptions options);
  ~Checkpointer();

  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Queues `state` for the timer.
  void Offer(ShardState state);

  // Writes the state still waiting from Offer, if any, then exports the
  // shard and writes it, unless the newest written version is the shard's
  // already. FAILED_PRECONDITION (not logged) before the shard has
  // parameters; a write's error is logged and returned.
  absl::StatusOr<CheckpointWritten> WriteNow();

  // WriteNow on the timer; `done` runs there with its result (or with
  // UNAVAILABLE, on the destructor's thread, if the Checkpointer goes first).
  using WriteDone = std::function<void(absl::StatusOr<CheckpointWritten>)>;
  void RequestWrite(WriteDone done);

  // The version of the newest checkpoint written; -1 before the first.
  int64_t last_written_version() const;

  // Write durations, failures, the last good write's time; any thread.
  const CheckpointMetrics& metrics() const { return metrics_; }

 private:
  // On the timer: writes what was offered, then answers the requests.
  void Work() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // On the timer, every period: WriteNow, and the next period.
  void Periodic() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Makes the timer run Work, unless it will already.
  void ScheduleWorkLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `state` and records it; logs the outcome.
  // ABORTED, writing nothing, for a delta not on the last written
  // checkpoint.
  absl::StatusOr<std::string> WriteLocked(const ShardState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // WriteNow's export and write, once.
  absl::StatusOr<CheckpointWritten> ExportAndWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void RestartChain() const;
  void Log(const std::string& line) const;

  CheckpointStore* const store_;  // not owned
  const CheckpointerOptions options_;

  // Serializes writes (the timer's and WriteNow's); held while writing.
  mutable absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int64_t last_written_ ABSL_GUARDED_BY(write_mu_) = -1;
  std::string last_path_ ABSL_GUARDED_BY(write_mu_);

  mutable absl::Mutex mu_;
  std::optional<ShardState> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<WriteDone> requests_ ABSL_GUARDED_BY(mu_);
  bool work_scheduled_ ABSL_GUARDED_BY(mu_) = false;  // Work is on the timer
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  CheckpointMetrics metrics_;
  // Last: destroyed first (by the destructor), before what its work uses.
  std::unique_ptr<Timer> timer_;
};

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINTER_H_
