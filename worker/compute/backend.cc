#include "worker/compute/backend.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/compute/cpu_backend.h"
#ifdef PS_WITH_CUDA
#include "worker/compute/cuda_backend.h"
#endif

namespace ps {
namespace {

absl::Status NeedSize(const char* op, const char* arg, const DeviceBuffer& b, size_t n) {
  if (b.size() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", arg, " holds ", b.size(), " elements, needs ", n));
  }
  return absl::OkStatus();
}

absl::Status NeedNonNegative(const char* op, int rows, int cols) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": negative shape ", rows, " x ", cols));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ComputeBackend::CopyToDevice(absl::Span<const float> src, DeviceBuffer* dst) {
  RETURN_IF_ERROR(NeedSize("CopyToDevice", "dst", *dst, src.size()));
  if (src.empty()) return absl::OkStatus();
  return DoCopyToDevice(src, dst);
}

absl::Status ComputeBackend::StartCopyToHost(const DeviceBuffer& src, absl::Span<float> dst) {
  RETURN_IF_ERROR(NeedSize("StartCopyToHost", "src", src, dst.size()));
  if (dst.empty()) return absl::OkStatus();
  return DoStartCopyToHost(src, dst);
}

absl::Status ComputeBackend::CopyToHost(const DeviceBuffer& src, absl::Span<float> dst) {
  RETURN_IF_ERROR(StartCopyToHost(src, dst));
  return FinishCopiesToHost();
}

absl::Status ComputeBackend::Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                  const DeviceBuffer& a, const DeviceBuffer& b, float beta,
                                  DeviceBuffer* c) {
  if (m <= 0 || n <= 0 || k <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: bad dims m=", m, " n=", n, " k=", k));
  }
  RETURN_IF_ERROR(NeedSize("Gemm", "A", a, size_t(m) * k));
  RETURN_IF_ERROR(NeedSize("Gemm", "B", b, size_t(k) * n));
  RETURN_IF_ERROR(NeedSize("Gemm", "C", *c, size_t(m) * n));
  return DoGemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

absl::Status ComputeBackend::AddBias(int rows, int cols, const DeviceBuffer& bias,
                                     DeviceBuffer* x) {
  RETURN_IF_ERROR(NeedNonNegative("AddBias", rows, cols));
  RETURN_IF_ERROR(NeedSize("AddBias", "bias", bias, cols));
  RETURN_IF_ERROR(NeedSize("AddBias", "x", *x, size_t(rows) * cols));
  if (rows == 0 || cols == 0) return absl::OkStatus();
  return DoAddBias(rows, cols, bias, x);
}

absl::Status ComputeBackend::Relu(int n, DeviceBuffer* x) {
  RETURN_IF_ERROR(NeedNonNegative("Relu", n, 1));
  RETURN_IF_ERROR(NeedSize("Relu", "x", *x, n));
  if (n == 0) return absl::OkStatus();
  return DoRelu(n, x);
}

absl::Status ComputeBackend::ReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx) {
  RETURN_IF_ERROR(NeedNonNegative("ReluBackward", n, 1));
  RETURN_IF_ERROR(NeedSize("ReluBackward", "y", y, n));
  RETURN_IF_ERROR(NeedSize("ReluBackward", "dx", *dx, n));
  if (n == 0) return absl::OkStatus();
  return DoReluBackward(n, y, dx);
}

absl::Status ComputeBackend::ColumnSums(int rows, int cols, const DeviceBuffer& x,
                                        DeviceBuffer* out) {
  RETURN_IF_ERROR(NeedNonNegative("ColumnSums", rows, cols));
  RETURN_IF_ERROR(NeedSize("ColumnSums", "x", x, size_t(rows) * cols));
  RETURN_IF_ERROR(NeedSize("ColumnSums", "out", *out, cols));
  if (cols == 0) return absl::OkStatus();
  return DoColumnSums(rows, cols, x, out);
}

