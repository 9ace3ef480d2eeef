#include "server/shard.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/float_bytes.h"
#include "common/status_macros.h"

namespace ps {

void WriteLineToStderr(absl::string_view line) {
  const std::string text = absl::StrCat(line, "\n");
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

namespace {

// "34.2s": the form of every duration in the stall reports.
std::string FormatSeconds(absl::Duration d) {
  return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const ShardOptions& options) {
  if (options.num_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_shards must be >= 1, got ", options.num_shards));
  }
  if (options.shard_id < 0 || options.shard_id >= options.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("shard_id must be in [0, ",
                                                   options.num_shards, "), got ",
                                                   options.shard_id));
  }
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1, got ", options.num_workers));
  }
  if (options.default_wait <= absl::ZeroDuration() || options.max_wait < options.default_wait) {
    return absl::InvalidArgumentError("need 0 < default_wait <= max_wait");
  }
  if (options.max_waiting_calls < 1 || options.max_pending_pushes < 0) {
    return absl::InvalidArgumentError("need max_waiting_calls >= 1 and max_pending_pushes >= 0");
  }
  // The optimizer is sized when the parameters arrive; validate its options now.
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt, CreateOptimizer(options.optimizer, 0));
  // An unknown mode fails here, not as a silent fallback.
  ASSIGN_OR_RETURN(std::unique_ptr<ConsistencyPolicy> policy,
                   CreateConsistencyPolicy(options.mode, options.num_workers, options.sync_rule));
  if (options.worker_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_timeout must be >= 0");
  }
  return std::unique_ptr<Shard>(new Shard(options, std::move(opt), std::move(policy)));
}

Shard::Shard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer,
             std::unique_ptr<ConsistencyPolicy> policy)
    : options_(options),
      layout_(std::make_shared<ShardLayout>()),
      gradient_pool_(GradientPool::Create(
          absl::StrCat("shard ", options.shard_id),
          options.max_pending_pushes > 0 ? options.max_pending_pushes
                                         : 2 * options.num_workers + 2,
          options.num_workers, metrics_)),
      optimizer_(std::move(optimizer)),
      policy_(std::move(policy)),
      last_seen_(options.num_workers, absl::InfinitePast()) {
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
  waiters_ = std::make_unique<Waiters>(std::move(w));
}

Shard::~Shard() {
  Close();
  waiters_.reset();  // joins the timer, whose callbacks use the shard
}

void Shard::Close() {
  {
    absl::MutexLock l(&mu_);
    closed_ = true;
  }
  waiters_->Close(
      absl::UnavailableError(absl::StrCat("shard ", options_.shard_id, " is shutting down")));
}

absl::Status Shard::CheckWorker(int worker_id) const {
  if (worker_id < 0 || worker_id >= options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id ", worker_id,
                                                   " is out of range: this server has ",
                                                   options_.num_workers, " workers (ids 0..",
                                                   options_.num_workers - 1, ")"));
  }
  return absl::OkStatus();
}

absl::Status Shard::Register(int worker_id, int num_workers) {
  RETURN_IF_ERROR(CheckWorker(worker_id));
  if (num_workers != options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker_id, " was started with num_workers=", num_workers,
        " but this server expects num_workers=", options_.num_workers));
  }
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    workers_seen_.insert(worker_id);
    TouchLocked(worker_id, &fx);
  }
  Finish(std::move(fx));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Shard::Heartbeat(int worker_id) {
  RETURN_IF_ERROR(CheckWorker(worker_id));
  Effects fx;
  int64_t version;
  {
    absl::MutexLock l(&mu_);
    TouchLocked(worker_id, &fx);
    version = version_;
  }
  Finish(std::move(fx));
  return version;
}

int64_t Shard::LastSeq(int worker_id) const {
  if (!CheckWorker(worker_id).ok()) return 0;
  absl::MutexLock l(&mu_);
  const std::vector<int64_t> seqs = policy_->LastSeqs();
  return worker_id < static_cast<int>(seqs.size()) ? seqs[worker_id] : 0;
}

