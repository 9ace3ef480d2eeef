#include "worker/trainer.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/mode.h"
#include "common/npy.h"
#include "common/status_macros.h"
#include "worker/data_order.h"
#include "worker/model.h"
#include "worker/progress.h"
#include "worker/straggler.h"

namespace ps {
namespace {

constexpr int kEvalBatch = 1000;

struct EvalResult {
  double accuracy = 0;
  double loss = 0;
};

absl::StatusOr<EvalResult> EvaluateOn(Mlp* model, const Dataset& d) {
  BatchStats total;
  for (int64_t i = 0; i < d.size; i += kEvalBatch) {
    const int rows = static_cast<int>(std::min<int64_t>(kEvalBatch, d.size - i));
    ASSIGN_OR_RETURN(BatchStats s, model->Evaluate(d.image(i), d.labels.data() + i, rows));
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.rows += s.rows;
  }
  return EvalResult{double(total.correct) / total.rows, total.loss_sum / total.rows};
}

absl::Status SaveModel(const std::string& dir, const ModelSpec& spec, const TensorList& w) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create --save_model directory ", dir));
  }
  for (size_t i = 0; i < spec.size(); ++i) {
    RETURN_IF_ERROR(WriteNpy(absl::StrCat(dir, "/", spec[i].name, ".npy"), spec[i].shape, w[i]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainerOptions(const TrainerOptions& o, const Dataset& train) {
  if (o.num_workers < 1 || o.worker_id < 0 || o.worker_id >= o.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--worker_id must be in [0, --num_workers=",
                                                   o.num_workers, "), got ", o.worker_id));
  }
  if (o.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  if (o.epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  if (o.max_steps < 0) return absl::InvalidArgumentError("--max_steps must be >= 0");
  if (o.eval_every < 0) return absl::InvalidArgumentError("--eval_every must be >= 0");
  for (int h : o.hidden) {
    if (h < 1) return absl::InvalidArgumentError("--hidden widths must be >= 1");
  }
  if (StepsPerEpoch(train.size, o.num_workers, o.batch_size) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", o.batch_size, " with ", o.num_workers, " workers leaves no full batch in ",
        train.size, " training examples"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run() {
  const TrainerOptions& o = options_;
  const Dataset& train = data_->train;
  RETURN_IF_ERROR(ValidateTrainerOptions(o, train));
  std::vector<int> dims = {train.features};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(train.classes);
  ASSIGN_OR_RETURN(std::unique_ptr<Mlp> model,
                   Mlp::Create(backend_, dims, std::max(o.batch_size, kEvalBatch)));

  std::unique_ptr<std::ofstream> metrics;
  if (!o.metrics_file.empty()) {
    metrics = std::make_unique<std::ofstream>(o.metrics_file, std::ios::trunc);
    if (!*metrics) {
      return absl::InvalidArgumentError(absl::StrCat("cannot write --metrics_file=", o.metrics_file));
    }
  }

  // On a GPU the training set goes to the device once, if it fits; each
  // step then gathers its batch there instead of uploading it.
  ASSIGN_OR_RETURN(const bool hold, backend_->ShouldHoldDataset(
                                        (train.images.size() + train.labels.size()) * sizeof(float)));
  if (hold) RETURN_IF_ERROR(model->HoldDataset(train.images, train.labels));

  TensorList weights, grads;
  RETURN_IF_ERROR(store_->Init(model->spec(), model->InitialValues(o.seed), o.worker_id == 0,
                               &weights));
  if (o.metrics != nullptr) {
    o.metrics->SetMode(store_->mode_name());
    o.metrics->SetModelVersion(store_->version());
  }
  const int64_t per_epoch = StepsPerEpoch(train.size, o.num_workers, o.batch_size);
  int64_t total_steps = per_epoch * o.epochs;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);
  if (o.log != nullptr && o.worker_id == 0) {
    *o.log << absl::StrFormat(
        "worker %d/%d: mlp %s (%d parameters), %s, %d steps/epoch x %d epochs (%d steps), "
        "batch %d per worker, on %s%s\n",
        o.worker_id, o.num_workers, absl::StrJoin(dims, "-"), TotalElements(model->spec()),
        store_->mode_name(), per_epoch, o.epochs, total_steps, o.batch_size,
        backend_->description(), hold ? " holding the training set" : "") << std::flush;
  }

  std::vector<int64_t> examples(o.batch_size);
  // The batch when it is uploaded rather than gathered on the device.
  std::vector<float> x(hold ? 0 : size_t(o.batch_size) * train.features);
  std::vector<float> y(hold ? 0 : o.batch_size);
  const absl::Time start = absl::Now();
  absl::Time last_log = start;
  // Sync servers restored from a checkpoint are at step V > 0: resume there.
  // The data order is a pure function of the seed and the step, so the run
  // continues exactly as an uninterrupted one would.
  const int64_t resume_at =
      store_->mode() == Mode::kSync ? std::min(store_->version(), total_steps) : 0;
  if (resume_at > 0 && o.log != nullptr) {
    *o.log << absl::StrFormat("worker %d: the servers are at step %d; resuming there\n",
                              o.worker_id, resume_at)
           << std::flush;
  }
  int64_t step = resume_at, samples_since_log = 0;
  double loss_since_log = 0;
  int64_t batches_since_log = 0;
  absl::Duration eval_time;     // spent evaluating; not training throughput
  absl::Duration compute_time;  // forward and backward
  absl::Duration comm_time;     // waiting for push-pull round trips
  Straggler straggler(o.slowdown, o.slowdown_whole_step, o.slowdown_every, o.worker_id);
  ProgressLine progress(resume_at, total_steps);  // drawn only with o.progress_line
  TrainResult result;

  auto log_point = [&](int epoch, bool eval) -> absl::Status {
    const absl::Time now = absl::Now();
    const double sps = samples_since_log / std::max(1e-9, absl::ToDoubleSeconds(now - last_log));
    const double train_loss = batches_since_log ? loss_since_log / batches_since_log : 0;
    EvalResult ev;
    if (eval) {
      RETURN_IF_ERROR(model->UseWeights(&weights));
      ASSIGN_OR_RETURN(ev, EvaluateOn(model.get(), data_->test));
      const absl::Duration eval_took = absl::Now() - now;
      eval_time += eval_took;
      progress.ExcludeTime(eval_took);
      result.evaluated = true;
      result.test_accuracy = ev.accuracy;
      result.test_loss = ev.loss;
      if (o.metrics != nullptr) o.metrics->RecordEvaluation(ev.accuracy, ev.loss);
      if (o.log != nullptr) {
        *o.log << progress.Clear()
               << absl::StrFormat(
                      "step %d epoch %d loss %.4f test_accuracy %.4f test_loss %.4f "
                      "samples/s %.0f\n",
                      step, epoch, train_loss, ev.accuracy, ev.loss, sps)
               << std::flush;
      }
    }
    if (metrics) {
      std::string line = absl::StrFormat(
          "{\"worker_id\": %d, \"step\": %d, \"epoch\": %d, \"train_loss\": %.6f, "
          "\"samples_per_sec\": %.1f, \"wall_s\": %.3f",
          o.worker_id, step, epoch, train_loss, sps, absl::ToDoubleSeconds(now - start));
      if (eval) {
        absl::StrAppendFormat(&line, ", \"test_accuracy\": %.6f, \"test_loss\": %.6f",
                              ev.accuracy, ev.loss);
      }
      *metrics << line << "}\n" << std::flush;
    }
    last_log = absl::Now();  // evaluation time does not count against samples/s
    samples_since_log = 0;
    loss_since_log = 0;
    batches_since_log = 0;
    return absl::OkStatus();
  };

  // Sync: a step can end past step + 1 when the servers moved on without
  // this worker (its gradient was dropped: --sync_quorum, or its lease
  // expired while it was cut off); it then continues at the servers' step,
  // with that step's share of the data.
  const bool sync = store_->mode() == Mode::kSync;
  int64_t trained = 0;  // steps this worker computed
  int64_t skips = 0;    // times the servers had moved on
  int epoch = static_cast<int>(step / per_epoch);
  std::vector<int64_t> perm;
  int perm_epoch = -1;
  while (step < total_steps) {
    epoch = static_cast<int>(step / per_epoch);
    const int64_t t = step - int64_t{epoch} * per_epoch;
    if (epoch != perm_epoch) {
      perm = EpochPermutation(train.size, o.seed, epoch, o.shuffle);
      perm_epoch = epoch;
    }
    for (int i = 0; i < o.batch_size; ++i) {
      examples[i] = BatchExample(perm, o.num_workers, o.worker_id, o.batch_size, t, i);
      if (hold) continue;
      const int64_t e = examples[i];
      std::copy(train.image(e), train.image(e) + train.features,
                x.begin() + size_t(i) * train.features);
      y[i] = train.labels[e];
    }
    const absl::Time compute_start = absl::Now();
    RETURN_IF_ERROR(model->UseWeights(&weights));
    // Each layer's gradient goes out as soon as backward has it; the next
    // weights replace this step's in `weights` at FinishPushPull (the model
    // may read them in place until then).
    RETURN_IF_ERROR(store_->BeginPushPull(&grads, &weights));
    const Mlp::OnReady send = [this](const std::vector<int>& t) { store_->SendGradients(t); };
    absl::StatusOr<BatchStats> s =
        hold ? model->TrainStep(examples, &grads, send)
             : model->TrainStep(x.data(), y.data(), o.batch_size, &grads, send);
    const absl::Time comm_start = absl::Now();
    absl::Status pushed = store_->FinishPushPull();
    RETURN_IF_ERROR(s.status());
    RETURN_IF_ERROR(pushed);
    absl::Duration step_compute = comm_start - compute_start;
    const absl::Duration step_comm = absl::Now() - comm_start;
    if (const absl::Duration extra = straggler.SleepAfter(step, comm_start - compute_start,
                                                          absl::Now() - compute_start);
        extra > absl::ZeroDuration()) {
      absl::SleepFor(extra);
      step_compute += extra;
    }
    compute_time += step_compute;
    comm_time += step_comm;
    const int64_t pushed_step = step++;
    ++trained;
    const bool dropped = sync && store_->DroppedShards() > 0;
    if (dropped) {
      ++result.steps_dropped;
      if (o.log != nullptr && (result.steps_dropped <= 3 || result.steps_dropped % 100 == 0)) {
        *o.log << progress.Clear()
               << absl::StrFormat(
                      "worker %d: step %d: %d of %d shards dropped this gradient (the step had "
                      "closed without it); continuing at step %d (%d dropped so far)\n",
                      o.worker_id, pushed_step, store_->DroppedShards(), store_->num_shards(),
                      std::min(store_->version(), total_steps), result.steps_dropped)
               << std::flush;
      }
    }
    if (sync && store_->version() > step) {
      // The servers closed steps without this worker (it was dropped, or
      // cut off: its retried gradient may still have counted).
      const int64_t next = std::min(store_->version(), total_steps);
      result.steps_skipped += next - step;
      ++skips;
      if (!dropped && o.log != nullptr && (skips <= 3 || skips % 100 == 0)) {
        *o.log << progress.Clear()
               << absl::StrFormat(
                      "worker %d: step %d: the servers moved on to step %d without this "
                      "worker; continuing there (%d steps skipped so far)\n",
                      o.worker_id, pushed_step, next, result.steps_skipped)
               << std::flush;
      }
      step = next;
    }
    samples_since_log += o.batch_size;
    loss_since_log += s->loss_sum / s->rows;
    if (o.metrics != nullptr) {
      o.metrics->RecordStep(step_compute, step_comm, o.batch_size, s->loss_sum / s->rows);
      o.metrics->SetModelVersion(store_->version());
      o.metrics->SetRetries(store_->retries());
      o.metrics->SetRecoveries(store_->recoveries());
    }
    ++batches_since_log;
    if (o.progress_line && o.log != nullptr) {
      progress.Step(step, o.batch_size, s->loss_sum / s->rows);
      if (const absl::Duration elapsed = absl::Now() - start; progress.Due(elapsed)) {
        *o.log << progress.Draw(elapsed) << std::flush;
      }
    }
    const bool eval = o.worker_id == 0 && o.eval_every > 0 && step % o.eval_every == 0;
    if (step < total_steps && (eval || (o.log_every > 0 && step % o.log_every == 0))) {
      RETURN_IF_ERROR(log_point(epoch, eval));
    }
  }
  if (o.log != nullptr) *o.log << progress.End() << std::flush;
  ++epoch;  // as after the loop over epochs: one past the last one trained
  const absl::Time end = absl::Now();
  // Async and SSP: the shards count pushes, and every worker pushes once per step, so
  // the run is complete at version W * steps. Worker 0 evaluates and saves
  // that model, not just the one it last pulled.
  if (o.worker_id == 0 && store_->mode() != Mode::kSync) {
    absl::Status s = store_->Pull(o.num_workers * step, &weights);
    // A worker that died leaves the run short of W * steps; the shards'
    // weights as of now are still a model worth evaluating.
    if (!s.ok() && o.log != nullptr) {
      *o.log << "warning: not every worker's pushes arrived; evaluating the weights as they "
                "are: "
             << s << "\n";
    }
  }
  result.steps = step;
  result.compute_s = absl::ToDoubleSeconds(compute_time);
  result.comm_s = absl::ToDoubleSeconds(comm_time);
  result.final_version = store_->version();
  if (o.metrics != nullptr) o.metrics->SetModelVersion(result.final_version);
  result.wall_s = absl::ToDoubleSeconds(end - start);
  result.samples_per_sec =
      trained * o.batch_size /
      std::max(1e-9, absl::ToDoubleSeconds(end - start - eval_time));
  RETURN_IF_ERROR(log_point(std::max(0, epoch - 1), /*eval=*/o.worker_id == 0));
  if (o.worker_id == 0 && !o.save_model.empty()) {
    RETURN_IF_ERROR(SaveModel(o.save_model, model->spec(), weights));
  }
  if (o.log != nullptr) {
    std::string line = absl::StrFormat(
        "worker %d done: mode %s, steps %d, version %d, samples/s %.0f, wall_s %.1f",
        o.worker_id, store_->mode_name(), step, result.final_version, result.samples_per_sec,
        result.wall_s);
    if (result.steps_dropped > 0 || result.steps_skipped > 0) {
      absl::StrAppendFormat(&line, ", gradients dropped %d, steps skipped %d",
                            result.steps_dropped, result.steps_skipped);
    }
    if (result.evaluated) {
      absl::StrAppendFormat(&line, ", final test_accuracy %.4f test_loss %.4f",
                            result.test_accuracy, result.test_loss);
    }
    *o.log << line << "\n" << std::flush;
  }
  result.weights = std::move(weights);
  return result;
}

absl::StatusOr<TrainResult> RunWorker(const TrainerOptions& options, const FashionMnist* data,
                                      const BackendOptions& backend_options,
                                      const ClientOptions* client,
                                      const OptimizerOptions& standalone_optimizer) {
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, CreateBackend(backend_options));
  std::unique_ptr<ParamStore> store;
  if (client == nullptr) {
    RETURN_IF_ERROR(ValidateOptimizerOptions(standalone_optimizer));
    store = std::make_unique<LocalParamStore>(standalone_optimizer);
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<PsClient> c, PsClient::Connect(*client));
    store = std::make_unique<RemoteParamStore>(std::move(c));
  }
  return Trainer(options, data, backend.get(), store.get()).Run();
}

}  // namespace ps
