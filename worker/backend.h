// ComputeBackend: the dense math a worker's model needs, on some device.
//
// Data lives in DeviceBuffers owned by the caller and allocated by the
// backend, so a GPU backend can keep weights, activations and gradients
// resident on the device; only CopyToDevice/CopyToHost cross to the host.
// All matrices are row-major float32.
//
// The CPU backend uses OpenBLAS; a CUDA/cuBLAS backend implements the same
// interface (issue: GPU workers). Backends are not thread-safe: one per
// training thread. Every method returns an error status rather than producing
// a silently wrong result (bad sizes: INVALID_ARGUMENT).
#ifndef PS_WORKER_BACKEND_H_
#define PS_WORKER_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

// A float32 array on a backend's device. Only the backend that allocated it
// may read or write it.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  virtual size_t size() const = 0;  // elements
};

// Sums reported by SoftmaxCrossEntropy.
struct LossSums {
  double loss_sum = 0;  // sum over rows of -log softmax(logits)[label]
  int64_t correct = 0;  // rows whose argmax equals the label
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual std::string name() const = 0;

  // A zero-filled buffer of n elements.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(size_t n) = 0;
  // REQUIRES: src.size() <= dst->size(); copies into the first src.size().
  virtual absl::Status CopyToDevice(absl::Span<const float> src, DeviceBuffer* dst) = 0;
  // REQUIRES: dst.size() <= src.size(); copies the first dst.size().
  virtual absl::Status CopyToHost(const DeviceBuffer& src, absl::Span<float> dst) = 0;

  // C[m,n] = alpha * op(A) * op(B) + beta * C, with op(A) [m,k] and op(B)
  // [k,n]; A is stored [k,m] when trans_a, B [n,k] when trans_b.
  virtual absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                            const DeviceBuffer& a, const DeviceBuffer& b, float beta,
                            DeviceBuffer* c) = 0;

  // x[r, c] += bias[c] for the first rows*cols elements of x.
  virtual absl::Status AddBias(int rows, int cols, const DeviceBuffer& bias,
                               DeviceBuffer* x) = 0;
  // x = max(x, 0) on the first n elements.
  virtual absl::Status Relu(int n, DeviceBuffer* x) = 0;
  // dx[i] = y[i] > 0 ? dx[i] : 0 on the first n elements (y: ReLU output).
  virtual absl::Status ReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx) = 0;
  // out[c] = sum over r of x[r, c].
  virtual absl::Status ColumnSums(int rows, int cols, const DeviceBuffer& x,
                                  DeviceBuffer* out) = 0;
  // Softmax cross-entropy of logits[rows, classes] against `labels` (rows
  // class ids stored as floats). If grad != nullptr, writes
  // grad = (softmax(logits) - onehot(labels)) * grad_scale. INVALID_ARGUMENT
  // for a label outside [0, classes).
  virtual absl::StatusOr<LossSums> SoftmaxCrossEntropy(int rows, int classes,
                                                       const DeviceBuffer& logits,
                                                       const DeviceBuffer& labels,
                                                       float grad_scale, DeviceBuffer* grad) = 0;
};

struct BackendOptions {
  // "cpu", "cuda" or "auto" (CUDA when built with it and a device exists).
  std::string device = "auto";
  // CPU math threads; 0 = the BLAS library's default (all cores).
  int threads = 0;
};

// INVALID_ARGUMENT for an unknown device; UNIMPLEMENTED for "cuda" in a build
// without CUDA support.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateBackend(const BackendOptions& options);

}  // namespace ps

#endif  // PS_WORKER_BACKEND_H_
