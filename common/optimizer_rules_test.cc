// The rules behind CreateOptimizer: values worked out by hand, state that
// round-trips and refuses another rule's bytes, the learning-rate factor,
// the start version, and the option checks that name each flag.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "common/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

std::unique_ptr<Optimizer> Make(OptimizerOptions o, int64_t n, int64_t start = 0) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(o, n, start);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? std::move(*opt) : nullptr;
}

OptimizerOptions Named(const std::string& name, double lr) {
  OptimizerOptions o;
  o.name = name;
  o.learning_rate = lr;
  return o;
}

void Step(Optimizer* opt, int64_t step, const std::vector<float>& g, std::vector<float>* w) {
  ASSERT_TRUE(ApplyGradient(opt, step, g, absl::MakeSpan(*w)).ok());
}

TEST(Momentum, AccumulatesTheGradientIntoItsBuffer) {
  OptimizerOptions o = Named("momentum", 1.0);
  o.momentum = 0.5;
  auto opt = Make(o, 1);
  std::vector<float> w = {0};
  Step(opt.get(), 1, {1}, &w);  // b = 1
  EXPECT_THAT(w, ElementsAre(-1.0f));
  Step(opt.get(), 2, {1}, &w);  // b = 1.5
  EXPECT_THAT(w, ElementsAre(-2.5f));
}

TEST(Nesterov, StepsAlongTheGradientPlusMomentumTimesBuffer) {
  OptimizerOptions o = Named("nesterov", 1.0);
  o.momentum = 0.5;
  auto opt = Make(o, 1);
  std::vector<float> w = {0};
  Step(opt.get(), 1, {1}, &w);  // b = 1, d = 1 + 0.5
  EXPECT_THAT(w, ElementsAre(-1.5f));
  Step(opt.get(), 2, {1}, &w);  // b = 1.5, d = 1 + 0.75
  EXPECT_THAT(w, ElementsAre(-3.25f));
}

TEST(Adagrad, DividesByTheRootOfTheSummedSquares) {
  auto opt = Make(Named("adagrad", 1.0), 1);
  std::vector<float> w = {0};
  Step(opt.get(), 1, {2}, &w);  // s = 4: w -= 2 / 2
  EXPECT_THAT(w, ElementsAre(FloatNear(-1.0f, 1e-6)));
  Step(opt.get(), 2, {2}, &w);  // s = 8: w -= 2 / sqrt(8)
  EXPECT_THAT(w, ElementsAre(FloatNear(-1.0f - 2 / std::sqrt(8.0f), 1e-6)));
}

TEST(Adam, FirstStepMovesByTheLearningRateAgainstTheGradientSign) {
  auto opt = Make(Named("adam", 0.1), 2);
  std::vector<float> w = {1, 1};
  Step(opt.get(), 1, {3, -0.01f}, &w);  // bias-corrected m / sqrt(v) = sign(g)
  EXPECT_THAT(w, ElementsAre(FloatNear(0.9f, 1e-6), FloatNear(1.1f, 1e-6)));
}

TEST(Adam, WeightDecayIsAddedToTheGradient) {
  OptimizerOptions o = Named("adam", 0.1);
  o.weight_decay = 1;
  auto opt = Make(o, 1);
  std::vector<float> w = {1};
  Step(opt.get(), 1, {0}, &w);  // g = 0 + 1 * w: a full step of lr
  EXPECT_THAT(w, ElementsAre(FloatNear(0.9f, 1e-6)));
}

TEST(AdamW, WeightDecayShrinksTheWeightsInstead) {
  OptimizerOptions o = Named("adamw", 0.1);
  o.weight_decay = 0.5;
  auto opt = Make(o, 1);
  std::vector<float> w = {1};
  Step(opt.get(), 1, {0}, &w);  // w *= 1 - 0.1 * 0.5; m = 0 moves nothing
  EXPECT_THAT(w, ElementsAre(static_cast<float>(1 - 0.1 * 0.5)));
}

TEST(Sgd, WeightDecayIsAddedToTheGradient) {
  OptimizerOptions o = Named("sgd", 0.1);
  o.weight_decay = 0.5;
  auto opt = Make(o, 1);
  std::vector<float> w = {2};
  Step(opt.get(), 1, {0}, &w);  // w -= 0.1 * (0 + 0.5 * 2)
  EXPECT_THAT(w, ElementsAre(1.9f));
}

