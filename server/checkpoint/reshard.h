// Checkpoints restored on another shard count. The rows of a checkpoint
// taken with S shards are re-hashed onto shard i of S'
// (ShardOfId(id, S') == i), each with its optimizer state bit for bit; the
// dense parameters are put together from the S slices of every tensor and
// cut again as shard i of S' owns them (common/partition.h), with the
// optimizer's per-element buffers (common/optimizer.h's
// SplitOptimizerState) cut the same way. The updates are elementwise, so a
// run restored onto S' goes on bit for bit as it would have on S.
//
// TablesForShard and StateForShard work on decoded states (one per old
// shard position); the Load functions read them from a checkpoint
// directory (the newest version every old position has). LoadTablesForShard
// moves only the tables (ps_server --restore_tables_from: the dense model
// starts anew); LoadStateForShard the whole state (--restore_from).
//
// Stateless functions; thread-safe.
#ifndef PS_SERVER_CHECKPOINT_RESHARD_H_
#define PS_SERVER_CHECKPOINT_RESHARD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_spec.h"
#include "server/core/row_tier.h"
#include "server/core/shard_state.h"

namespace ps {

// The tables of shard `shard_id` of `num_shards` from `states`, the states
// of every position of one checkpoint (any order). INVALID_ARGUMENT naming
// the problem when they are not one of each position of the same shard
// count, or their tables differ (names, order, dim, seed, init_scale,
// optimizer) or an id is held twice.
absl::StatusOr<std::vector<EmbeddingTableState>> TablesForShard(
    const std::vector<ShardState>& states, int shard_id, int num_shards);

// Reads the checkpoints of `from_shards` positions in `dir` (server/
// checkpoint/checkpoint_store.h's files), picks the newest version all of
// them have, and returns TablesForShard of those states with that version,
// their tier snapshots read by `read` (MaterializeTierSnapshot: every row
// passes through memory). NOT_FOUND naming the directory when no version
// is complete.
struct ReshardedTables {
  int64_t version = 0;
  std::vector<EmbeddingTableState> tables;
};
absl::StatusOr<ReshardedTables> LoadTablesForShard(const std::string& dir, int from_shards,
                                                   int shard_id, int num_shards,
                                                   const SpecLimits& limits,
                                                   const TierSnapshotReader& read = nullptr);

// The whole state of shard `shard_id` of `num_shards` from `states` (as
// TablesForShard takes them): the tables, the dense weights and optimizer
// state re-cut, the version, spec, membership (the workers seen by any),
// push seqs and incarnation. Row pushes reach only the shards that own
// some of their ids, so their seqs differ by shard: each worker's newest is
// kept (async: a retry of a row push that only some old shards had applied
// when they checkpointed is not applied again). INVALID_ARGUMENT naming the problem as
// TablesForShard does, and when the states disagree on what must be one
// for the whole cluster: version, spec, optimizer, worker count, dense push
// seqs (a push some old shards applied and others not cannot be re-cut);
// or when a state's weights or optimizer state do not fit its slices.
absl::StatusOr<ShardState> StateForShard(const std::vector<ShardState>& states, int shard_id,
                                         int num_shards);

// LoadTablesForShard's reading, then StateForShard.
absl::StatusOr<ShardState> LoadStateForShard(const std::string& dir, int from_shards, int shard_id,
                                             int num_shards, const SpecLimits& limits,
                                             const TierSnapshotReader& read = nullptr);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_RESHARD_H_
