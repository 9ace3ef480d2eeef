#include "worker/ctr_worker.h"

#include <cblas.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/status_macros.h"
#include "worker/ctr_local_trainer.h"
#include "worker/ctr_metrics.h"
#include "worker/ctr_remote_trainer.h"

namespace ps {
namespace {

// The training and held-out examples, from the generator or a file.
class CtrSource {
 public:
  static absl::StatusOr<CtrSource> Create(const CtrWorkerOptions& o) {
    CtrSource s;
    if (o.data_file.empty()) {
      ASSIGN_OR_RETURN(s.generator_, CtrGenerator::Create(o.data));
      s.train_size_ = o.data.num_examples;
      for (int j = 0; j < o.eval_examples; ++j) {
        s.held_out_.push_back(s.generator_->HeldOutExample(j));
        s.best_.push_back(s.generator_->BestProbability(s.held_out_.back()));
      }
    } else {
      ASSIGN_OR_RETURN(s.file_, ReadCtrFile(o.data_file, o.reader));
      const int64_t n = static_cast<int64_t>(s.file_.size());
      if (n < int64_t{o.eval_examples} + 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--ctr_data=", o.data_file, " has ", n, " examples: need more than --ctr_eval_examples=",
            o.eval_examples));
      }
      s.train_size_ = n - o.eval_examples;
      s.held_out_.assign(s.file_.begin() + s.train_size_, s.file_.end());
      s.file_.resize(s.train_size_);
    }
    for (const CtrExample& e : s.held_out_) s.labels_.push_back(e.label);
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

// What the loop needs of a trainer, local or remote.
struct CtrSteps {
  std::function<absl::StatusOr<double>(absl::Span<const CtrExample>)> step;
  std::function<absl::Status(absl::Span<const CtrExample>, std::vector<float>*)> predict;
};

absl::StatusOr<std::pair<double, double>> Evaluate(const CtrSteps& t, const CtrSource& source) {
  constexpr size_t kChunk = 4096;  // examples per Forward
  const std::vector<CtrExample>& held = source.held_out();
  std::vector<float> probs;
  probs.reserve(held.size());
  for (size_t i = 0; i < held.size(); i += kChunk) {
    const size_t n = std::min(kChunk, held.size() - i);
    RETURN_IF_ERROR(t.predict(absl::MakeConstSpan(held.data() + i, n), &probs));
  }
  ASSIGN_OR_RETURN(double auc, Auc(probs, source.labels()));
  ASSIGN_OR_RETURN(double loss, LogLoss(probs, source.labels()));
  return std::make_pair(auc, loss);
}

}  // namespace

absl::Status CtrWorkerOptions::Validate() const {
  if (num_workers < 1 || worker_id < 0 || worker_id >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--worker_id must be in [0, --num_workers=",
                                                   num_workers, "), got ", worker_id));
  }
  if (absl::Status s = model.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--ctr_dim or --ctr_hidden: ", s.message()));
  }
  if (data_file.empty()) {
    if (absl::Status s = data.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ctr_vocab, --ctr_signal_vocab or --ctr_examples: ", s.message()));
    }
  }
  if (batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  if (steps < 0) return absl::InvalidArgumentError("--max_steps must be >= 0");
  if (epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  if (eval_examples < 2) return absl::InvalidArgumentError("--ctr_eval_examples must be >= 2");
  if (eval_every < 0) return absl::InvalidArgumentError("--eval_every must be >= 0");
  if (log_every < 0) return absl::InvalidArgumentError("--log_every must be >= 0");
  if (threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<CtrWorkerResult> RunCtrWorker(const CtrWorkerOptions& o,
                                             const ClientOptions* client_options) {
  RETURN_IF_ERROR(o.Validate());
  if (client_options == nullptr && o.num_workers != 1) {
    return absl::InvalidArgumentError("--standalone trains alone: use --num_workers=1");
  }
  if (o.threads > 0) openblas_set_num_threads(o.threads);
  ASSIGN_OR_RETURN(CtrSource source, CtrSource::Create(o));
  const int64_t per_pass = source.train_size() / (int64_t{o.num_workers} * o.batch_size);
  const int64_t total_steps = o.steps > 0 ? o.steps : per_pass * o.epochs;
  if (total_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", o.batch_size, " with ", o.num_workers, " workers leaves no full batch in ",
        source.train_size(), " training examples: lower it or set --max_steps"));
  }

  std::unique_ptr<PsClient> client;
  std::unique_ptr<CtrRemoteTrainer> remote;
  std::unique_ptr<CtrLocalTrainer> local;
  CtrSteps t;
  if (client_options != nullptr) {
    ASSIGN_OR_RETURN(client, PsClient::Connect(*client_options));
    CtrRemoteTrainerOptions ro;
    ro.model = o.model;
    ro.table_seed = o.table_seed;
    ro.creator = o.worker_id == 0;
    ASSIGN_OR_RETURN(remote, CtrRemoteTrainer::Create(ro, client.get()));
    t.step = [&](absl::Span<const CtrExample> b) { return remote->Step(b); };
    t.predict = [&](absl::Span<const CtrExample> b, std::vector<float>* p) {
      return remote->Predict(b, p);
    };
  } else {
    CtrLocalTrainerOptions lo;
    lo.model = o.model;
    lo.table.seed = o.table_seed;
    lo.table.optimizer.lr = o.standalone_sparse_lr;
    lo.dense.learning_rate = o.standalone_dense_lr;
    ASSIGN_OR_RETURN(local, CtrLocalTrainer::Create(lo));
    t.step = [&](absl::Span<const CtrExample> b) { return local->Step(b); };
    t.predict = [&](absl::Span<const CtrExample> b, std::vector<float>* p) {
      return local->Predict(b, p);
    };
  }
  const std::string mode = client != nullptr ? ModeName(client->mode()) : "standalone";

  CtrWorkerResult result;
  if (!source.best().empty()) {
    ASSIGN_OR_RETURN(result.best_auc, Auc(source.best(), source.labels()));
    ASSIGN_OR_RETURN(result.best_log_loss, LogLoss(source.best(), source.labels()));
    result.has_best = true;
  }
  std::unique_ptr<std::ofstream> metrics;
  if (!o.metrics_file.empty()) {
    metrics = std::make_unique<std::ofstream>(o.metrics_file, std::ios::trunc);
    if (!*metrics) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write --metrics_file=", o.metrics_file));
    }
  }
  if (o.log != nullptr && o.worker_id == 0) {
    *o.log << absl::StrFormat(
        "worker %d/%d: ctr dim %d hidden %s, %s, %s (%d training examples), %d steps, batch %d "
        "per worker; held-out %d examples",
        o.worker_id, o.num_workers, o.model.dim, absl::StrJoin(o.model.hidden, ","), mode,
        o.data_file.empty() ? "synthetic generator" : o.data_file, source.train_size(),
        total_steps, o.batch_size, o.eval_examples);
    if (result.has_best) {
      *o.log << absl::StrFormat(", best AUC %.4f, best log loss %.4f", result.best_auc,
                                result.best_log_loss);
    }
    *o.log << "\n" << std::flush;
  }

  const absl::Time start = absl::Now();
  absl::Time last_log = start;
  absl::Duration eval_time;
  int64_t samples_since_log = 0, batches_since_log = 0;
  double loss_since_log = 0;
  auto log_point = [&](int64_t step, bool eval) -> absl::Status {
    const absl::Time now = absl::Now();
    const double sps = samples_since_log / std::max(1e-9, absl::ToDoubleSeconds(now - last_log));
    const double train_loss = batches_since_log ? loss_since_log / batches_since_log : 0;
    std::string line = absl::StrFormat(
        "{\"worker_id\": %d, \"step\": %d, \"train_loss\": %.6f, \"samples_per_sec\": %.1f, "
        "\"wall_s\": %.3f",
        o.worker_id, step, train_loss, sps, absl::ToDoubleSeconds(now - start));
    if (eval) {
      ASSIGN_OR_RETURN(auto ev, Evaluate(t, source));
      eval_time += absl::Now() - now;
      result.evaluated = true;
      result.auc = ev.first;
      result.log_loss = ev.second;
      absl::StrAppendFormat(&line, ", \"auc\": %.6f, \"log_loss\": %.6f", ev.first, ev.second);
      if (result.has_best) absl::StrAppendFormat(&line, ", \"best_auc\": %.6f", result.best_auc);
      if (o.log != nullptr) {
        *o.log << absl::StrFormat("step %d loss %.4f held-out AUC %.4f log loss %.4f", step,
                                  train_loss, ev.first, ev.second);
        if (result.has_best) {
          *o.log << absl::StrFormat(" (best AUC %.4f, gap %.4f)", result.best_auc,
                                    result.best_auc - ev.first);
        }
        *o.log << absl::StrFormat(" samples/s %.0f\n", sps) << std::flush;
      }
    } else if (o.log != nullptr) {
      *o.log << absl::StrFormat("worker %d step %d loss %.4f samples/s %.0f\n", o.worker_id, step,
                                train_loss, sps)
             << std::flush;
    }
    if (metrics) *metrics << line << "}\n" << std::flush;
    last_log = absl::Now();
    samples_since_log = batches_since_log = 0;
    loss_since_log = 0;
    return absl::OkStatus();
  };

  std::vector<CtrExample> batch(o.batch_size);
  const int64_t n = source.train_size();
  // Sync: the step is the servers' version, so that a worker that
  // (re)starts against servers restored from a checkpoint resumes where
  // they are, and one whose gradient a step dropped (leases, backup
  // workers) goes on from the current step, as the MLP trainer does.
  const bool sync = client != nullptr && client->mode() == Mode::kSync;
  int64_t step = sync ? client->version() : 0;
  const int64_t first_step = step;
  if (step > 0 && o.log != nullptr) {
    *o.log << "worker " << o.worker_id << ": the servers are at step " << step
           << "; resuming there\n";
  }
  while (step < total_steps) {
    const int64_t first = (step * o.num_workers + o.worker_id) * int64_t{o.batch_size};
    for (int i = 0; i < o.batch_size; ++i) batch[i] = source.Example((first + i) % n);
    ASSIGN_OR_RETURN(const double loss, t.step(batch));
    step = sync ? client->version() : step + 1;
    samples_since_log += o.batch_size;
    loss_since_log += loss;
    ++batches_since_log;
    const bool eval = o.worker_id == 0 && o.eval_every > 0 && step % o.eval_every == 0;
    if (step < total_steps && (eval || (o.log_every > 0 && step % o.log_every == 0))) {
      RETURN_IF_ERROR(log_point(step, eval));
    }
  }
  const absl::Time end = absl::Now();
  if (remote != nullptr && o.worker_id == 0 && client->mode() != Mode::kSync) {
    // Async and SSP: the shards count pushes; evaluate the model with
    // every worker's, not only the weights last pulled.
    if (absl::Status s = remote->PullWeights(int64_t{o.num_workers} * step);
        !s.ok() && o.log != nullptr) {
      *o.log << "warning: not every worker's pushes arrived; evaluating the weights as they "
                "are: "
             << s << "\n";
    }
  }
  result.steps = step - first_step;
  result.final_version = client != nullptr ? client->version() : step;
  result.wall_s = absl::ToDoubleSeconds(end - start);
  result.samples_per_sec = static_cast<double>(step - first_step) * o.batch_size /
                           std::max(1e-9, absl::ToDoubleSeconds(end - start - eval_time));
  RETURN_IF_ERROR(log_point(step, /*eval=*/o.worker_id == 0));
  if (o.log != nullptr) {
    std::string line = absl::StrFormat(
        "worker %d done: mode %s, steps %d, version %d, samples/s %.0f, wall_s %.1f", o.worker_id,
        mode, step, result.final_version, result.samples_per_sec, result.wall_s);
    if (result.evaluated) {
      absl::StrAppendFormat(&line, ", final AUC %.4f log_loss %.4f", result.auc, result.log_loss);
      if (result.has_best) absl::StrAppendFormat(&line, " best_auc %.4f", result.best_auc);
    }
    *o.log << line << "\n" << std::flush;
  }
  return result;
}

}  // namespace ps
