#include "worker/ctr/trainer.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace ps {

LocalStoreOptions CtrStandaloneStore(double dense_lr, float sparse_lr) {
  LocalStoreOptions o;
  o.dense.name = "adam";
  o.dense.learning_rate = dense_lr;
  o.rows.kind = SparseOptimizerKind::kAdagrad;
  o.rows.lr = sparse_lr;
  return o;
}

absl::StatusOr<std::unique_ptr<CtrTrainer>> CtrTrainer::Create(const CtrTrainerOptions& options,
                                                               ParamStore* store) {
  ASSIGN_OR_RETURN(CtrModel model, CtrModel::Create(options.model));
  RETURN_IF_ERROR(store->DeclareTables(
      {{kCtrTableName, options.model.dim, options.table_seed, options.init_scale}}));
  const TensorList initial = model.params();
  RETURN_IF_ERROR(store->Init(model.spec(), initial, options.creator, model.mutable_params()));
  return std::unique_ptr<CtrTrainer>(new CtrTrainer(std::move(model), store));
}

CtrTrainer::CtrTrainer(CtrModel model, ParamStore* store)
    : model_(std::move(model)), store_(store) {}

RowLookup CtrTrainer::Lookup(absl::Span<const CtrExample> next) {
  const size_t dim = model_.config().dim;
  return [this, dim, next](absl::Span<const uint64_t> ids, float* rows) {
    RETURN_IF_ERROR(store_->PullRows(kCtrTableName, ids, absl::MakeSpan(rows, ids.size() * dim)));
    if (next.empty()) return absl::OkStatus();
    next_ids_.clear();
    for (const CtrExample& e : next) {
      next_ids_.insert(next_ids_.end(), std::begin(e.ids), std::end(e.ids));
    }
    std::sort(next_ids_.begin(), next_ids_.end());
    next_ids_.erase(std::unique(next_ids_.begin(), next_ids_.end()), next_ids_.end());
    return store_->PrefetchRows(kCtrTableName, next_ids_);
  };
}

absl::StatusOr<double> CtrTrainer::Compute(absl::Span<const CtrExample> batch,
                                           absl::Span<const CtrExample> next) {
  if (batch.empty()) return absl::InvalidArgumentError("Step: empty batch");
  RETURN_IF_ERROR(model_.Forward(batch, Lookup(next), &acts_));
  labels_.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) labels_[i] = batch[i].label;
  const double loss = SigmoidCrossEntropy(acts_.logits, labels_, &dlogits_);
  model_.Backward(acts_, dlogits_, &grads_);
  return loss;
}

absl::Status CtrTrainer::Exchange() {
  RETURN_IF_ERROR(store_->PushRows(kCtrTableName, grads_.ids, grads_.rows));
  return store_->PushPull(grads_.dense, model_.mutable_params());
}

absl::StatusOr<double> CtrTrainer::Step(absl::Span<const CtrExample> batch) {
  ASSIGN_OR_RETURN(const double loss, Compute(batch));
  RETURN_IF_ERROR(Exchange());
  return loss;
}

absl::Status CtrTrainer::Predict(absl::Span<const CtrExample> batch, std::vector<float>* probs) {
  if (batch.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(model_.Forward(batch, Lookup({}), &acts_));
  for (float z : acts_.logits) probs->push_back(Sigmoid(z));
  return absl::OkStatus();
}

}  // namespace ps
