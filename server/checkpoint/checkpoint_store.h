// CheckpointStore: one shard's checkpoints in a directory, written atomically
// and durably, and read back newest valid first.
//
// A checkpoint is one file, shard-<id>-of-<count>-v<version>.ckpt (version
// zero-padded to 20 digits, so names sort by version), holding
//   "PSCKPT01" | payload size (8 bytes, little-endian) |
//   CRC-32 of the payload (4 bytes, little-endian) | payload,
// where the payload is the ShardState encoded by server/checkpoint/checkpoint.h.
// Write puts it in a temporary file in the same directory, fsyncs it,
// renames it into place and fsyncs the directory, so a crash leaves either
// the old set or the new file, never half a file under a checkpoint's name;
// then it deletes all but the newest `keep`. LoadNewest tries the files
// newest first and skips (logging why) one that is truncated, fails its
// checksum or does not decode, so a damaged newest checkpoint falls back to
// the one before.
//
// Incremental checkpoints: a delta (ShardState::delta_base >= 0) is written
// as shard-<id>-of-<count>-v<version>.delta.ckpt, framed the same. Pruning
// keeps the newest `keep` full checkpoints and the deltas after the oldest
// of them. LoadNewest takes the newest full checkpoint that reads back
// whole and applies the deltas after it in version order, stopping (and
// logging why) at one that is damaged or not on the state so far: the
// result is the newest state the files reach.
//
// Files of other shard positions in the same directory are left alone, so
// the shards of a cluster may share one directory.
//
// Thread-compatible: one writer at a time (server/checkpoint/checkpointer.h serializes
// them); LoadNewest before the writes start.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_STORE_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model_spec.h"
#include "server/core/shard_state.h"

namespace ps {

struct CheckpointStoreOptions {
  std::string dir;  // created (one level) if missing
  int shard_id = 0;
  int num_shards = 1;
  int keep = 3;  // newest checkpoints kept, >= 1
  // Receives one line per checkpoint skipped while loading, without a
  // newline. Null drops them.
  std::function<void(absl::string_view line)> log;
};

class CheckpointStore {
 public:
  // INVALID_ARGUMENT for bad options; the errno's status if the directory
  // cannot be created or is not writable.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(
      const CheckpointStoreOptions& options);

  // Writes `state` (of this store's shard position) as the checkpoint of its
  // version (a delta's name for a delta), replacing one of the same version
  // (of either kind), then prunes. Returns the file's path.
  absl::StatusOr<std::string> Write(const ShardState& state);

  // The newest checkpoint that reads back whole and decodes within
  // `limits`, with its path; nullopt if there is none.
  struct Loaded {
    std::string path;  // the newest file applied (a delta's, if any)
    ShardState state;  // full
    int deltas = 0;    // deltas applied on the full checkpoint
  };
  // Only states of version <= max_version count.
  absl::StatusOr<std::optional<Loaded>> LoadNewest(
      const SpecLimits& limits,
      int64_t max_version = std::numeric_limits<int64_t>::max()) const;

  // This shard's checkpoint files (full and deltas), newest first.
  std::vector<std::string> List() const;

  // The file name of the checkpoint of `version`, for tests and tools.
  std::string FileName(int64_t version, bool delta = false) const;

  // Where the shard makes its tables' tier snapshots (SparseTablesOptions::
  // tier_snapshot_dir) for Write to move next to the file: a folder of this
  // shard position's in `dir`, emptied by Open.
  std::string TierStagingDir() const;

 private:
  // "shard-<id>-of-<count>-v", the start of this shard's file names.
  std::string FilePrefix() const;
  struct Entry {
    int64_t version;
    bool delta;
    std::string path;
  };
  // This shard's files, newest first (of one version, the full one first).
  std::vector<Entry> Entries() const;
  // The state in the file at `path` (its tier snapshots' paths made
  // absolute), or why not (DATA_LOSS for a snapshot missing).
  absl::StatusOr<ShardState> Read(const std::string& path, const SpecLimits& limits) const;
  // The folder of a checkpoint file's tier snapshots: `file` less .ckpt,
  // and .tiers.
  static std::string TiersDirOf(const std::string& file);
  // Deletes a checkpoint file and its tier snapshots.
  static void Remove(const std::string& file);
  // Moves `state`'s staged tier snapshots into TiersDirOf(file)/<table
  // index>; *stored maps each snapshot of the state to its path relative
  // to `dir`, as the file names it.
  absl::Status AdoptTierSnapshots(const ShardState& state, const std::string& file,
                                  std::map<std::string, std::string>* stored);

  explicit CheckpointStore(const CheckpointStoreOptions& options) : options_(options) {}

  const CheckpointStoreOptions options_;
};

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_STORE_H_
