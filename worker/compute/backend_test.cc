// Backend conformance, op by op: every backend in the build computes each op
// like a plain reference implementation, on random shapes (including sizes
// that are not multiples of 32) with fresh random inputs each run; and the
// CUDA backend agrees with the CPU backend op by op. And the device: each
// backend says which it is, WrapHost is the caller's memory on the CPU only,
// started copies to the host deliver their source as started. The MLP's
// training step on every backend is worker/mlp/backend_training_test.cc;
// the fixtures both use are in backend_test_util.h.
// Failures print the seed; BACKEND_TEST_SEED=<seed> replays a run.
#include "worker/compute/backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/compute/backend_test_util.h"

namespace ps {
namespace {

using backend_testing::Backends;
using backend_testing::BackendTest;
using backend_testing::CudaAgreesWithCpu;
using backend_testing::Download;
using backend_testing::Upload;

// gamma_n = n*u / (1 - n*u) with u = 2^-24: a float32 sum of n products (or
// any computation with at most n roundings along each path) is within
// gamma_n * (the same computation over absolute values) of the exact result,
// whatever the order of the sum and whether it uses FMA (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., section 3.1). Two float32
// evaluations in different orders are thus within twice that of each other.
double Gamma(int n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1 - n * u);
}

// Each entry of `got` is within gamma * magnitude[i] of want[i] (plus what
// underflow to subnormals can lose, n times the smallest subnormal).
void ExpectWithinRounding(const std::vector<float>& got, const std::vector<double>& want,
                          const std::vector<double>& magnitude, double gamma, int n) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), magnitude.size());
  const double underflow = n * double(std::numeric_limits<float>::denorm_min());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), gamma * magnitude[i] + underflow)
        << "at " << i << ": got " << got[i] << ", want " << want[i];
  }
}

// got == want exactly (operations IEEE arithmetic makes exact).
void ExpectExact(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], float(want[i])) << "at " << i;
}

// alpha * op(a) * op(b) + beta * c in double, and the magnitude that bounds
// its float32 rounding: |alpha| * |op(a)| * |op(b)| + |beta| * |c|.
void ReferenceGemm(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a,
                   const std::vector<float>& b, float beta, const std::vector<float>& c,
                   std::vector<double>* want, std::vector<double>* magnitude) {
  want->assign(c.size(), 0.0);
  magnitude->assign(c.size(), 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double t =
            double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
        s += t;
        mag += std::fabs(t);
      }
      (*want)[i * n + j] = alpha * s + beta * c[i * n + j];
      (*magnitude)[i * n + j] = std::fabs(alpha) * mag + std::fabs(beta * c[i * n + j]);
    }
  }
}

// A float32 GEMM rounds at most k + 3 times along any path: k products and
// sums, the scaling by alpha, beta * c, and the final addition.
TEST_P(BackendTest, GemmMatchesReferenceForAllTransposes) {
  for (int iter = 0; iter < 20; ++iter) {
    const int m = Dim(), n = Dim(), k = Dim();
    const bool ta = iter & 1, tb = iter & 2;
    const float alpha = 0.75f, beta = iter % 3 == 0 ? 0.0f : 0.5f;
    auto a = Random(size_t(m) * k), b = Random(size_t(k) * n), c = Random(size_t(m) * n);
    std::vector<double> want, magnitude;
    ReferenceGemm(ta, tb, m, n, k, alpha, a, b, beta, c, &want, &magnitude);
    auto da = Upload(a), db = Upload(b), dc = Upload(c);
    ASSERT_TRUE(backend_->Gemm(ta, tb, m, n, k, alpha, *da, *db, beta, dc.get()).ok());
    ExpectWithinRounding(Download(*dc, c.size()), want, magnitude, Gamma(k + 3), k + 3);
  }
}

