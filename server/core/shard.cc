#include "server/core/shard.h"

#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const ShardOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<ConsistencyPolicy> policy,
                   CreateConsistencyPolicy(options.mode, options.num_workers, options.sync_rule,
                                           options.staleness));
  return std::unique_ptr<Shard>(new Shard(options, std::move(policy)));
}

Shard::Shard(const ShardOptions& options, std::unique_ptr<ConsistencyPolicy> policy)
    : options_(options),
      gradient_pool_(GradientPool::Create(
          absl::StrCat("shard ", options.shard_id),
          options.max_pending_pushes > 0 ? options.max_pending_pushes : 2 * options.num_workers + 2,
          options.num_workers, metrics_)),
      weights_(options.shard_id, &metrics_->version),
      policy_(std::move(policy)),
      // Leases are sync and SSP rules, stall reports sync's: async has no
      // step barrier.
      membership_(options.shard_id, options.num_workers,
                  options.mode != Mode::kAsync ? options.worker_timeout : absl::ZeroDuration(),
                  options.mode != Mode::kAsync && options.worker_registry),
      stalls_(options.shard_id, options.num_workers,
              options.mode == Mode::kSync ? options.stall_report_after : absl::ZeroDuration()),
      tables_(options.tables, options.mode, options.shard_id, options.num_shards,
              options.num_workers, options.reject_nonfinite),
      checkpoint_chain_(options.checkpoint_full_every) {
  incarnation_.run_id = options.run_id;
  while (incarnation_.run_id == 0) {
    std::random_device random;
    incarnation_.run_id = (uint64_t{random()} << 32) | random();
  }
  incarnation_.start = 1;
  WaitersOptions w;
  w.name = absl::StrCat("shard ", options.shard_id);
  w.max_waiting = options.max_waiting_calls;
  w.default_wait = options.default_wait;
  w.max_wait = options.max_wait;
  w.waiting = &metrics_->waiting_calls;
  w.timeout_message = [this](int64_t version, absl::Duration waited) {
    return WaitTimeoutMessage(version, waited);
  };
  w.on_alarm = [this](absl::Time now) { OnAlarm(now); };
  w.clock = options.clock;
  waiters_ = std::make_unique<Waiters>(std::move(w));
}

Shard::~Shard() {
  Close();
  waiters_.reset();  // destroys the timer, whose callbacks use the shard
}

void Shard::Close(absl::Status why) {
  absl::Status status;
  {
    absl::MutexLock l(&mu_);
    if (!closed_) {
      closed_status_ = !why.ok() ? std::move(why)
                                 : absl::UnavailableError(absl::StrCat("shard ", options_.shard_id,
                                                                       " is shutting down"));
    }
    closed_ = true;
    status = closed_status_;
  }
  waiters_->Close(status);
}

absl::Status Shard::ShuttingDown() const { return closed_status_; }

int64_t Shard::LastSeq(int worker_id) const {
  if (!options_.CheckWorker(worker_id).ok()) return 0;
  absl::MutexLock l(&mu_);
  const std::vector<int64_t> seqs = policy_->LastSeqs();
  return worker_id < static_cast<int>(seqs.size()) ? seqs[worker_id] : 0;
}

Incarnation Shard::incarnation() const {
  absl::MutexLock l(&mu_);
  return incarnation_;
}

SliceAssembler::Options Shard::AssemblerOptions(absl::string_view what) const {
  SliceAssembler::Options o;
  o.what = absl::StrCat(what, " to shard ", options_.shard_id);
  o.reject_nonfinite = options_.reject_nonfinite;
  return o;
}

