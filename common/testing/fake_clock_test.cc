#include "common/testing/fake_clock.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(FakeClock, TimeMovesOnlyWhenAdvanced) {
  FakeClock clock;
  EXPECT_EQ(clock.Now(), FakeClock::kStart);
  EXPECT_EQ(clock.Now(), FakeClock::kStart);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now(), FakeClock::kStart + absl::Seconds(3));
}

TEST(FakeClock, CallbacksRunInTimeOrderAtTheirOwnTimeOnlyOnceReached) {
  FakeClock clock;
  std::unique_ptr<Timer> a = clock.NewTimer();
  std::unique_ptr<Timer> b = clock.NewTimer();
  const absl::Time t0 = clock.Now();
  std::vector<std::string> ran;
  auto note = [&](const char* name) {
    return [&, name] {
      ran.push_back(absl::StrCat(name, "@", (clock.Now() - t0) / absl::Seconds(1)));
    };
  };
  a->Schedule(t0 + absl::Seconds(2), note("a2"));
  b->Schedule(t0 + absl::Seconds(1), note("b1"));
  a->Schedule(t0 + absl::Seconds(1), note("a1"));  // same time as b1: after it
  b->Schedule(t0 + absl::Seconds(5), note("b5"));
  clock.Advance(absl::Seconds(1) - absl::Nanoseconds(1));
  EXPECT_THAT(ran, IsEmpty());
  clock.Advance(absl::Seconds(3));
  EXPECT_THAT(ran, ElementsAre("b1@1", "a1@1", "a2@2"));
  EXPECT_EQ(clock.Now(), t0 + absl::Seconds(4) - absl::Nanoseconds(1));
  EXPECT_EQ(clock.pending(), 1);
}

TEST(FakeClock, ACallbackScheduledForATimeReachedRunsInTheSameAdvance) {
  FakeClock clock;
  std::unique_ptr<Timer> timer = clock.NewTimer();
  const absl::Time t0 = clock.Now();
  std::vector<absl::Duration> ran;
  timer->Schedule(t0 + absl::Seconds(1), [&] {
    ran.push_back(clock.Now() - t0);
    timer->Schedule(clock.Now() + absl::Seconds(1), [&] { ran.push_back(clock.Now() - t0); });
    timer->Schedule(clock.Now() + absl::Seconds(9), [&] { ran.push_back(clock.Now() - t0); });
  });
  clock.Advance(absl::Seconds(5));
  EXPECT_THAT(ran, ElementsAre(absl::Seconds(1), absl::Seconds(2)));
}

TEST(FakeClock, ACallbackForThePresentWaitsForTheNextAdvance) {
  FakeClock clock;
  std::unique_ptr<Timer> timer = clock.NewTimer();
  bool ran = false;
  timer->Schedule(clock.Now() - absl::Seconds(1), [&] { ran = true; });
  EXPECT_FALSE(ran);
  clock.RunDue();
  EXPECT_TRUE(ran);
}

TEST(FakeClock, CancelAndDestroyingTheTimerDropWhatHasNotRun) {
  FakeClock clock;
  std::unique_ptr<Timer> a = clock.NewTimer();
  std::unique_ptr<Timer> b = clock.NewTimer();
  int ran = 0;
  const Timer::Id id = a->Schedule(clock.Now() + absl::Seconds(1), [&] { ++ran; });
  EXPECT_FALSE(b->Cancel(id));  // another timer's
  EXPECT_TRUE(a->Cancel(id));
  EXPECT_FALSE(a->Cancel(id));
  b->Schedule(clock.Now() + absl::Seconds(1), [&] { ++ran; });
  a->Schedule(clock.Now() + absl::Seconds(1), [&] { ran += 10; });
  EXPECT_EQ(clock.pending(), 2);
  b.reset();
  EXPECT_EQ(clock.pending(), 1);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(ran, 10);
}

// A callback that re-arms itself for the present would spin for ever on a
// clock whose time does not move: it aborts instead of hanging the test.
TEST(FakeClockDeathTest, ACallbackThatKeepsReschedulingForThePresentAborts) {
  EXPECT_DEATH(
      {
        FakeClock clock;
        std::unique_ptr<Timer> timer = clock.NewTimer();
        std::function<void()> again = [&] { timer->Schedule(clock.Now(), again); };
        timer->Schedule(clock.Now(), again);
        clock.RunDue();
      },
      "schedules itself for the present");
}

}  // namespace
}  // namespace ps
