// The MLP's training step on every backend in the build: its gradient
// matches finite differences, it trains on a held dataset as on uploaded
// batches, UseWeights reads the caller's weights in place on the CPU only;
// and the CUDA backend agrees with the CPU backend on a model's gradients.
// The backends' ops and device are worker/compute/backend_test.cc; the
// fixtures are worker/compute/backend_test_util.h.
// Failures print the seed; BACKEND_TEST_SEED=<seed> replays a run.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/backend.h"
#include "worker/compute/backend_test_util.h"
#include "worker/mlp/model.h"

namespace ps {
namespace {

using backend_testing::Backends;
using backend_testing::BackendTest;
using backend_testing::CudaAgreesWithCpu;
using backend_testing::MaxRelDiff;

// The model's analytic gradient agrees with central finite differences. A
// fixed seed keeps the probes away from ReLU kinks, where differences lie.
TEST_P(BackendTest, MlpGradientMatchesFiniteDifferences) {
  rng_.seed(1234);
  auto model = Mlp::Create(backend_.get(), {5, 7, 4}, 8);
  ASSERT_TRUE(model.ok());
  TensorList w = (*model)->InitialValues(rng_());
  for (float& b : w[1]) b = 0.1f;  // keep ReLUs away from their kink
  const int rows = 6;
  auto x = Random(rows * 5);
  std::vector<float> y = Labels(rows, 4);
  TensorList grads;
  ASSERT_TRUE((*model)->SetWeights(w).ok());
  ASSERT_TRUE((*model)->TrainStep(x.data(), y.data(), rows, &grads).ok());
  auto loss_at = [&](const TensorList& ww) {
    EXPECT_TRUE((*model)->SetWeights(ww).ok());
    return (*model)->Evaluate(x.data(), y.data(), rows)->loss_sum / rows;
  };
  const float eps = 1e-3f;
  for (size_t t = 0; t < w.size(); ++t) {
    for (size_t i = 0; i < w[t].size(); i += 3) {
      TensorList plus = w, minus = w;
      plus[t][i] += eps;
      minus[t][i] -= eps;
      const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * eps);
      EXPECT_NEAR(grads[t][i], numeric, 2e-3) << "tensor " << t << " element " << i;
    }
  }
}

// TrainStep on a held dataset gathers the batch that TrainStep would upload,
// and computes the same; on_ready reports each layer once, last first, with
// its gradients already in place.
TEST_P(BackendTest, MlpTrainStepOnHeldDatasetMatchesUploadedBatch) {
  const std::vector<int> dims = {Dim(), Dim(), Dim(), 2 + int(rng_() % 9)};
  const int n = 100, rows = Dim(50);
  auto model = Mlp::Create(backend_.get(), dims, rows);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->SetWeights((*model)->InitialValues(rng_())).ok());
  const std::vector<float> images = Random(size_t(n) * dims[0]), labels = Labels(n, dims.back());
  std::vector<int64_t> examples(rows);
  std::vector<float> x, y;
  for (int64_t& e : examples) {
    e = rng_() % n;
    x.insert(x.end(), &images[e * dims[0]], &images[(e + 1) * dims[0]]);
    y.push_back(labels[e]);
  }
  TensorList want, got;
  EXPECT_EQ((*model)->TrainStep(examples, &got).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto uploaded = (*model)->TrainStep(x.data(), y.data(), rows, &want);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();

  ASSERT_TRUE((*model)->HoldDataset(images, labels).ok());
  std::vector<int> order;
  TensorList at_ready((*model)->spec().size());
  auto gathered = (*model)->TrainStep(examples, &got, [&](const std::vector<int>& ready) {
    for (int t : ready) {
      order.push_back(t);
      at_ready[t] = got[t];
    }
  });
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(order, (std::vector<int>{4, 5, 2, 3, 0, 1}));
  EXPECT_TRUE(at_ready == got);
  EXPECT_NEAR(gathered->loss_sum, uploaded->loss_sum, 1e-6 * uploaded->loss_sum);
  EXPECT_EQ(gathered->correct, uploaded->correct);
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_LE(MaxRelDiff(got[t], want[t]), 1e-6) << "tensor " << t;
  }
}

