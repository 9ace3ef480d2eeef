// Embedding tables restored on another shard count: the rows of a
// checkpoint taken with S shards, re-hashed onto shard i of S'
// (ShardOfId(id, S') == i), each with its optimizer state bit for bit.
//
// TablesForShard works on decoded states (one per old shard position);
// LoadTablesForShard reads them from a checkpoint directory (the newest
// version every old position has). Only the tables move: the dense
// parameters' slices and optimizer state depend on the shard count, so a
// cluster restored this way starts its dense model anew (worker 0's Init).
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

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_RESHARD_H_
