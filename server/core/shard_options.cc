#include "server/core/shard_options.h"

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

void WriteLineToStderr(absl::string_view line) {
  const std::string text = absl::StrCat(line, "\n");
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

absl::Status ShardOptions::Validate() const {
  if (num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_shards must be >= 1, got ", num_shards));
  }
  if (shard_id < 0 || shard_id >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_id must be in [0, ", num_shards, "), got ", shard_id));
  }
  if (num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be >= 1, got ", num_workers));
  }
  // ps_server sets default_wait and max_wait both from --pull_timeout; the
  // messages name the flags an operator sets.
  if (default_wait <= absl::ZeroDuration() || max_wait < default_wait) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pull_timeout must be > 0 (need 0 < default_wait <= max_wait, got ",
        absl::FormatDuration(default_wait), " and ", absl::FormatDuration(max_wait), ")"));
  }
  if (max_waiting_calls < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_waiting_calls must be >= 1, got ", max_waiting_calls));
  }
  if (max_pending_pushes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_pending_pushes must be >= 0, got ", max_pending_pushes));
  }
  // The optimizer is sized when the parameters arrive; its options are
  // checked now. An unknown mode fails here, not as a silent fallback.
  RETURN_IF_ERROR(CreateOptimizer(optimizer, 0).status());
  RETURN_IF_ERROR(CreateConsistencyPolicy(mode, num_workers, sync_rule, staleness).status());
  RETURN_IF_ERROR(tables.Validate());
  if (checkpoint_full_every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_full_every must be >= 1, got ", checkpoint_full_every));
  }
  if (checkpoint_full_every > 1 && !tables.track_changes) {
    return absl::InvalidArgumentError(
        "checkpoint_full_every > 1 needs the tables to keep their changes (track_changes)");
  }
  if (worker_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--worker_timeout must be >= 0, got ",
                                                   absl::FormatDuration(worker_timeout)));
  }
  if (clock == nullptr) return absl::InvalidArgumentError("the shard's clock is null");
  return absl::OkStatus();
}

absl::Status ShardOptions::CheckWorker(int worker_id) const {
  if (worker_id < 0 || worker_id >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_id ", worker_id, " is out of range: this server has ", num_workers,
        " workers (ids 0..", num_workers - 1, ")"));
  }
  return absl::OkStatus();
}

absl::Status ShardOptions::CheckState(const ShardState& state) const {
  if (state.shard_id != shard_id || state.num_shards != num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("state is of shard ", state.shard_id, " of ",
                                                   state.num_shards, ", this is shard ",
                                                   shard_id, " of ", num_shards));
  }
  if (state.num_workers != num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("state is of a run with ", state.num_workers,
                                                   " workers, this server expects ",
                                                   num_workers));
  }
  for (int w : state.workers_seen) RETURN_IF_ERROR(CheckWorker(w));
  if (state.optimizer != optimizer.name) {
    return absl::InvalidArgumentError(absl::StrCat("state holds optimizer \"", state.optimizer,
                                                   "\" state, this server runs \"",
                                                   optimizer.name, "\""));
  }
  for (const EmbeddingTableState& t : state.tables) {
    if (t.options.optimizer.kind != tables.optimizer.kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          "state holds embedding table \"", t.options.name, "\" with ",
          SparseOptimizerName(t.options.optimizer.kind), " state, this server runs ",
          SparseOptimizerName(tables.optimizer.kind), " (--sparse_optimizer)"));
    }
  }
  return ValidateModelSpec(state.spec, spec_limits);
}

}  // namespace ps
