#include "worker/ctr/det_math.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(DetMath, CloseToLibm) {
  for (double x = 1e-300; x < 1e300; x *= 1.7) {
    ASSERT_NEAR(DetLog(x), std::log(x), 6e-16 * std::fabs(std::log(x)) + 1e-300) << x;
  }
  for (double x = -700; x < 700; x += 0.37) {
    ASSERT_NEAR(DetExp(x), std::exp(x), 6e-16 * std::exp(x)) << x;
  }
  for (double x = -0.99; x < 5; x += 0.0131) {
    ASSERT_NEAR(DetLog1p(x), std::log1p(x), 6e-16 * std::fabs(std::log1p(x)) + 1e-300) << x;
    ASSERT_NEAR(DetExpm1(x), std::expm1(x), 6e-16 * std::fabs(std::expm1(x)) + 1e-300) << x;
  }
  EXPECT_EQ(DetLog1p(1e-20), 1e-20);
  EXPECT_EQ(DetExpm1(1e-20), 1e-20);
  EXPECT_EQ(DetExp(0), 1.0);
  EXPECT_EQ(DetLog(1), 0.0);
}

TEST(DetMath, SigmoidIsSymmetricAndDoesNotOverflow) {
  EXPECT_EQ(DetSigmoid(0), 0.5);
  EXPECT_EQ(DetSigmoid(1000), 1.0);
  EXPECT_EQ(DetSigmoid(-1000), 0.0);
  for (double x = -30; x < 30; x += 0.7) {
    EXPECT_NEAR(DetSigmoid(x) + DetSigmoid(-x), 1.0, 1e-15) << x;
    EXPECT_NEAR(DetSigmoid(x), 1.0 / (1.0 + std::exp(-x)), 1e-15) << x;
  }
}

TEST(DetMath, UnitFromBitsStaysInsideTheOpenInterval) {
  EXPECT_GT(UnitFromBits(0), 0.0);
  EXPECT_LT(UnitFromBits(~uint64_t{0}), 1.0);
  EXPECT_NE(Hash4(1, 2, 3, 4), Hash4(1, 2, 3, 5));
  EXPECT_NE(Hash4(1, 2, 3, 4), Hash4(2, 2, 3, 4));
  EXPECT_NE(Hash4(0, 1, 0, 0), Hash4(0, 0, 1, 0));
}

}  // namespace
}  // namespace ps
