#include "server/core/versioned_weights.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/optimizer.h"
#include "common/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const ModelSpec kSpec = {{"w", {2, 2}}, {"b", {3}}};  // 7 elements on one shard

std::unique_ptr<Optimizer> Sgd(int64_t n, float lr = 1.0f) {
  OptimizerOptions o;
  o.learning_rate = lr;
  return *CreateOptimizer(o, n);
}

// `w` installed at `version` with SGD (learning rate 1) over one shard.
void Install(VersionedWeights* w, std::vector<float> values, int64_t version = 0) {
  ASSERT_TRUE(w->Install(MakeSliceLayout(kSpec, 1, 0), std::move(values), Sgd(7), version).ok());
}

TEST(VersionedWeights, StartsEmptyAndInstallMakesAVersion) {
  Gauge gauge;
  VersionedWeights w(0, &gauge);
  EXPECT_FALSE(w.initialized());
  EXPECT_EQ(w.layout()->num_elements, 0);
  Install(&w, {1, 2, 3, 4, 5, 6, 7}, 4);
  EXPECT_TRUE(w.initialized());
  EXPECT_EQ(w.version(), 4);
  EXPECT_EQ(gauge.Get(), 4);
  const WeightsSnapshot s = w.Snapshot();
  EXPECT_EQ(s.version, 4);
  EXPECT_EQ(s.layout, w.layout());
  EXPECT_THAT(*s.weights, ElementsAre(1, 2, 3, 4, 5, 6, 7));
}

TEST(VersionedWeights, ApplyMeanUpdatesAndAdvancesTheVersion) {
  Gauge gauge;
  VersionedWeights w(0, &gauge);
  Install(&w, std::vector<float>(7, 1.0f));
  w.ApplyMean({std::vector<float>(7, 2.0f), std::vector<float>(7, 4.0f)});  // mean 3, lr 1
  EXPECT_EQ(w.version(), 1);
  EXPECT_EQ(gauge.Get(), 1);
  EXPECT_EQ(*w.Snapshot().weights, std::vector<float>(7, -2.0f));
}

TEST(VersionedWeights, SnapshotNeverSeesALaterUpdate) {
  VersionedWeights w(0);
  Install(&w, std::vector<float>(7, 1.0f));
  const WeightsSnapshot held = w.Snapshot();
  w.ApplyMean({std::vector<float>(7, 1.0f)});
  EXPECT_EQ(held.version, 0);
  EXPECT_EQ(*held.weights, std::vector<float>(7, 1.0f));  // copied on write
  const WeightsSnapshot now = w.Snapshot();
  EXPECT_NE(now.weights, held.weights);
  EXPECT_EQ(*now.weights, std::vector<float>(7, 0.0f));
}

TEST(VersionedWeights, UnheldBufferIsUpdatedInPlace) {
  VersionedWeights w(0);
  Install(&w, std::vector<float>(7, 1.0f));
  const float* before = w.Snapshot().weights->data();  // the snapshot is gone again
  w.ApplyMean({std::vector<float>(7, 1.0f)});
  EXPECT_EQ(w.Snapshot().weights->data(), before);
}

TEST(VersionedWeights, NoGradientsOnlyMoveTheVersion) {
  // A shard that owns no elements still advances.
  VersionedWeights w(0);
  const ModelSpec tiny = {{"t", {2}}};
  auto layout = MakeSliceLayout(tiny, 3, 0);
  ASSERT_EQ(layout->num_elements, 0);
  ASSERT_TRUE(w.Install(layout, {}, Sgd(0), 0).ok());
  w.ApplyMean({{}, {}});
  EXPECT_EQ(w.version(), 1);
}

TEST(VersionedWeights, FailedInstallChangesNothing) {
  VersionedWeights w(3);
  Install(&w, std::vector<float>(7, 1.0f), 2);
  absl::Status s = w.Install(MakeSliceLayout(kSpec, 1, 0), {1, 2}, Sgd(7), 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("state has 2 elements but shard 3 owns 7"));
  const ModelSpec bigger = {{"w", {2, 3}}};
  s = w.Install(MakeSliceLayout(bigger, 1, 0), std::vector<float>(6), nullptr, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);  // the optimizer does not fit
  EXPECT_EQ(w.version(), 2);
  EXPECT_EQ(*w.Snapshot().weights, std::vector<float>(7, 1.0f));
  VersionedWeights empty(0);
  EXPECT_EQ(empty.Install(MakeSliceLayout(kSpec, 1, 0), std::vector<float>(7), nullptr, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(empty.initialized());
}

TEST(VersionedWeights, InstallWithoutAnOptimizerKeepsTheCurrentOne) {
  VersionedWeights w(0);
  ASSERT_TRUE(w.Install(MakeSliceLayout(kSpec, 1, 0), std::vector<float>(7, 0.0f),
                        Sgd(7, 0.5f), 0)
                  .ok());
  ASSERT_TRUE(w.Install(MakeSliceLayout(kSpec, 1, 0), std::vector<float>(7, 1.0f), nullptr, 5)
                  .ok());
  w.ApplyMean({std::vector<float>(7, 1.0f)});
  EXPECT_EQ(w.version(), 6);
  EXPECT_EQ(*w.Snapshot().weights, std::vector<float>(7, 0.5f));  // lr 0.5 kept
}

TEST(VersionedWeights, ExportFillsTheParametersOfAState) {
  VersionedWeights w(1);
  ShardState state;
  absl::Status s = w.ExportTo(&state);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shard 1 has no parameters to export"));
  Install(&w, {1, 2, 3, 4, 5, 6, 7}, 3);
  ASSERT_TRUE(w.ExportTo(&state).ok());
  EXPECT_EQ(state.spec, kSpec);
  EXPECT_EQ(state.version, 3);
  EXPECT_THAT(state.weights, ElementsAre(1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(state.optimizer, "sgd");
}

TEST(VersionedWeights, AssembleChecksEverySliceBeforeCopying) {
  auto layout = MakeSliceLayout(kSpec, 1, 0);
  const std::vector<float> wv = {1, 2, 3, 4}, bv = {5, 6, 7};
  auto bytes = [](const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  const std::string wb = bytes(wv), bb = bytes(bv);
  std::vector<RawTensorSlice> values = {{"b", {3}, 0, 3, {bb}}, {"w", {2, 2}, 0, 4, {wb}}};
  SliceAssembler::Options o;
  o.what = "init to shard 0";
  absl::StatusOr<std::vector<float>> flat = VersionedWeights::Assemble(layout, values, o);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_THAT(*flat, ElementsAre(1, 2, 3, 4, 5, 6, 7));  // layout order
  values.pop_back();  // "w" missing
  flat = VersionedWeights::Assemble(layout, values, o);
  EXPECT_EQ(flat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(flat.status().message()), HasSubstr("init to shard 0"));
}

}  // namespace
}  // namespace ps
