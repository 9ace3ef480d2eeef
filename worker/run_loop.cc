#include "worker/run_loop.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/mode.h"
#include "common/npy.h"
#include "common/status_macros.h"
#include "worker/straggler.h"

namespace ps {
namespace {

absl::Status MakeDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create --save_model directory ", dir));
  }
  return absl::OkStatus();
}

// Each tensor as DIR/<name>.npy; a name's '/' makes subfolders (the CTR
// model's "layer0/weight").
absl::Status SaveModel(const std::string& dir, const ModelSpec& spec, const TensorList& w) {
  RETURN_IF_ERROR(MakeDirectory(dir));
  for (size_t i = 0; i < spec.size(); ++i) {
    const std::string path = absl::StrCat(dir, "/", spec[i].name, ".npy");
    for (size_t slash = path.find('/', dir.size() + 1); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      RETURN_IF_ERROR(MakeDirectory(path.substr(0, slash)));
    }
    RETURN_IF_ERROR(WriteNpy(path, spec[i].shape, w[i]));
  }
  return absl::OkStatus();
}

// One run of RunLoop: its state between the steps.
class Run {
 public:
  Run(const RunOptions& o, Workload* workload, ParamStore* store, Reporter* reporter,
      DataShares* shares)
      : o_(o),
        workload_(workload),
        store_(store),
        reporter_(reporter),
        shares_(shares),
        straggler_(o.slowdown, o.slowdown_whole_step, o.slowdown_every, o.worker_id) {
    shape_.steps = [workload](int workers) { return workload->StepsPerEpoch(workers); };
  }

  absl::StatusOr<RunResult> Go();

 private:
  // Trains step_ and moves step_ to the next step to train.
  absl::Status TrainStep();
  // Sync: after the step pushed at `pushed`, follows the servers past the
  // steps they closed without this worker.
  void FollowServers(int64_t pushed);
  // A reporter's point at step_, with an evaluation when `evaluate`.
  absl::Status Point(bool evaluate);
  // Moves share_ on to the epoch that holds step_ (or the next one where
  // this worker has a share, step_ then moving to its start); whether
  // there is a step left to train.
  absl::StatusOr<bool> Advance();
  // The share of a later epoch starts past step_: this worker joined.
  absl::Status JumpTo(int64_t first_step);

  const RunOptions& o_;
  Workload* const workload_;
  ParamStore* const store_;
  Reporter* const reporter_;
  DataShares* const shares_;
  Straggler straggler_;
  WorkloadPlan plan_;
  EpochShape shape_;
  DataShare share_;    // of the epoch being trained
  int64_t limit_ = 0;  // the run ends at this step at the latest
  bool sync_ = false;
  int64_t step_ = 0;                      // the next step to train
  int64_t epoch_ = 0;                     // of the last step trained (or the first, before one)
  int64_t trained_ = 0;                   // steps this worker computed
  int64_t skips_ = 0;                     // times the servers had moved on
  absl::Duration compute_, comm_, eval_;  // in Compute, Exchange, Evaluate
  RunResult result_;
};