// A float32 addition, max and select are exact in IEEE arithmetic; a column
// sum of `rows` terms rounds at most `rows` times.
TEST_P(BackendTest, ElementwiseOpsMatchReference) {
  const int rows = Dim(), cols = Dim();
  auto x = Random(size_t(rows) * cols), bias = Random(cols), dy = Random(x.size());
  std::vector<double> biased(x.size()), relu(x.size()), drelu(x.size()), colsum(cols, 0.0),
      colmag(cols, 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t i = size_t(r) * cols + c;
      biased[i] = x[i] + bias[c];  // a float32 sum
      relu[i] = std::max(biased[i], 0.0);
      drelu[i] = relu[i] > 0 ? dy[i] : 0.0;
      colsum[c] += drelu[i];
      colmag[c] += std::fabs(drelu[i]);
    }
  }
  auto dx = Upload(x), db = Upload(bias), ddy = Upload(dy), out = Upload(std::vector<float>(cols));
  ASSERT_TRUE(backend_->AddBias(rows, cols, *db, dx.get()).ok());
  ExpectExact(Download(*dx, x.size()), biased);
  ASSERT_TRUE(backend_->Relu(rows * cols, dx.get()).ok());
  ExpectExact(Download(*dx, x.size()), relu);
  ASSERT_TRUE(backend_->ReluBackward(rows * cols, *dx, ddy.get()).ok());
  ExpectExact(Download(*ddy, x.size()), drelu);
  ASSERT_TRUE(backend_->ColumnSums(rows, cols, *ddy, out.get()).ok());
  ExpectWithinRounding(Download(*out, cols), colsum, colmag, Gamma(rows), rows);
}

