#include "worker/ctr/workload.h"

#include <cblas.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/ctr/auc.h"

namespace ps {

// The training and held-out examples, from the generator or a file.
class CtrWorkload::Source {
 public:
  static absl::StatusOr<std::unique_ptr<Source>> Create(const CtrOptions& o) {
    auto s = std::make_unique<Source>();
    if (o.data_file.empty()) {
      ASSIGN_OR_RETURN(s->generator_, CtrGenerator::Create(o.data));
      s->train_size_ = o.data.num_examples;
      for (int j = 0; j < o.eval_examples; ++j) {
        s->held_out_.push_back(s->generator_->HeldOutExample(j));
        s->best_.push_back(s->generator_->BestProbability(s->held_out_.back()));
      }
    } else {
      ASSIGN_OR_RETURN(s->file_, ReadCtrFile(o.data_file, o.reader));
      const int64_t n = static_cast<int64_t>(s->file_.size());
      if (n < int64_t{o.eval_examples} + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ctr_data=", o.data_file, " has ", n,
                         " examples: need more than --ctr_eval_examples=", o.eval_examples));
      }
      s->train_size_ = n - o.eval_examples;
      s->held_out_.assign(s->file_.begin() + s->train_size_, s->file_.end());
      s->file_.resize(s->train_size_);
    }
    for (const CtrExample& e : s->held_out_) s->labels_.push_back(e.label);
    return s;
  }

  int64_t train_size() const { return train_size_; }
  CtrExample Example(int64_t i) const {
    return generator_ != nullptr ? generator_->Example(i) : file_[i];
  }
  const std::vector<CtrExample>& held_out() const { return held_out_; }
  const std::vector<float>& labels() const { return labels_; }
  const std::vector<double>& best() const { return best_; }  // empty for a file

 private:
  std::unique_ptr<CtrGenerator> generator_;
  std::vector<CtrExample> file_;
  int64_t train_size_ = 0;
  std::vector<CtrExample> held_out_;
  std::vector<float> labels_;
  std::vector<double> best_;
};

absl::Status CtrOptions::Validate() const {
  RETURN_IF_ERROR(ValidateSharedOptions(worker_id, num_workers, batch_size, epochs, steps));
  if (absl::Status s = model.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--ctr_dim or --ctr_hidden: ", s.message()));
  }
  if (data_file.empty()) {
    if (absl::Status s = data.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ctr_vocab, --ctr_signal_vocab or --ctr_examples: ", s.message()));
    }
  }
  if (eval_examples < 2) return absl::InvalidArgumentError("--ctr_eval_examples must be >= 2");
  if (threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CtrWorkload>> CtrWorkload::Create(const CtrOptions& o) {
  RETURN_IF_ERROR(o.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<Source> source, Source::Create(o));
  std::unique_ptr<CtrWorkload> w(new CtrWorkload(o, std::move(source)));
  const Source& s = *w->source_;
  if (o.steps == 0 && s.train_size() / (int64_t{o.num_workers} * o.batch_size) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", o.batch_size, " with ", o.num_workers, " workers leaves no full batch in ",
        s.train_size(), " training examples: lower it or set --max_steps"));
  }
  if (!s.best().empty()) {
    ASSIGN_OR_RETURN(w->best_auc_, Auc(s.best(), s.labels()));
    ASSIGN_OR_RETURN(w->best_log_loss_, LogLoss(s.best(), s.labels()));
  }
  return w;
}

CtrWorkload::CtrWorkload(const CtrOptions& options, std::unique_ptr<Source> source)
    : options_(options), source_(std::move(source)), batch_(options.batch_size) {}

CtrWorkload::~CtrWorkload() = default;

