#include "common/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Optimizer> Sgd(float lr) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer({"sgd", lr}, 0);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? std::move(*opt) : nullptr;
}

// Records every ApplyMean call; changes nothing.
class RecordingOptimizer final : public Optimizer {
 public:
  struct Call {
    int64_t step;
    std::vector<const float*> grads;
    size_t begin, end;
    float* weights;
  };
  void ApplyMean(int64_t step, double /*lr_scale*/, absl::Span<const float* const> grads,
                 size_t begin, size_t end, float* weights) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back(Call{step, {grads.begin(), grads.end()}, begin, end, weights});
  }
  absl::StatusOr<std::string> SaveState() const override { return std::string(); }
  absl::Status RestoreState(absl::string_view) override { return absl::OkStatus(); }
  std::string name() const override { return "recording"; }

  std::vector<Call> calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
};

TEST(Sgd, SubtractsLearningRateTimesGradient) {
  auto opt = Sgd(0.5f);
  std::vector<float> w = {1, 2, 3, -4};
  const std::vector<float> g = {2, 4, -8, 0.25f};
  ASSERT_TRUE(ApplyGradient(opt.get(), 1, g, absl::MakeSpan(w)).ok());
  EXPECT_THAT(w, ElementsAre(0, 0, 7, -4.125f));
  EXPECT_EQ(opt->name(), "sgd");
}

TEST(Sgd, LearningRateScalesTheUpdate) {
  for (float lr : {0.1f, 0.25f, 3.0f}) {
    auto opt = Sgd(lr);
    std::vector<float> w = {1.5f, -2.0f};
    const std::vector<float> g = {0.3f, 7.0f};
    ASSERT_TRUE(ApplyGradient(opt.get(), 1, g, absl::MakeSpan(w)).ok());
    EXPECT_THAT(w, ElementsAre(1.5f - lr * 0.3f, -2.0f - lr * 7.0f)) << lr;
  }
}

// The mean of 2, 3 and 4 gradients (each a separate code path), summed in
// the order given, then divided by the count: bit for bit.
TEST(Sgd, AppliesTheMeanOfSeveralGradientsSummedInOrder) {
  const float lr = 0.5f;
  const std::vector<std::vector<float>> all = {
      {1e8f, 1.0f, 3.0f}, {1.0f, 2.0f, -6.0f}, {-1e8f, 0.1f, 1.5f}, {7.0f, -0.3f, 2.0f}};
  for (size_t n = 2; n <= all.size(); ++n) {
    std::vector<const float*> grads;
    for (size_t k = 0; k < n; ++k) grads.push_back(all[k].data());
    std::vector<float> w = {10.0f, 20.0f, 30.0f};
    std::vector<float> expected = w;
    for (size_t i = 0; i < w.size(); ++i) {
      float s = all[0][i];
      for (size_t k = 1; k < n; ++k) s += all[k][i];
      expected[i] -= lr * (s / static_cast<float>(n));
    }
    Sgd(lr)->ApplyMean(1, 1.0, grads, 0, w.size(), w.data());
    EXPECT_EQ(w, expected) << n << " gradients";
  }
  // In that order 1e8 + 1 rounds to 1e8, and -1e8 cancels it: the mean is 0.
  std::vector<float> w = {10.0f};
  const float a = 1e8f, b = 1.0f, c = -1e8f;
  Sgd(lr)->ApplyMean(1, 1.0, {&a, &b, &c}, 0, 1, w.data());
  EXPECT_EQ(w[0], 10.0f);
}

TEST(Sgd, OneGradientIsTakenAsItIs) {
  auto opt = Sgd(0.5f);
  std::vector<float> w = {1.0f, 1.0f};
  const std::vector<float> g = {0.1f, 3.0f};
  opt->ApplyMean(1, 1.0, {g.data()}, 0, 2, w.data());
  EXPECT_THAT(w, ElementsAre(1.0f - 0.5f * 0.1f, 1.0f - 0.5f * 3.0f));
}

TEST(Sgd, ApplyMeanTouchesOnlyItsRange) {
  auto opt = Sgd(1.0f);
  std::vector<float> w = {1, 1, 1, 1, 1};
  const std::vector<float> g = {1, 1, 1, 1, 1};
  opt->ApplyMean(1, 1.0, {g.data()}, 1, 3, w.data());
  EXPECT_THAT(w, ElementsAre(1, 0, 0, 1, 1));
}

TEST(Sgd, StepDoesNotChangeTheUpdate) {
  const std::vector<float> g = {0.3f, -1.7f};
  std::vector<float> first = {1.0f, 2.0f}, later = first;
  ASSERT_TRUE(ApplyGradient(Sgd(0.1f).get(), 1, g, absl::MakeSpan(first)).ok());
  ASSERT_TRUE(ApplyGradient(Sgd(0.1f).get(), 1000, g, absl::MakeSpan(later)).ok());
  EXPECT_EQ(first, later);
}

TEST(ApplyGradient, PassesTheStepAndTheWholeBuffer) {
  RecordingOptimizer opt;
  const std::vector<float> g(5, 1.0f);
  std::vector<float> w(5, 0.0f);
  ASSERT_TRUE(ApplyGradient(&opt, 42, g, absl::MakeSpan(w)).ok());
  const auto calls = opt.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].step, 42);
  EXPECT_THAT(calls[0].grads, ElementsAre(g.data()));
  EXPECT_EQ(calls[0].begin, 0u);
  EXPECT_EQ(calls[0].end, 5u);
  EXPECT_EQ(calls[0].weights, w.data());
}

