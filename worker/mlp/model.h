// Mlp: a fully connected classifier (softmax regression when it has no hidden
// layers) with ReLU activations and softmax cross-entropy loss, computed on a
// ComputeBackend.
//
// Tensors, in ModelSpec order: for each layer i (1-based) "fc<i>.weight" of
// shape [in, out] and "fc<i>.bias" of shape [out]; logits = x W + b.
//
// Weights, activations and gradients stay in the backend's buffers; a step
// uploads weights once (SetWeights) and downloads gradients once. Where those
// buffers are host memory (the CPU), UseWeights reads the caller's weights in
// place and the gradients are computed straight into the caller's. The batch is
// uploaded with the step, or gathered from a dataset the backend holds
// (HoldDataset). Not thread-safe. Borrows the backend, which must outlive the
// model.
#ifndef PS_WORKER_MLP_MODEL_H_
#define PS_WORKER_MLP_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_spec.h"
#include "worker/compute/backend.h"

namespace ps {

struct BatchStats {
  double loss_sum = 0;  // summed over the batch's rows
  int64_t correct = 0;
  int64_t rows = 0;
};

class Mlp {
 public:
  // dims = {inputs, hidden..., classes}; at least 2 entries, all positive.
  // max_batch bounds the rows of TrainStep/Evaluate calls.
  static absl::StatusOr<std::unique_ptr<Mlp>> Create(ComputeBackend* backend,
                                                     std::vector<int> dims, int max_batch);

  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  const ModelSpec& spec() const { return spec_; }
  int inputs() const { return dims_.front(); }
  int classes() const { return dims_.back(); }

  // Deterministic initial values from `seed`: weights uniform in
  // +-sqrt(6 / (in + out)) (Glorot), biases zero.
  TensorList InitialValues(uint64_t seed) const;

  // Uploads the weights used by the next steps (a copy).
  absl::Status SetWeights(const TensorList& weights);
  // SetWeights without the copy where the backend's buffers are host memory
  // (the CPU): the next steps read `*weights` in place, so the caller must
  // leave its floats unchanged, and its vectors unresized, until the next
  // SetWeights or UseWeights. Elsewhere (CUDA) it is SetWeights.
  absl::Status UseWeights(TensorList* weights);

  using OnReady = std::function<void(const std::vector<int>&)>;

  // Forward and backward on `rows` examples (x: rows*inputs floats, labels:
  // rows class ids as floats). Writes the gradient of the batch's mean loss
  // into `grads` (resized to the spec). If given, `on_ready(indices)` runs
  // as soon as those tensors of `grads` are final (last layer first), so the
  // caller can send them while the backend computes the earlier layers.
  absl::StatusOr<BatchStats> TrainStep(const float* x, const float* labels, int rows,
                                       TensorList* grads, const OnReady& on_ready = nullptr);

  // Copies a dataset into the backend once (images: inputs() floats per
  // example, labels: one class id per example), replacing any held before.
  // Worth it where ComputeBackend::ShouldHoldDataset says so.
  absl::Status HoldDataset(absl::Span<const float> images, absl::Span<const float> labels);
  // TrainStep on the held dataset's `examples` (indices), gathered by the
  // backend. FAILED_PRECONDITION when no dataset is held.
  absl::StatusOr<BatchStats> TrainStep(absl::Span<const int64_t> examples, TensorList* grads,
                                       const OnReady& on_ready = nullptr);

  // Forward only.
  absl::StatusOr<BatchStats> Evaluate(const float* x, const float* labels, int rows);

 private:
  Mlp(ComputeBackend* backend, std::vector<int> dims, int max_batch);
  absl::Status Allocate();
  absl::Status CheckWeights(const TensorList& weights) const;
  // Layer l's weights and bias as the next ops read them.
  const DeviceBuffer& W(size_t l) const { return w_view_.empty() ? *w_[l] : *w_view_[l]; }
  const DeviceBuffer& B(size_t l) const { return b_view_.empty() ? *b_[l] : *b_view_[l]; }
  absl::Status CheckRows(int64_t rows) const;
  // Put a batch into acts_[0] and labels_.
  absl::Status UploadBatch(const float* x, const float* labels, int rows);
  absl::Status GatherBatch(absl::Span<const int64_t> examples);
  // On the batch in acts_[0] and labels_.
  absl::StatusOr<BatchStats> Forward(int rows, bool want_grad);
  absl::StatusOr<BatchStats> ForwardBackward(int rows, TensorList* grads,
                                             const OnReady& on_ready);

  ComputeBackend* const backend_;  // not owned
  const std::vector<int> dims_;
  const int max_batch_;
  ModelSpec spec_;
  // Per layer l (0-based): weights [dims[l], dims[l+1]], bias, gradients.
  std::vector<std::unique_ptr<DeviceBuffer>> w_, b_, dw_, db_;
  // UseWeights' views of the caller's weights and biases; empty after
  // SetWeights (and on backends that cannot wrap host memory).
  std::vector<std::unique_ptr<DeviceBuffer>> w_view_, b_view_;
  // acts_[0] = input, acts_[l+1] = output of layer l (logits for the last).
  std::vector<std::unique_ptr<DeviceBuffer>> acts_;
  // Gradient w.r.t. acts_[l+1], for l = 0..L-1.
  std::vector<std::unique_ptr<DeviceBuffer>> deltas_;
  std::unique_ptr<DeviceBuffer> labels_;
  // HoldDataset's copy; null until then.
  std::unique_ptr<DeviceBuffer> held_images_, held_labels_;
};

}  // namespace ps

#endif  // PS_WORKER_MLP_MODEL_H_
