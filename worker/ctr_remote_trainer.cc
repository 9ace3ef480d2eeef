#include "worker/ctr_remote_trainer.h"

#include <utility>

#include "common/status_macros.h"

namespace ps {

absl::StatusOr<std::unique_ptr<CtrRemoteTrainer>> CtrRemoteTrainer::Create(
    const CtrRemoteTrainerOptions& options, PsClient* client) {
  ASSIGN_OR_RETURN(CtrModel model, CtrModel::Create(options.model));
  const std::vector<TableSpec> tables = {
      {kCtrTableName, options.model.dim, options.table_seed, options.init_scale}};
  RETURN_IF_ERROR(ValidateTableSpecs(tables));
  RETURN_IF_ERROR(client->DeclareTables(tables));
  RETURN_IF_ERROR(client->Init(model.spec(), options.creator ? &model.params() : nullptr));
  RETURN_IF_ERROR(client->Pull(/*min_version=*/0, model.mutable_params()));
  return std::unique_ptr<CtrRemoteTrainer>(new CtrRemoteTrainer(std::move(model), client));
}

CtrRemoteTrainer::CtrRemoteTrainer(CtrModel model, PsClient* client)
    : model_(std::move(model)), client_(client) {}

RowLookup CtrRemoteTrainer::Lookup() {
  const size_t dim = model_.config().dim;
  return [this, dim](absl::Span<const uint64_t> ids, float* rows) {
    return client_->PullRows(kCtrTableName, ids, absl::MakeSpan(rows, ids.size() * dim));
  };
}

absl::StatusOr<double> CtrRemoteTrainer::Step(absl::Span<const CtrExample> batch) {
  if (batch.empty()) return absl::InvalidArgumentError("Step: empty batch");
  RETURN_IF_ERROR(model_.Forward(batch, Lookup(), &acts_));
  labels_.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) labels_[i] = batch[i].label;
  const double loss = SigmoidCrossEntropy(acts_.logits, labels_, &dlogits_);
  model_.Backward(acts_, dlogits_, &grads_);
  RETURN_IF_ERROR(client_->PushRows(kCtrTableName, grads_.ids, grads_.rows));
  RETURN_IF_ERROR(client_->PushPull(grads_.dense, model_.mutable_params()));
  ++step_;
  return loss;
}

absl::Status CtrRemoteTrainer::Predict(absl::Span<const CtrExample> batch,
                                       std::vector<float>* probs) {
  if (batch.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(model_.Forward(batch, Lookup(), &acts_));
  for (float z : acts_.logits) probs->push_back(Sigmoid(z));
  return absl::OkStatus();
}

absl::Status CtrRemoteTrainer::PullWeights(int64_t min_version) {
  return client_->Pull(min_version, model_.mutable_params());
}

}  // namespace ps
