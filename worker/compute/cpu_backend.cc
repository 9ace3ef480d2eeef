// CPU implementation of ComputeBackend on OpenBLAS. Every op runs before it
// returns, so copies to the host land at once.
#include "worker/compute/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Owns its floats, or (WrapHost) is a view of the caller's.
class HostBuffer final : public DeviceBuffer {
 public:
  explicit HostBuffer(size_t n) : owned_(n, 0.0f), data_(owned_.data()), size_(n) {}
  explicit HostBuffer(absl::Span<float> view) : data_(view.data()), size_(view.size()) {}
  size_t size() const override { return size_; }
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  std::vector<float> owned_;
  float* const data_;
  const size_t size_;
};

const HostBuffer& H(const DeviceBuffer& b) { return static_cast<const HostBuffer&>(b); }
HostBuffer& H(DeviceBuffer* b) { return *static_cast<HostBuffer*>(b); }

class CpuBackend final : public ComputeBackend {
 public:
  CpuBackend(int threads, std::string why) : why_(std::move(why)) {
    if (threads > 0) openblas_set_num_threads(threads);
  }

  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return absl::StrCat("cpu (OpenBLAS, ", openblas_get_num_threads(), " threads)",
                        why_.empty() ? "" : "; ", why_);
  }

  // The host already holds the dataset.
  absl::StatusOr<bool> ShouldHoldDataset(size_t /*bytes*/) override { return false; }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(size_t n) override {
    return std::unique_ptr<DeviceBuffer>(new HostBuffer(n));
  }

  std::unique_ptr<DeviceBuffer> WrapHost(absl::Span<float> host) override {
    return std::make_unique<HostBuffer>(host);
  }

  absl::Status FinishCopiesToHost() override { return absl::OkStatus(); }
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  absl::Status DoCopyToDevice(absl::Span<const float> src, DeviceBuffer* dst) override {
    std::memcpy(H(dst).data(), src.data(), src.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status DoStartCopyToHost(const DeviceBuffer& src, absl::Span<float> dst) override {
    std::memcpy(dst.data(), H(src).data(), dst.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status DoGemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const DeviceBuffer& a, const DeviceBuffer& b, float beta,
                      DeviceBuffer* c) override {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, H(a).data(),
                trans_a ? m : k, H(b).data(), trans_b ? k : n, beta, H(c).data(), n);
    return absl::OkStatus();
  }

  absl::Status DoAddBias(int rows, int cols, const DeviceBuffer& bias, DeviceBuffer* x) override {
    const float* b = H(bias).data();
    float* p = H(x).data();
    for (int r = 0; r < rows; ++r, p += cols) {
      for (int c = 0; c < cols; ++c) p[c] += b[c];
    }
    return absl::OkStatus();
  }

  absl::Status DoRelu(int n, DeviceBuffer* x) override {
    float* p = H(x).data();
    for (int i = 0; i < n; ++i) p[i] = std::max(p[i], 0.0f);
    return absl::OkStatus();
  }

  absl::Status DoReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx) override {
    const float* yp = H(y).data();
    float* d = H(dx).data();
    for (int i = 0; i < n; ++i) d[i] = yp[i] > 0.0f ? d[i] : 0.0f;
    return absl::OkStatus();
  }

  absl::Status DoColumnSums(int rows, int cols, const DeviceBuffer& x,
                            DeviceBuffer* out) override {
    float* o = H(out).data();
    std::fill(o, o + cols, 0.0f);
    const float* p = H(x).data();
    for (int r = 0; r < rows; ++r, p += cols) {
      for (int c = 0; c < cols; ++c) o[c] += p[c];
    }
    return absl::OkStatus();
  }

  absl::Status DoGatherRows(const DeviceBuffer& table, int cols, absl::Span<const int64_t> rows,
                            DeviceBuffer* dst) override {
    float* d = H(dst).data();
    for (int64_t r : rows) {
      d = std::copy_n(H(table).data() + r * cols, cols, d);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<LossSums> DoSoftmaxCrossEntropy(int rows, int classes,
                                                 const DeviceBuffer& logits,
                                                 const DeviceBuffer& labels, float grad_scale,
                                                 DeviceBuffer* grad) override {
    LossSums sums;
    const float* lab = H(labels).data();
    for (int r = 0; r < rows; ++r) {
      const float* z = H(logits).data() + size_t(r) * classes;
      if (!(lab[r] >= 0 && lab[r] < classes) || lab[r] != std::floor(lab[r])) {
        return BadLabelError(r, lab[r], classes);
      }
      const int y = static_cast<int>(lab[r]);
      const float zmax = *std::max_element(z, z + classes);
      double denom = 0;
      for (int c = 0; c < classes; ++c) denom += std::exp(double(z[c]) - zmax);
      sums.loss_sum += std::log(denom) - (double(z[y]) - zmax);
      if (std::max_element(z, z + classes) - z == y) ++sums.correct;
      if (grad != nullptr) {
        float* g = H(grad).data() + size_t(r) * classes;
        for (int c = 0; c < classes; ++c) {
          const float p = static_cast<float>(std::exp(double(z[c]) - zmax) / denom);
          g[c] = (p - (c == y ? 1.0f : 0.0f)) * grad_scale;
        }
      }
    }
    return sums;
  }

  const std::string why_;  // see CreateCpuBackend
};

}  // namespace

std::unique_ptr<ComputeBackend> CreateCpuBackend(int threads, std::string why) {
  return std::make_unique<CpuBackend>(threads, std::move(why));
}

}  // namespace ps
