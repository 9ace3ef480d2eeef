// ComputeBackend: the dense math a worker's model needs, on some device.
//
// Data lives in DeviceBuffers owned by the caller and allocated by the
// backend, so a GPU backend keeps weights, activations and gradients resident
// on the device; only the copy methods cross to the host. All matrices are
// row-major float32.
//
// The CPU backend uses OpenBLAS and runs every op before returning. The CUDA
// backend (built with --config=cuda) runs ops in order on one CUDA stream:
// they may still be running when the call returns, which the caller sees only
// through StartCopyToHost (results land by FinishCopiesToHost) and through
// Synchronize. Either way an op sees the results of every op called before it.
//
// Backends are not thread-safe: one per training thread. Every method returns
// an error status rather than producing a silently wrong result (bad sizes:
// INVALID_ARGUMENT; a failed device call: an error naming the call and the
// device's reason, RESOURCE_EXHAUSTED when out of memory, else INTERNAL). The
// public ops check their arguments here, once for every backend, and then
// call the backend's Do* implementation.
#ifndef PS_WORKER_COMPUTE_BACKEND_H_
#define PS_WORKER_COMPUTE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

// A float32 array on a backend's device. Only the backend that allocated it
// may read or write it, and it must be destroyed before that backend.
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

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // For logs: the device and its settings, e.g. "cpu (OpenBLAS, 2 threads)"
  // or "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 79.2 GiB, tf32 off)".
  virtual std::string description() const = 0;

  // Whether a dataset of `bytes` should be copied into this backend's buffers
  // once, with each batch gathered there (GatherRows), rather than uploaded
  // batch by batch: true for a device with memory of its own and room to
  // spare; false for the CPU, whose buffers would only duplicate host memory.
  virtual absl::StatusOr<bool> ShouldHoldDataset(size_t bytes) = 0;

  // A zero-filled buffer of n elements.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(size_t n) = 0;

  // A buffer that is `host`'s own memory, where this backend's buffers are
  // host memory (the CPU): ops write into `host` directly, with no copy to
  // the host. nullptr on backends with memory of their own (CUDA). It must
  // not outlive `host`.
  virtual std::unique_ptr<DeviceBuffer> WrapHost(absl::Span<float> host) { return nullptr; }

  // Copies src into the first src.size() elements of dst. src may be reused
  // as soon as this returns. REQUIRES: src.size() <= dst->size().
  absl::Status CopyToDevice(absl::Span<const float> src, DeviceBuffer* dst);

  // Starts copying the first dst.size() elements of src into dst; the copy
  // has landed once FinishCopiesToHost returns OK. It reads src as every op
  // called before it left it; ops called after it may run before it lands,
  // may even overwrite src, and do not change what it delivers. dst must stay
  // valid, and the caller must not touch it, until FinishCopiesToHost returns.
  // (The CPU backend copies at once.) REQUIRES: dst.size() <= src.size().
  absl::Status StartCopyToHost(const DeviceBuffer& src, absl::Span<float> dst);
  // Blocks until every copy started so far has landed in its dst. It does not
  // wait for ops called after the last started copy, which keep the device
  // busy meanwhile. On error, dsts of unfinished copies hold unspecified data.
  virtual absl::Status FinishCopiesToHost() = 0;
  // StartCopyToHost, then FinishCopiesToHost.
  absl::Status CopyToHost(const DeviceBuffer& src, absl::Span<float> dst);

  // Blocks until every op called so far has finished (for timing).
  virtual absl::Status Synchronize() = 0;

  // C[m,n] = alpha * op(A) * op(B) + beta * C, with op(A) [m,k] and op(B)
  // [k,n]; A is stored [k,m] when trans_a, B [n,k] when trans_b. fp32 math
  // (TF32 tensor cores only with BackendOptions::tf32).
  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                    const DeviceBuffer& a, const DeviceBuffer& b, float beta, DeviceBuffer* c);

  // x[r, c] += bias[c] for the first rows*cols elements of x.
  absl::Status AddBias(int rows, int cols, const DeviceBuffer& bias, DeviceBuffer* x);
  // x = max(x, 0) on the first n elements.
  absl::Status Relu(int n, DeviceBuffer* x);
  // dx[i] = y[i] > 0 ? dx[i] : 0 on the first n elements (y: ReLU output).
  absl::Status ReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx);
  // out[c] = sum over r of x[r, c].
  absl::Status ColumnSums(int rows, int cols, const DeviceBuffer& x, DeviceBuffer* out);
  // dst[i, :] = table[rows[i], :] for each i, where table holds rows of
  // `cols` elements. INVALID_ARGUMENT for an index outside the table.
  absl::Status GatherRows(const DeviceBuffer& table, int cols, absl::Span<const int64_t> rows,
                          DeviceBuffer* dst);
  // Softmax cross-entropy of logits[rows, classes] against `labels` (rows
  // class ids stored as floats). If grad != nullptr, writes
  // grad = (softmax(logits) - onehot(labels)) * grad_scale. INVALID_ARGUMENT
  // for a label that is not an integer in [0, classes). Waits for the sums.
  absl::StatusOr<LossSums> SoftmaxCrossEntropy(int rows, int classes, const DeviceBuffer& logits,
                                               const DeviceBuffer& labels, float grad_scale,
                                               DeviceBuffer* grad);

 protected:
  // What SoftmaxCrossEntropy returns for `label` in row `row`, which is not an
  // integer in [0, classes).
  static absl::Status BadLabelError(int row, float label, int classes);

 private:
  // The ops above, called with checked arguments and non-empty shapes (only
  // ColumnSums may get rows == 0, and then writes zeros): every buffer is
  // large enough, and every index of GatherRows is in its table.
  virtual absl::Status DoCopyToDevice(absl::Span<const float> src, DeviceBuffer* dst) = 0;
  virtual absl::Status DoStartCopyToHost(const DeviceBuffer& src, absl::Span<float> dst) = 0;
  virtual absl::Status DoGemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                              const DeviceBuffer& a, const DeviceBuffer& b, float beta,
                              DeviceBuffer* c) = 0;
  virtual absl::Status DoAddBias(int rows, int cols, const DeviceBuffer& bias,
                                 DeviceBuffer* x) = 0;
  virtual absl::Status DoRelu(int n, DeviceBuffer* x) = 0;
  virtual absl::Status DoReluBackward(int n, const DeviceBuffer& y, DeviceBuffer* dx) = 0;
  virtual absl::Status DoColumnSums(int rows, int cols, const DeviceBuffer& x,
                                    DeviceBuffer* out) = 0;
  virtual absl::Status DoGatherRows(const DeviceBuffer& table, int cols,
                                    absl::Span<const int64_t> rows, DeviceBuffer* dst) = 0;
  // Also validates the labels.
  virtual absl::StatusOr<LossSums> DoSoftmaxCrossEntropy(int rows, int classes,
                                                         const DeviceBuffer& logits,
                                                         const DeviceBuffer& labels,
                                                         float grad_scale, DeviceBuffer* grad) = 0;
};

struct BackendOptions {
  // "cpu", "cuda" or "auto" (CUDA when built with it and a device exists,
  // else the CPU).
  std::string device = "auto";
  // CPU math threads; 0 = the BLAS library's default (all cores).
  int threads = 0;
  // CUDA device index, 0 <= gpu < number of devices.
  int gpu = 0;
  // Lets cuBLAS use TF32 tensor cores for Gemm: faster on Ampere and later,
  // but products carry only 10 mantissa bits, so results no longer match the
  // CPU's. Off by default.
  bool tf32 = false;
};

// The backend `options` ask for:
//   "cpu":  the OpenBLAS backend.
//   "cuda": the CUDA backend on device `gpu`. UNIMPLEMENTED in a build without
//           CUDA support; FAILED_PRECONDITION when no CUDA device or driver is
//           found or the device is older than sm_80; INVALID_ARGUMENT when
//           `gpu` is not a device's index.
//   "auto": "cuda" in a build with CUDA support where a usable device is
//           found, else "cpu", whose description() then says why.
// INVALID_ARGUMENT for an unknown device or negative threads or gpu.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateBackend(const BackendOptions& options);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_BACKEND_H_