uint64_t Shard::Init(int worker_id, const ModelSpec& spec,
                     const std::vector<RawTensorSlice>& values, absl::Duration wait,
                     std::function<void(absl::StatusOr<int64_t>, bool)> done) {
  absl::Status s = options_.CheckWorker(worker_id);
  if (s.ok()) s = ValidateModelSpec(spec, options_.spec_limits);
  const bool creator = worker_id == 0;
  if (s.ok() && !values.empty() && !creator) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker_id, " sent initial values; only worker 0 creates the parameters"));
  }
  if (!s.ok()) {
    done(s, false);
    return 0;
  }
  Touch(worker_id);

  // The creator's values are checked in full before the weights are
  // allocated, and copied outside the lock. (Parameters, once created, are
  // never replaced by an init: then the spec is only compared, below.)
  std::shared_ptr<const ShardLayout> layout;
  std::vector<float> initial;
  bool initialized;
  {
    absl::MutexLock l(&mu_);
    initialized = weights_.initialized();
  }
  if (creator && !initialized) {
    layout = MakeSliceLayout(spec, options_.num_shards, options_.shard_id);
    absl::StatusOr<std::vector<float>> assembled =
        VersionedWeights::Assemble(layout, values, AssemblerOptions("init"));
    if (!assembled.ok()) {
      done(assembled.status(), false);
      return 0;
    }
    initial = *std::move(assembled);
  }

  absl::StatusOr<int64_t> result;
  bool created = false;
  SnapshotCallbacks ready;
  WeightsSnapshot snap;
  {
    absl::MutexLock l(&mu_);
    if (closed_) {
      result = ShuttingDown();
    } else if (weights_.initialized()) {
      // Already created (e.g. worker 0 restarted): check, never overwrite.
      absl::Status cmp = CompareModelSpecs(weights_.layout()->spec, spec);
      if (cmp.ok()) {
        result = weights_.version();
      } else {
        result = cmp;
      }
    } else if (!creator) {
      // Wait for worker 0, then check the spec.
      SnapshotCallback check = [spec, done](absl::StatusOr<WeightsSnapshot> snap) {
        if (!snap.ok()) return done(snap.status(), false);
        absl::Status cmp = CompareModelSpecs(snap->layout->spec, spec);
        if (!cmp.ok()) return done(cmp, false);
        done(snap->version, false);
      };
      absl::StatusOr<uint64_t> ticket = waiters_->Add(0, wait, &check);
      if (ticket.ok()) return *ticket;
      result = ticket.status();
    } else {
      absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
          CreateOptimizer(options_.optimizer, layout->num_elements);
      absl::Status installed =
          optimizer.ok() ? ReplaceParametersLocked(std::move(layout), std::move(initial),
                                                   *std::move(optimizer), 0)
                         : optimizer.status();
      if (installed.ok()) {
        result = int64_t{0};
        created = true;
        ready = TakeReadyLocked(&snap);
      } else {
        result = installed;
      }
    }
  }
  Release(std::move(ready), snap);
  done(result, created);
  return 0;
}

absl::Status Shard::CheckInitializedLocked() const {
  if (weights_.initialized()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("shard ", options_.shard_id,
                   " has no parameters yet: worker 0 must call InitParams before anyone pushes"));
}

absl::StatusOr<GradientAssembly> Shard::StartPush(int worker_id,
                                                  int64_t computed_version) const {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  if (computed_version < 0) {
    return absl::InvalidArgumentError(absl::StrCat("push from worker ", worker_id, ": version ",
                                                   computed_version, " is negative"));
  }
  std::shared_ptr<const ShardLayout> layout;
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckInitializedLocked());
    layout = weights_.layout();
  }
  return GradientAssembly(worker_id, computed_version, std::move(layout),
                          AssemblerOptions("push"), gradient_pool_);
}

absl::StatusOr<PushResult> Shard::Push(AssembledGradient g, int64_t seq) {
  const absl::Time start = Now();
  const int worker_id = g.worker_id;
  const int64_t computed_version = g.computed_version;
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  std::vector<float> grad = std::move(g.values).TakeValues();
  Effects fx;
  PushResult result;
  int64_t staleness;
  int64_t step_staleness;
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckInitializedLocked());
    const int64_t size = weights_.layout()->num_elements;
    if (g.layout != weights_.layout()) {
      return absl::AbortedError(absl::StrCat(
          "shard ", options_.shard_id, "'s parameters were replaced during the push; retry"));
    }
    if (static_cast<int64_t>(grad.size()) != size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push has ", grad.size(), " elements, shard ", options_.shard_id, " owns ", size));
    }
    std::vector<std::vector<float>> to_apply;
    ASSIGN_OR_RETURN(const PushVerdict verdict,
                     policy_->OnPush(worker_id, computed_version, seq, weights_.version(),
                                     std::move(grad), &to_apply));
    membership_.MarkSeen(worker_id);
    TouchLocked(worker_id, start, &fx);
    result.outcome = verdict.outcome;
    step_staleness = verdict.step_staleness;
    // The policy accepted it: 0 <= computed_version <= version, no overflow.
    staleness = weights_.version() - computed_version;
    if (verdict.outcome == PushOutcome::kApplied) {
      tables_.NoteDenseAccepted(worker_id);
      if (verdict.apply) {
        ApplyLocked(std::move(to_apply), start, &fx,
                    StalenessLrScale(options_.staleness_lr, options_.mode, staleness));
      } else {
        WakeAt(stalls_.OnPushKept(start));
      }
    }
    result.version = weights_.version();
  }
  switch (result.outcome) {
    case PushOutcome::kApplied:
      metrics_->pushes_accepted.Add();
      metrics_->RecordStaleness(staleness);
      if (step_staleness >= 0) metrics_->step_staleness_max.RaiseTo(step_staleness);
      break;
    case PushOutcome::kDuplicate:
      metrics_->pushes_duplicate.Add();
      break;
    case PushOutcome::kDropped:
      metrics_->pushes_dropped.Add();
      break;
  }
  metrics_->push_latency.Record(Now() - start);
  Finish(std::move(fx));
  return result;
}

