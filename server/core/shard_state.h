// ShardState: everything a shard needs to resume where it stopped, as one
// plain value: its position, its membership, its parameters, the
// optimizer's state and its embedding tables. Shard::ExportState makes one and Shard::LoadCheckpoint
// installs one; server/checkpoint/checkpoint.h turns it into bytes and back.
//
// What it leaves out on purpose: gradients of a sync step that is still open
// (workers resend them after a restart, since their push fails) and waiting
// calls (their clients retry).
//
// A plain struct: copyable, no thread safety of its own.
#ifndef PS_SERVER_CORE_SHARD_STATE_H_
#define PS_SERVER_CORE_SHARD_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/incarnation.h"
#include "common/model_spec.h"
#include "server/core/embedding_table.h"

namespace ps {

// One embedding table of a shard: the options it was created with and every
// row (EmbeddingTable::Export; EmbeddingTable::Create(options) then Import
// restores it).
// In a delta (ShardState::delta_base >= 0) `contents` holds only the rows
// changed since the base and `removed` the ids of the rows gone since,
// ascending, none of them in contents.ids.
//
// A full state of a table with a disk tier may hold only the rows in memory
// in `contents` and the rest as tier_snapshot, a RowTier::Snapshot
// directory: the table's rows are then the snapshot's, less `removed`,
// overlaid by contents'. Elsewhere a full state's `removed` is empty.
// tier_snapshot_owner is set while that directory is a staging copy no
// checkpoint file holds yet: the last copy of the state to go removes it.
struct EmbeddingTableState {
  EmbeddingTableOptions options;
  EmbeddingTableContents contents;
  std::vector<uint64_t> removed;
  std::string tier_snapshot;
  std::shared_ptr<const void> tier_snapshot_owner;
};

struct ShardState {
  // Position: a state restores only into the shard with the same id of the
  // same number of shards (the partition depends on both).
  int shard_id = 0;
  int num_shards = 1;
  // Membership: the number of workers the shard was started for (a state
  // restores only into a shard with the same number) and the ids of those
  // that registered or pushed, ascending.
  int num_workers = 1;
  std::vector<int> workers_seen;
  // Parameters: the model spec worker 0 created, the version of the weights
  // (sync: the step), and the weights flat in layout order
  // (common/partition.h).
  ModelSpec spec;
  int64_t version = 0;
  std::vector<float> weights;
  // Optimizer: its name (common/optimizer.h; a state restores only into a
  // shard with the same rule) and its Optimizer::SaveState bytes.
  std::string optimizer;
  std::string optimizer_state;
  // The incarnation of the shard that exported it: a shard restoring it
  // becomes start + 1 of the same run.
  Incarnation incarnation;
  // Async exactly-once: by worker id, the last push seq accepted (empty in
  // sync mode).
  std::vector<int64_t> last_seq;
  // Embedding tables, names unique, in the order the model declared them.
  std::vector<EmbeddingTableState> tables;
  // Async exactly-once of row pushes: by worker id, the last row-push seq
  // accepted (empty in sync mode and in states from before).
  std::vector<int64_t> last_row_seq;
  // -1: a full state. Else a delta (an incremental checkpoint): everything
  // above is whole but the tables, which hold only what changed since the
  // state of version delta_base (server/checkpoint/checkpoint_delta.h
  // applies it to that state). delta_base <= version.
  int64_t delta_base = -1;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_SHARD_STATE_H_