absl::StatusOr<RunResult> Run::Go() {
  ASSIGN_OR_RETURN(plan_, workload_->Init(store_));
  if (plan_.total_steps < 1) return absl::InternalError("the workload plans no step");
  result_.mode = store_->mode_name();
  sync_ = store_->mode() == Mode::kSync;
  if (o_.worker_id == 0) {
    reporter_->Line(
        absl::StrFormat("worker %d/%d: %s", o_.worker_id, o_.num_workers, plan_.description));
  }
  shape_.epochs = plan_.epochs;
  limit_ = plan_.max_steps > 0 ? plan_.max_steps : std::numeric_limits<int64_t>::max();
  if (shares_->all_workers()) limit_ = std::min(limit_, plan_.total_steps);
  // Sync servers restored from a checkpoint are at step V > 0: resume there.
  // The data is a pure function of the step, so the run continues exactly
  // as an uninterrupted one would.
  step_ = sync_ ? std::min(store_->version(), limit_) : 0;
  if (step_ > 0) {
    reporter_->Line(absl::StrFormat("worker %d: the servers are at step %d; resuming there",
                                    o_.worker_id, step_));
  }
  ASSIGN_OR_RETURN(share_, shares_->ShareAt(step_, shape_));
  epoch_ = share_.epoch;
  const absl::Time start = absl::Now();
  reporter_->Start(plan_, result_.mode, store_->version(), step_, start);
  while (true) {
    ASSIGN_OR_RETURN(const bool more, Advance());
    if (!more) break;
    RETURN_IF_ERROR(TrainStep());
    const bool eval = o_.worker_id == 0 && o_.eval_every > 0 && step_ % o_.eval_every == 0;
    if (step_ < limit_ && (eval || (o_.log_every > 0 && step_ % o_.log_every == 0))) {
      RETURN_IF_ERROR(Point(eval));
    }
  }
  reporter_->EndSteps();
  const absl::Time end = absl::Now();
  if (o_.worker_id == 0 && !sync_ && shares_->all_workers()) {
    // Async and SSP: evaluate and save the model of every worker's pushes,
    // not just the weights last pulled. A worker that died leaves the run
    // short of W * steps; the shards' weights as of now are still a model
    // worth evaluating.
    if (absl::Status s = store_->Pull(o_.num_workers * step_, workload_->weights()); !s.ok()) {
      reporter_->Line(absl::StrCat(
          "warning: not every worker's pushes arrived; evaluating the weights as they are: ",
          s.ToString()));
    }
  }
  result_.steps = step_;
  result_.final_version = store_->version();
  result_.wall_s = absl::ToDoubleSeconds(end - start);
  result_.compute_s = absl::ToDoubleSeconds(compute_);
  result_.comm_s = absl::ToDoubleSeconds(comm_);
  result_.samples_per_sec = static_cast<double>(trained_) * plan_.batch_size /
                            std::max(1e-9, absl::ToDoubleSeconds(end - start - eval_));
  RETURN_IF_ERROR(Point(/*evaluate=*/o_.worker_id == 0));
  if (o_.worker_id == 0 && !o_.save_model.empty()) {
    RETURN_IF_ERROR(SaveModel(o_.save_model, workload_->spec(), *workload_->weights()));
  }
  reporter_->Done(result_);
  result_.weights = std::move(*workload_->weights());
  return std::move(result_);
}

absl::StatusOr<bool> Run::Advance() {
  while (step_ >= shape_.EndOf(share_) && !shape_.Past(share_.epoch)) {
    if (shape_.Past(share_.epoch + 1)) return false;  // the last epoch is done
    ASSIGN_OR_RETURN(share_, shares_->Next(share_, shape_));
  }
  if (shape_.Past(share_.epoch)) return false;
  if (share_.first_step > step_) RETURN_IF_ERROR(JumpTo(share_.first_step));
  return step_ < limit_;
}

absl::Status Run::JumpTo(int64_t first_step) {
  reporter_->Line(absl::StrFormat(
      "worker %d: takes share %d of %d of epoch %d, from step %d on (it joined at step %d)",
      o_.worker_id, share_.rank, share_.workers, share_.epoch, first_step, step_));
  step_ = first_step;
  // The weights of the step it starts at (sync: once the servers are there).
  return store_->Pull(sync_ ? first_step : 0, workload_->weights());
}