Incarnation Shard::incarnation() const {
  absl::MutexLock l(&mu_);
  return incarnation_;
}

void Shard::Touch(int worker_id) {
  if (!leases()) return;
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    TouchLocked(worker_id, &fx);
  }
  Finish(std::move(fx));
}

void Shard::TouchLocked(int worker_id, Effects* fx) {
  if (!leases()) return;
  const absl::Time now = absl::Now();
  last_seen_[worker_id] = now;
  if (dropped_.erase(worker_id) > 0) {
    fx->lines.push_back(absl::StrCat("shard ", options_.shard_id, ": worker ", worker_id,
                                     " is back (at step ", version_,
                                     "); sync steps wait for it again"));
    std::vector<std::vector<float>> to_apply;
    if (policy_->SetLive(worker_id, true, &to_apply) && initialized_) {
      OnStepPushLocked(/*completed=*/true, &fx->lines);
      ApplyLocked(std::move(to_apply), fx);
    }
  }
  ArmLeaseCheckLocked(now + options_.worker_timeout);
}

void Shard::ArmLeaseCheckLocked(absl::Time when) {
  if (next_lease_check_ != absl::InfiniteFuture()) return;  // an earlier one is set
  next_lease_check_ = when;
  waiters_->WakeAt(when);
}

void Shard::CheckLeasesLocked(absl::Time now, Effects* fx) {
  if (!leases() || now < next_lease_check_) return;
  next_lease_check_ = absl::InfiniteFuture();
  for (int w = 0; w < options_.num_workers; ++w) {
    if (last_seen_[w] == absl::InfinitePast() || dropped_.count(w) > 0) continue;
    const absl::Time expires = last_seen_[w] + options_.worker_timeout;
    if (expires > now) {
      next_lease_check_ = std::min(next_lease_check_, expires);
      continue;
    }
    dropped_.insert(w);
    fx->lines.push_back(absl::StrFormat(
        "shard %d: worker %d dropped: no request for %.1fs (--worker_timeout=%s) at step %d; "
        "sync steps close without it until it is back",
        options_.shard_id, w, absl::ToDoubleSeconds(now - last_seen_[w]),
        absl::FormatDuration(options_.worker_timeout), version_));
    std::vector<std::vector<float>> to_apply;
    if (policy_->SetLive(w, false, &to_apply) && initialized_) {
      OnStepPushLocked(/*completed=*/true, &fx->lines);
      ApplyLocked(std::move(to_apply), fx);
    }
  }
}
absl::StatusOr<std::vector<float>> Shard::AssembleValues(
    const std::shared_ptr<const ShardLayout>& layout, const std::vector<RawTensorSlice>& values,
    absl::string_view what) const {
  SliceAssembler assembler(layout, AssemblerOptions(what));
  RETURN_IF_ERROR(assembler.Validate(values));
  std::vector<float> flat(layout->num_elements);
  for (const RawTensorSlice& v : values) {
    RETURN_IF_ERROR(assembler.Add(v, [&](const SliceRange& r) -> absl::StatusOr<float*> {
      return flat.data() + r.flat_offset;
    }));
  }
  return flat;
}

SliceAssembler::Options Shard::AssemblerOptions(absl::string_view what) const {
  SliceAssembler::Options o;
  o.what = absl::StrCat(what, " to shard ", options_.shard_id);
  o.reject_nonfinite = options_.reject_nonfinite;
  return o;
}

