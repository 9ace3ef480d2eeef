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
                                                  absl::Span<const float> grads, Effects* fx,
                                                  SparseTables::RowsAnswer* answer) {
  TouchLocked(worker_id, Now(), fx);
  tables_.SetClock(weights_.version(), Now());
  absl::StatusOr<PushOutcome> outcome =
      tables_.Push(worker_id, table, version, seq, weights_.version(), ids, grads, answer);
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

uint64_t Shard::PushPullRows(int worker_id, absl::string_view table, int64_t version, int64_t seq,
                             absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                             absl::Duration wait, RowsPushPullDone done, size_t piece_ids,
                             const RowsPiece& piece) {
  if (absl::Status s = CheckRowPush(worker_id, table, version, seq); !s.ok()) {
    done(s);
    return 0;
  }
  const bool sync = options_.mode == Mode::kSync;
  Effects fx;
  absl::StatusOr<RowsPushPullResult> result = absl::UnknownError("unset");
  uint64_t waiting = 0;  // the ticket of a sync call that waits
  {
    absl::MutexLock l(&mu_);
    // Async and SSP: the push reads its rows as it applies them (a row
    // push leaves the version as it is).
    RowsPushPullResult r;
    r.rows.version = weights_.version();
    SparseTables::RowsAnswer answer{&r.rows.values, piece_ids,
                                    PieceOf(r.rows.version, PushOutcome::kApplied, piece)};
    absl::StatusOr<PushOutcome> outcome =
        closed_ ? ShuttingDown()
                : PushRowsLocked(worker_id, table, version, seq, ids, grads, &fx,
                                 sync ? nullptr : &answer);
    const int64_t now_version = weights_.version();
    if (outcome.ok() && answer.answered) {
      r.outcome = *outcome;
      result = std::move(r);
    } else if (!outcome.ok()) {
      result = outcome.status();
    } else if (sync && version == now_version) {
      // Held (or held already, a retry): wait for the step to close.
      absl::StatusOr<uint64_t> ticket = WaitForRowsLocked(
          RowsWait{worker_id, std::string(table), {ids.begin(), ids.end()}, version, /*push=*/true},
          wait, done);
      if (ticket.ok()) {
        waiting = *ticket;
      } else {
        result = ticket.status();
      }
    } else {
      // Async and SSP; or sync, a retry after its step closed (kDuplicate)
      // or a push for a step gone by (kDropped): the rows now.
      r.outcome = *outcome;
      r.rows.version = now_version;
      absl::Status pulled = tables_.Pull(table, ids, &r.rows.values, sync ? 0 : piece_ids,
                                         sync ? nullptr : PieceOf(now_version, *outcome, piece));
      result = pulled.ok() ? absl::StatusOr<RowsPushPullResult>(std::move(r))
                           : absl::StatusOr<RowsPushPullResult>(pulled);
    }
  }
  Finish(std::move(fx));
  if (waiting != 0) return waiting;
  done(std::move(result));
  return 0;
}

uint64_t Shard::PullRowsAt(int worker_id, absl::string_view table, absl::Span<const uint64_t> ids,
                           int64_t min_version, absl::Duration wait, RowsDone done,
                           bool renews_lease) {
  if (absl::Status s = options_.CheckWorker(worker_id); !s.ok()) {
    done(s);
    return 0;
  }
  Effects fx;
  absl::StatusOr<RowsResult> result = absl::UnknownError("unset");
  uint64_t waiting = 0;
  {
    absl::MutexLock l(&mu_);
    const bool now =
        min_version <= 0 || (weights_.initialized() && weights_.version() >= min_version);
    // A pull that waits is checked first (its errors come at once); one
    // read now is checked by the read.
    absl::Status checked = closed_ ? ShuttingDown()
                           : now   ? absl::OkStatus()
                                   : tables_.CheckPrefetch(table, ids).status();
    if (checked.ok() && renews_lease) TouchLocked(worker_id, Now(), &fx);
    if (!checked.ok()) {
      result = checked;
    } else if (now) {
      RowsResult r;
      r.version = weights_.version();
      tables_.SetClock(r.version, Now());
      absl::Status s = tables_.Pull(table, ids, &r.values);
      result = s.ok() ? absl::StatusOr<RowsResult>(std::move(r)) : absl::StatusOr<RowsResult>(s);
    } else {
      absl::StatusOr<uint64_t> ticket =
          WaitForRowsLocked(RowsWait{worker_id,
                                     std::string(table),
                                     {ids.begin(), ids.end()},
                                     min_version - 1,
                                     /*push=*/false},
                            wait, [done](absl::StatusOr<RowsPushPullResult> r) {
                              if (!r.ok()) return done(r.status());
                              done(std::move(r->rows));
                            });
      if (ticket.ok()) {
        waiting = *ticket;
      } else {
        result = ticket.status();
      }
    }
    for (std::string& line : tables_.TierNews()) fx.lines.push_back(std::move(line));
  }
  Finish(std::move(fx));
  if (waiting != 0) return waiting;
  done(std::move(result));
  return 0;
}

absl::StatusOr<uint64_t> Shard::WaitForRowsLocked(RowsWait wait_for, absl::Duration wait,
                                                  RowsPushPullDone done) {
  auto w = std::make_shared<RowsWait>(std::move(wait_for));
  Waiters::Callback answer = [this, w, done](absl::StatusOr<WeightsSnapshot> snap) {
    if (!snap.ok()) {
      {
        absl::MutexLock l(&mu_);
        rows_waits_.erase(w);
      }
      done(snap.status());
      return;
    }
    done(std::move(w->result));
  };
  const int64_t ready_at = w->step + 1;
  ASSIGN_OR_RETURN(const uint64_t ticket, waiters_->Add(ready_at, wait, &answer));
  rows_waits_.insert(std::move(w));
  return ticket;
}

void Shard::ReadWaitingRowsLocked() {
  const int64_t version = weights_.version();
  for (auto it = rows_waits_.begin(); it != rows_waits_.end();) {
    RowsWait& w = **it;
    if (w.step >= version) {
      ++it;
      continue;
    }
    RowsPushPullResult r;
    r.rows.version = version;
    r.outcome = w.push ? tables_.StepOutcome(w.table, w.worker_id, w.step) : PushOutcome::kApplied;
    absl::Status s = tables_.Pull(w.table, w.ids, &r.rows.values);
    w.result = s.ok() ? absl::StatusOr<RowsPushPullResult>(std::move(r))
                      : absl::StatusOr<RowsPushPullResult>(s);
    rows_waits_.erase(it++);
  }
}

}  // namespace ps
