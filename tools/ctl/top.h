// ps_ctl top: a live view of the shards, redrawn every --interval. Polls
// every shard's GetStatus at once (client/admin_client.h StatusPoller) and
// shows TopView's table (tools/ctl/top_view.h): on a terminal in place (ANSI
// clear and home before each table), elsewhere as plain lines, one block
// per poll, each opened by a "ps_ctl top: poll N at TIME" line.
//
// RunTop owns no thread and reads no signal: the caller hands it a
// Notification to stop on (ps_ctl's Ctrl-C handler, StopOnSignals) and the
// waits between polls end as soon as it is notified. Not thread-safe; one
// RunTop at a time per poller.
#ifndef PS_TOOLS_CTL_TOP_H_
#define PS_TOOLS_CTL_TOP_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/admin_client.h"

namespace ps {

// `ps_ctl top`'s flags.
struct TopOptions {
  // --interval: seconds between polls; also each poll's deadline, past which
  // a shard shows as DOWN. > 0 and at most an hour; default 1.
  absl::Duration interval = absl::Seconds(1);
  // --iterations: polls before exiting; 0 = until Ctrl-C (or SIGTERM).
  int64_t iterations = 0;

  // INVALID_ARGUMENT naming the flag of a value out of range.
  absl::Status Validate() const;
};

// The options from --interval and --iterations, validated.
absl::StatusOr<TopOptions> TopOptionsFromFlags();

// Polls `poller` (whose servers are `servers`, in order) and writes each
// table to `out`, until options.iterations polls are done or `stop` is
// notified (then it returns within a poll's deadline). `redraw`: clear the
// screen before each table (a terminal). OK then; but a shard that refuses
// the caller's identity (PERMISSION_DENIED, UNAUTHENTICATED: a worker's
// certificate, say) ends it after that poll's table with its error, as
// waiting would not change the answer. Shards that are down do not.
absl::Status RunTop(StatusPoller& poller, const std::vector<std::string>& servers,
               const TopOptions& options, bool redraw, std::ostream& out,
               absl::Notification& stop);

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it
// starts later; call it before any thread exists) and starts a thread that
// waits for either and then notifies `stop`. The thread ends when a signal
// came or when the returned object is destroyed; `stop` must outlive it.
class StopOnSignals {
 public:
  explicit StopOnSignals(absl::Notification& stop);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  struct Waiter;
  std::unique_ptr<Waiter> waiter_;
};

}  // namespace ps

#endif  // PS_TOOLS_CTL_TOP_H_
