#include "client/internal/heartbeater.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(HeartbeatPeriod, ThreePerLeaseAtMostTenPerSecond) {
  EXPECT_EQ(HeartbeatPeriod(absl::Seconds(3)), absl::Seconds(1));
  EXPECT_EQ(HeartbeatPeriod(absl::Milliseconds(900)), absl::Milliseconds(300));
  EXPECT_EQ(HeartbeatPeriod(absl::Milliseconds(300)), absl::Milliseconds(100));
  EXPECT_EQ(HeartbeatPeriod(absl::Milliseconds(1)), absl::Milliseconds(100));
}

TEST(Heartbeater, BeatsEveryPeriodUntilDestroyed) {
  std::atomic<int> beats{0};
  absl::Notification third;
  {
    Heartbeater h(absl::Milliseconds(5), [&] {
      if (++beats == 3) third.Notify();
    });
    ASSERT_TRUE(third.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
  const int at_destruction = beats.load();
  EXPECT_GE(at_destruction, 3);
  absl::SleepFor(absl::Milliseconds(50));  // ten periods
  EXPECT_EQ(beats.load(), at_destruction);
}

TEST(Heartbeater, WaitsAPeriodBeforeTheFirstBeatAndStopsWithoutWaitingForIt) {
  std::atomic<int> beats{0};
  const absl::Time start = absl::Now();
  {
    Heartbeater h(absl::Hours(1), [&] { ++beats; });
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(beats.load(), 0);
}

TEST(Heartbeater, DestructionWaitsForABeatInProgress) {
  absl::Notification in_beat;
  std::atomic<bool> beat_ended{false};
  {
    Heartbeater h(absl::Milliseconds(1), [&] {
      if (in_beat.HasBeenNotified()) return;
      in_beat.Notify();
      absl::SleepFor(absl::Milliseconds(100));
      beat_ended = true;
    });
    ASSERT_TRUE(in_beat.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
  EXPECT_TRUE(beat_ended.load());
}

}  // namespace
}  // namespace ps
