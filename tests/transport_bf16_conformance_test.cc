// Transport conformance on the bf16 wire (the fixture: tests/conformance.h):
// over both transports, on TCP and on unix sockets, the servers apply the
// client's bf16-rounded gradients to their float32 weights, a sync step is
// w - lr * mean of the rounded gradients, and a bf16 pull returns the
// weights rounded, exactly, large tensors of many stream chunks included.
#include <vector>

#include "common/bf16.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"

namespace ps {
namespace {

using namespace conformance;  // NOLINT: the shared fixture and helpers

// Worker 0 on the bf16 wire, worker 1 on f32: worker 0's gradients arrive
// rounded to bf16 and are applied to the float32 weights, which worker 1
// pulls exactly and worker 0 pulls rounded to bf16.
TEST_P(Conformance, Bf16WireAppliesRoundedGradientsToFloat32Weights) {
  const TensorList init = Fine(kSpec, 4);
  ASSERT_NE(RoundedToBf16(init), init);  // the test would show nothing otherwise
  ForEachVia(
      Mode::kAsync, init,
      [&](Via via, const Workers& workers) {
        TensorList weights;
        ASSERT_OK(workers[0]->Pull(0, &weights));
        EXPECT_EQ(weights, RoundedToBf16(init));
        ASSERT_OK(workers[1]->Pull(0, &weights));
        EXPECT_EQ(weights, init);
        // A bf16 push-pull: the rounded gradient applied, the result rounded.
        const TensorList g0 = Fine(kSpec, 5);
        const TensorList after0 = SgdStep(init, {RoundedToBf16(g0)});
        ASSERT_OK(PushPullVia(via, workers[0].get(), g0, &weights));
        EXPECT_EQ(weights, RoundedToBf16(after0));
        // The server kept float32: an f32 pull sees every bit.
        ASSERT_OK(workers[1]->Pull(0, &weights));
        EXPECT_EQ(weights, after0);
        // An f32 push is applied unrounded, and a bf16 pull rounds the result.
        const TensorList g1 = Fine(kSpec, 6);
        const TensorList after1 = SgdStep(after0, {g1});
        ASSERT_OK(workers[1]->Push(g1));
        ASSERT_OK(workers[0]->Pull(0, &weights));
        EXPECT_EQ(weights, RoundedToBf16(after1));
        EXPECT_EQ(workers[0]->version(), 2);
      },
      {WireDtype::kBf16, WireDtype::kF32});
}

// A sync step with both workers on bf16: the mean of the rounded gradients.
TEST_P(Conformance, Bf16SyncStepIsWeightsMinusLrTimesMeanOfRoundedGradients) {
  const TensorList init = Fine(kSpec, 7);
  Running run = Start(2, 2, Mode::kSync, kSpec, init, {WireDtype::kBf16, WireDtype::kBf16});
  ASSERT_EQ(run.workers.size(), 2u);
  const std::vector<TensorList> grads = {Fine(kSpec, 8), Fine(kSpec, 9)};
  std::vector<TensorList> weights(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] { status[w] = run.workers[w]->PushPull(grads[w], &weights[w]); });
  }
  for (auto& t : threads) t.join();
  const TensorList expected =
      SgdStep(init, {RoundedToBf16(grads[0]), RoundedToBf16(grads[1])});
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];
    EXPECT_EQ(weights[w], RoundedToBf16(expected)) << "worker " << w;
  }
}

// The same on the bf16 wire: many 2-byte-element chunks on the stream, and
// an odd number of elements per shard.
TEST_P(Conformance, LargeTensorsRoundTripInBf16) {
  const ModelSpec spec = {{"big", {3000001}}, {"small", {3}}};
  TensorList init = {std::vector<float>(3000001), {1, 2, 3}};
  TensorList grads = {std::vector<float>(3000001), {2, 2, 2}};
  for (size_t i = 0; i < init[0].size(); ++i) {
    init[0][i] = float(i % 1000) + float(i % 61) / 64;
    grads[0][i] = float(i % 7) + float(i % 13) / 256;
  }
  Running run = Start(2, 1, Mode::kAsync, spec, init, {WireDtype::kBf16});
  ASSERT_EQ(run.workers.size(), 1u);
  TensorList weights;
  ASSERT_OK(run.workers[0]->Pull(0, &weights));
  EXPECT_TRUE(weights == RoundedToBf16(init));
  ASSERT_OK(run.workers[0]->PushPull(grads, &weights));
  EXPECT_TRUE(weights == RoundedToBf16(SgdStep(init, {RoundedToBf16(grads)})));
}

INSTANTIATE_TEST_SUITE_P(Transports, Conformance, AllSetups(), SetupName);

}  // namespace
}  // namespace ps
