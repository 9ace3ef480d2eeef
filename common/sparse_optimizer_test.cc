#include "common/sparse_optimizer.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(SparseOptimizer, ParsesAndNamesKinds) {
  for (const char* name : {"sgd", "adagrad", "adam", "ftrl"}) {
    absl::StatusOr<SparseOptimizerKind> k = ParseSparseOptimizerKind(name);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(SparseOptimizerName(*k), name);
  }
  absl::StatusOr<SparseOptimizerKind> bad = ParseSparseOptimizerKind("rmsprop");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("rmsprop"));
}

TEST(SparseOptimizer, ValidateNamesTheBadField) {
  SparseOptimizerOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.lr = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("lr"));
  o = SparseOptimizerOptions();
  o.kind = SparseOptimizerKind::kFtrl;
  o.ftrl_l1 = -1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("ftrl_l1"));
  o.ftrl_l1 = 0;
  o.ftrl_beta = NAN;
  EXPECT_THAT(o.Validate().message(), HasSubstr("ftrl_beta"));
  o = SparseOptimizerOptions();
  o.kind = SparseOptimizerKind::kAdam;
  o.adam_beta2 = 1.0f;
  EXPECT_THAT(o.Validate().message(), HasSubstr("adam_beta2"));
  o = SparseOptimizerOptions();
  o.kind = SparseOptimizerKind::kAdagrad;
  o.adagrad_initial_accumulator = -0.5f;
  EXPECT_THAT(o.Validate().message(), HasSubstr("adagrad_initial_accumulator"));
}

TEST(SparseOptimizer, StateSizesAndInitialState) {
  SparseOptimizerOptions o;
  EXPECT_EQ(o.StateFloatsPerElement(), 0);
  o.kind = SparseOptimizerKind::kAdagrad;
  o.adagrad_initial_accumulator = 0.25f;
  EXPECT_EQ(o.StateFloatsPerElement(), 1);
  std::vector<float> s(3, -1);
  InitSparseState(o, 3, s.data());
  EXPECT_THAT(s, ::testing::Each(0.25f));
  o.kind = SparseOptimizerKind::kAdam;
  EXPECT_EQ(o.StateFloatsPerElement(), 2);
  EXPECT_TRUE(o.HasRowStep());
  s.assign(6, -1);
  InitSparseState(o, 3, s.data());
  EXPECT_THAT(s, ::testing::Each(0.0f));
  o.kind = SparseOptimizerKind::kFtrl;
  EXPECT_EQ(o.StateFloatsPerElement(), 2);
  EXPECT_FALSE(o.HasRowStep());
}

TEST(SparseOptimizer, AdamFirstStepMovesByLearningRate) {
  // With m and v from zero, step 1's bias-corrected ratio is g / |g|.
  SparseOptimizerOptions o;
  o.kind = SparseOptimizerKind::kAdam;
  o.lr = 0.5f;
  std::vector<float> w = {1.0f, 1.0f}, state(4, 0.0f), g = {4.0f, -0.01f};
  uint32_t step = 0;
  ApplySparseRow(o, 2, g.data(), w.data(), state.data(), &step);
  EXPECT_EQ(step, 1u);
  EXPECT_NEAR(w[0], 0.5f, 1e-5);
  EXPECT_NEAR(w[1], 1.5f, 1e-3);
}

TEST(SparseOptimizer, FtrlL1KeepsSmallWeightsAtZero) {
  SparseOptimizerOptions o;
  o.kind = SparseOptimizerKind::kFtrl;
  o.lr = 0.1f;
  o.ftrl_l1 = 1.0f;
  // From w = 0, z = g after one step: |g| <= l1 stays at zero, a larger
  // gradient gives -(g - l1) / ((beta + |g|) / alpha + l2).
  std::vector<float> w = {0.0f, 0.0f}, state(4, 0.0f), g = {0.5f, 3.0f};
  ApplySparseRow(o, 2, g.data(), w.data(), state.data(), nullptr);
  EXPECT_EQ(w[0], 0.0f);
  EXPECT_NEAR(w[1], -2.0f / ((1.0f + 3.0f) / 0.1f), 1e-7);
  EXPECT_FLOAT_EQ(state[1], 3.0f);  // z
  EXPECT_FLOAT_EQ(state[3], 9.0f);  // n
}

TEST(SparseOptimizer, AdagradAccumulatesSquares) {
  SparseOptimizerOptions o;
  o.kind = SparseOptimizerKind::kAdagrad;
  o.lr = 1.0f;
  o.adagrad_initial_accumulator = 0.0f;
  std::vector<float> w = {0.0f}, a = {0.0f}, g = {3.0f};
  ApplySparseRow(o, 1, g.data(), w.data(), a.data(), nullptr);
  EXPECT_FLOAT_EQ(a[0], 9.0f);
  EXPECT_NEAR(w[0], -1.0f, 1e-6);
  g = {4.0f};
  ApplySparseRow(o, 1, g.data(), w.data(), a.data(), nullptr);
  EXPECT_FLOAT_EQ(a[0], 25.0f);
  EXPECT_NEAR(w[0], -1.8f, 1e-6);
}

}  // namespace
}  // namespace ps