TEST(ApplyGradient, RejectsMismatchedSizesAndAppliesNothing) {
  auto opt = Sgd(0.5f);
  std::vector<float> w = {1, 2, 3};
  const std::vector<float> g = {1, 1};
  absl::Status s = ApplyGradient(opt.get(), 1, g, absl::MakeSpan(w));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("2 elements"));
  EXPECT_THAT(w, ElementsAre(1, 2, 3));
}

TEST(ApplyMeanInParallel, PassesTheStepAndCoversEveryElementOnce) {
  RecordingOptimizer opt;
  const size_t n = (3u << 20) + 7;  // large enough to be split
  const float g0 = 0, g1 = 0;
  ApplyMeanInParallel(&opt, 7, 1.0, {&g0, &g1}, n, nullptr);
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& c : opt.calls()) {
    EXPECT_EQ(c.step, 7);
    EXPECT_THAT(c.grads, ElementsAre(&g0, &g1));
    ranges.emplace_back(c.begin, c.end);
  }
  std::sort(ranges.begin(), ranges.end());
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().first, 0u);
  EXPECT_EQ(ranges.back().second, n);
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].first, ranges[i - 1].second);
}

TEST(ApplyMeanInParallel, SameBitsAsOneThread) {
  const size_t n = (2u << 20) + 3;
  std::vector<std::vector<float>> g(3, std::vector<float>(n));
  std::vector<float> start(n);
  for (size_t i = 0; i < n; ++i) {
    start[i] = std::sin(static_cast<float>(i));
    for (size_t k = 0; k < g.size(); ++k) g[k][i] = std::cos(static_cast<float>(i * (k + 1)));
  }
  const std::vector<const float*> grads = {g[0].data(), g[1].data(), g[2].data()};
  std::vector<float> parallel = start, serial = start;
  ApplyMeanInParallel(Sgd(0.1f).get(), 1, 1.0, grads, n, parallel.data());
  Sgd(0.1f)->ApplyMean(1, 1.0, grads, 0, n, serial.data());
  EXPECT_TRUE(parallel == serial);
}

TEST(Sgd, SaveAndRestoreRoundTrip) {
  auto opt = Sgd(0.5f);
  std::vector<float> w = {1.0f};
  const std::vector<float> g = {1.0f};
  ASSERT_TRUE(ApplyGradient(opt.get(), 1, g, absl::MakeSpan(w)).ok());
  absl::StatusOr<std::string> state = opt->SaveState();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, "");  // plain SGD keeps no state

  auto restored = Sgd(0.5f);
  ASSERT_TRUE(restored->RestoreState(*state).ok());
  std::vector<float> a = w, b = w;
  ASSERT_TRUE(ApplyGradient(opt.get(), 2, g, absl::MakeSpan(a)).ok());
  ASSERT_TRUE(ApplyGradient(restored.get(), 2, g, absl::MakeSpan(b)).ok());
  EXPECT_EQ(a, b);
}

TEST(Sgd, RestoreRejectsStateItDidNotWrite) {
  auto opt = Sgd(0.5f);
  absl::Status s = opt->RestoreState("momentum");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("8 bytes"));
}

TEST(Sgd, FailedRestoreLeavesTheOptimizerAsItWas) {
  auto opt = Sgd(0.5f);
  ASSERT_FALSE(opt->RestoreState("momentum").ok());
  absl::StatusOr<std::string> state = opt->SaveState();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, "");
  std::vector<float> w = {1.0f, 2.0f};
  const std::vector<float> g = {2.0f, -4.0f};
  ASSERT_TRUE(ApplyGradient(opt.get(), 1, g, absl::MakeSpan(w)).ok());
  EXPECT_THAT(w, ElementsAre(0.0f, 4.0f));
}

// A shard that owns no element still applies each step: over nothing.
TEST(ApplyMeanInParallel, EmptyBufferTouchesNothing) {
  RecordingOptimizer recording;
  ApplyMeanInParallel(&recording, 3, 1.0, {nullptr, nullptr}, 0, nullptr);
  for (const auto& c : recording.calls()) EXPECT_EQ(c.begin, c.end);
  ApplyMeanInParallel(Sgd(0.5f).get(), 3, 1.0, {nullptr, nullptr}, 0, nullptr);  // no access
}

TEST(CreateOptimizer, RejectsUnknownNamesAndNamesTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer({"adamx", 0.1f}, 10);
  ASSERT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(opt.status().message(), HasSubstr("'adamx'"));
  EXPECT_THAT(opt.status().message(), HasSubstr("sgd"));
}

TEST(CreateOptimizer, RejectsLearningRatesThatAreNotPositiveAndFinite) {
  for (float lr : {0.0f, -0.1f, std::numeric_limits<float>::quiet_NaN(),
                   std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(CreateOptimizer({"sgd", lr}, 10).status().code(),
              absl::StatusCode::kInvalidArgument)
        << lr;
  }
}

}  // namespace
}  // namespace ps