absl::Status Shard::InstallLocked(std::shared_ptr<const ShardLayout> layout,
                                  std::vector<float> weights, std::unique_ptr<Optimizer> optimizer,
                                  int64_t version) {
  if (static_cast<int64_t>(weights.size()) != layout->num_elements) {
    return absl::InvalidArgumentError(absl::StrCat("state has ", weights.size(),
                                                   " elements but shard ", options_.shard_id,
                                                   " owns ", layout->num_elements));
  }
  // Made before anything changes, so a failure leaves the shard as it was.
  ASSIGN_OR_RETURN(std::unique_ptr<ConsistencyPolicy> policy,
                   CreateConsistencyPolicy(options_.mode, options_.num_workers,
                                           options_.sync_rule));
  std::vector<std::vector<float>> none;
  for (int w : dropped_) policy->SetLive(w, false, &none);  // no step is open
  optimizer_ = std::move(optimizer);
  layout_ = std::move(layout);
  weights_ = weights_pool_->Share(std::move(weights));
  version_ = version;
  metrics_->version.Set(version);
  policy_ = std::move(policy);
  // The pending gradients are gone, so is the open step (unreported).
  step_opened_ = absl::InfiniteFuture();
  next_stall_report_ = absl::InfiniteFuture();
  stall_reports_ = 0;
  weights_pool_->Clear();
  gradient_pool_->Clear();
  initialized_ = true;
  untouched_restore_ = false;
  return absl::OkStatus();
}

uint64_t Shard::Init(int worker_id, const ModelSpec& spec,
                     const std::vector<RawTensorSlice>& values, absl::Duration wait,
                     std::function<void(absl::StatusOr<int64_t>, bool)> done) {
  absl::Status s = CheckWorker(worker_id);
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
    initialized = initialized_;
  }
  if (creator && !initialized) {
    layout = MakeSliceLayout(spec, options_.num_shards, options_.shard_id);
    absl::StatusOr<std::vector<float>> assembled = AssembleValues(layout, values, "init");
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
      result = absl::UnavailableError(
          absl::StrCat("shard ", options_.shard_id, " is shutting down"));
    } else if (initialized_) {
      // Already created (e.g. worker 0 restarted): check, never overwrite.
      absl::Status cmp = CompareModelSpecs(layout_->spec, spec);
      if (cmp.ok()) {
        result = version_;
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
          optimizer.ok() ? InstallLocked(std::move(layout), std::move(initial),
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

absl::StatusOr<bool> Shard::Restore(int worker_id, const ModelSpec& spec,
                                     const std::vector<RawTensorSlice>& values,
                                     int64_t version) {
  RETURN_IF_ERROR(CheckWorker(worker_id));
  RETURN_IF_ERROR(ValidateModelSpec(spec, options_.spec_limits));
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore from worker ", worker_id, ": version ", version, " is negative"));
  }
  {
    absl::MutexLock l(&mu_);
    if (initialized_) {
      RETURN_IF_ERROR(CompareModelSpecs(layout_->spec, spec));
      if (version_ >= version) return false;
    }
  }
  // Checked and copied outside the lock, as a creating init.
  std::shared_ptr<const ShardLayout> layout =
      MakeSliceLayout(spec, options_.num_shards, options_.shard_id);
  ASSIGN_OR_RETURN(std::vector<float> weights, AssembleValues(layout, values, "restore"));
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    if (closed_) {
      return absl::UnavailableError(absl::StrCat("shard ", options_.shard_id, " is shutting down"));
    }
    if (initialized_ && version_ >= version) return false;  // another worker was first
    const int64_t was = version_;
    const bool had = initialized_;
    std::unique_ptr<Optimizer> optimizer;
    if (had) {
      optimizer = std::move(optimizer_);  // same spec: its state still fits
    } else {
      ASSIGN_OR_RETURN(optimizer, CreateOptimizer(options_.optimizer, layout->num_elements));
    }
    const std::vector<int64_t> seqs = policy_->LastSeqs();
    absl::Status installed =
        InstallLocked(std::move(layout), std::move(weights), std::move(optimizer), version);
    if (!installed.ok()) {
      // Cannot happen (the weights are sized by the layout), but the shard
      // must keep an optimizer that fits its unchanged parameters.
      optimizer_ = CreateOptimizer(options_.optimizer, layout_->num_elements).value();
      return installed;
    }
    policy_->SetLastSeqs(seqs);
    workers_seen_.insert(worker_id);
    if (leases()) {
      // The run is live (a worker holds its weights): every worker is
      // expected, so one that died before this shard restarted is dropped
      // after a lease rather than waited for.
      const absl::Time now = absl::Now();
      for (absl::Time& seen : last_seen_) {
        if (seen == absl::InfinitePast()) seen = now;
      }
      ArmLeaseCheckLocked(now + options_.worker_timeout);
    }
    fx.lines.push_back(absl::StrCat(
        "shard ", options_.shard_id, ": restored to version ", version, " from worker ",
        worker_id, "'s copy (the shard was ",
        had ? absl::StrCat("at version ", was) : std::string("empty"), ")"));
    fx.ready = TakeReadyLocked(&fx.snap);
  }
  Finish(std::move(fx));
  return true;
}

absl::Status Shard::CheckInitializedLocked() const {
  if (initialized_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("shard ", options_.shard_id,
                   " has no parameters yet: worker 0 must call InitParams before anyone pushes"));
}

absl::StatusOr<GradientAssembly> Shard::StartPush(int worker_id,
                                                  int64_t computed_version) const {
  RETURN_IF_ERROR(CheckWorker(worker_id));
  if (computed_version < 0) {
    return absl::InvalidArgumentError(absl::StrCat("push from worker ", worker_id, ": version ",
                                                   computed_version, " is negative"));
  }
  std::shared_ptr<const ShardLayout> layout;
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckInitializedLocked());
    layout = layout_;
  }
  return GradientAssembly(worker_id, computed_version, std::move(layout),
                          AssemblerOptions("push"), gradient_pool_);
}

