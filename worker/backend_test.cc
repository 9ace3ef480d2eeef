// Backend conformance: every backend in the build computes each op like a
// plain reference implementation, on random shapes (including sizes that are
// not multiples of 32) with fresh random inputs each run.
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "worker/backend.h"
#include "worker/model.h"

namespace ps {
namespace {

std::vector<std::string> Backends() { return {"cpu"}; }

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto b = CreateBackend({GetParam(), 1});
    if (!b.ok() && b.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << GetParam() << " backend not available: " << b.status();
    }
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
    rng_.seed(std::random_device{}());
  }

  std::vector<float> Random(size_t n) {
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  int Dim() { return 1 + rng_() % 77; }

  std::unique_ptr<DeviceBuffer> Upload(const std::vector<float>& v) {
    auto b = backend_->Allocate(v.size());
    EXPECT_TRUE(b.ok());
    EXPECT_TRUE(backend_->CopyToDevice(v, b->get()).ok());
    return *std::move(b);
  }
  std::vector<float> Download(const DeviceBuffer& b, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE(backend_->CopyToHost(b, absl::MakeSpan(v)).ok());
    return v;
  }
  static void ExpectClose(const std::vector<float>& got, const std::vector<double>& want,
                          double rel = 1e-5) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(want[i]))) << "at " << i;
    }
  }

  std::unique_ptr<ComputeBackend> backend_;
  std::mt19937 rng_;
};

TEST_P(BackendTest, GemmMatchesReferenceForAllTransposes) {
  for (int iter = 0; iter < 20; ++iter) {
    const int m = Dim(), n = Dim(), k = Dim();
    const bool ta = iter & 1, tb = iter & 2;
    const float alpha = 0.75f, beta = iter % 3 == 0 ? 0.0f : 0.5f;
    auto a = Random(size_t(m) * k), b = Random(size_t(k) * n), c = Random(size_t(m) * n);
    std::vector<double> want(c.size());
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int p = 0; p < k; ++p) {
          s += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
        }
        want[i * n + j] = alpha * s + beta * c[i * n + j];
      }
    }
    auto da = Upload(a), db = Upload(b), dc = Upload(c);
    ASSERT_TRUE(backend_->Gemm(ta, tb, m, n, k, alpha, *da, *db, beta, dc.get()).ok());
    ExpectClose(Download(*dc, c.size()), want);
  }
}

TEST_P(BackendTest, ElementwiseOpsMatchReference) {
  const int rows = Dim(), cols = Dim();
  auto x = Random(size_t(rows) * cols), bias = Random(cols), dy = Random(x.size());
  std::vector<double> biased(x.size()), relu(x.size()), drelu(x.size()), colsum(cols, 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t i = size_t(r) * cols + c;
      biased[i] = float(x[i] + bias[c]);
      relu[i] = std::max(biased[i], 0.0);
      drelu[i] = relu[i] > 0 ? dy[i] : 0.0;
      colsum[c] += dy[i];
    }
  }
  auto dx = Upload(x), db = Upload(bias), ddy = Upload(dy), out = Upload(std::vector<float>(cols));
  ASSERT_TRUE(backend_->AddBias(rows, cols, *db, dx.get()).ok());
  ExpectClose(Download(*dx, x.size()), biased);
  ASSERT_TRUE(backend_->Relu(rows * cols, dx.get()).ok());
  ExpectClose(Download(*dx, x.size()), relu);
  ASSERT_TRUE(backend_->ReluBackward(rows * cols, *dx, ddy.get()).ok());
  ExpectClose(Download(*ddy, x.size()), drelu);
  ASSERT_TRUE(backend_->ColumnSums(rows, cols, *ddy, out.get()).ok());
  std::vector<double> want_sums(cols, 0.0);
  for (size_t i = 0; i < drelu.size(); ++i) want_sums[i % cols] += drelu[i];
  ExpectClose(Download(*out, cols), want_sums);
  (void)colsum;
}

TEST_P(BackendTest, SoftmaxCrossEntropyMatchesReference) {
  const int rows = Dim(), classes = 2 + rng_() % 15;
  auto logits = Random(size_t(rows) * classes);
  for (float& v : logits) v *= 5;
  std::vector<float> labels(rows);
  for (float& l : labels) l = float(rng_() % classes);
  const float scale = 1.0f / rows;
  double loss = 0;
  int64_t correct = 0;
  std::vector<double> grad(logits.size());
  for (int r = 0; r < rows; ++r) {
    const float* z = &logits[size_t(r) * classes];
    double mx = *std::max_element(z, z + classes), sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - mx);
    const int y = int(labels[r]);
    loss += std::log(sum) - (z[y] - mx);
    if (std::max_element(z, z + classes) - z == y) ++correct;
    for (int c = 0; c < classes; ++c) {
      grad[size_t(r) * classes + c] = (std::exp(z[c] - mx) / sum - (c == y)) * scale;
    }
  }
  auto dl = Upload(logits), dy = Upload(labels), dg = Upload(std::vector<float>(logits.size()));
  auto sums = backend_->SoftmaxCrossEntropy(rows, classes, *dl, *dy, scale, dg.get());
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_NEAR(sums->loss_sum, loss, 1e-4 * std::max(1.0, loss));
  EXPECT_EQ(sums->correct, correct);
  ExpectClose(Download(*dg, logits.size()), grad);
}

TEST_P(BackendTest, BadSizesAndLabelsAreErrors) {
  auto small = Upload(std::vector<float>(4));
  EXPECT_EQ(backend_->Gemm(false, false, 3, 3, 3, 1, *small, *small, 0, small.get()).code(),
            absl::StatusCode::kInvalidArgument);
  auto labels = Upload({7.0f});
  EXPECT_EQ(backend_->SoftmaxCrossEntropy(1, 4, *small, *labels, 1, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

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
  std::vector<float> y(rows);
  for (float& l : y) l = float(rng_() % 4);
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

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ps