TEST_P(BackendTest, GatherRowsCopiesTheIndexedRows) {
  const int table_rows = Dim(), cols = Dim(), rows = Dim(200);
  auto table = Random(size_t(table_rows) * cols);
  std::vector<int64_t> index(rows);
  for (int64_t& i : index) i = rng_() % table_rows;
  std::vector<float> want;
  for (int64_t i : index) want.insert(want.end(), &table[i * cols], &table[(i + 1) * cols]);
  auto dt = Upload(table), dd = Upload(std::vector<float>(want.size()));
  ASSERT_TRUE(backend_->GatherRows(*dt, cols, index, dd.get()).ok());
  EXPECT_EQ(Download(*dd, want.size()), want);

  for (int64_t bad : {int64_t{-1}, int64_t{table_rows}}) {
    index[rng_() % rows] = bad;
    EXPECT_EQ(backend_->GatherRows(*dt, cols, index, dd.get()).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST_P(BackendTest, SoftmaxCrossEntropyMatchesReference) {
  const int rows = Dim(), classes = 2 + rng_() % 40;
  auto logits = Random(size_t(rows) * classes);
  for (float& v : logits) v *= 5;
  std::vector<float> labels = Labels(rows, classes);
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
  // In float32 (as a GPU computes it) a row's exp-sum of at most 41 classes
  // and its log are within about (classes + 4) * u = 2.7e-6 relative, so a
  // row's loss (logits within +-5) is within 3e-5 absolute, and the gradient
  // (each |p - onehot| <= 1, times scale <= 1) within 2.7e-6: the bounds
  // below (1e-4 of the loss, at least 1e-4; 1e-5) hold with room to spare.
  // The CPU computes them in double.
  EXPECT_NEAR(sums->loss_sum, loss, 1e-4 * std::max(1.0, loss));
  EXPECT_EQ(sums->correct, correct);
  ExpectClose(Download(*dg, logits.size()), grad);
  // Without a gradient, the same sums.
  auto again = backend_->SoftmaxCrossEntropy(rows, classes, *dl, *dy, scale, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->loss_sum, sums->loss_sum);
  EXPECT_EQ(again->correct, sums->correct);
}

TEST_P(BackendTest, BadSizesAndLabelsAreErrors) {
  auto small = Upload(std::vector<float>(4));
  EXPECT_EQ(backend_->Gemm(false, false, 3, 3, 3, 1, *small, *small, 0, small.get()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->AddBias(-1, 2, *small, small.get()).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> five(5);
  EXPECT_EQ(backend_->CopyToDevice(five, small.get()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->StartCopyToHost(*small, absl::MakeSpan(five)).code(),
            absl::StatusCode::kInvalidArgument);
  for (float bad : {7.0f, -1.0f, 1.5f, std::nanf("")}) {
    // The bad label sits among good ones, in a row the device must find.
    auto labels = Upload({1.0f, 0.0f, bad, 3.0f});
    auto logits = Upload(Random(16));
    auto sums = backend_->SoftmaxCrossEntropy(4, 4, *logits, *labels, 1, nullptr);
    EXPECT_EQ(sums.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(sums.status().message().find("row 2"), absl::string_view::npos) << sums.status();
  }
}

TEST_P(BackendTest, NameAndDescriptionSayWhichBackend) {
  EXPECT_EQ(backend_->name(), GetParam());
  EXPECT_EQ(backend_->description().rfind(GetParam(), 0), 0u) << backend_->description();
}

// WrapHost: on the CPU ops write into the caller's memory (no copy); on a
// device with memory of its own there is no such buffer.
TEST_P(BackendTest, WrapHostIsTheCallersMemoryOnTheCpuOnly) {
  std::vector<float> host(6, -1.0f);
  std::unique_ptr<DeviceBuffer> view = backend_->WrapHost(absl::MakeSpan(host));
  if (GetParam() != "cpu") {
    EXPECT_EQ(view, nullptr);
    return;
  }
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->size(), 6u);
  auto x = Upload({1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(backend_->ColumnSums(2, 3, *x, view.get()).ok());
  EXPECT_EQ(host, (std::vector<float>{5, 7, 9, -1, -1, -1}));
  ASSERT_TRUE(backend_->Relu(6, view.get()).ok());
  EXPECT_EQ(host, (std::vector<float>{5, 7, 9, 0, 0, 0}));
}

// A started copy delivers its source as it was when started, however later
// ops change it, and has landed once FinishCopiesToHost returns; copies larger
// than any staging buffer and more copies than fit one at once both work.
TEST_P(BackendTest, StartedCopiesDeliverTheSourceAsStarted) {
  std::vector<float> big = Random((3 << 20) + Dim());
  std::vector<float> small = Random(size_t(Dim()) * Dim());
  auto dbig = Upload(big), dsmall = Upload(small);
  auto one = Upload(std::vector<float>(small.size(), 1.0f));
  std::vector<float> got_big(big.size());
  constexpr int kCopies = 40;
  std::vector<std::vector<float>> got(kCopies, std::vector<float>(small.size()));
  ASSERT_TRUE(backend_->StartCopyToHost(*dbig, absl::MakeSpan(got_big)).ok());
  ASSERT_TRUE(backend_->Relu(big.size(), dbig.get()).ok());
  std::vector<std::vector<float>> want;
  for (int i = 0; i < kCopies; ++i) {
    ASSERT_TRUE(backend_->StartCopyToHost(*dsmall, absl::MakeSpan(got[i])).ok());
    want.push_back(small);
    ASSERT_TRUE(backend_->AddBias(1, small.size(), *one, dsmall.get()).ok());
    for (float& v : small) v += 1.0f;
  }
  ASSERT_TRUE(backend_->FinishCopiesToHost().ok());
  EXPECT_TRUE(got_big == big);
  for (int i = 0; i < kCopies; ++i) EXPECT_TRUE(got[i] == want[i]) << "copy " << i;
  EXPECT_TRUE(backend_->FinishCopiesToHost().ok()) << "nothing left to finish";
  // The ops after the copies ran too.
  EXPECT_TRUE(Download(*dsmall, small.size()) == small);
  for (float& v : big) v = std::max(v, 0.0f);
  EXPECT_TRUE(Download(*dbig, big.size()) == big);
  EXPECT_TRUE(backend_->Synchronize().ok());
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest, ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param; });

TEST_F(CudaAgreesWithCpu, OnEveryOp) {
  // Sums of up to 800 products: cuBLAS and OpenBLAS order them differently,
  // so each is held to the rounding bound of GemmMatchesReferenceForAllTransposes.
  for (int iter = 0; iter < 8; ++iter) {
    const int m = Dim(300), n = Dim(300), k = Dim(800);
    const bool ta = iter & 1, tb = iter & 2;
    const float alpha = 0.75f, beta = iter % 3 == 0 ? 0.0f : 0.5f;
    const auto a = Random(size_t(m) * k), b = Random(size_t(k) * n), c = Random(size_t(m) * n);
    std::vector<double> want, magnitude;
    ReferenceGemm(ta, tb, m, n, k, alpha, a, b, beta, c, &want, &magnitude);
    for (ComputeBackend* be : {cpu_.get(), cuda_.get()}) {
      SCOPED_TRACE(absl::StrCat(be->name(), " Gemm ", m, "x", n, "x", k, " ta=", ta, " tb=", tb));
      auto da = Upload(be, a), db = Upload(be, b), dc = Upload(be, c);
      ASSERT_TRUE(be->Gemm(ta, tb, m, n, k, alpha, *da, *db, beta, dc.get()).ok());
      ExpectWithinRounding(Download(be, *dc, c.size()), want, magnitude, Gamma(k + 3), k + 3);
    }
  }

  const int rows = Dim(300), cols = Dim(300);
  const auto x = Random(size_t(rows) * cols), bias = Random(cols), dy = Random(x.size());
  ExpectSame("AddBias", [&](ComputeBackend* be) {
    auto dx = Upload(be, x), db = Upload(be, bias);
    EXPECT_TRUE(be->AddBias(rows, cols, *db, dx.get()).ok());
    return Download(be, *dx, x.size());
  });
  ExpectSame("Relu", [&](ComputeBackend* be) {
    auto dx = Upload(be, x);
    EXPECT_TRUE(be->Relu(x.size(), dx.get()).ok());
    return Download(be, *dx, x.size());
  });
  ExpectSame("ReluBackward", [&](ComputeBackend* be) {
    auto dx = Upload(be, x), ddy = Upload(be, dy);
    EXPECT_TRUE(be->ReluBackward(x.size(), *dx, ddy.get()).ok());
    return Download(be, *ddy, dy.size());
  });
  std::vector<double> colsum(cols, 0.0), colmag(cols, 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    colsum[i % cols] += x[i];
    colmag[i % cols] += std::fabs(x[i]);
  }
  for (ComputeBackend* be : {cpu_.get(), cuda_.get()}) {
    SCOPED_TRACE(absl::StrCat(be->name(), " ColumnSums"));
    auto dx = Upload(be, x), out = Upload(be, std::vector<float>(cols));
    ASSERT_TRUE(be->ColumnSums(rows, cols, *dx, out.get()).ok());
    ExpectWithinRounding(Download(be, *out, cols), colsum, colmag, Gamma(rows), rows);
  }
  std::vector<int64_t> index(Dim(500));
  for (int64_t& i : index) i = rng_() % rows;
  ExpectSame("GatherRows", [&](ComputeBackend* be) {
    auto dx = Upload(be, x), out = Upload(be, std::vector<float>(index.size() * cols));
    EXPECT_TRUE(be->GatherRows(*dx, cols, index, out.get()).ok());
    return Download(be, *out, index.size() * cols);
  });

  const int classes = 1 + Dim(40);
  auto logits = Random(size_t(rows) * classes);
  for (float& v : logits) v *= 5;
  const std::vector<float> labels = Labels(rows, classes);
  std::vector<LossSums> sums;
  ExpectSame("SoftmaxCrossEntropy", [&](ComputeBackend* be) {
    auto dl = Upload(be, logits), dy = Upload(be, labels);
    auto dg = Upload(be, std::vector<float>(logits.size()));
    auto s = be->SoftmaxCrossEntropy(rows, classes, *dl, *dy, 1.0f / rows, dg.get());
    EXPECT_TRUE(s.ok()) << s.status();
    sums.push_back(s.value_or(LossSums{}));
    return Download(be, *dg, logits.size());
  });
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_NEAR(sums[1].loss_sum, sums[0].loss_sum, kTolerance * sums[0].loss_sum);
  EXPECT_EQ(sums[1].correct, sums[0].correct);
}

}  // namespace
}  // namespace ps
