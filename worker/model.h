// Mlp: a fully connected classifier (softmax regression when it has no hidden
// layers) with ReLU activations and softmax cross-entropy loss, computed on a
// ComputeBackend.
//
// Tensors, in ModelSpec order: for each layer i (1-based) "fc<i>.weight" of
// shape [in, out] and "fc<i>.bias" of shape [out]; logits = x W + b.
//
// Weights, activations and gradients stay in the backend's buffers; a step
// uploads weights once (SetWeights) and downloads gradients once. Not
// thread-safe. Borrows the backend, which must outlive the model.
#ifndef PS_WORKER_MODEL_H_
#define PS_WORKER_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "worker/backend.h"

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

  // Uploads the weights used by the next steps.
  absl::Status SetWeights(const TensorList& weights);

  // Forward and backward on `rows` examples (x: rows*inputs floats, labels:
  // rows class ids as floats). Writes the gradient of the batch's mean loss
  // into `grads` (resized to the spec). If given, `on_ready(indices)` runs
  // as soon as those tensors of `grads` are final (last layer first), so the
  // caller can send them while the earlier layers are still computed.
  absl::StatusOr<BatchStats> TrainStep(
      const float* x, const float* labels, int rows, TensorList* grads,
      const std::function<void(const std::vector<int>&)>& on_ready = nullptr);

  // Forward only.
  absl::StatusOr<BatchStats> Evaluate(const float* x, const float* labels, int rows);

 private:
  Mlp(ComputeBackend* backend, std::vector<int> dims, int max_batch);
  absl::Status Allocate();
  absl::StatusOr<BatchStats> Forward(const float* x, const float* labels, int rows,
                                     bool want_grad);

  ComputeBackend* const backend_;  // not owned
  const std::vector<int> dims_;
  const int max_batch_;
  ModelSpec spec_;
  // Per layer l (0-based): weights [dims[l], dims[l+1]], bias, gradients.
  std::vector<std::unique_ptr<DeviceBuffer>> w_, b_, dw_, db_;
  // acts_[0] = input, acts_[l+1] = output of layer l (logits for the last).
  std::vector<std::unique_ptr<DeviceBuffer>> acts_;
  // Gradient w.r.t. acts_[l+1], for l = 0..L-1.
  std::vector<std::unique_ptr<DeviceBuffer>> deltas_;
  std::unique_ptr<DeviceBuffer> labels_;
};

}  // namespace ps

#endif  // PS_WORKER_MODEL_H_
