// Incremental checkpoints: a delta (a ShardState with delta_base >= 0,
// server/core/shard_state.h) applied to the state it was taken on.
//
// A delta holds the shard's whole state but its tables, of which it holds
// the rows changed since its base and the ids of the rows removed since.
// Applying it gives the state the shard had when the delta was taken: the
// rows bit for bit. Row order (what Import rebuilds the LRU order from)
// is the base's, with a changed row moved to the end in the delta's order
// for an evict_lru table, kept in place otherwise, and new rows at the end;
// so the recency of rows only read since the base is not kept. A base
// whose table holds a tier snapshot (its rows on disk) keeps the ids the
// delta removed, for its restore to delete from the snapshot's rows.
//
// Stateless functions; thread-safe.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_DELTA_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_DELTA_H_

#include "absl/status/status.h"
#include "server/core/shard_state.h"

namespace ps {

// Makes *base the state `delta` was taken at: everything but the tables
// from `delta`, each table's rows merged. *base may be a full state (it
// stays full) or a delta (it becomes the delta of both, on base's base:
// how a checkpoint writer that fell behind folds two into one).
// FAILED_PRECONDITION when delta.delta_base is not base->version (the
// chain is broken); INVALID_ARGUMENT naming the problem when `delta` is
// not a delta, is of another shard position, or its tables are not base's
// (names, order, dim, optimizer) or hold rows of the wrong size. *base is
// unchanged on error.
absl::Status ApplyDelta(ShardState delta, ShardState* base);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_DELTA_H_
