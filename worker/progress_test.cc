#include "worker/progress.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace ps {
namespace {

absl::Duration Sec(double s) { return absl::Seconds(s); }

TEST(ProgressMode, ParsesTheThreeValuesAndNamesTheFlagOtherwise) {
  EXPECT_EQ(*ParseProgressMode("auto"), ProgressMode::kAuto);
  EXPECT_EQ(*ParseProgressMode("on"), ProgressMode::kOn);
  EXPECT_EQ(*ParseProgressMode("off"), ProgressMode::kOff);
  absl::StatusOr<ProgressMode> bad = ParseProgressMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown --progress 'yes' (known: auto, on, off)");
}

TEST(ProgressMode, AutoFollowsTheTerminalAndOnOffOverrideIt) {
  EXPECT_TRUE(ShowProgress(ProgressMode::kAuto, true));
  EXPECT_FALSE(ShowProgress(ProgressMode::kAuto, false));
  EXPECT_TRUE(ShowProgress(ProgressMode::kOn, false));
  EXPECT_FALSE(ShowProgress(ProgressMode::kOff, true));
}

TEST(FormatEta, SecondsMinutesHours) {
  EXPECT_EQ(FormatEta(0), "0s");
  EXPECT_EQ(FormatEta(42.4), "42s");
  EXPECT_EQ(FormatEta(59.4), "59s");
  EXPECT_EQ(FormatEta(59.6), "1m00s");
  EXPECT_EQ(FormatEta(725), "12m05s");
  EXPECT_EQ(FormatEta(3600), "1h00m");
  EXPECT_EQ(FormatEta(3 * 3600 + 7 * 60 + 59), "3h07m");
  EXPECT_EQ(FormatEta(-1), "--");
  EXPECT_EQ(FormatEta(std::numeric_limits<double>::infinity()), "--");
}

TEST(ProgressLine, DrawsStepRateLossAndEta) {
  ProgressLine p(0, 1000);
  for (int i = 1; i <= 100; ++i) p.Step(i, 64, i <= 50 ? 0.5 : 0.3);
  // 100 steps in 10 s: 900 left take 90 s; 6400 samples in 10 s.
  EXPECT_EQ(p.Draw(Sec(10)), "\rstep 100/1000 (10%)  640 samples/s  loss 0.4000  ETA 1m30s");
}

TEST(ProgressLine, RateAndLossAreSinceThePreviousDrawEtaOverTheRun) {
  ProgressLine p(0, 400);
  for (int i = 1; i <= 100; ++i) p.Step(i, 10, 1.0);
  p.Draw(Sec(1));
  for (int i = 101; i <= 200; ++i) p.Step(i, 10, 0.25);
  // The second window: 1000 samples in 4 s, loss 0.25. The run: 200 steps in
  // 5 s, so 200 left take 5 s. One space covers the first line's longer
  // "1000 samples/s".
  EXPECT_EQ(p.Draw(Sec(5)), "\rstep 200/400 (50%)  250 samples/s  loss 0.2500  ETA 5s ");
}

TEST(ProgressLine, EvaluationTimeDoesNotCountAgainstSamplesPerSecond) {
  ProgressLine p(0, 20);
  for (int i = 1; i <= 10; ++i) p.Step(i, 100, 1.0);
  p.ExcludeTime(Sec(3));
  // 1000 samples in 4 s, 3 of them evaluating: 1000/s. The time left is at
  // the run's pace, evaluation included: 10 steps in 4 s.
  EXPECT_EQ(p.Draw(Sec(4)), "\rstep 10/20 (50%)  1000 samples/s  loss 1.0000  ETA 4s");
}

TEST(ProgressLine, EtaCountsFromTheStepTheRunResumedAt) {
  ProgressLine p(500, 1000);
  for (int i = 501; i <= 600; ++i) p.Step(i, 1, 0.1);
  // 100 steps in 20 s since the resume: 400 left take 80 s.
  EXPECT_EQ(p.Draw(Sec(20)), "\rstep 600/1000 (60%)  5 samples/s  loss 0.1000  ETA 1m20s");
}

TEST(ProgressLine, EtaIsUnknownBeforeAStep) {
  ProgressLine p(0, 10);
  EXPECT_EQ(p.Draw(Sec(1)), "\rstep 0/10 (0%)  0 samples/s  loss 0.0000  ETA --");
}

TEST(ProgressLine, ShorterLinePadsOverTheLongerOne) {
  ProgressLine p(0, 100000);
  p.Step(99999, 100000, 12.5);
  const std::string long_line = p.Draw(Sec(1));
  p.Step(100000, 1, 0.5);
  const std::string short_line = p.Draw(Sec(2));
  // Each draw covers at least as many characters as the one before it.
  EXPECT_EQ(short_line.size(), long_line.size());
  EXPECT_EQ(short_line.find_last_not_of(' ') + 1,
            std::string("\rstep 100000/100000 (100%)  1 samples/s  loss 0.5000  ETA 0s").size());
  EXPECT_EQ(long_line.find('\n'), std::string::npos);
  EXPECT_EQ(short_line.find('\n'), std::string::npos);
}

TEST(ProgressLine, ClearBlanksTheLineAndEndMovesToTheNext) {
  ProgressLine p(0, 10);
  EXPECT_EQ(p.Clear(), "");
  EXPECT_EQ(p.End(), "");
  p.Step(1, 1, 1);
  const std::string line = p.Draw(Sec(1));
  const size_t width = line.size() - 1;  // without the '\r'
  EXPECT_EQ(p.Clear(), "\r" + std::string(width, ' ') + "\r");
  EXPECT_EQ(p.Clear(), "");  // nothing left to blank
  EXPECT_EQ(p.End(), "");    // already at a line's start
  p.Step(2, 1, 1);
  EXPECT_EQ(p.Draw(Sec(2)).find(' ', line.size()), std::string::npos);  // no padding after Clear
  EXPECT_EQ(p.End(), "\n");
  EXPECT_EQ(p.End(), "");
}

TEST(ProgressLine, RedrawsAtMostEveryIntervalAndAlwaysAtTheLastStep) {
  ProgressLine p(0, 3);
  p.Step(1, 1, 1);
  EXPECT_FALSE(p.Due(absl::Milliseconds(100)));
  EXPECT_TRUE(p.Due(ProgressLine::kRedrawInterval));
  p.Draw(absl::Milliseconds(300));
  p.Step(2, 1, 1);
  EXPECT_FALSE(p.Due(absl::Milliseconds(500)));
  EXPECT_TRUE(p.Due(absl::Milliseconds(550)));
  p.Step(3, 1, 1);
  EXPECT_TRUE(p.Due(absl::Milliseconds(301)));  // the last step
}

}  // namespace
}  // namespace ps