void Shard::ApplyLocked(std::vector<std::vector<float>> to_apply, absl::Time now, Effects* fx,
                        double lr_scale) {
  if (options_.mode == Mode::kSync) metrics_->barrier_wait.Record(stalls_.OpenFor(now));
  std::optional<std::string> line = stalls_.OnStepClosed(now, weights_.version());
  if (line.has_value()) fx->lines.push_back(*std::move(line));
  tables_.SetClock(weights_.version(), now);
  for (std::string& l : tables_.CloseStep(weights_.version(), static_cast<int>(to_apply.size()))) {
    fx->lines.push_back(std::move(l));
  }
  for (std::string& l : tables_.TierNews()) fx->lines.push_back(std::move(l));
  weights_.ApplyMean(to_apply, lr_scale);
  for (std::vector<float>& g : to_apply) gradient_pool_->Give(std::move(g));
  untouched_checkpoint_ = false;
  TakeReadyLocked(fx);
  if (options_.checkpoint_every > 0 && options_.on_checkpoint &&
      weights_.version() % options_.checkpoint_every == 0) {
    fx->checkpoint = ExportCheckpointLocked();
  }
}

void Shard::Finish(Effects fx) {
  Log(fx.lines);
  Release(std::move(fx.ready), fx.snap);
  if (fx.checkpoint.has_value()) {
    if (fx.checkpoint->ok()) {
      options_.on_checkpoint(*std::move(*fx.checkpoint));
    } else {
      Log({absl::StrCat("shard ", options_.shard_id, ": cannot export a checkpoint: ",
                        fx.checkpoint->status().message())});
    }
  }
}

uint64_t Shard::Pull(int worker_id, int64_t min_version, absl::Duration wait,
                     SnapshotCallback done, bool renews_lease) {
  const absl::Status valid = options_.CheckWorker(worker_id);
  absl::StatusOr<WeightsSnapshot> result = absl::UnknownError("unset");
  if (valid.ok() && renews_lease) Touch(worker_id);
  if (!valid.ok()) {
    result = valid;
  } else {
    absl::MutexLock l(&mu_);
    const int64_t ready_at = policy_->PullReadyVersion(worker_id, min_version);
    // SSP: a worker too far ahead waits for the slowest one (a reader, who
    // computes no gradient, never does).
    const int64_t needs_step = renews_lease ? policy_->PullNeedsStep(worker_id) : INT64_MIN;
    const bool held = policy_->SlowestStep() < needs_step;
    if (closed_) {
      result = ShuttingDown();
    } else if (!weights_.initialized() || weights_.version() < ready_at || held) {
      if (held) metrics_->pulls_held.Add();
      // Counted when the weights come.
      SnapshotCallback counted = [metrics = metrics_, clock = options_.clock, start = Now(),
                                  done = std::move(done)](absl::StatusOr<WeightsSnapshot> snap) {
        if (snap.ok()) {
          metrics->pulls_served.Add();
          metrics->pull_latency.Record(clock->Now() - start);
        }
        done(std::move(snap));
      };
      absl::StatusOr<uint64_t> ticket = waiters_->Add(ready_at, wait, &counted, needs_step);
      if (ticket.ok()) return *ticket;
      done = std::move(counted);  // refused: still ours, and it counts no error
      result = ticket.status();
    } else {
      result = weights_.Snapshot();
    }
  }
  if (result.ok()) {
    metrics_->pulls_served.Add();
    metrics_->pull_latency.Record(absl::ZeroDuration());
  }
  done(std::move(result));
  return 0;
}

void Shard::CancelWait(uint64_t ticket) { waiters_->Cancel(ticket); }

Shard::SnapshotCallbacks Shard::TakeReadyLocked(WeightsSnapshot* snap) {
  if (!weights_.initialized()) return {};
  ReadWaitingRowsLocked();
  *snap = weights_.Snapshot();
  return waiters_->TakeReady(weights_.version(), policy_->SlowestStep());
}

void Shard::TakeReadyLocked(Effects* fx) {
  // The latest snapshot serves every call released before it too.
  for (Waiters::Callback& done : TakeReadyLocked(&fx->snap)) fx->ready.push_back(std::move(done));
}

void Shard::Release(SnapshotCallbacks ready, const WeightsSnapshot& snap) {
  for (Waiters::Callback& done : ready) done(snap);
}

void Shard::Log(const std::vector<std::string>& lines) const {
  if (!options_.log) return;
  for (const std::string& line : lines) options_.log(line);
}

ShardStats Shard::Stats() const {
  ShardStats s = StatsFrom(options_, *metrics_);
  absl::MutexLock l(&mu_);
  s.initialized = weights_.initialized();
  s.version = weights_.version();
  s.num_elements = weights_.layout()->num_elements;
  if (s.initialized) s.waiting_for = policy_->MissingWorkers();
  s.workers_seen = membership_.seen();
  s.live_workers = membership_.live();
  s.dropped_workers = membership_.dropped();
  s.incarnation = incarnation_;
  s.worker_steps = policy_->Steps();
  if (options_.mode == Mode::kAsync) s.worker_last_seq = policy_->LastSeqs();
  s.tables = tables_.Usage();
  return s;
}

std::shared_ptr<const ShardLayout> Shard::Layout() const {
  absl::MutexLock l(&mu_);
  return weights_.layout();
}

}  // namespace ps
