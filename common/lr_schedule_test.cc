#include "common/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ps {
namespace {

LrSchedule Make(const char* name, int64_t warmup, int64_t decay_steps) {
  LrSchedule s;
  s.name = name;
  s.warmup_steps = warmup;
  s.decay_steps = decay_steps;
  return s;
}

TEST(LrSchedule, ConstantIsTheBaseRate) {
  const LrSchedule s = Make("constant", 0, 1000);
  EXPECT_EQ(s.At(0.1, 1), 0.1);
  EXPECT_EQ(s.At(0.1, 1000000), 0.1);
}

TEST(LrSchedule, WarmupRisesLinearlyToTheBaseRate) {
  const LrSchedule s = Make("constant", 4, 1000);
  EXPECT_DOUBLE_EQ(s.At(1.0, 1), 0.25);
  EXPECT_DOUBLE_EQ(s.At(1.0, 2), 0.5);
  EXPECT_DOUBLE_EQ(s.At(1.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(s.At(1.0, 5), 1.0);
}

TEST(LrSchedule, StepDecaysEveryDecayStepsAfterWarmup) {
  LrSchedule s = Make("step", 2, 3);
  s.decay_rate = 0.5;
  EXPECT_DOUBLE_EQ(s.At(1.0, 2), 1.0);   // end of warmup
  EXPECT_DOUBLE_EQ(s.At(1.0, 3), 1.0);   // e = 0
  EXPECT_DOUBLE_EQ(s.At(1.0, 5), 1.0);   // e = 2
  EXPECT_DOUBLE_EQ(s.At(1.0, 6), 0.5);   // e = 3
  EXPECT_DOUBLE_EQ(s.At(1.0, 9), 0.25);  // e = 6
}

TEST(LrSchedule, CosineFallsFromTheBaseRateToMinLrAndStays) {
  LrSchedule s = Make("cosine", 0, 10);
  s.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(s.At(1.0, 1), 1.0);                                  // e = 0
  EXPECT_DOUBLE_EQ(s.At(1.0, 6), 0.1 + 0.9 * (1 + std::cos(M_PI / 2)) / 2);  // e = 5
  EXPECT_DOUBLE_EQ(s.At(1.0, 11), 0.1);                                 // e = 10
  EXPECT_DOUBLE_EQ(s.At(1.0, 500), 0.1);
}

TEST(LrSchedule, IsAPureFunctionOfTheStep) {
  const LrSchedule s = Make("cosine", 5, 100);
  const double first = s.At(0.3, 42);
  (void)s.At(0.3, 7);
  EXPECT_EQ(s.At(0.3, 42), first);
}

}  // namespace
}  // namespace ps