absl::StatusOr<WorkloadPlan> CtrWorkload::Init(ParamStore* store) {
  const CtrOptions& o = options_;
  if (o.threads > 0) openblas_set_num_threads(o.threads);
  CtrTrainerOptions to;
  to.model = o.model;
  to.table_seed = o.table_seed;
  to.creator = o.worker_id == 0;
  ASSIGN_OR_RETURN(trainer_, CtrTrainer::Create(to, store));

  WorkloadPlan plan;
  const int64_t per_pass = source_->train_size() / (int64_t{o.num_workers} * o.batch_size);
  plan.total_steps = o.steps > 0 ? o.steps : per_pass * o.epochs;
  plan.epochs = o.steps > 0 ? 0 : o.epochs;
  plan.max_steps = o.steps;
  plan.batch_size = o.batch_size;
  plan.log_loss_lines = true;
  plan.description = absl::StrFormat(
      "ctr dim %d hidden %s, %s, %s (%d training examples), %d steps, batch %d per worker; "
      "held-out %d examples",
      o.model.dim, absl::StrJoin(o.model.hidden, ","), store->mode_name(),
      o.data_file.empty() ? "synthetic generator" : o.data_file, source_->train_size(),
      plan.total_steps, o.batch_size, o.eval_examples);
  if (best_auc_.has_value()) {
    absl::StrAppendFormat(&plan.description, ", best AUC %.4f, best log loss %.4f", *best_auc_,
                          *best_log_loss_);
  }
  return plan;
}

int64_t CtrWorkload::StepsPerEpoch(int workers) const {
  return std::max<int64_t>(1, source_->train_size() / (int64_t{workers} * options_.batch_size));
}

absl::StatusOr<double> CtrWorkload::Compute(int64_t step, const DataShare& share) {
  const CtrOptions& o = options_;
  const int64_t steps = StepsPerEpoch(share.workers);
  // Step t of epoch e: the share's batch t of the e-th pass over the
  // examples, each pass of steps * workers batches taking on from the last
  // (so with fixed shares, step s is batch s * W + w of one long stream).
  const auto fill = [&](int64_t s, std::vector<CtrExample>* batch) {
    const int64_t t = share.epoch * steps + (s - share.first_step);
    const int64_t first = (t * share.workers + share.rank) * int64_t{o.batch_size};
    batch->resize(o.batch_size);
    for (int i = 0; i < o.batch_size; ++i) {
      (*batch)[i] = source_->Example((first + i) % source_->train_size());
    }
  };
  if (next_step_ == step) {
    batch_.swap(next_batch_);
  } else {
    fill(step, &batch_);
  }
  next_step_ = -1;
  // The next batch is made ahead within the epoch only: the next epoch's
  // share is not known yet.
  if (!o.prefetch_rows || step + 1 >= share.first_step + steps) return trainer_->Compute(batch_);
  fill(step + 1, &next_batch_);
  next_step_ = step + 1;
  return trainer_->Compute(batch_, next_batch_);
}

absl::Status CtrWorkload::Exchange() { return trainer_->Exchange(); }

absl::StatusOr<Evaluation> CtrWorkload::Evaluate() {
  constexpr size_t kChunk = 4096;  // examples per Forward
  const std::vector<CtrExample>& held = source_->held_out();
  std::vector<float> probs;
  probs.reserve(held.size());
  for (size_t i = 0; i < held.size(); i += kChunk) {
    const size_t n = std::min(kChunk, held.size() - i);
    RETURN_IF_ERROR(trainer_->Predict(absl::MakeConstSpan(held.data() + i, n), &probs));
  }
  ASSIGN_OR_RETURN(const double auc, Auc(probs, source_->labels()));
  ASSIGN_OR_RETURN(const double loss, LogLoss(probs, source_->labels()));
  Evaluation e;
  e.fields = {
      {"auc", "Area under the ROC curve on the held-out examples at the last evaluation.", auc},
      {"log_loss", "Mean log loss on the held-out examples at the last evaluation.", loss}};
  e.line = absl::StrFormat("held-out AUC %.4f log loss %.4f", auc, loss);
  e.summary = absl::StrFormat("AUC %.4f log_loss %.4f", auc, loss);
  if (best_auc_.has_value()) {
    e.fields.push_back({"best_auc",
                        "The best AUC any model reaches on the held-out examples (the "
                        "synthetic generator's own probabilities).",
                        *best_auc_});
    absl::StrAppendFormat(&e.line, " (best AUC %.4f, gap %.4f)", *best_auc_, *best_auc_ - auc);
    absl::StrAppendFormat(&e.summary, " best_auc %.4f", *best_auc_);
  }
  return e;
}

}  // namespace ps