absl::StatusOr<PushResult> Shard::Push(AssembledGradient g, int64_t seq) {
  const absl::Time start = absl::Now();
  const int worker_id = g.worker_id;
  const int64_t computed_version = g.computed_version;
  RETURN_IF_ERROR(CheckWorker(worker_id));
  std::vector<float> grad = std::move(g.values).TakeValues();
  Effects fx;
  PushResult result;
  int64_t staleness;
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckInitializedLocked());
    if (g.layout != layout_) {
      return absl::AbortedError(absl::StrCat(
          "shard ", options_.shard_id, "'s parameters were replaced during the push; retry"));
    }
    if (static_cast<int64_t>(grad.size()) != layout_->num_elements) {
      return absl::InvalidArgumentError(absl::StrCat("push has ", grad.size(),
                                                     " elements, shard ", options_.shard_id,
                                                     " owns ", layout_->num_elements));
    }
    std::vector<std::vector<float>> to_apply;
    ASSIGN_OR_RETURN(const PushVerdict verdict,
                     policy_->OnPush(worker_id, computed_version, seq, version_, std::move(grad),
                                     &to_apply));
    workers_seen_.insert(worker_id);
    TouchLocked(worker_id, &fx);
    result.outcome = verdict.outcome;
    // The policy accepted it: 0 <= computed_version <= version_, no overflow.
    staleness = version_ - computed_version;
    if (verdict.outcome == PushOutcome::kApplied) {
      OnStepPushLocked(verdict.apply, &fx.lines);
      if (verdict.apply) ApplyLocked(std::move(to_apply), &fx);
    }
    result.version = version_;
  }
  switch (result.outcome) {
    case PushOutcome::kApplied:
      metrics_->pushes_accepted.Add();
      metrics_->RecordStaleness(staleness);
      break;
    case PushOutcome::kDuplicate:
      metrics_->pushes_duplicate.Add();
      break;
    case PushOutcome::kDropped:
      metrics_->pushes_dropped.Add();
      break;
  }
  metrics_->push_latency.Record(absl::Now() - start);
  Finish(std::move(fx));
  return result;
}

