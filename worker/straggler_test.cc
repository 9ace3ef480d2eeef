#include "worker/straggler.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

absl::Duration Ms(int64_t ms) { return absl::Milliseconds(ms); }

TEST(Straggler, FullSpeedWithoutSlowdown) {
  Straggler s(0, true, 1, 0);
  for (int t = 0; t < 20; ++t) EXPECT_EQ(s.SleepAfter(t, Ms(5), Ms(9)), absl::ZeroDuration());
}

TEST(Straggler, ComputeSleepsAMultipleOfEachStepsCompute) {
  Straggler s(2, false, 1, 0);
  EXPECT_EQ(s.SleepAfter(0, Ms(5), Ms(9)), Ms(10));
  EXPECT_EQ(s.SleepAfter(1, Ms(7), Ms(100)), Ms(14));
}

TEST(Straggler, StepSleepsAMultipleOfTheMedianOfTheFirstSteps) {
  Straggler s(2, true, 1, 0);
  // The first kCalibrationSteps run at full speed; an outlier (the first
  // step's warm-up) does not move the median.
  const int64_t whole[Straggler::kCalibrationSteps] = {90, 10, 11, 9, 10, 12, 10, 8, 10, 11};
  for (int t = 0; t < Straggler::kCalibrationSteps; ++t) {
    EXPECT_EQ(s.SleepAfter(t, Ms(1), Ms(whole[t])), absl::ZeroDuration()) << t;
  }
  // Then 2x that median, whatever the steps take now: a step that waited
  // long for the others does not make the next sleep longer.
  EXPECT_EQ(s.SleepAfter(10, Ms(1), Ms(30)), Ms(20));
  EXPECT_EQ(s.SleepAfter(11, Ms(1), Ms(500)), Ms(20));
}

TEST(Straggler, OnlyEveryNthStepSleepsOffsetByWorker) {
  Straggler s(3, false, 4, 1);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(s.SleepAfter(t, Ms(2), Ms(5)), (t + 1) % 4 == 0 ? Ms(6) : absl::ZeroDuration()) << t;
  }
}

}  // namespace
}  // namespace ps