absl::Status ComputeBackend::GatherRows(const DeviceBuffer& table, int cols,
                                        absl::Span<const int64_t> rows, DeviceBuffer* dst) {
  if (cols <= 0) return absl::InvalidArgumentError(absl::StrCat("GatherRows: cols=", cols));
  const int64_t table_rows = static_cast<int64_t>(table.size() / cols);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= table_rows) {
      return absl::InvalidArgumentError(absl::StrCat("GatherRows: index ", rows[i], " at ", i,
                                                     " is outside the table's ", table_rows,
                                                     " rows"));
    }
  }
  RETURN_IF_ERROR(NeedSize("GatherRows", "dst", *dst, rows.size() * cols));
  if (rows.empty()) return absl::OkStatus();
  return DoGatherRows(table, cols, rows, dst);
}

absl::StatusOr<LossSums> ComputeBackend::SoftmaxCrossEntropy(int rows, int classes,
                                                             const DeviceBuffer& logits,
                                                             const DeviceBuffer& labels,
                                                             float grad_scale, DeviceBuffer* grad) {
  RETURN_IF_ERROR(NeedNonNegative("SoftmaxCrossEntropy", rows, classes));
  if (classes == 0) return absl::InvalidArgumentError("SoftmaxCrossEntropy: no classes");
  const size_t n = size_t(rows) * classes;
  RETURN_IF_ERROR(NeedSize("SoftmaxCrossEntropy", "logits", logits, n));
  RETURN_IF_ERROR(NeedSize("SoftmaxCrossEntropy", "labels", labels, rows));
  if (grad != nullptr) RETURN_IF_ERROR(NeedSize("SoftmaxCrossEntropy", "grad", *grad, n));
  if (rows == 0) return LossSums{};
  return DoSoftmaxCrossEntropy(rows, classes, logits, labels, grad_scale, grad);
}

absl::Status ComputeBackend::BadLabelError(int row, float label, int classes) {
  return absl::InvalidArgumentError(absl::StrCat("SoftmaxCrossEntropy: label ", label, " of row ",
                                                 row, " is not an integer in [0, ", classes, ")"));
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateBackend(const BackendOptions& options) {
  if (options.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  if (options.gpu < 0) {
    return absl::InvalidArgumentError(absl::StrCat("gpu must be >= 0, got ", options.gpu));
  }
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", options.device, "': expected auto, cpu or cuda"));
  }
  if (options.device == "cpu") return CreateCpuBackend(options.threads);
#ifdef PS_WITH_CUDA
  ASSIGN_OR_RETURN(CudaDevices devices, FindCudaDevices());
  if (devices.count == 0) {
    if (options.device == "auto") {
      return CreateCpuBackend(options.threads,
                              absl::StrCat("auto: no CUDA device found (", devices.why_none, ")"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device found (", devices.why_none, "); use --device=cpu or auto"));
  }
  if (options.gpu >= devices.count) {
    return absl::InvalidArgumentError(absl::StrCat("gpu ", options.gpu, " does not exist: found ",
                                                   devices.count, " CUDA device(s), 0..",
                                                   devices.count - 1));
  }
  absl::StatusOr<std::unique_ptr<ComputeBackend>> cuda = CreateCudaBackend(options);
  if (!cuda.ok() && options.device == "auto" &&
      cuda.status().code() == absl::StatusCode::kFailedPrecondition) {
    // A device this build cannot use (e.g. too old): auto means the CPU.
    return CreateCpuBackend(options.threads, absl::StrCat("auto: ", cuda.status().message()));
  }
  return cuda;
#else
  if (options.device == "auto") {
    return CreateCpuBackend(options.threads, "auto: built without CUDA support");
  }
  return absl::UnimplementedError(
      "device cuda: this build has no CUDA support; rebuild with --config=cuda, or use "
      "--device=cpu or auto");
#endif
}

}  // namespace ps
