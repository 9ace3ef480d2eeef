// WaitUntil: a bounded wait, in tests, for a condition that no event
// announces (a server's counter seen through its API or an RPC, a port
// that frees up).
//
// Calls `condition` on this thread until it returns true, every `interval`
// and once more at the deadline, `timeout` from now on the real clock.
// Returns OK as soon as it holds; DEADLINE_EXCEEDED naming `what` if it
// never did ("gave up after 10s waiting for 3 waiting calls on the server").
//
//   ASSERT_EQ(WaitUntil([&] { return shard->Stats().waiting_calls == 3; },
//                       absl::Seconds(10), "3 waiting calls on the shard"),
//             absl::OkStatus());
//
// Where a test can wait on the event itself (an absl::Notification, a Mutex
// condition) or move the time itself (common/testing/fake_clock.h), it
// should: this is for what it cannot see happen. Test-only.
#ifndef PS_COMMON_TESTING_WAIT_UNTIL_H_
#define PS_COMMON_TESTING_WAIT_UNTIL_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ps {

absl::Status WaitUntil(const std::function<bool()>& condition, absl::Duration timeout,
                       absl::string_view what, absl::Duration interval = absl::Milliseconds(10));

}  // namespace ps

#endif  // PS_COMMON_TESTING_WAIT_UNTIL_H_
