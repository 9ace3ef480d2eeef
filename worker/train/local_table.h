// LocalEmbeddingTable: one embedding table's rows in this process: what
// LocalParamStore (worker/train/param_store.h) keeps for a standalone run, in place
// of the servers' tables.
//
// A hash map from id to a row and its sparse optimizer state
// (common/sparse_optimizer.h). A row is created on first Lookup with
// create = true, its values from InitRow(seed, id, dim, init_scale)
// (common/embedding_shard.h: the same first values a server shard would
// give it) and its state from InitSparseState. Lookup with create = false
// returns those initial values for an unknown id without storing it (what
// evaluation on held-out data wants). Apply runs ApplySparseRow on each
// (id, gradient row), so rows change exactly as on a server table.
//
// Thread-compatible: no call may overlap a non-const call.
#ifndef PS_WORKER_TRAIN_LOCAL_TABLE_H_
#define PS_WORKER_TRAIN_LOCAL_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/sparse_optimizer.h"

namespace ps {

struct LocalEmbeddingTableOptions {
  int dim = 16;             // floats per row, >= 1
  uint64_t seed = 1;        // InitRow's seed
  float init_scale = 0.01f;  // new rows uniform in +-init_scale, >= 0
  SparseOptimizerOptions optimizer;  // the per-row rule
  // INVALID_ARGUMENT naming the field (or the optimizer's).
  absl::Status Validate() const;
};

class LocalEmbeddingTable {
 public:
  static absl::StatusOr<LocalEmbeddingTable> Create(const LocalEmbeddingTableOptions& options);

  // rows[i * dim, (i + 1) * dim) = the row of ids[i].
  void Lookup(absl::Span<const uint64_t> ids, bool create, float* rows);
  // Applies grads[i * dim, (i + 1) * dim) to the row of ids[i], creating it
  // first if needed. REQUIRES: grads.size() == ids.size() * dim.
  void Apply(absl::Span<const uint64_t> ids, absl::Span<const float> grads);

  size_t size() const { return index_.size(); }
  int dim() const { return options_.dim; }

 private:
  explicit LocalEmbeddingTable(const LocalEmbeddingTableOptions& options);
  size_t RowOf(uint64_t id);  // creates the row if missing

  LocalEmbeddingTableOptions options_;
  int state_floats_ = 0;                       // per row
  absl::flat_hash_map<uint64_t, size_t> index_;  // id -> row number
  std::vector<float> values_;                  // [rows * dim]
  std::vector<float> state_;                   // [rows * state_floats_]
  std::vector<uint32_t> steps_;                // [rows] (adam)
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_LOCAL_TABLE_H_
