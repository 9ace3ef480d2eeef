// StallReporter: the log lines of a sync step that waits long for some
// workers' gradients.
//
// The rule. Once the open step holds at least one worker's gradient but not
// all, and `report_after` has passed since its first push, it is reported
//   shard 0: step 17 has waited 10.0s for gradients from workers [2] (received from [0, 1])
// and again each time its wait has doubled (at 2x, 4x, 8x ... that time)
// while the step is still open, each line giving the total wait since the
// first push, in seconds with one decimal; a check that comes late skips
// the reports it missed. A step that was reported logs, when it closes,
//   shard 0: step 17 completed after 34.2s
// A step with no push yet is never reported (nobody has started it), nor is
// one closed by its own first push (async mode, where every push is applied
// at once, or a quorum of one). report_after zero or negative: no reports.
//
// Time is passed in (`now`) and nothing here sleeps or owns a thread. The
// owner keeps an alarm at next_report() and calls Report when it rings;
// calling Report early is harmless. The lines are returned, not written.
//
// Not thread-safe: the owner calls it under its lock.
#ifndef PS_SERVER_CORE_STALL_REPORTER_H_
#define PS_SERVER_CORE_STALL_REPORTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ps {

class StallReporter {
 public:
  // `shard_id` names the shard in the lines; workers are 0..num_workers-1.
  StallReporter(int shard_id, int num_workers, absl::Duration report_after);

  // A push at `now` was accepted into the open step and did not close it.
  // The step's first such push opens its clock. Returns when the first
  // report is due, to set an alarm for; InfiniteFuture if the clock was open
  // already or reports are off.
  absl::Time OnPushKept(absl::Time now);

  // The open step closed at `now` (its version was `step`): the completion
  // line if it was reported, and the clock is reset for the next step.
  std::optional<std::string> OnStepClosed(absl::Time now, int64_t step);

  // The open step was discarded (its gradients dropped, e.g. the weights
  // were replaced): the clock is reset, nothing is logged.
  void Reset();

  // The report due at `now`, if any, for step `step` whose gradients from
  // `missing` (ascending) have not arrived; then the next report is due at
  // twice the wait. nullopt (and nothing changes) before next_report().
  std::optional<std::string> Report(absl::Time now, int64_t step,
                                    const std::vector<int>& missing);

  // How long the open step has waited at `now` since its first kept push;
  // zero if none is open.
  absl::Duration OpenFor(absl::Time now) const {
    return opened_ == absl::InfiniteFuture() ? absl::ZeroDuration() : now - opened_;
  }

  // When the next report is due; InfiniteFuture if none is.
  absl::Time next_report() const { return next_report_; }

 private:
  const int shard_id_;
  const int num_workers_;
  const absl::Duration report_after_;
  // When the open step got its first push; InfiniteFuture if none is open.
  absl::Time opened_ = absl::InfiniteFuture();
  absl::Time next_report_ = absl::InfiniteFuture();
  int reports_ = 0;  // logged for the open step so far
};

}  // namespace ps

#endif  // PS_SERVER_CORE_STALL_REPORTER_H_
