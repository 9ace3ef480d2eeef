// Shard's embedding-table calls (server/core/shard.h): the rules are
// SparseTables' (server/core/sparse_tables.h); this adds the lock, leases and
// the shard's version.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/shard.h"

namespace ps {
namespace {

// SparseTables' piece of rows as a Shard's (with the shard's version).
SparseTables::RowsPiece PieceOf(int64_t version, PushOutcome outcome,
                                const Shard::RowsPiece& piece) {
  if (!piece) return nullptr;
  return [version, outcome, &piece](std::vector<float> rows, bool last) {
    piece(RowsResult{std::move(rows), version}, outcome, last);
  };
}

}  // namespace

absl::Status Shard::DeclareTables(const std::vector<TableSpec>& tables) {
  absl::MutexLock l(&mu_);
  if (closed_) return ShuttingDown();
  return tables_.Declare(tables);
}

int64_t Shard::LastRowSeq(int worker_id) const {
  if (!options_.CheckWorker(worker_id).ok()) return 0;
  absl::MutexLock l(&mu_);
  return tables_.LastRowSeqs()[worker_id];
}

std::vector<TableSpec> Shard::Tables() const {
  absl::MutexLock l(&mu_);
  return tables_.specs();
}

absl::StatusOr<RowsResult> Shard::PullRows(int worker_id, absl::string_view table,
                                           absl::Span<const uint64_t> ids, bool renews_lease,
                                           size_t piece_ids, const RowsPiece& piece) {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  Effects fx;
  RowsResult result;
  absl::Status s;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return ShuttingDown();
    if (renews_lease) TouchLocked(worker_id, Now(), &fx);
    result.version = weights_.version();
    tables_.SetClock(result.version, Now());
    s = tables_.Pull(table, ids, &result.values, piece_ids,
                     PieceOf(result.version, PushOutcome::kApplied, piece));
    for (std::string& line : tables_.TierNews()) fx.lines.push_back(std::move(line));
  }
  Finish(std::move(fx));
  if (!s.ok()) return s;
  return result;
}

absl::Status Shard::PrefetchRows(int worker_id, absl::string_view table,
                                 absl::Span<const uint64_t> ids) {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  {
    absl::MutexLock l(&mu_);
    if (closed_) return ShuttingDown();
    ASSIGN_OR_RETURN(const bool tiered, tables_.CheckPrefetch(table, ids));
    if (!tiered) return absl::OkStatus();
  }
  prefetcher_.Add(
      [this, table = std::string(table), ids = std::vector<uint64_t>(ids.begin(), ids.end())] {
        Effects fx;
        {
          absl::MutexLock l(&mu_);
          if (closed_) return;
          // A table replaced since (a checkpoint) or a read error: the pull
          // to come reads the rows itself, and reports the error.
          tables_.Prefetch(table, ids).IgnoreError();
          for (std::string& line : tables_.TierNews()) fx.lines.push_back(std::move(line));
        }
        Finish(std::move(fx));
      });
  return absl::OkStatus();
}

absl::Status Shard::CheckRowPush(int worker_id, absl::string_view table, int64_t version,
                                 int64_t seq) const {
  RETURN_IF_ERROR(options_.CheckWorker(worker_id));
  if (version < 0 || seq < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding table \"", EscapeName(table), "\": negative version or seq"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushOutcome> Shard::PushRowsLocked(int worker_id, absl::string_view table,
                                                  int64_t version, int64_t seq,
                                                  absl::Span<const uint64_t> ids,
                                                  absl::Span<const float> grads, Effects* fx) {
  TouchLocked(worker_id, Now(), fx);
  tables_.SetClock(weights_.version(), Now());
  absl::StatusOr<PushOutcome> outcome =
      tables_.Push(worker_id, table, version, seq, weights_.version(), ids, grads);
  for (std::string& line : tables_.TierNews()) fx->lines.push_back(std::move(line));
  if (outcome.ok()) membership_.MarkSeen(worker_id);
  return outcome;
}

absl::StatusOr<PushResult> Shard::PushRows(int worker_id, absl::string_view table, int64_t version,
                                           int64_t seq, absl::Span<const uint64_t> ids,
                                           absl::Span<const float> grads) {
  RETURN_IF_ERROR(CheckRowPush(worker_id, table, version, seq));
  Effects fx;
  absl::StatusOr<PushOutcome> outcome;
  PushResult result;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return ShuttingDown();
    outcome = PushRowsLocked(worker_id, table, version, seq, ids, grads, &fx);
    result.version = weights_.version();
  }
  Finish(std::move(fx));
  if (!outcome.ok()) return outcome.status();
  result.outcome = *outcome;
  return result;
}

absl::StatusOr<RowsPushPullResult> Shard::PushPullRows(int worker_id, absl::string_view table,
                                                       int64_t version, int64_t seq,
                                                       absl::Span<const uint64_t> ids,
                                                       absl::Span<const float> grads,
                                                       size_t piece_ids, const RowsPiece& piece) {
  RETURN_IF_ERROR(CheckRowPush(worker_id, table, version, seq));
  if (options_.mode == Mode::kSync) {
    return absl::FailedPreconditionError(absl::StrCat(
        "embedding table \"", EscapeName(table),
        "\": push-pull of rows is for async and SSP; in sync a step's rows change when the step "
        "closes, after every worker's dense push: push the rows, then pull them after the dense "
        "push-pull"));
  }
  Effects fx;
  absl::StatusOr<PushOutcome> outcome;
  RowsPushPullResult result;
  absl::Status pulled;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return ShuttingDown();
    outcome = PushRowsLocked(worker_id, table, version, seq, ids, grads, &fx);
    result.rows.version = weights_.version();
    if (outcome.ok()) {
      pulled = tables_.Pull(table, ids, &result.rows.values, piece_ids,
                            PieceOf(result.rows.version, *outcome, piece));
    }
  }
  Finish(std::move(fx));
  if (!outcome.ok()) return outcome.status();
  if (!pulled.ok()) return pulled;
  result.outcome = *outcome;
  return result;
}

}  // namespace ps