TEST(Optimizer, LearningRateScaleMultipliesTheRate) {
  for (const std::string& name : OptimizerNames()) {
    auto half = Make(Named(name, 0.5), 1);
    auto scaled = Make(Named(name, 1.0), 1);
    std::vector<float> a = {1}, b = {1};
    const float g = 0.25f;
    const float* grads[] = {&g};
    half->ApplyMean(1, 1.0, grads, 0, 1, a.data());
    scaled->ApplyMean(1, 0.5, grads, 0, 1, b.data());
    EXPECT_EQ(a, b) << name;
    EXPECT_NE(a[0], 1.0f) << name;
  }
}

TEST(Adam, BiasCorrectionCountsFromTheStartVersion) {
  auto fresh = Make(Named("adam", 0.01), 3);
  auto later = Make(Named("adam", 0.01), 3, /*start=*/10);
  std::vector<float> a = {1, 2, 3}, b = a;
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = {0.5f * t, -1.0f, 0.125f};
    Step(fresh.get(), t, g, &a);
    Step(later.get(), 10 + t, g, &b);
  }
  EXPECT_EQ(a, b);
}

// For every rule: three steps, save, restore into a new one, two more steps
// on both: the same bits; a range at a time gives the same bits as a whole.
TEST(Optimizer, StateRoundTripsAndRangesAreIndependent) {
  for (const std::string& name : OptimizerNames()) {
    OptimizerOptions o = Named(name, 0.05);
    o.weight_decay = 0.01;
    auto opt = Make(o, 4);
    std::vector<float> w = {1, -2, 0.5f, 3};
    for (int t = 1; t <= 3; ++t) Step(opt.get(), t, {0.1f * t, -0.3f, 1.0f / t, 2}, &w);
    absl::StatusOr<std::string> state = opt->SaveState();
    ASSERT_TRUE(state.ok()) << state.status();
    auto restored = Make(o, 4);
    ASSERT_TRUE(restored->RestoreState(*state).ok()) << name;
    std::vector<float> a = w, b = w;
    for (int t = 4; t <= 5; ++t) {
      const std::vector<float> g = {0.2f, -0.1f * t, 0.7f, -1};
      Step(opt.get(), t, g, &a);
      const float* grads[] = {g.data()};
      restored->ApplyMean(t, 1.0, grads, 0, 2, b.data());  // two ranges
      restored->ApplyMean(t, 1.0, grads, 2, 4, b.data());
    }
    EXPECT_EQ(a, b) << name;
  }
}

