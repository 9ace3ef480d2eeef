#include "worker/mlp/workload.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/mlp/data_order.h"

namespace ps {
namespace {

constexpr int kEvalBatch = 1000;

}  // namespace

absl::Status MlpOptions::Validate(const Dataset& train) const {
  RETURN_IF_ERROR(ValidateSharedOptions(worker_id, num_workers, batch_size, epochs, max_steps));
  for (int h : hidden) {
    if (h < 1) return absl::InvalidArgumentError("--hidden widths must be >= 1");
  }
  if (StepsPerEpoch(train.size, num_workers, batch_size) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--batch_size=", batch_size, " with ",
                                                   num_workers, " workers leaves no full batch in ",
                                                   train.size, " training examples"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MlpWorkload>> MlpWorkload::Create(
    const MlpOptions& options, std::shared_ptr<const FashionMnist> data) {
  RETURN_IF_ERROR(options.Validate(data->train));
  return std::unique_ptr<MlpWorkload>(new MlpWorkload(options, std::move(data)));
}

MlpWorkload::MlpWorkload(const MlpOptions& options, std::shared_ptr<const FashionMnist> data)
    : options_(options),
      data_(std::move(data)),
      steps_per_epoch_(
          ::ps::StepsPerEpoch(data_->train.size, options.num_workers, options.batch_size)),
      examples_(options.batch_size) {}

absl::StatusOr<WorkloadPlan> MlpWorkload::Init(ParamStore* store) {
  const MlpOptions& o = options_;
  const Dataset& train = data_->train;
  store_ = store;
  ASSIGN_OR_RETURN(backend_, CreateBackend(o.backend));
  std::vector<int> dims = {train.features};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(train.classes);
  ASSIGN_OR_RETURN(model_, Mlp::Create(backend_.get(), dims, std::max(o.batch_size, kEvalBatch)));
  // On a GPU the training set goes to the device once, if it fits; each
  // step then gathers its batch there instead of uploading it.
  ASSIGN_OR_RETURN(hold_, backend_->ShouldHoldDataset((train.images.size() + train.labels.size()) *
                                                      sizeof(float)));
  if (hold_) {
    RETURN_IF_ERROR(model_->HoldDataset(train.images, train.labels));
  } else {
    x_.resize(size_t(o.batch_size) * train.features);
    y_.resize(o.batch_size);
  }
  RETURN_IF_ERROR(
      store->Init(model_->spec(), model_->InitialValues(o.seed), o.worker_id == 0, &weights_));

  WorkloadPlan plan;
  plan.total_steps = steps_per_epoch_ * o.epochs;
  if (o.max_steps > 0) plan.total_steps = std::min(plan.total_steps, o.max_steps);
  plan.epochs = o.epochs;
  plan.max_steps = o.max_steps;
  plan.batch_size = o.batch_size;
  plan.steps_per_epoch = steps_per_epoch_;
  plan.description = absl::StrFormat(
      "mlp %s (%d parameters), %s, %d steps/epoch x %d epochs (%d steps), batch %d per worker, "
      "on %s%s",
      absl::StrJoin(dims, "-"), TotalElements(model_->spec()), store->mode_name(), steps_per_epoch_,
      o.epochs, plan.total_steps, o.batch_size, backend_->description(),
      hold_ ? " holding the training set" : "");
  return plan;
}

int64_t MlpWorkload::StepsPerEpoch(int workers) const {
  return ::ps::StepsPerEpoch(data_->train.size, workers, options_.batch_size);
}

absl::StatusOr<double> MlpWorkload::Compute(int64_t step, const DataShare& share) {
  const MlpOptions& o = options_;
  const Dataset& train = data_->train;
  const int epoch = static_cast<int>(share.epoch);
  const int64_t t = step - share.first_step;
  if (t < 0 || t >= StepsPerEpoch(share.workers)) {
    return absl::InternalError(absl::StrCat("step ", step, " is not in epoch ", share.epoch,
                                            "'s share (from step ", share.first_step, ")"));
  }
  if (epoch != perm_epoch_) {
    perm_ = EpochPermutation(train.size, o.seed, epoch, o.shuffle);
    perm_epoch_ = epoch;
  }
  for (int i = 0; i < o.batch_size; ++i) {
    examples_[i] = BatchExample(perm_, share.workers, share.rank, o.batch_size, t, i);
    if (hold_) continue;
    const int64_t e = examples_[i];
    std::copy(train.image(e), train.image(e) + train.features,
              x_.begin() + size_t(i) * train.features);
    y_[i] = train.labels[e];
  }
  RETURN_IF_ERROR(model_->UseWeights(&weights_));
  // Each layer's gradient goes out as soon as backward has it; the next
  // weights replace this step's in weights_ at Exchange (the model may read
  // them in place until then).
  RETURN_IF_ERROR(store_->BeginPushPull(&grads_, &weights_));
  const Mlp::OnReady send = [this](const std::vector<int>& t) { store_->SendGradients(t); };
  absl::StatusOr<BatchStats> s =
      hold_ ? model_->TrainStep(examples_, &grads_, send)
            : model_->TrainStep(x_.data(), y_.data(), o.batch_size, &grads_, send);
  if (!s.ok()) {
    store_->FinishPushPull().IgnoreError();  // the step's error is the one to report
    return s.status();
  }
  return s->loss_sum / s->rows;
}

absl::Status MlpWorkload::Exchange() { return store_->FinishPushPull(); }

absl::StatusOr<Evaluation> MlpWorkload::Evaluate() {
  RETURN_IF_ERROR(model_->UseWeights(&weights_));
  const Dataset& d = data_->test;
  BatchStats total;
  for (int64_t i = 0; i < d.size; i += kEvalBatch) {
    const int rows = static_cast<int>(std::min<int64_t>(kEvalBatch, d.size - i));
    ASSIGN_OR_RETURN(BatchStats s, model_->Evaluate(d.image(i), d.labels.data() + i, rows));
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.rows += s.rows;
  }
  const double accuracy = double(total.correct) / total.rows;
  const double loss = total.loss_sum / total.rows;
  Evaluation e;
  e.fields = {
      {"test_accuracy", "Accuracy on the test set at the last evaluation (0..1).", accuracy},
      {"test_loss", "Mean loss on the test set at the last evaluation.", loss}};
  e.line = absl::StrFormat("test_accuracy %.4f test_loss %.4f", accuracy, loss);
  e.summary = e.line;
  return e;
}

}  // namespace ps
