// RocksDbRowTier: an embedding table's rows past its memory budget, on disk
// in RocksDB (Debian's librocksdb-dev; server/core/row_tier.h has the
// contract).
//
// One database per table and shard, in its own directory. A row's key is
// its id, 8 bytes big-endian (so that iteration is in id order); its value
// the row's floats as they are in memory, then the step count (4 bytes).
// The tier holds no state of its own worth keeping: checkpoints do
// (server/checkpoint/), so Open empties the directory of an earlier run,
// and writes skip RocksDB's write-ahead log (a crash loses the tier, and
// the shard restarts from its checkpoint, as it does without one).
//
// Errors name the directory and what failed (RocksDB's own message:
// "No space left on device", "Permission denied"), never a crash.
//
// Thread-compatible (RowTier's contract); the database itself is
// thread-safe.
#ifndef PS_SERVER_TIER_ROCKSDB_ROW_TIER_H_
#define PS_SERVER_TIER_ROCKSDB_ROW_TIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/core/row_tier.h"
#include "server/core/sparse_tables.h"

namespace rocksdb {
class DB;
}

namespace ps {

struct RocksDbRowTierOptions {
  std::string dir;     // the database's directory; made if missing, emptied if not
  int row_floats = 0;  // floats per row (values and state), >= 1
  // RocksDB's block cache, bytes (0: RocksDB's default, 8 MiB). Counts
  // against the shard's memory beyond the table's budget.
  int64_t block_cache_bytes = 0;
  // Remove `dir` when the tier is destroyed.
  bool remove_when_closed = false;
};

class RocksDbRowTier final : public RowTier {
 public:
  // INVALID_ARGUMENT for bad options; the open's error naming `dir`.
  static absl::StatusOr<std::unique_ptr<RocksDbRowTier>> Open(const RocksDbRowTierOptions& options);
  ~RocksDbRowTier() override;

  absl::Status Put(uint64_t id, absl::Span<const float> row, uint32_t step) override;
  absl::StatusOr<bool> Get(uint64_t id, absl::Span<float> row, uint32_t* step) override;
  absl::Status ForEach(const std::function<void(uint64_t id, absl::Span<const float> row,
                                                uint32_t step)>& visit) const override;
  absl::Status Delete(uint64_t id) override;
  absl::Status Clear() override;
  int64_t num_rows() const override;
  // RocksDB's checkpoint (rocksdb/utilities/checkpoint.h) after a flush of
  // the memtables (the tier's writes skip the write-ahead log): the
  // immutable table files hard-linked, the rest copied.
  absl::Status Snapshot(const std::string& dir) override;
  // Closes the database, makes its directory a copy of `dir` (table files
  // hard-linked, where the file system allows, else copied) and opens it
  // again. If that fails the tier is left empty (and usable) and the error
  // names both directories.
  absl::Status RestoreFrom(const std::string& dir) override;

  const std::string& dir() const { return options_.dir; }

 private:
  friend absl::Status ReadRocksDbSnapshot(
      const std::string& dir, int row_floats,
      const std::function<void(uint64_t id, absl::Span<const float> row, uint32_t step)>& visit);
  RocksDbRowTier(const RocksDbRowTierOptions& options, std::unique_ptr<rocksdb::DB> db);
  // `s` as an absl::Status naming the directory and `what`.
  absl::Status Error(const char* what, const std::string& message) const;
  // Opens the database in options_.dir (emptied first if `destroy`).
  absl::Status OpenDb(bool destroy);

  const RocksDbRowTierOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::string value_;  // Put's and Get's buffer
};

// SparseTables' tiers (--table_dir): one RocksDbRowTier per table and
// shard, in `dir`/shard-<id>/<table name>.<n> (letters, digits, '_', '-'
// and '.' past the first byte kept, other bytes as %XX; n counts the tiers
// this factory opened, so that a table installed again, by a rollback,
// never opens a database its old tier holds), removed when the tier goes.
// The shard's folder is emptied at its first tier (an earlier run's) and
// made if missing (an error naming it otherwise). Thread-safe.
SparseTablesOptions::TierFactory RocksDbTiersUnder(const std::string& dir);

// The TierSnapshotReader of RocksDbRowTier::Snapshot directories: opens one
// read-only (changing nothing in it) and visits its rows in id order.
absl::Status ReadRocksDbSnapshot(
    const std::string& dir, int row_floats,
    const std::function<void(uint64_t id, absl::Span<const float> row, uint32_t step)>& visit);

}  // namespace ps

#endif  // PS_SERVER_TIER_ROCKSDB_ROW_TIER_H_
