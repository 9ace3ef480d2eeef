#include "tools/ctl/top.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flag_lists.h"
#include "tools/ctl/top_view.h"

ABSL_FLAG(double, interval, 1,
          "top: seconds between polls, and each poll's deadline (a shard that does not answer "
          "within it shows as DOWN).");
ABSL_FLAG(int64_t, iterations, 0, "top: polls before exiting; 0 = until Ctrl-C.");

namespace ps {

absl::Status TopOptions::Validate() const {
  if (!(interval > absl::ZeroDuration()) || interval > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--interval must be > 0 and at most 3600 seconds, got ", absl::FormatDuration(interval)));
  }
  if (iterations < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--iterations must be >= 0 (0: until Ctrl-C), got ", iterations));
  }
  return absl::OkStatus();
}

absl::StatusOr<TopOptions> TopOptionsFromFlags() {
  TopOptions options;
  absl::StatusOr<absl::Duration> interval =
      SecondsFromFlag("interval", absl::GetFlag(FLAGS_interval));
  if (!interval.ok()) return interval.status();
  options.interval = *interval;
  options.iterations = absl::GetFlag(FLAGS_iterations);
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  return options;
}

absl::Status RunTop(StatusPoller& poller, const std::vector<std::string>& servers,
               const TopOptions& options, bool redraw, std::ostream& out,
               absl::Notification& stop) {
  TopView view;
  int64_t polls = 0;
  absl::Time next = absl::Now();
  while (!stop.HasBeenNotified()) {
    TopPoll poll;
    poll.time = absl::Now();
    poll.servers = servers;
    poll.replies = poller.Poll(options.interval);
    absl::Status refused;
    for (const absl::StatusOr<v1::StatusResponse>& reply : poll.replies) {
      if (absl::IsPermissionDenied(reply.status()) || absl::IsUnauthenticated(reply.status())) {
        refused = reply.status();
      }
    }
    const absl::Time polled_at = poll.time;
    view.Add(std::move(poll));
    ++polls;
    if (redraw) out << "\033[H\033[2J";
    out << "ps_ctl top: poll " << polls << " at "
        << absl::FormatTime("%Y-%m-%d %H:%M:%S", polled_at, absl::LocalTimeZone()) << ", every "
        << absl::FormatDuration(options.interval) << (redraw ? " (Ctrl-C quits)" : "") << "\n";
    for (const std::string& line : view.Render()) out << line << "\n";
    if (!redraw) out << "\n";
    out.flush();
    if (!refused.ok()) return refused;
    if (options.iterations > 0 && polls >= options.iterations) break;
    next += options.interval;
    const absl::Time now = absl::Now();
    if (next < now) next = now;  // a slow poll: go on at once, not in a burst
    stop.WaitForNotificationWithDeadline(next);
  }
  return absl::OkStatus();
}

struct StopOnSignals::Waiter {
  sigset_t signals;
  std::atomic<bool> done{false};  // the thread's wait is over
  std::thread thread;
};

StopOnSignals::StopOnSignals(absl::Notification& stop) : waiter_(std::make_unique<Waiter>()) {
  sigemptyset(&waiter_->signals);
  sigaddset(&waiter_->signals, SIGINT);
  sigaddset(&waiter_->signals, SIGTERM);
  sigaddset(&waiter_->signals, SIGUSR1);  // from the destructor: end the thread
  pthread_sigmask(SIG_BLOCK, &waiter_->signals, nullptr);
  Waiter* waiter = waiter_.get();
  waiter_->thread = std::thread([waiter, &stop] {
    int sig = 0;
    // No deadline: the destructor's SIGUSR1 ends the wait at the latest.
    sigwait(&waiter->signals, &sig);
    waiter->done.store(true);
    if (sig != SIGUSR1) stop.Notify();
  });
}

StopOnSignals::~StopOnSignals() {
  // A thread that is done, or about to be, ignores the SIGUSR1 (it stays
  // blocked); the handle is valid until the join.
  if (!waiter_->done.load()) pthread_kill(waiter_->thread.native_handle(), SIGUSR1);
  waiter_->thread.join();
}

}  // namespace ps
