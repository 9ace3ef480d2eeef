// CtrLocalTrainer: trains a CtrModel (worker/ctr_model.h) in one process,
// its embedding rows in a LocalEmbeddingTable (worker/ctr_local_table.h):
// what tests and tools/ctr_local_main.cc use before the tables move onto
// the parameter servers.
//
// Step(batch): Forward with rows looked up (and created) in the table, mean
// sigmoid cross-entropy against the labels, Backward, then the sparse rule
// on each unique row's summed gradient and the dense optimizer
// (common/optimizer.h, one instance per tensor) on the MLP's tensors.
// Predict(batch) looks rows up without creating them.
//
// Thread-compatible: one call at a time.
#ifndef PS_WORKER_CTR_LOCAL_TRAINER_H_
#define PS_WORKER_CTR_LOCAL_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/optimizer.h"
#include "worker/ctr_local_table.h"
#include "worker/ctr_model.h"

namespace ps {

struct CtrLocalTrainerOptions {
  CtrModelConfig model;  // model.dim is also the table's dim
  // The table: its dim is overwritten by model.dim; AdaGrad by default.
  LocalEmbeddingTableOptions table = DefaultTable();
  // The MLP's optimizer: Adam, lr 1e-3 by default.
  OptimizerOptions dense = DefaultDense();

  static LocalEmbeddingTableOptions DefaultTable();
  static OptimizerOptions DefaultDense();
};

class CtrLocalTrainer {
 public:
  // Errors: INVALID_ARGUMENT from the options' validation.
  static absl::StatusOr<std::unique_ptr<CtrLocalTrainer>> Create(
      const CtrLocalTrainerOptions& options);

  CtrLocalTrainer(const CtrLocalTrainer&) = delete;
  CtrLocalTrainer& operator=(const CtrLocalTrainer&) = delete;

  // One update on `batch` (non-empty); returns its mean loss before the
  // update.
  absl::StatusOr<double> Step(absl::Span<const CtrExample> batch);
  // Click probabilities of `batch`, appended to *probs.
  absl::Status Predict(absl::Span<const CtrExample> batch, std::vector<float>* probs);

  const CtrModel& model() const { return model_; }
  const LocalEmbeddingTable& table() const { return table_; }
  int64_t steps() const { return step_; }

 private:
  CtrLocalTrainer(CtrModel model, LocalEmbeddingTable table,
                  std::vector<std::unique_ptr<Optimizer>> dense);

  CtrModel model_;
  LocalEmbeddingTable table_;
  std::vector<std::unique_ptr<Optimizer>> dense_;  // one per tensor
  int64_t step_ = 0;
  CtrActivations acts_;  // reused across calls
  CtrGradients grads_;
  std::vector<float> labels_, dlogits_;
};

}  // namespace ps

#endif  // PS_WORKER_CTR_LOCAL_TRAINER_H_
