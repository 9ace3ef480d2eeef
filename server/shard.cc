#include "server/shard.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
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
                   CreateConsistencyPolicy(options.mode, options.num_workers));
  return std::unique_ptr<Shard>(new Shard(options, std::move(opt), std::move(policy)));
}

Shard::Shard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer,
             std::unique_ptr<ConsistencyPolicy> policy)
    : options_(options),
      layout_(std::make_shared<ShardLayout>()),
      gradient_pool_(BufferPool::Create(options.num_workers)),
      optimizer_(std::move(optimizer)),
      policy_(std::move(policy)) {
  timer_ = std::thread([this] { TimerLoop(); });
}

Shard::~Shard() {
  Close();
  timer_.join();
}

void Shard::Close() {
  std::unordered_map<uint64_t, Waiter> failed;
  {
    absl::MutexLock l(&mu_);
    closed_ = true;
    failed.swap(waiters_);
    by_version_.clear();
    by_deadline_.clear();
    timer_cv_.SignalAll();
  }
  for (auto& [ticket, w] : failed) {
    w.done(absl::UnavailableError(
        absl::StrCat("shard ", options_.shard_id, " is shutting down")));
  }
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

absl::Duration Shard::ClampWait(absl::Duration wait) const {
  if (wait <= absl::ZeroDuration()) return options_.default_wait;
  return std::min(wait, options_.max_wait);
}

absl::Status Shard::Register(int worker_id, int num_workers) {
  RETURN_IF_ERROR(CheckWorker(worker_id));
  if (num_workers != options_.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker_id, " was started with num_workers=", num_workers,
        " but this server expects num_workers=", options_.num_workers));
  }
  absl::MutexLock l(&mu_);
  workers_seen_.insert(worker_id);
  return absl::OkStatus();
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
                   CreateConsistencyPolicy(options_.mode, options_.num_workers));
  optimizer_ = std::move(optimizer);
  layout_ = std::move(layout);
  weights_ = weights_pool_->Share(std::move(weights));
  version_ = version;
  policy_ = std::move(policy);
  // The pending gradients are gone, so is the open step (unreported).
  step_opened_ = absl::InfiniteFuture();
  next_stall_report_ = absl::InfiniteFuture();
  stall_reports_ = 0;
  weights_pool_->Clear();
  gradient_pool_->Clear();
  initialized_ = true;
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
    SliceAssembler assembler(layout, AssemblerOptions("init"));
    s = assembler.Validate(values);
    if (s.ok()) {
      initial.resize(layout->num_elements);
      for (const RawTensorSlice& v : values) {
        s = assembler.Add(v, [&](const SliceRange& r) -> absl::StatusOr<float*> {
          return initial.data() + r.flat_offset;
        });
        if (!s.ok()) break;
      }
    }
    if (!s.ok()) {
      done(s, false);
      return 0;
    }
  }

  absl::StatusOr<int64_t> result;
  bool created = false;
  ReadyList ready;
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
      if (uint64_t ticket = AddWaiterLocked(0, wait, &check); ticket != 0) return ticket;
      result = TooManyWaitersLocked();
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
        CollectReadyLocked(&ready);
      } else {
        result = installed;
      }
    }
  }
  for (auto& r : ready) r.first(std::move(r.second));
  done(result, created);
  return 0;
}

absl::Status Shard::CheckInitialized() const {
  absl::MutexLock l(&mu_);
  return CheckInitializedLocked();
}

absl::Status Shard::CheckInitializedLocked() const {
  if (initialized_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("shard ", options_.shard_id,
                   " has no parameters yet: worker 0 must call InitParams before anyone pushes"));
}

absl::StatusOr<SliceAssembler> Shard::StartPush(int worker_id, int64_t computed_version) const {
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
  return SliceAssembler(std::move(layout), AssemblerOptions("push"));
}

absl::StatusOr<PushBuffer> Shard::TakePushBuffer(const SliceAssembler& assembler) {
  const int limit = options_.max_pending_pushes > 0 ? options_.max_pending_pushes
                                                    : 2 * options_.num_workers + 2;
  if (pending_pushes_->fetch_add(1) >= limit) {
    pending_pushes_->fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "shard ", options_.shard_id, " already has ", limit,
        " pushes in progress (--max_pending_pushes); a client may be starting pushes that it "
        "never finishes"));
  }
  PushBuffer b;
  b.pending_ = pending_pushes_;
  b.values_ = gradient_pool_->Take(assembler.layout().num_elements);
  return b;
}

