// RowTier: where an EmbeddingTable (server/core/embedding_table.h) keeps the
// rows its memory budget leaves out: the rows it evicts are written here,
// and a row missing from memory is read from here before it would be
// created. The product's tier is on disk, in RocksDB
// (server/tier/rocksdb_row_tier.h); this interface keeps the shard core
// free of it.
//
// A stored row is its row_floats floats (values, then optimizer state),
// bit for bit, and for adam its step count (0 otherwise). Errors name what
// failed and where (the tier's directory): an unwritable or full disk is a
// Status, never a crash.
//
// Thread-compatible: the table's owner (the shard's lock) serializes calls.
#ifndef PS_SERVER_CORE_ROW_TIER_H_
#define PS_SERVER_CORE_ROW_TIER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

class RowTier {
 public:
  virtual ~RowTier() = default;

  // Stores `row` and `step` as id's row, replacing any stored before.
  virtual absl::Status Put(uint64_t id, absl::Span<const float> row, uint32_t step) = 0;
  // Reads id's row into `row` (which must hold row_floats floats) and
  // `*step`: true; false (row untouched) when none is stored.
  virtual absl::StatusOr<bool> Get(uint64_t id, absl::Span<float> row, uint32_t* step) = 0;
  // Calls visit(id, row, step) for every stored row, in ascending id order.
  virtual absl::Status ForEach(const std::function<void(uint64_t id, absl::Span<const float> row,
                                                        uint32_t step)>& visit) const = 0;
  // Forgets id's row, if stored.
  virtual absl::Status Delete(uint64_t id) = 0;
  // Forgets every row.
  virtual absl::Status Clear() = 0;
  // Rows stored (RocksDB: its estimate, exact after Clear and Puts alone).
  virtual int64_t num_rows() const = 0;

  // Checkpoints of the tier itself, without reading its rows: Snapshot
  // makes `dir` (which must not exist; its parent must) a copy of every
  // row stored now, as cheaply as the store can (RocksDB: its own
  // checkpoint, hard links to its immutable files); RestoreFrom replaces
  // every row stored by a Snapshot's, leaving `dir` as it is.
  // UNIMPLEMENTED for a tier that cannot (the table's rows are then read
  // into the checkpoint).
  virtual absl::Status Snapshot(const std::string& dir) {
    return absl::UnimplementedError("this row tier takes no snapshots");
  }
  virtual absl::Status RestoreFrom(const std::string& dir) {
    return absl::UnimplementedError("this row tier takes no snapshots");
  }
};

// Reads the rows of a RowTier::Snapshot directory of rows of `row_floats`
// floats: visit(id, row, step) for each, in ascending id order (ps_server:
// RocksDB's, server/tier/rocksdb_row_tier.h), or the error naming `dir`.
using TierSnapshotReader = std::function<absl::Status(
    const std::string& dir, int row_floats,
    const std::function<void(uint64_t id, absl::Span<const float> row, uint32_t step)>& visit)>;

}  // namespace ps

#endif  // PS_SERVER_CORE_ROW_TIER_H_
