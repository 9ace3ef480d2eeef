// Shard's calls that replace its parameters (see shard.h): with a worker's
// copy, a checkpoint or an older checkpoint, and the export checkpoints come
// from. (Init, which creates them, is in shard.cc.)
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/shard.h"

namespace ps {

absl::Status Shard::ReplaceParametersLocked(std::shared_ptr<const ShardLayout> layout,
                                            std::vector<float> weights,
                                            std::unique_ptr<Optimizer> optimizer,
                                            int64_t version) {
  // Made before anything changes, so a failure leaves the shard as it was.
  ASSIGN_OR_RETURN(std::unique_ptr<ConsistencyPolicy> policy,
                   CreateConsistencyPolicy(options_.mode, options_.num_workers,
                                           options_.sync_rule, options_.staleness));
  RETURN_IF_ERROR(
      weights_.Install(std::move(layout), std::move(weights), std::move(optimizer), version));
  std::vector<std::vector<float>> none;
  for (int w : membership_.not_live()) policy->SetLive(w, false, &none);  // no step is open
  policy_ = std::move(policy);
  stalls_.Reset();  // the pending gradients are gone, so is the open step
  tables_.DropOpenStep();
  gradient_pool_->Clear();
  untouched_checkpoint_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> Shard::AdoptWorkerCopy(int worker_id, const ModelSpec& spec,
                                            const std::vector<RawTensorSlice>& values,
                                            int64_t version) {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  RETURN_IF_ERROR(ValidateModelSpec(spec, options_.spec_limits));
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("restore from worker ", worker_id, ": version ", version, " is negative"));
  }
  {
    absl::MutexLock l(&mu_);
    if (weights_.initialized()) {
      RETURN_IF_ERROR(CompareModelSpecs(weights_.layout()->spec, spec));
      if (weights_.version() >= version) return false;
    }
  }
  // Checked and copied outside the lock, as a creating init.
  std::shared_ptr<const ShardLayout> layout =
      MakeSliceLayout(spec, options_.num_shards, options_.shard_id);
  ASSIGN_OR_RETURN(std::vector<float> weights,
                   VersionedWeights::Assemble(layout, values, AssemblerOptions("restore")));
  Effects fx;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return ShuttingDown();
    const bool had = weights_.initialized();
    const int64_t was = weights_.version();
    if (had && was >= version) return false;  // another worker was first
    // A worker's copy holds no optimizer state, and what the shard had is
    // of an older version: the state starts afresh at `version`.
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                     CreateOptimizer(options_.optimizer, layout->num_elements, version));
    const std::vector<int64_t> seqs = policy_->LastSeqs();
    RETURN_IF_ERROR(
        ReplaceParametersLocked(std::move(layout), std::move(weights), std::move(optimizer),
                                version));
    policy_->SetLastSeqs(seqs);
    membership_.MarkSeen(worker_id);
    // The run is live (a worker holds its weights): a worker that died
    // before this shard restarted is dropped after a lease, not waited for.
    const absl::Time now = Now();
    OnLeaseEventsLocked(membership_.ExpectAll(now), now, &fx);
    fx.lines.push_back(absl::StrCat(
        "shard ", options_.shard_id, ": restored to version ", version, " from worker ",
        worker_id, "'s copy (the shard was ",
        had ? absl::StrCat("at version ", was) : std::string("empty"), ")",
        options_.optimizer.name == "sgd"
            ? std::string()
            : absl::StrCat("; the ", options_.optimizer.name,
                           " optimizer state (moments, step count) was reset: a worker's copy "
                           "holds none")));
    fx.ready = TakeReadyLocked(&fx.snap);
  }
  Finish(std::move(fx));
  return true;
}

absl::StatusOr<ShardState> Shard::ExportState() const {
  absl::MutexLock l(&mu_);
  return ExportStateLocked();
}

absl::StatusOr<ShardState> Shard::ExportCheckpoint() {
  absl::MutexLock l(&mu_);
  return ExportCheckpointLocked();
}

