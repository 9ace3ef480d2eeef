// CPU implementation of ComputeBackend on OpenBLAS.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/backend.h"

namespace ps {
namespace {

class HostBuffer final : public DeviceBuffer {
 public:
  explicit HostBuffer(size_t n) : data_(n, 0.0f) {}
  size_t size() const override { return data_.size(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }

 private:
  std::vector<float> data_;
};

const HostBuffer& H(const DeviceBuffer& b) { return static_cast<const HostBuffer&>(b); }
HostBuffer& H(DeviceBuffer* b) { return *static_cast<HostBuffer*>(b); }

absl::Status NeedSize(const char* op, const char* arg, const DeviceBuffer& b, size_t n) {
  if (b.size() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " holds ", b.size(), " elements, needs ", n));
  }
  return absl::OkStatus();
}

class CpuBackend final : public ComputeBackend {
 public:
  explicit CpuBackend(int threads) {
    if (threads > 0) openblas_set_num_threads(threads);
  }

  std::string name() const override { return "cpu"; }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(size_t n) override {
    return std::unique_ptr<DeviceBuffer>(new HostBuffer(n));
  }

  absl::Status CopyToDevice(absl::Span<const float> src, DeviceBuffer* dst) override {
    if (src.size() > dst->size()) return NeedSize("CopyToDevice", "dst", *dst, src.size());
    if (!src.empty()) std::memcpy(H(dst).data(), src.data(), src.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status CopyToHost(const DeviceBuffer& src, absl::Span<float> dst) override {
    if (dst.size() > src.size()) return NeedSize("CopyToHost", "src", src, dst.size());
    if (!dst.empty()) std::memcpy(dst.data(), H(src).data(), dst.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                    const DeviceBuffer& a, const DeviceBuffer& b, float beta,
                    DeviceBuffer* c) override {
    if (m <= 0 || n <= 0 || k <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("Gemm: bad dims m=", m, " n=", n, " k=", k));
    }
    if (auto s = NeedSize("Gemm", "A", a, size_t(m) * k); !s.ok()) return s;
    if (auto s = NeedSize("Gemm", "B", b, size_t(k) * n); !s.ok()) return s;
    if (auto s = NeedSize("Gemm", "C", *c, size_t(m) * n); !s.ok()) return s;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, H(a).data(),
                trans_a ? m : k, H(b).data(), trans_b ? k : n, beta, H(c).data(), n);
    return absl::OkStatus();
  }

  absl::Status AddBias(int rows, int cols, const DeviceBuffer& bias, DeviceBuffer* x) override {
    if (auto s = NeedSize("AddBias", "bias", bias, cols); !s.ok()) return s;
    if (auto s = NeedSize("AddBias", "x", *x, size_t(rows) * cols); !s.ok()) return s;
    const float* b = H(bias).data();
    float* p = H(x).data();
    for (int r = 0; r < rows; ++r, p += cols) {
      for (int c = 0; c < cols; ++c) p[c] += b[c];
    }
    return absl::OkStatus();
  }

  absl::Status Relu(int n, DeviceBuffer* x) override {
    if (auto s = NeedSize("Relu", "x", *x, n); !s.ok()) return s;
    float* p = H(x).data();
    for (int i = 0; i < n; ++i) p[i] = std::max(p[i], 0.0f);
    return absl::OkStatus();
  }

  absl::Status ReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx) override {
    if (auto s = NeedSize("ReluBackward", "y", y, n); !s.ok()) return s;
    if (auto s = NeedSize("ReluBackward", "dx", *dx, n); !s.ok()) return s;
    const float* yp = H(y).data();
    float* d = H(dx).data();
    for (int i = 0; i < n; ++i) d[i] = yp[i] > 0.0f ? d[i] : 0.0f;
    return absl::OkStatus();
  }

  absl::Status ColumnSums(int rows, int cols, const DeviceBuffer& x, DeviceBuffer* out) override {
    if (auto s = NeedSize("ColumnSums", "x", x, size_t(rows) * cols); !s.ok()) return s;
    if (auto s = NeedSize("ColumnSums", "out", *out, cols); !s.ok()) return s;
    float* o = H(out).data();
    std::fill(o, o + cols, 0.0f);
    const float* p = H(x).data();
    for (int r = 0; r < rows; ++r, p += cols) {
      for (int c = 0; c < cols; ++c) o[c] += p[c];
    }
    return absl::OkStatus();
  }

  absl::StatusOr<LossSums> SoftmaxCrossEntropy(int rows, int classes, const DeviceBuffer& logits,
                                               const DeviceBuffer& labels, float grad_scale,
                                               DeviceBuffer* grad) override {
    const size_t n = size_t(rows) * classes;
    if (auto s = NeedSize("SoftmaxCrossEntropy", "logits", logits, n); !s.ok()) return s;
    if (auto s = NeedSize("SoftmaxCrossEntropy", "labels", labels, rows); !s.ok()) return s;
    if (grad != nullptr) {
      if (auto s = NeedSize("SoftmaxCrossEntropy", "grad", *grad, n); !s.ok()) return s;
    }
    LossSums sums;
    const float* lab = H(labels).data();
    for (int r = 0; r < rows; ++r) {
      const float* z = H(logits).data() + size_t(r) * classes;
      const int y = static_cast<int>(lab[r]);
      if (y < 0 || y >= classes || static_cast<float>(y) != lab[r]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SoftmaxCrossEntropy: label ", lab[r], " of row ", r, " is not in [0, ", classes, ")"));
      }
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
};

}  // namespace

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateBackend(const BackendOptions& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  if (options.device == "cpu" || options.device == "auto") {
    return std::unique_ptr<ComputeBackend>(new CpuBackend(options.threads));
  }
  if (options.device == "cuda") {
    return absl::UnimplementedError(
        "--device=cuda: this binary was built without CUDA support; use --device=cpu or "
        "--device=auto");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", options.device, "': expected auto, cpu or cuda"));
}

}  // namespace ps