absl::StatusOr<int64_t> Shard::Push(int worker_id, int64_t computed_version,
                                    const std::vector<RawTensorSlice>& gradients) {
  ASSIGN_OR_RETURN(SliceAssembler assembler, StartPush(worker_id, computed_version));
  // Every chunk is checked before the buffer is taken.
  RETURN_IF_ERROR(assembler.Validate(gradients));
  ASSIGN_OR_RETURN(PushBuffer grad, TakePushBuffer(assembler));
  for (const RawTensorSlice& g : gradients) {
    RETURN_IF_ERROR(assembler.Add(g, [&grad](const SliceRange& r) -> absl::StatusOr<float*> {
      return grad.data() + r.flat_offset;
    }));
  }
  return PushFlat(worker_id, computed_version, assembler, std::move(grad));
}

absl::StatusOr<int64_t> Shard::PushFlat(int worker_id, int64_t computed_version,
                                        const SliceAssembler& assembler, PushBuffer buffer) {
  RETURN_IF_ERROR(CheckWorker(worker_id));
  RETURN_IF_ERROR(assembler.Finish());
  std::vector<float> grad = std::move(buffer.values_);
  buffer.Release();
  ReadyList ready;
  std::vector<std::string> lines;
  int64_t version;
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckInitializedLocked());
    if (&assembler.layout() != layout_.get()) {
      return absl::AbortedError(absl::StrCat(
          "shard ", options_.shard_id, "'s parameters were replaced during the push; retry"));
    }
    if (static_cast<int64_t>(grad.size()) != layout_->num_elements) {
      return absl::InvalidArgumentError(absl::StrCat("push has ", grad.size(),
                                                     " elements, shard ", options_.shard_id,
                                                     " owns ", layout_->num_elements));
    }
    std::vector<std::vector<float>> to_apply;
    ASSIGN_OR_RETURN(const bool apply, policy_->OnPush(worker_id, computed_version, version_,
                                                       std::move(grad), &to_apply));
    workers_seen_.insert(worker_id);
    ++pushes_applied_;
    // The policy accepted it: 0 <= computed_version <= version_, no overflow.
    const int64_t staleness = version_ - computed_version;
    staleness_sum_ += static_cast<double>(staleness);
    ++staleness_count_;
    max_staleness_ = std::max(max_staleness_, staleness);
    OnStepPushLocked(apply, &lines);
    if (apply) {
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
      CollectReadyLocked(&ready);
    }
    version = version_;
  }
  Log(lines);
  for (auto& r : ready) r.first(std::move(r.second));
  return version;
}

uint64_t Shard::AddWaiterLocked(int64_t min_version, absl::Duration wait,
                                SnapshotCallback* done) {
  if (static_cast<int64_t>(waiters_.size()) >= options_.max_waiting_calls) return 0;
  const absl::Duration w = ClampWait(wait);
  const uint64_t ticket = ++last_ticket_;
  const absl::Time deadline = absl::Now() + w;
  waiters_.emplace(ticket, Waiter{min_version, w, deadline, std::move(*done)});
  by_version_.emplace(min_version, ticket);
  by_deadline_.emplace(deadline, ticket);
  timer_cv_.Signal();
  return ticket;
}

absl::Status Shard::TooManyWaitersLocked() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "shard ", options_.shard_id, " already has ", waiters_.size(),
      " calls waiting for a version (--max_waiting_calls)"));
}

Shard::SnapshotCallback Shard::EraseWaiterLocked(
    std::unordered_map<uint64_t, Waiter>::iterator it) {
  by_version_.erase({it->second.min_version, it->first});
  by_deadline_.erase({it->second.deadline, it->first});
  SnapshotCallback done = std::move(it->second.done);
  waiters_.erase(it);
  return done;
}