absl::Status Run::TrainStep() {
  epoch_ = share_.epoch;
  const absl::Time compute_start = absl::Now();
  ASSIGN_OR_RETURN(const double loss, workload_->Compute(step_, share_));
  const absl::Time comm_start = absl::Now();
  RETURN_IF_ERROR(workload_->Exchange());
  const absl::Time comm_end = absl::Now();
  absl::Duration compute = comm_start - compute_start;
  const absl::Duration comm = comm_end - comm_start;
  if (const absl::Duration extra = straggler_.SleepAfter(step_, compute, comm_end - compute_start);
      extra > absl::ZeroDuration()) {
    absl::SleepFor(extra);
    compute += extra;
  }
  compute_ += compute;
  comm_ += comm;
  const int64_t pushed = step_++;
  ++trained_;
  if (sync_) FollowServers(pushed);
  StepReport r;
  r.step = step_;
  r.samples = plan_.batch_size;
  r.loss = loss;
  r.compute = compute;
  r.communication = comm;
  r.version = store_->version();
  r.retries = store_->retries();
  r.recoveries = store_->recoveries();
  reporter_->Step(r, absl::Now());
  return absl::OkStatus();
}

void Run::FollowServers(int64_t pushed) {
  const int64_t total = limit_;
  const bool dropped = store_->DroppedShards() > 0;
  if (dropped) {
    const int64_t n = ++result_.steps_dropped;
    if (n <= 3 || n % 100 == 0) {
      reporter_->Line(absl::StrFormat(
          "worker %d: step %d: %d of %d shards dropped this gradient (the step had closed "
          "without it); continuing at step %d (%d dropped so far)",
          o_.worker_id, pushed, store_->DroppedShards(), store_->num_shards(),
          std::min(store_->version(), total), n));
    }
  }
  if (store_->version() <= step_) return;
  // The servers closed steps without this worker (it was dropped, or cut
  // off: its retried gradient may still have counted).
  const int64_t next = std::min(store_->version(), total);
  result_.steps_skipped += next - step_;
  ++skips_;
  if (!dropped && (skips_ <= 3 || skips_ % 100 == 0)) {
    reporter_->Line(absl::StrFormat(
        "worker %d: step %d: the servers moved on to step %d without this worker; continuing "
        "there (%d steps skipped so far)",
        o_.worker_id, pushed, next, result_.steps_skipped));
  }
  step_ = next;
}

absl::Status Run::Point(bool evaluate) {
  const absl::Time at = absl::Now();
  if (evaluate) {
    ASSIGN_OR_RETURN(result_.evaluation, workload_->Evaluate());
  }
  const absl::Time resume = absl::Now();
  if (evaluate) eval_ += resume - at;
  reporter_->Point(step_, epoch_, evaluate ? &*result_.evaluation : nullptr, at, resume);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunOptions::Validate() const {
  RETURN_IF_ERROR(ValidateWorkerId(worker_id, num_workers));
  if (eval_every < 0) return absl::InvalidArgumentError("--eval_every must be >= 0");
  if (log_every < 0) return absl::InvalidArgumentError("--log_every must be >= 0");
  if (!(slowdown >= 0)) return absl::InvalidArgumentError("--slowdown must be >= 0");
  if (slowdown_every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slowdown_every must be >= 1, got ", slowdown_every));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> RunLoop(const RunOptions& options, Workload* workload, ParamStore* store,
                                  Reporter* reporter, DataShares* shares) {
  RETURN_IF_ERROR(options.Validate());
  std::optional<FixedShares> fixed;
  if (shares == nullptr) shares = &fixed.emplace(options.worker_id, options.num_workers);
  return Run(options, workload, store, reporter, shares).Go();
}

absl::StatusOr<RunResult> RunWorker(const RunOptions& options, Workload* workload,
                                    const ClientOptions* client,
                                    const LocalStoreOptions& standalone, Reporter* reporter,
                                    DataShares* shares) {
  RETURN_IF_ERROR(options.Validate());
  if (client == nullptr && options.num_workers != 1) {
    return absl::InvalidArgumentError("--standalone trains alone: use --num_workers=1");
  }
  std::unique_ptr<Reporter> silent;
  if (reporter == nullptr) {
    silent = Reporter::Silent();
    reporter = silent.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ParamStore> store, ConnectParamStore(client, standalone));
  return RunLoop(options, workload, store.get(), reporter, shares);
}

}  // namespace ps