void Shard::ApplyLocked(std::vector<std::vector<float>> to_apply, Effects* fx) {
  // Copy on write: a reader may still be sending the current buffer. New
  // references are only taken under mu_, so a count of 1 means nobody
  // else holds it; the fence orders the last reader's reads before ours.
  if (weights_.use_count() > 1) {
    std::vector<float> copy = weights_pool_->Take(weights_->size());
    std::copy(weights_->begin(), weights_->end(), copy.begin());
    weights_ = weights_pool_->Share(std::move(copy));
  } else {
    std::atomic_thread_fence(std::memory_order_acquire);
  }
  std::vector<const float*> grads;
  for (const std::vector<float>& g : to_apply) grads.push_back(g.data());
  ApplyMeanInParallel(optimizer_.get(), /*step=*/version_ + 1, grads, weights_->size(),
                      weights_->data());
  for (std::vector<float>& g : to_apply) gradient_pool_->Give(std::move(g));
  ++version_;
  untouched_restore_ = false;
  metrics_->version.Set(version_);
  fx->ready = TakeReadyLocked(&fx->snap);
  if (options_.checkpoint_every > 0 && options_.on_checkpoint &&
      version_ % options_.checkpoint_every == 0) {
    fx->checkpoint = ExportStateLocked();
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
  const absl::Status valid = CheckWorker(worker_id);
  absl::StatusOr<WeightsSnapshot> result = absl::UnknownError("unset");
  if (valid.ok() && renews_lease) Touch(worker_id);
  if (!valid.ok()) {
    result = valid;
  } else {
    absl::MutexLock l(&mu_);
    const int64_t ready_at = policy_->PullReadyVersion(worker_id, min_version);
    if (closed_) {
      result = absl::UnavailableError(absl::StrCat("shard ", options_.shard_id, " is shutting down"));
    } else if (!initialized_ || version_ < ready_at) {
      // Counted when the weights come.
      SnapshotCallback counted = [metrics = metrics_, start = absl::Now(),
                                  done = std::move(done)](absl::StatusOr<WeightsSnapshot> snap) {
        if (snap.ok()) {
          metrics->pulls_served.Add();
          metrics->pull_latency.Record(absl::Now() - start);
        }
        done(std::move(snap));
      };
      absl::StatusOr<uint64_t> ticket = waiters_->Add(ready_at, wait, &counted);
      if (ticket.ok()) return *ticket;
      done = std::move(counted);  // refused: still ours, and it counts no error
      result = ticket.status();
    } else {
      result = SnapshotLocked();
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

WeightsSnapshot Shard::SnapshotLocked() const {
  return WeightsSnapshot{version_, layout_, weights_};
}

Shard::SnapshotCallbacks Shard::TakeReadyLocked(WeightsSnapshot* snap) {
  if (!initialized_) return {};
  *snap = SnapshotLocked();
  return waiters_->TakeReady(version_);
}

void Shard::Release(SnapshotCallbacks ready, const WeightsSnapshot& snap) {
  for (Waiters::Callback& done : ready) done(snap);
}

std::string Shard::WaitTimeoutMessage(int64_t min_version, absl::Duration waited) const {
  absl::MutexLock l(&mu_);
  std::string msg = absl::StrCat("shard ", options_.shard_id, ": gave up after ",
                                 absl::FormatDuration(waited), " waiting for ");
  if (!initialized_) {
    absl::StrAppend(&msg,
                    "the parameters: worker 0 has not initialized them (is worker 0 running?)");
    return msg;
  }
  absl::StrAppend(&msg, "version ", min_version, "; the shard is at version ", version_);
  if (options_.mode == Mode::kSync) {
    absl::StrAppend(&msg, "; step ", version_, " is missing gradients from workers [",
                    absl::StrJoin(policy_->MissingWorkers(), ", "), "]");
  }
  return msg;
}

void Shard::OnStepPushLocked(bool completed, std::vector<std::string>* lines) {
  if (options_.mode != Mode::kSync) return;
  if (completed) {
    if (stall_reports_ > 0) {
      lines->push_back(absl::StrCat("shard ", options_.shard_id, ": step ", version_,
                                    " completed after ",
                                    FormatSeconds(absl::Now() - step_opened_)));
    }
    step_opened_ = absl::InfiniteFuture();
    next_stall_report_ = absl::InfiniteFuture();
    stall_reports_ = 0;
  } else if (step_opened_ == absl::InfiniteFuture()) {
    step_opened_ = absl::Now();
    if (options_.stall_report_after > absl::ZeroDuration()) {
      next_stall_report_ = step_opened_ + options_.stall_report_after;
      waiters_->WakeAt(next_stall_report_);
    }
  }
}

void Shard::OnAlarm(absl::Time now) {
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    CheckLeasesLocked(now, &fx);
    CollectStallReportLocked(now, &fx.lines);
    // The timer keeps only the earliest alarm: set both again, also when
    // the alarm came early (set for another purpose, or an earlier step).
    if (next_stall_report_ != absl::InfiniteFuture()) waiters_->WakeAt(next_stall_report_);
    if (next_lease_check_ != absl::InfiniteFuture()) waiters_->WakeAt(next_lease_check_);
  }
  Finish(std::move(fx));
}

void Shard::CollectStallReportLocked(absl::Time now, std::vector<std::string>* lines) {
  if (now < next_stall_report_) return;
  std::vector<int> received;
  const std::vector<int> missing = policy_->MissingWorkers();
  for (int w = 0, m = 0; w < options_.num_workers; ++w) {
    if (m < static_cast<int>(missing.size()) && missing[m] == w) {
      ++m;
    } else {
      received.push_back(w);
    }
  }
  lines->push_back(absl::StrCat("shard ", options_.shard_id, ": step ", version_,
                                " has waited ", FormatSeconds(now - step_opened_),
                                " for gradients from workers [", absl::StrJoin(missing, ", "),
                                "] (received from [", absl::StrJoin(received, ", "), "])"));
  ++stall_reports_;
  // The next report is due when the step has waited twice as long (10 s,
  // 20 s, 40 s, ...), so a step that never completes logs a few lines, not a
  // line every period; a timer that woke late skips the reports it missed.
  while (next_stall_report_ <= now) {
    next_stall_report_ = step_opened_ + 2 * (next_stall_report_ - step_opened_);
  }
}

void Shard::Log(const std::vector<std::string>& lines) const {
  if (!options_.log) return;
  for (const std::string& line : lines) options_.log(line);
}

ShardStats Shard::Stats() const {
  absl::MutexLock l(&mu_);
  ShardStats s;
  s.mode = options_.mode;
  s.shard_id = options_.shard_id;
  s.num_shards = options_.num_shards;
  s.num_workers = options_.num_workers;
  s.initialized = initialized_;
  s.version = version_;
  s.workers_seen.assign(workers_seen_.begin(), workers_seen_.end());
  if (initialized_) s.waiting_for = policy_->MissingWorkers();
  s.num_elements = layout_->num_elements;
  s.learning_rate = options_.optimizer.learning_rate;
  s.pushes_applied = metrics_->pushes_accepted.Get();
  s.max_staleness = metrics_->staleness_max.Get();
  s.mean_staleness = metrics_->MeanStaleness();
  s.waiting_calls = metrics_->waiting_calls.Get();
  s.pending_pushes = metrics_->pending_pushes.Get();
  s.pulls_served = metrics_->pulls_served.Get();
  s.incarnation = incarnation_;
  if (leases()) {
    for (int w = 0; w < options_.num_workers; ++w) {
      if (last_seen_[w] == absl::InfinitePast()) continue;
      (dropped_.count(w) > 0 ? s.dropped_workers : s.live_workers).push_back(w);
    }
  }
  if (options_.mode == Mode::kSync) {
    s.sync_quorum =
        options_.sync_rule.quorum > 0 ? options_.sync_rule.quorum : options_.num_workers;
    s.min_workers = options_.sync_rule.min_workers;
    s.worker_timeout = options_.worker_timeout;
  }
  s.pushes_dropped = metrics_->pushes_dropped.Get();
  s.pushes_duplicate = metrics_->pushes_duplicate.Get();
  s.push_latency = metrics_->push_latency.Read();
  s.pull_latency = metrics_->pull_latency.Read();
  return s;
}

std::shared_ptr<const ShardLayout> Shard::Layout() const {
  absl::MutexLock l(&mu_);
  return layout_;
}

absl::StatusOr<ShardState> Shard::ExportState() const {
  absl::MutexLock l(&mu_);
  return ExportStateLocked();
}

absl::StatusOr<ShardState> Shard::ExportStateLocked() const {
  if (!initialized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", options_.shard_id, " has no parameters to export"));
  }
  ShardState state;
  state.shard_id = options_.shard_id;
  state.num_shards = options_.num_shards;
  state.num_workers = options_.num_workers;
  state.workers_seen.assign(workers_seen_.begin(), workers_seen_.end());
  state.spec = layout_->spec;
  state.version = version_;
  state.weights = *weights_;
  state.incarnation = incarnation_;
  state.last_seq = policy_->LastSeqs();
  state.optimizer = optimizer_->name();
  ASSIGN_OR_RETURN(state.optimizer_state, optimizer_->SaveState());
  return state;
}

absl::Status Shard::RestoreState(const ShardState& state) {
  return Install(state, /*only_untouched=*/false);
}

absl::Status Shard::RollBack(const ShardState& state) {
  return Install(state, /*only_untouched=*/true);
}

absl::Status Shard::Install(const ShardState& state, bool only_untouched) {
  if (state.shard_id != options_.shard_id || state.num_shards != options_.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state is of shard ", state.shard_id, " of ", state.num_shards, ", this is shard ",
        options_.shard_id, " of ", options_.num_shards));
  }
  if (state.num_workers != options_.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("state is of a run with ", state.num_workers,
                     " workers, this server expects ", options_.num_workers));
  }
  for (int w : state.workers_seen) RETURN_IF_ERROR(CheckWorker(w));
  if (state.optimizer != options_.optimizer.name) {
    return absl::InvalidArgumentError(absl::StrCat("state holds optimizer \"", state.optimizer,
                                                   "\" state, this server runs \"",
                                                   options_.optimizer.name, "\""));
  }
  RETURN_IF_ERROR(ValidateModelSpec(state.spec, options_.spec_limits));
  auto layout = MakeSliceLayout(state.spec, options_.num_shards, options_.shard_id);
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   CreateOptimizer(options_.optimizer, layout->num_elements));
  RETURN_IF_ERROR(optimizer->RestoreState(state.optimizer_state));
  SnapshotCallbacks ready;
  WeightsSnapshot snap;
  {
    absl::MutexLock l(&mu_);
    if (only_untouched && !untouched_restore_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", options_.shard_id, " is at version ", version_,
          " and has changed since it restored its checkpoint: it cannot roll back"));
    }
    RETURN_IF_ERROR(
        InstallLocked(std::move(layout), state.weights, std::move(optimizer), state.version));
    untouched_restore_ = true;
    workers_seen_.insert(state.workers_seen.begin(), state.workers_seen.end());
    policy_->SetLastSeqs(state.last_seq);
    // A rollback is no restart: the incarnation stays.
    if (state.incarnation.run_id != 0 && !only_untouched) {
      incarnation_ = Incarnation{state.incarnation.run_id, state.incarnation.start + 1};
    }
    ready = TakeReadyLocked(&snap);
  }
  Release(std::move(ready), snap);
  return absl::OkStatus();
}

}  // namespace ps