absl::StatusOr<ShardState> Shard::ExportCheckpointLocked() {
  const int64_t version = weights_.version();
  const CheckpointChain::Plan plan = checkpoint_chain_.Next(version);
  if (plan.kind == CheckpointChain::Kind::kFull) {
    ASSIGN_OR_RETURN(ShardState state, ExportStateLocked(TableRows::kTierSnapshots));
    if (options_.checkpoint_full_every > 1) tables_.ResetChanges();
    checkpoint_chain_.Exported(plan, version);
    return state;
  }
  ASSIGN_OR_RETURN(ShardState state, ExportStateLocked(TableRows::kNone));
  ASSIGN_OR_RETURN(state.tables, tables_.ExportChanges());
  state.delta_base = plan.base;
  if (plan.kind == CheckpointChain::Kind::kDelta) tables_.ResetChanges();
  checkpoint_chain_.Exported(plan, version);
  return state;
}

void Shard::RestartCheckpointChain() {
  absl::MutexLock l(&mu_);
  checkpoint_chain_.Restart();
}

absl::StatusOr<ShardState> Shard::ExportStateLocked(TableRows rows) const {
  ShardState state;
  RETURN_IF_ERROR(weights_.ExportTo(&state));
  state.shard_id = options_.shard_id;
  state.num_shards = options_.num_shards;
  state.num_workers = options_.num_workers;
  state.workers_seen = membership_.seen();
  state.incarnation = incarnation_;
  state.last_seq = policy_->LastSeqs();
  if (rows != TableRows::kNone) {
    ASSIGN_OR_RETURN(state.tables, tables_.Export(rows == TableRows::kTierSnapshots));
  }
  if (options_.mode != Mode::kSync) state.last_row_seq = tables_.LastRowSeqs();
  return state;
}

absl::Status Shard::LoadCheckpoint(const ShardState& state) {
  return InstallCheckpoint(state, /*rollback=*/false);
}

absl::Status Shard::RollBackToCheckpoint(const ShardState& state) {
  return InstallCheckpoint(state, /*rollback=*/true);
}

absl::Status Shard::ImportTables(const std::vector<EmbeddingTableState>& tables) {
  SparseTables imported(options_.tables, options_.mode, options_.shard_id, options_.num_shards,
                        options_.num_workers, options_.reject_nonfinite);
  RETURN_IF_ERROR(imported.Import(tables, /*last_row_seq=*/{}));
  absl::MutexLock l(&mu_);
  if (weights_.initialized()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", options_.shard_id, " has parameters already: tables import before the model"));
  }
  tables_ = std::move(imported);
  checkpoint_chain_.Restart();
  return absl::OkStatus();
}

absl::Status Shard::InstallCheckpoint(const ShardState& state, bool rollback) {
  RETURN_IF_ERROR(options_.CheckState(state));
  auto layout = MakeSliceLayout(state.spec, options_.num_shards, options_.shard_id);
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   CreateOptimizer(options_.optimizer, layout->num_elements));
  RETURN_IF_ERROR(optimizer->RestoreState(state.optimizer_state));
  // Rebuilt outside the lock; swapped in with the weights.
  SparseTables tables(options_.tables, options_.mode, options_.shard_id, options_.num_shards,
                      options_.num_workers, options_.reject_nonfinite);
  RETURN_IF_ERROR(tables.Import(state.tables, state.last_row_seq));
  SnapshotCallbacks ready;
  WeightsSnapshot snap;
  {
    absl::MutexLock l(&mu_);
    if (rollback && !untouched_checkpoint_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", options_.shard_id, " is at version ", weights_.version(),
          " and has changed since it restored its checkpoint: it cannot roll back"));
    }
    RETURN_IF_ERROR(ReplaceParametersLocked(std::move(layout), state.weights,
                                            std::move(optimizer), state.version));
    tables_ = std::move(tables);
    checkpoint_chain_.Restart();
    untouched_checkpoint_ = true;
    membership_.MarkSeen(state.workers_seen);
    policy_->SetLastSeqs(state.last_seq);
    // A rollback is no restart: the incarnation stays.
    if (state.incarnation.run_id != 0 && !rollback) {
      incarnation_ = Incarnation{state.incarnation.run_id, state.incarnation.start + 1};
    }
    ready = TakeReadyLocked(&snap);
  }
  Release(std::move(ready), snap);
  return absl::OkStatus();
}

}  // namespace ps