// UseWeights computes what SetWeights does. On the CPU the model then reads
// the caller's weights in place (a change to them shows in the next step
// without another call); on other backends it holds a copy. SetWeights ends
// the borrowing.
TEST_P(BackendTest, MlpUseWeightsReadsTheCallersWeightsOnTheCpuOnly) {
  const std::vector<int> dims = {Dim(), Dim(), 2 + int(rng_() % 9)};
  const int rows = Dim(20);
  auto model = Mlp::Create(backend_.get(), dims, rows);
  ASSERT_TRUE(model.ok()) << model.status();
  const TensorList w = (*model)->InitialValues(rng_());
  TensorList changed = w;
  for (float& v : changed[0]) v *= 0.5f;
  const std::vector<float> x = Random(size_t(rows) * dims[0]), y = Labels(rows, dims.back());
  auto step = [&](TensorList* grads) {
    auto s = (*model)->TrainStep(x.data(), y.data(), rows, grads);
    ASSERT_TRUE(s.ok()) << s.status();
  };
  TensorList with_w, with_changed, got;
  ASSERT_TRUE((*model)->SetWeights(w).ok());
  step(&with_w);
  ASSERT_TRUE((*model)->SetWeights(changed).ok());
  step(&with_changed);
  ASSERT_NE(with_w, with_changed);

  TensorList borrowed = w;
  ASSERT_TRUE((*model)->UseWeights(&borrowed).ok());
  step(&got);
  EXPECT_EQ(got, with_w);
  borrowed = changed;  // same sizes: the vectors keep their memory
  step(&got);
  EXPECT_EQ(got, backend_->name() == "cpu" ? with_changed : with_w);

  ASSERT_TRUE((*model)->SetWeights(w).ok());
  borrowed = changed;
  step(&got);
  EXPECT_EQ(got, with_w);
  TensorList wrong = w;
  wrong[1].pop_back();
  EXPECT_EQ((*model)->UseWeights(&wrong).code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param; });

// The smallest |pre-activation| of the hidden layers of an MLP with weights
// w on x [rows, dims[0]], in double precision.
double ClosestToReluKink(const std::vector<int>& dims, const TensorList& w,
                         const std::vector<float>& x, int rows) {
  std::vector<double> act(x.begin(), x.end());
  double closest = INFINITY;
  for (size_t l = 0; l + 2 < dims.size(); ++l) {
    const int in = dims[l], out = dims[l + 1];
    std::vector<double> next(size_t(rows) * out);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        double z = w[2 * l + 1][o];
        for (int i = 0; i < in; ++i) z += act[size_t(r) * in + i] * w[2 * l][size_t(i) * out + o];
        closest = std::min(closest, std::fabs(z));
        next[size_t(r) * out + o] = std::max(z, 0.0);
      }
    }
    act = std::move(next);
  }
  return closest;
}

TEST_F(CudaAgreesWithCpu, OnMlpGradients) {
  const std::vector<int> dims = {784, 200 + Dim(100), 50 + Dim(50), 10};
  const int rows = 33 + Dim(60);
  auto cpu_model = Mlp::Create(cpu_.get(), dims, rows);
  auto cuda_model = Mlp::Create(cuda_.get(), dims, rows);
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
  ASSERT_TRUE(cuda_model.ok()) << cuda_model.status();
  const TensorList w = (*cpu_model)->InitialValues(rng_());
  // A pre-activation within rounding of 0 could pass one backend's ReLU and
  // not the other's; inputs keep every one far from there.
  std::vector<float> x;
  do {
    x = Random(size_t(rows) * dims[0]);
  } while (ClosestToReluKink(dims, w, x, rows) < 1e-5);
  const std::vector<float> labels = Labels(rows, dims.back());

  TensorList want, got;
  ASSERT_TRUE((*cpu_model)->SetWeights(w).ok());
  ASSERT_TRUE((*cuda_model)->SetWeights(w).ok());
  auto cpu_stats = (*cpu_model)->TrainStep(x.data(), labels.data(), rows, &want);
  auto cuda_stats = (*cuda_model)->TrainStep(x.data(), labels.data(), rows, &got);
  ASSERT_TRUE(cpu_stats.ok()) << cpu_stats.status();
  ASSERT_TRUE(cuda_stats.ok()) << cuda_stats.status();
  EXPECT_NEAR(cuda_stats->loss_sum, cpu_stats->loss_sum, kTolerance * cpu_stats->loss_sum);
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < want.size(); ++t) {
    EXPECT_LE(MaxRelDiff(got[t], want[t]), kTolerance) << (*cpu_model)->spec()[t].name;
  }
}

}  // namespace
}  // namespace ps
