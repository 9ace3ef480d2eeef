#include "server/core/stall_reporter.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::Optional;

// A fake clock: every time is an offset from t0.
const absl::Time t0 = absl::FromUnixSeconds(1000);
absl::Time At(double seconds) { return t0 + absl::Seconds(seconds); }

TEST(StallReporter, OpenStepIsReportedAtOneTwoFourTimesTheWaitThenCompletes) {
  StallReporter r(0, 3, absl::Seconds(10));
  EXPECT_EQ(r.OnPushKept(At(0)), At(10));
  EXPECT_EQ(r.OnPushKept(At(4)), absl::InfiniteFuture());  // the clock is open already
  EXPECT_EQ(r.Report(At(9.9), 17, {2}), std::nullopt);
  EXPECT_THAT(r.Report(At(10), 17, {2}),
              Optional(std::string("shard 0: step 17 has waited 10.0s for gradients from "
                                   "workers [2] (received from [0, 1])")));
  EXPECT_EQ(r.next_report(), At(20));
  EXPECT_EQ(r.Report(At(19), 17, {2}), std::nullopt);
  EXPECT_THAT(r.Report(At(20.04), 17, {2}),
              Optional(::testing::HasSubstr("has waited 20.0s")));
  EXPECT_EQ(r.next_report(), At(40));
  EXPECT_THAT(r.OnStepClosed(At(34.2), 17),
              Optional(std::string("shard 0: step 17 completed after 34.2s")));
  EXPECT_EQ(r.next_report(), absl::InfiniteFuture());
}

TEST(StallReporter, LateCheckSkipsTheReportsItMissed) {
  StallReporter r(1, 2, absl::Seconds(1));
  r.OnPushKept(At(0));
  EXPECT_THAT(r.Report(At(5), 3, {0}),
              Optional(std::string("shard 1: step 3 has waited 5.0s for gradients from "
                                   "workers [0] (received from [1])")));
  EXPECT_EQ(r.next_report(), At(8));  // not 2 s or 4 s
}

TEST(StallReporter, StepThatWaitedLessThanTheReportTimeCompletesSilently) {
  StallReporter r(0, 2, absl::Seconds(10));
  r.OnPushKept(At(0));
  EXPECT_EQ(r.Report(At(9), 0, {1}), std::nullopt);
  EXPECT_EQ(r.OnStepClosed(At(9.5), 0), std::nullopt);
}

TEST(StallReporter, NextStepStartsItsOwnClock) {
  StallReporter r(0, 3, absl::Seconds(1));
  r.OnPushKept(At(0));
  ASSERT_TRUE(r.Report(At(1), 0, {2}).has_value());
  ASSERT_TRUE(r.OnStepClosed(At(1.5), 0).has_value());
  EXPECT_EQ(r.OnPushKept(At(7)), At(8));
  EXPECT_EQ(r.Report(At(7.9), 1, {0, 2}), std::nullopt);
  EXPECT_THAT(r.Report(At(8), 1, {0, 2}),
              Optional(::testing::EndsWith(
                  "step 1 has waited 1.0s for gradients from workers [0, 2] (received from [1])")));
}

TEST(StallReporter, StepWithNoPushYetIsNeverReported) {
  StallReporter r(0, 3, absl::Milliseconds(10));
  EXPECT_EQ(r.next_report(), absl::InfiniteFuture());
  EXPECT_EQ(r.Report(At(1000), 0, {0, 1, 2}), std::nullopt);
}

TEST(StallReporter, StepClosedByItsOwnPushIsNeverReported) {
  // Async mode: every push is applied at once, so no clock ever opens.
  StallReporter r(0, 3, absl::Milliseconds(10));
  EXPECT_EQ(r.OnStepClosed(At(1), 0), std::nullopt);
  EXPECT_EQ(r.Report(At(1000), 1, {}), std::nullopt);
}

TEST(StallReporter, ZeroOrNegativeReportTimeTurnsReportsOff) {
  for (absl::Duration after : {absl::ZeroDuration(), absl::Milliseconds(-5)}) {
    StallReporter r(0, 3, after);
    EXPECT_EQ(r.OnPushKept(At(0)), absl::InfiniteFuture()) << after;
    EXPECT_EQ(r.Report(At(1000), 0, {2}), std::nullopt) << after;
    EXPECT_EQ(r.OnStepClosed(At(1000), 0), std::nullopt) << after;
  }
}

TEST(StallReporter, ResetDiscardsTheOpenStepWithoutALine) {
  StallReporter r(0, 2, absl::Seconds(1));
  r.OnPushKept(At(0));
  ASSERT_TRUE(r.Report(At(1), 4, {1}).has_value());
  r.Reset();  // e.g. the weights were replaced
  EXPECT_EQ(r.next_report(), absl::InfiniteFuture());
  EXPECT_EQ(r.OnStepClosed(At(3), 4), std::nullopt);
  EXPECT_EQ(r.OnPushKept(At(5)), At(6));
}

}  // namespace
}  // namespace ps