// A state split into its buffers and joined again is the same bytes; a
// state of two elements joined from halves of two states restores an
// optimizer that steps as the two did.
TEST(Optimizer, StateSplitsIntoBuffersAndJoinsBack) {
  for (const std::string& name : OptimizerNames()) {
    const OptimizerOptions o = Named(name, 0.05);
    auto opt = Make(o, 4, /*start=*/2);
    std::vector<float> w = {1, -2, 0.5f, 3};
    for (int t = 3; t <= 5; ++t) Step(opt.get(), t, {0.1f * t, -0.3f, 1.0f / t, 2}, &w);
    const std::string state = *opt->SaveState();
    absl::StatusOr<OptimizerStateParts> parts = SplitOptimizerState(state);
    ASSERT_TRUE(parts.ok()) << parts.status();
    EXPECT_EQ(JoinOptimizerState(*parts), state) << name;
    if (name == "sgd") {
      EXPECT_TRUE(parts->name.empty());
      continue;
    }
    EXPECT_EQ(parts->name, name);
    EXPECT_EQ(parts->start, 2);
    EXPECT_EQ(parts->elements, 4);
    EXPECT_EQ(parts->buffers.size(), name.rfind("adam", 0) == 0 ? 2u : 1u) << name;
    // Elements 1..2 alone: an optimizer of 2 restored from them steps them
    // as the whole one steps them.
    OptimizerStateParts middle = *parts;
    middle.elements = 2;
    for (std::vector<float>& b : middle.buffers) b = {b[1], b[2]};
    auto part = Make(o, 2);
    ASSERT_TRUE(part->RestoreState(JoinOptimizerState(middle)).ok()) << name;
    std::vector<float> whole = w, half = {w[1], w[2]};
    const std::vector<float> g = {0.2f, -0.4f, 0.7f, -1};
    Step(opt.get(), 6, g, &whole);
    Step(part.get(), 6, {g[1], g[2]}, &half);
    EXPECT_EQ(half, (std::vector<float>{whole[1], whole[2]})) << name;
  }
  EXPECT_EQ(SplitOptimizerState("garbage").status().code(), absl::StatusCode::kInvalidArgument);
  // Counts that would wrap around a size check, or no buffer at all.
  OptimizerStateParts huge;
  huge.name = "adam";
  huge.elements = int64_t{1} << 61;
  huge.buffers.resize(8);  // 8 * 2^61 * 4 wraps to 0 bytes
  std::string forged = JoinOptimizerState(huge);
  EXPECT_EQ(SplitOptimizerState(forged).status().code(), absl::StatusCode::kInvalidArgument);
  huge.buffers.clear();
  forged = JoinOptimizerState(huge);
  EXPECT_EQ(SplitOptimizerState(forged).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string adam = *Make(Named("adam", 0.1), 3)->SaveState();
  EXPECT_EQ(SplitOptimizerState(adam.substr(0, adam.size() - 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Optimizer, RefusesStateOfAnotherRuleNamingBoth) {
  auto adam = Make(Named("adam", 0.1), 2);
  absl::StatusOr<std::string> adam_state = adam->SaveState();
  ASSERT_TRUE(adam_state.ok());
  for (const char* name : {"sgd", "momentum", "adamw"}) {
    auto other = Make(Named(name, 0.1), 2);
    absl::Status s = other->RestoreState(*adam_state);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr("\"adam\"")) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("\"", name, "\""))) << name;
  }
  // An SGD checkpoint's "" into Adam, a truncated state, another size.
  EXPECT_THAT(std::string(adam->RestoreState("").message()), HasSubstr("sgd"));
  EXPECT_FALSE(adam->RestoreState(adam_state->substr(0, adam_state->size() - 1)).ok());
  EXPECT_FALSE(Make(Named("adam", 0.1), 3)->RestoreState(*adam_state).ok());
}

TEST(Optimizer, FailedRestoreKeepsTheState) {
  auto opt = Make(Named("momentum", 1.0), 1);
  std::vector<float> w = {0};
  Step(opt.get(), 1, {1}, &w);
  const std::string before = *opt->SaveState();
  EXPECT_FALSE(opt->RestoreState(before.substr(0, 20)).ok());
  EXPECT_EQ(*opt->SaveState(), before);
}

TEST(ValidateOptimizerOptions, NamesTheFlagOfEachBadValue) {
  struct Case {
    void (*change)(OptimizerOptions&);
    const char* message;
  };
  const Case cases[] = {
      {[](OptimizerOptions& o) { o.name = "lion"; }, "unknown --optimizer 'lion' (known: sgd"},
      {[](OptimizerOptions& o) { o.learning_rate = 0; }, "--lr must be a positive number"},
      {[](OptimizerOptions& o) { o.learning_rate = NAN; }, "--lr must be a positive number"},
      {[](OptimizerOptions& o) { o.momentum = -0.1; }, "--momentum must be >= 0"},
      {[](OptimizerOptions& o) {
         o.name = "nesterov";
         o.momentum = 0;
       },
       "--momentum must be > 0 for --optimizer=nesterov"},
      {[](OptimizerOptions& o) { o.beta1 = 1; }, "--beta1 must be in [0, 1)"},
      {[](OptimizerOptions& o) { o.beta2 = -0.5; }, "--beta2 must be in [0, 1)"},
      {[](OptimizerOptions& o) { o.eps = 0; }, "--eps must be > 0"},
      {[](OptimizerOptions& o) { o.weight_decay = -1; }, "--weight_decay must be >= 0"},
      {[](OptimizerOptions& o) { o.schedule.name = "linear"; }, "unknown --lr_schedule 'linear'"},
      {[](OptimizerOptions& o) { o.schedule.warmup_steps = -1; }, "--warmup_steps must be >= 0"},
      {[](OptimizerOptions& o) { o.schedule.decay_steps = 0; }, "--decay_steps must be >= 1"},
      {[](OptimizerOptions& o) { o.schedule.decay_rate = 0; }, "--decay_rate must be in (0, 1]"},
      {[](OptimizerOptions& o) { o.schedule.min_lr = 1; }, "--min_lr must be in [0, --lr]"},
  };
  for (const Case& c : cases) {
    OptimizerOptions o;
    ASSERT_TRUE(ValidateOptimizerOptions(o).ok());
    c.change(o);
    const absl::Status s = ValidateOptimizerOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
    EXPECT_FALSE(CreateOptimizer(o, 1).ok()) << c.message;
  }
}

}  // namespace
}  // namespace ps
