// CtrWorkload: the click-through-rate model (worker/ctr/model.h) as a
// Workload (worker/train/workload.h): ps_worker --model=ctr. It trains through a
// CtrTrainer (worker/ctr/trainer.h) on the synthetic generator
// (worker/ctr/data.h) or a Criteo/libsvm file (worker/ctr/reader.h), and
// evaluates AUC and log loss on held-out examples (worker/ctr/auc.h).
//
// The data. Training examples are [0, N): the generator's num_examples, or
// a file's examples but its last eval_examples. Worker w of W at step t
// takes examples ((t * W + w) * B + i) mod N, i < B: the workers' batches of
// a step are disjoint, and a pass over N is N / (W * B) steps. Held-out:
// the generator's HeldOutExample(0 .. eval_examples - 1), with the best AUC
// its hidden model reaches on them; or the file's last eval_examples (no
// best AUC known).
//
// Evaluate's fields: auc, log_loss, and, with the generator, best_auc.
// Not thread-safe; several workloads may run at once in different threads
// (the bench does): OpenBLAS's thread count (`threads`) is process-wide.
#ifndef PS_WORKER_CTR_WORKLOAD_H_
#define PS_WORKER_CTR_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/ctr/data.h"
#include "worker/ctr/model.h"
#include "worker/ctr/reader.h"
#include "worker/ctr/trainer.h"
#include "worker/train/param_store.h"
#include "worker/train/workload.h"

namespace ps {

struct CtrOptions {
  int worker_id = 0;  // 0 <= worker_id < num_workers
  int num_workers = 1;
  CtrModelConfig model;      // dim 16, hidden 64,32
  CtrGeneratorOptions data;  // when data_file is empty
  std::string data_file;     // a Criteo TSV or libsvm file; empty: the generator
  CtrReaderOptions reader;   // its format
  uint64_t table_seed = 1;   // the rows' initial values
  int batch_size = 256;      // examples per step on this worker, >= 1
  // > 0: train to this step; 0: epochs passes over N. (Sync starts at the
  // servers' step: a restart resumes there.)
  int64_t steps = 0;
  int epochs = 1;             // >= 1
  int eval_examples = 20000;  // held-out examples, >= 2
  int threads = 0;            // OpenBLAS threads, set at Init; 0 = OpenBLAS's own
  // Name each next batch's ids to the store as the step pulls its rows
  // (ParamStore::PrefetchRows; --ctr_prefetch_rows).
  bool prefetch_rows = false;

  // INVALID_ARGUMENT naming the flag (ps_worker's) otherwise.
  absl::Status Validate() const;
};

class CtrWorkload final : public Workload {
 public:
  // Validates the options and prepares the data (the generator and the
  // held-out examples, or the file read into memory). Errors:
  // INVALID_ARGUMENT naming the flag, and a batch that leaves no full step;
  // the file's.
  static absl::StatusOr<std::unique_ptr<CtrWorkload>> Create(const CtrOptions& options);
  ~CtrWorkload() override;

  CtrWorkload(const CtrWorkload&) = delete;
  CtrWorkload& operator=(const CtrWorkload&) = delete;

  absl::StatusOr<WorkloadPlan> Init(ParamStore* store) override;
  int64_t StepsPerEpoch(int workers) const override;
  absl::StatusOr<double> Compute(int64_t step, const DataShare& share) override;
  absl::Status Exchange() override;
  absl::StatusOr<Evaluation> Evaluate() override;
  // After Init.
  const ModelSpec& spec() const override { return trainer_->model().spec(); }
  TensorList* weights() override { return trainer_->weights(); }

  // The generator's probabilities' AUC and log loss on the held-out
  // examples: the best any model reaches there; nullopt for a file.
  std::optional<double> best_auc() const { return best_auc_; }

 private:
  class Source;  // the training and held-out examples
  CtrWorkload(const CtrOptions& options, std::unique_ptr<Source> source);

  const CtrOptions options_;
  const std::unique_ptr<Source> source_;
  std::optional<double> best_auc_, best_log_loss_;
  std::unique_ptr<CtrTrainer> trainer_;  // from Init
  std::vector<CtrExample> batch_;
  // With prefetch_rows: the batch of step next_step_, made ahead.
  std::vector<CtrExample> next_batch_;
  int64_t next_step_ = -1;
};

}  // namespace ps

#endif  // PS_WORKER_CTR_WORKLOAD_H_
