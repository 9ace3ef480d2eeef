#include "worker/ctr_local_trainer.h"

#include <utility>

#include "common/status_macros.h"

namespace ps {

LocalEmbeddingTableOptions CtrLocalTrainerOptions::DefaultTable() {
  LocalEmbeddingTableOptions table;
  table.optimizer.kind = SparseOptimizerKind::kAdagrad;
  table.optimizer.lr = 0.05f;
  return table;
}

OptimizerOptions CtrLocalTrainerOptions::DefaultDense() {
  OptimizerOptions dense;
  dense.name = "adam";
  dense.learning_rate = 1e-3;
  return dense;
}

absl::StatusOr<std::unique_ptr<CtrLocalTrainer>> CtrLocalTrainer::Create(
    const CtrLocalTrainerOptions& options) {
  ASSIGN_OR_RETURN(CtrModel model, CtrModel::Create(options.model));
  LocalEmbeddingTableOptions table_options = options.table;
  table_options.dim = options.model.dim;
  ASSIGN_OR_RETURN(LocalEmbeddingTable table, LocalEmbeddingTable::Create(table_options));
  std::vector<std::unique_ptr<Optimizer>> dense;
  for (const TensorSpec& tensor : model.spec()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                     CreateOptimizer(options.dense, tensor.num_elements()));
    dense.push_back(std::move(optimizer));
  }
  return std::unique_ptr<CtrLocalTrainer>(
      new CtrLocalTrainer(std::move(model), std::move(table), std::move(dense)));
}

CtrLocalTrainer::CtrLocalTrainer(CtrModel model, LocalEmbeddingTable table,
                                 std::vector<std::unique_ptr<Optimizer>> dense)
    : model_(std::move(model)), table_(std::move(table)), dense_(std::move(dense)) {}

absl::StatusOr<double> CtrLocalTrainer::Step(absl::Span<const CtrExample> batch) {
  if (batch.empty()) return absl::InvalidArgumentError("Step: empty batch");
  RowLookup lookup = [this](absl::Span<const uint64_t> ids, float* rows) {
    table_.Lookup(ids, /*create=*/true, rows);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(model_.Forward(batch, lookup, &acts_));
  labels_.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) labels_[i] = batch[i].label;
  const double loss = SigmoidCrossEntropy(acts_.logits, labels_, &dlogits_);
  model_.Backward(acts_, dlogits_, &grads_);
  table_.Apply(grads_.ids, grads_.rows);
  ++step_;
  TensorList& params = *model_.mutable_params();
  for (size_t t = 0; t < params.size(); ++t) {
    RETURN_IF_ERROR(ApplyGradient(dense_[t].get(), step_, grads_.dense[t],
                                  absl::MakeSpan(params[t])));
  }
  return loss;
}

absl::Status CtrLocalTrainer::Predict(absl::Span<const CtrExample> batch,
                                      std::vector<float>* probs) {
  if (batch.empty()) return absl::OkStatus();
  RowLookup lookup = [this](absl::Span<const uint64_t> ids, float* rows) {
    table_.Lookup(ids, /*create=*/false, rows);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(model_.Forward(batch, lookup, &acts_));
  for (float z : acts_.logits) probs->push_back(Sigmoid(z));
  return absl::OkStatus();
}

}  // namespace ps
