// The real Clock's Timer: its own thread, the earliest time first, Cancel,
// and a destructor that drops what has not run. (Time order and ties are
// the TimerQueue's, tested here too without a thread.)
#include "common/clock.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/timer_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;

TEST(TimerQueue, TakesByTimeThenByOrderOfAdding) {
  TimerQueue q;
  const absl::Time t = absl::UnixEpoch();
  std::vector<int> order;
  q.Add(t + absl::Seconds(2), [&] { order.push_back(2); });
  const Timer::Id removed = q.Add(t + absl::Seconds(1), [&] { order.push_back(-1); });
  q.Add(t + absl::Seconds(1), [&] { order.push_back(1); });
  q.Add(t + absl::Seconds(1), [&] { order.push_back(11); });
  EXPECT_TRUE(q.Remove(removed));
  EXPECT_FALSE(q.Remove(removed));
  EXPECT_EQ(q.next(), t + absl::Seconds(1));
  while (auto e = q.TakeDue(t + absl::Seconds(1))) e->fn();
  EXPECT_THAT(order, ElementsAre(1, 11));
  EXPECT_EQ(q.next(), t + absl::Seconds(2));
  q.Clear();
  EXPECT_EQ(q.next(), absl::InfiniteFuture());
  EXPECT_FALSE(q.TakeDue(absl::InfiniteFuture()).has_value());
}

TEST(RealClock, TimerRunsAnEarlierTimeScheduledLaterFirstOnItsThread) {
  std::unique_ptr<Timer> timer = RealClock()->NewTimer();
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification both;
  const absl::Time now = RealClock()->Now();
  timer->Schedule(now + absl::Milliseconds(50), [&] {
    absl::MutexLock l(&mu);
    order.push_back(2);
    both.Notify();
  });
  timer->Schedule(now, [&] {  // while the thread sleeps until the first
    absl::MutexLock l(&mu);
    order.push_back(1);
  });
  ASSERT_TRUE(both.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::MutexLock l(&mu);
  EXPECT_THAT(order, ElementsAre(1, 2));
}

TEST(RealClock, CancelledAndPendingCallbacksNeverRun) {
  bool ran = false;
  {
    std::unique_ptr<Timer> timer = RealClock()->NewTimer();
    const Timer::Id id = timer->Schedule(RealClock()->Now() + absl::Hours(1), [&] { ran = true; });
    EXPECT_TRUE(timer->Cancel(id));
    EXPECT_FALSE(timer->Cancel(id));
    timer->Schedule(RealClock()->Now() + absl::Hours(1), [&] { ran = true; });
  }  // joined at once, not in an hour
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace ps
