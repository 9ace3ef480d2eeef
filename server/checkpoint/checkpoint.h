// Checkpoint encoding of a shard: its ShardState (server/core/shard_state.h) as a
// serialized ps.v1.ShardSnapshot (proto/checkpoint.proto), so that it can be written
// to disk or sent over the wire and restored into a shard of the same
// position, worker count and optimizer.
//
// Stateless functions; thread-safe (Shard itself is).
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model_spec.h"
#include "server/core/shard.h"
#include "server/core/shard_state.h"

namespace ps {

// The widest embedding row a checkpoint may hold (floats per row).
inline constexpr int kMaxCheckpointEmbeddingDim = 65536;

// `state` as ShardSnapshot bytes. REQUIRES: a state from Shard::ExportState
// (weights sized for its spec and position), its tables' contents from
// EmbeddingTable::Export of tables with those options.
// With `snapshot_path`, each table's tier_snapshot is stored as
// snapshot_path(it) (the checkpoint store: relative to its directory).
std::string EncodeShardState(
    const ShardState& state,
    const std::function<std::string(const std::string&)>& snapshot_path = nullptr);

// The state in `bytes`, checked on its own: INVALID_ARGUMENT, naming the
// problem, if they do not parse, name an impossible position or worker
// count, hold an invalid spec, or weights that do not cover the position's
// slices exactly once; RESOURCE_EXHAUSTED for a spec over `limits`. Whether it fits a given shard
// is Shard::LoadCheckpoint's check (ShardOptions::CheckState).
//
// Embedding tables are checked before any is built: INVALID_ARGUMENT naming
// the table for a repeated or missing name, options that do not validate
// (EmbeddingTableOptions::Validate; an unknown optimizer kind), a dim past
// kMaxCheckpointEmbeddingDim, a row count that overflows, passes max_rows or
// disagrees with the ids, values, state or adam steps present, or a
// repeated id (among its rows and removed ids), stamps of the wrong count,
// removed ids in a full state without a tier snapshot, or a tier snapshot
// path that is absolute or climbs out ("..");
// RESOURCE_EXHAUSTED naming the table when the rows' values
// of all tables pass limits.max_model_elements. A decoded table's contents
// Import into EmbeddingTable::Create(its options).
absl::StatusOr<ShardState> DecodeShardState(absl::string_view bytes, const SpecLimits& limits);

// The shard's state as ShardSnapshot bytes. FAILED_PRECONDITION if the shard
// has no parameters yet.
absl::StatusOr<std::string> EncodeCheckpoint(const Shard& shard);

// Restores `shard` from EncodeCheckpoint's bytes (DecodeShardState, then
// Shard::LoadCheckpoint). INVALID_ARGUMENT from either; the shard is unchanged
// then.
absl::Status RestoreCheckpoint(absl::string_view bytes, Shard* shard);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_H_
