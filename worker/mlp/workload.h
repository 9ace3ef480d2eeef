// MlpWorkload: the Fashion-MNIST classifier (worker/mlp/model.h) as a
// Workload (worker/train/workload.h): fully connected ReLU layers with softmax
// cross-entropy, on a ComputeBackend (worker/compute/backend.h).
//
// Step t trains this worker's batch t of its epoch's share of the training
// set (worker/mlp/data_order.h): sync with W workers of batch b is
// single-process SGD with batch W*b. Compute sends each layer's gradient as
// soon as backward has produced it (last layer first) and Exchange receives
// the next weights after the last one, so communication overlaps the rest
// of the backward pass. On a GPU the training set is copied to the device
// once, when it fits, and each step gathers its batch there. Evaluate: the
// accuracy and mean loss on the test set (fields test_accuracy, test_loss).
//
// Shares the read-only dataset (several workloads may use one, in threads);
// owns its backend and model. Not thread-safe.
#ifndef PS_WORKER_MLP_WORKLOAD_H_
#define PS_WORKER_MLP_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/compute/backend.h"
#include "worker/mlp/dataset.h"
#include "worker/mlp/model.h"
#include "worker/train/param_store.h"
#include "worker/train/workload.h"

namespace ps {

struct MlpOptions {
  int worker_id = 0;                     // 0 <= worker_id < num_workers
  int num_workers = 1;                   // W
  std::vector<int> hidden = {512, 256};  // hidden layer widths; empty = softmax regression
  int batch_size = 64;                   // examples per step on this worker
  int epochs = 1;                        // passes over the training set
  int64_t max_steps = 0;                 // stop after this many steps; 0 = no limit
  uint64_t seed = 1;                     // initialization and data order
  bool shuffle = true;                   // reshuffle each epoch (else the file order)
  BackendOptions backend;                // made at Init

  // Against the training set: INVALID_ARGUMENT naming ps_worker's flag
  // (worker ids, sizes, a batch that leaves no full step).
  absl::Status Validate(const Dataset& train) const;
};

class MlpWorkload final : public Workload {
 public:
  // Errors: options.Validate's.
  static absl::StatusOr<std::unique_ptr<MlpWorkload>> Create(
      const MlpOptions& options, std::shared_ptr<const FashionMnist> data);

  MlpWorkload(const MlpWorkload&) = delete;
  MlpWorkload& operator=(const MlpWorkload&) = delete;

  absl::StatusOr<WorkloadPlan> Init(ParamStore* store) override;
  int64_t StepsPerEpoch(int workers) const override;
  absl::StatusOr<double> Compute(int64_t step, const DataShare& share) override;
  absl::Status Exchange() override;
  absl::StatusOr<Evaluation> Evaluate() override;
  const ModelSpec& spec() const override { return model_->spec(); }
  TensorList* weights() override { return &weights_; }

 private:
  MlpWorkload(const MlpOptions& options, std::shared_ptr<const FashionMnist> data);

  const MlpOptions options_;
  const std::shared_ptr<const FashionMnist> data_;
  const int64_t steps_per_epoch_;
  ParamStore* store_ = nullptr;  // from Init; not owned
  std::unique_ptr<ComputeBackend> backend_;
  std::unique_ptr<Mlp> model_;  // uses backend_
  bool hold_ = false;           // the backend holds the training set
  TensorList weights_, grads_;
  std::vector<int64_t> perm_;  // of epoch perm_epoch_
  int perm_epoch_ = -1;
  std::vector<int64_t> examples_;  // the step's batch
  std::vector<float> x_, y_;       // it, uploaded (when not held)
};

}  // namespace ps

#endif  // PS_WORKER_MLP_WORKLOAD_H_
