// What worker/backend_test.cc (the ops) and worker/backend_training_test.cc
// (device memory, copies and the model's training step) share: the backends
// of the build, random inputs from a seed printed on failure
// (BACKEND_TEST_SEED=<seed> replays it), uploads and downloads, and the two
// fixtures, BackendTest (one backend, parameterized over Backends()) and
// CudaAgreesWithCpu. Test-only. Backends() lists "cuda" where the including
// test is compiled with PS_WITH_CUDA (worker/BUILD's WITH_CUDA_DEFINES).
#ifndef PS_WORKER_COMPUTE_BACKEND_TEST_UTIL_H_
#define PS_WORKER_COMPUTE_BACKEND_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/compute/backend.h"

namespace ps {
namespace backend_testing {

inline std::vector<std::string> Backends() {
#ifdef PS_WITH_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

// A backend for the test, or the reason it must skip: no CUDA device
// (FAILED_PRECONDITION) or no CUDA support in this build (UNIMPLEMENTED).
inline absl::StatusOr<std::unique_ptr<ComputeBackend>> NewBackend(const std::string& device) {
  BackendOptions options;
  options.device = device;
  options.threads = 1;
  return CreateBackend(options);
}

inline bool Unavailable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition ||
         s.code() == absl::StatusCode::kUnimplemented;
}

inline std::string SkipReason(const absl::Status& s) {
  return absl::StrCat(s.code() == absl::StatusCode::kUnimplemented ? "no CUDA support: "
                                                                    : "no CUDA device: ",
                      s.message());
}

// Random inputs from a fresh seed, named in every failure message.
class RandomTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* replay = std::getenv("BACKEND_TEST_SEED");
    const unsigned seed = replay != nullptr ? std::strtoul(replay, nullptr, 10)
                                            : std::random_device{}();
    rng_.seed(seed);
    trace_ = std::make_unique<::testing::ScopedTrace>(
        __FILE__, __LINE__,
        absl::StrCat("random seed ", seed, " (replay: --test_env=BACKEND_TEST_SEED=", seed, ")"));
  }
  void TearDown() override { trace_.reset(); }

  std::vector<float> Random(size_t n) {
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  std::vector<float> Labels(int rows, int classes) {
    std::vector<float> v(rows);
    for (float& l : v) l = float(rng_() % classes);
    return v;
  }
  int Dim(int max = 77) { return 1 + rng_() % max; }

  std::mt19937 rng_;

 private:
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

inline std::unique_ptr<DeviceBuffer> Upload(ComputeBackend* backend, const std::vector<float>& v) {
  auto b = backend->Allocate(v.size());
  EXPECT_TRUE(b.ok()) << b.status();
  if (!b.ok()) return nullptr;
  absl::Status s = backend->CopyToDevice(v, b->get());
  EXPECT_TRUE(s.ok()) << s;
  return *std::move(b);
}

inline std::vector<float> Download(ComputeBackend* backend, const DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  absl::Status s = backend->CopyToHost(b, absl::MakeSpan(v));
  EXPECT_TRUE(s.ok()) << s;
  return v;
}

// max |got - want| relative to max |want|: an fp32 error measure that is
// not fooled by entries that cancel to nearly zero.
inline double MaxRelDiff(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return diff / scale;
}

class BackendTest : public RandomTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    RandomTest::SetUp();
    auto b = NewBackend(GetParam());
    if (Unavailable(b.status())) GTEST_SKIP() << SkipReason(b.status());
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }
  void TearDown() override {
    backend_.reset();
    RandomTest::TearDown();
  }

  std::unique_ptr<DeviceBuffer> Upload(const std::vector<float>& v) {
    return backend_testing::Upload(backend_.get(), v);
  }
  std::vector<float> Download(const DeviceBuffer& b, size_t n) {
    return backend_testing::Download(backend_.get(), b, n);
  }
  static void ExpectClose(const std::vector<float>& got, const std::vector<double>& want,
                          double rel = 1e-5) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(want[i]))) << "at " << i;
    }
  }

  std::unique_ptr<ComputeBackend> backend_;
};

// The CUDA backend and the CPU backend agree, on the same random inputs: op
// by op (GEMM and column sums each within float32 rounding of the exact
// result, the other ops to a relative 1e-5 or exactly), and on a model's
// gradients to a relative 1e-5.
class CudaAgreesWithCpu : public RandomTest {
 protected:
  static constexpr double kTolerance = 1e-5;

  void SetUp() override {
    RandomTest::SetUp();
    auto cuda = NewBackend("cuda");
    if (Unavailable(cuda.status())) GTEST_SKIP() << SkipReason(cuda.status());
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *std::move(cuda);
    auto cpu = NewBackend("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
  }
  void TearDown() override {
    cuda_.reset();
    RandomTest::TearDown();
  }

  // Runs `op` (which returns its output) on both backends.
  void ExpectSame(const std::string& what,
                  const std::function<std::vector<float>(ComputeBackend*)>& op) {
    const std::vector<float> want = op(cpu_.get()), got = op(cuda_.get());
    EXPECT_LE(MaxRelDiff(got, want), kTolerance) << what;
  }

  std::unique_ptr<ComputeBackend> cpu_, cuda_;
};

}  // namespace backend_testing
}  // namespace ps

#endif  // PS_WORKER_COMPUTE_BACKEND_TEST_UTIL_H_