uint64_t Shard::Pull(int worker_id, int64_t min_version, absl::Duration wait,
                     SnapshotCallback done) {
  const absl::Status valid = CheckWorker(worker_id);
  absl::StatusOr<WeightsSnapshot> result = absl::UnknownError("unset");
  if (!valid.ok()) {
    result = valid;
  } else {
    absl::MutexLock l(&mu_);
    if (closed_) {
      result = absl::UnavailableError(absl::StrCat("shard ", options_.shard_id, " is shutting down"));
    } else if (!initialized_ || version_ < min_version) {
      if (uint64_t ticket = AddWaiterLocked(min_version, wait, &done); ticket != 0) return ticket;
      result = TooManyWaitersLocked();
    } else {
      result = SnapshotLocked();
    }
  }
  done(std::move(result));
  return 0;
}

void Shard::CancelWait(uint64_t ticket) {
  SnapshotCallback done;
  {
    absl::MutexLock l(&mu_);
    auto it = waiters_.find(ticket);
    if (it == waiters_.end()) return;
    done = EraseWaiterLocked(it);
  }
  done(absl::CancelledError(absl::StrCat("shard ", options_.shard_id, ": call cancelled")));
}

WeightsSnapshot Shard::SnapshotLocked() const {
  return WeightsSnapshot{version_, layout_, weights_};
}

void Shard::CollectReadyLocked(ReadyList* ready) {
  if (!initialized_) return;
  while (!by_version_.empty() && by_version_.begin()->first <= version_) {
    ready->emplace_back(EraseWaiterLocked(waiters_.find(by_version_.begin()->second)),
                        SnapshotLocked());
  }
}

std::string Shard::WaitTimeoutMessage(int64_t min_version, absl::Duration waited) const {
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
      timer_cv_.Signal();
    }
  }
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

void Shard::TimerLoop() {
  absl::MutexLock l(&mu_);
  while (!closed_) {
    // Whatever makes either time earlier signals timer_cv_, so this sleeps
    // until the earlier of the two (and until signalled when neither is set).
    absl::Time next = next_stall_report_;
    if (!by_deadline_.empty()) next = std::min(next, by_deadline_.begin()->first);
    timer_cv_.WaitWithDeadline(&mu_, next);
    if (closed_) break;
    const absl::Time now = absl::Now();
    std::vector<std::string> lines;
    CollectStallReportLocked(now, &lines);
    std::vector<std::pair<SnapshotCallback, absl::Status>> expired;
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      auto it = waiters_.find(by_deadline_.begin()->second);
      absl::Status s =
          absl::DeadlineExceededError(WaitTimeoutMessage(it->second.min_version, it->second.wait));
      expired.emplace_back(EraseWaiterLocked(it), std::move(s));
    }
    if (!expired.empty() || !lines.empty()) {
      mu_.Unlock();
      Log(lines);
      for (auto& e : expired) e.first(e.second);
      mu_.Lock();
    }
  }
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
  s.pushes_applied = pushes_applied_;
  s.max_staleness = max_staleness_;
  s.mean_staleness = staleness_count_ == 0 ? 0.0 : staleness_sum_ / staleness_count_;
  if (initialized_) s.waiting_for = policy_->MissingWorkers();
  s.num_elements = layout_->num_elements;
  s.learning_rate = options_.optimizer.learning_rate;
  s.waiting_calls = static_cast<int64_t>(waiters_.size());
  s.pending_pushes = pending_pushes_->load();
  return s;
}

std::shared_ptr<const ShardLayout> Shard::Layout() const {
  absl::MutexLock l(&mu_);
  return layout_;
}

absl::StatusOr<ShardState> Shard::ExportState() const {
  absl::MutexLock l(&mu_);
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
  state.optimizer = optimizer_->name();
  ASSIGN_OR_RETURN(state.optimizer_state, optimizer_->SaveState());
  return state;
}

absl::Status Shard::RestoreState(const ShardState& state) {
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
  ReadyList ready;
  {
    absl::MutexLock l(&mu_);
    RETURN_IF_ERROR(
        InstallLocked(std::move(layout), state.weights, std::move(optimizer), state.version));
    workers_seen_.insert(state.workers_seen.begin(), state.workers_seen.end());
    CollectReadyLocked(&ready);
  }
  for (auto& r : ready) r.first(std::move(r.second));
  return absl::OkStatus();
}

}  // namespace ps
