// Shard's side that time drives (see shard.h): the leases that requests
// renew (Register, Heartbeat, Touch) and that expire, and the timer's work:
// the alarm that checks the leases and reports stalled sync steps, and the
// message of a wait that ran out. The time is the options' clock's.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/core/shard.h"

namespace ps {

absl::Status Shard::Register(int worker_id, int num_workers) {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  if (num_workers != options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker ", worker_id, " was started with num_workers=", num_workers,
                     " but this server expects num_workers=", options_.num_workers));
  }
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    membership_.MarkSeen(worker_id);
    TouchLocked(worker_id, Now(), &fx);
  }
  Finish(std::move(fx));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Shard::Heartbeat(int worker_id) {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  Effects fx;
  int64_t version;
  {
    absl::MutexLock l(&mu_);
    TouchLocked(worker_id, Now(), &fx);
    version = weights_.version();
  }
  Finish(std::move(fx));
  return version;
}

void Shard::Touch(int worker_id) {
  if (!tracks_requests()) return;
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    TouchLocked(worker_id, Now(), &fx);
  }
  Finish(std::move(fx));
}

void Shard::SetRegisteredWorkers(const std::vector<int>& workers, const std::vector<int>& held) {
  if (!tracks_requests()) return;
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    const absl::Time now = Now();
    OnLeaseEventsLocked(membership_.Registered(workers, now, weights_.version(), held), now, &fx);
  }
  Finish(std::move(fx));
}

void Shard::TouchLocked(int worker_id, absl::Time now, Effects* fx) {
  OnLeaseEventsLocked(membership_.Touch(worker_id, now, weights_.version()), now, fx);
}

void Shard::OnLeaseEventsLocked(LeaseEvents events, absl::Time now, Effects* fx) {
  for (LeaseChange& change : events.changes) {
    if (!change.line.empty()) fx->lines.push_back(std::move(change.line));
    if (change.expired) metrics_->workers_dropped.Add();
    std::vector<std::vector<float>> to_apply;
    if (policy_->SetLive(change.worker, change.live, &to_apply) && weights_.initialized()) {
      ApplyLocked(std::move(to_apply), now, fx);
    }
  }
  // SSP: a drop can move the slowest step, releasing held pulls.
  if (options_.mode == Mode::kSsp && !events.changes.empty()) TakeReadyLocked(fx);
  WakeAt(events.wake_at);
}

void Shard::WakeAt(absl::Time when) const {
  if (when != absl::InfiniteFuture()) waiters_->WakeAt(when);
}

void Shard::OnAlarm(absl::Time now) {
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    // Both are asked even when the alarm was set for the other (or came
    // early): each answers with its next alarm, and the timer keeps only the
    // earliest, so both are set again.
    OnLeaseEventsLocked(membership_.Expire(now, weights_.version()), now, &fx);
    std::optional<std::string> report =
        stalls_.Report(now, weights_.version(), policy_->MissingWorkers());
    if (report.has_value()) fx.lines.push_back(*std::move(report));
    WakeAt(stalls_.next_report());
  }
  Finish(std::move(fx));
}

std::string Shard::WaitTimeoutMessage(int64_t min_version, absl::Duration waited) const {
  absl::MutexLock l(&mu_);
  std::string msg = absl::StrCat("shard ", options_.shard_id, ": gave up after ",
                                 absl::FormatDuration(waited), " waiting for ");
  if (!weights_.initialized()) {
    absl::StrAppend(&msg,
                    "the parameters: worker 0 has not initialized them (is worker 0 running?)");
    return msg;
  }
  const int64_t version = weights_.version();
  absl::StrAppend(&msg, "version ", min_version, "; the shard is at version ", version);
  if (options_.mode == Mode::kSync) {
    absl::StrAppend(&msg, "; step ", version, " is missing gradients from workers [",
                    absl::StrJoin(policy_->MissingWorkers(), ", "), "]");
  }
  if (options_.mode == Mode::kSsp) {
    absl::StrAppend(&msg, "; SSP (--staleness=", options_.staleness, "): worker steps [",
                    absl::StrJoin(policy_->Steps(), ", "), "], held back by workers [",
                    absl::StrJoin(policy_->MissingWorkers(), ", "), "]");
  }
  return msg;
}

}  // namespace ps
