#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/embedding_table.h"

// EmbeddingTable's Export and Import (checkpoints), apart from its calls.

namespace ps {

// --- Export and Import -------------------------------------------------------

absl::StatusOr<EmbeddingTableContents> EmbeddingTable::Export() const {
  EmbeddingTableContents c;
  c.dim = options_.dim;
  c.optimizer = options_.optimizer.kind;
  const size_t dim = options_.dim;
  const size_t state = row_floats_ - dim;
  c.ids.reserve(num_rows_);
  c.values.reserve(num_rows_ * dim);
  c.state.reserve(num_rows_ * state);
  const auto add = [&](uint32_t slot) {
    const float* row = RowOf(slot);
    const uint32_t* stamp = StampOf(slot);
    if (ExpiryOf(row, stamp ? *stamp : 0) != Expiry::kKeep) return;  // a sweep's to evict
    c.ids.push_back(IdOf(slot));
    c.values.insert(c.values.end(), row, row + dim);
    c.state.insert(c.state.end(), row + dim, row + row_floats_);
    if (const uint32_t* step = StepOf(slot)) c.adam_steps.push_back(*step);
  };
  if (options_.tier != nullptr) {
    // The tier's copy of a row in memory is older: memory's wins.
    RETURN_IF_ERROR(
        options_.tier->ForEach([&](uint64_t id, absl::Span<const float> row, uint32_t step) {
          if (Find(id) != kNone) return;
          uint32_t stamp = 0;  // with ttl, the row's last float's bits
          if (options_.ttl > 0) std::memcpy(&stamp, &row[row_floats_], sizeof(stamp));
          if (ExpiryOf(row.data(), stamp) != Expiry::kKeep) return;  // evicted when read
          c.ids.push_back(id);
          c.values.insert(c.values.end(), row.begin(), row.begin() + dim);
          c.state.insert(c.state.end(), row.begin() + dim, row.begin() + row_floats_);
          if (options_.optimizer.HasRowStep()) c.adam_steps.push_back(step);
        }));
  }
  if (options_.evict_lru) {
    for (uint32_t slot = tail_; slot != kNone; slot = PrevOf(slot)) add(slot);  // LRU first
  } else {
    // In the order made; slots freed by ttl or min_l2 hold no row.
    const int64_t made = num_rows_ + static_cast<int64_t>(free_slots_.size());
    for (int64_t slot = 0; slot < made; ++slot) {
      if (Live(static_cast<uint32_t>(slot))) add(static_cast<uint32_t>(slot));
    }
  }
  return c;
}

absl::Status EmbeddingTable::Import(const EmbeddingTableContents& c) {
  const std::string table = absl::StrCat("embedding table \"", options_.name, "\": import: ");
  if (c.dim != options_.dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "rows of dim ", c.dim, ", the table's is ", options_.dim));
  }
  if (c.optimizer != options_.optimizer.kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "optimizer state of ", SparseOptimizerName(c.optimizer),
                     ", the table uses ", SparseOptimizerName(options_.optimizer.kind)));
  }
  const size_t n = c.ids.size();
  const size_t dim = options_.dim;
  const size_t state = row_floats_ - dim;
  const size_t steps = options_.optimizer.HasRowStep() ? n : 0;
  if (c.values.size() != n * dim || c.state.size() != n * state || c.adam_steps.size() != steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, n, " ids need ", n * dim, " values, ", n * state, " state floats and ", steps,
        " step counts; got ", c.values.size(), ", ", c.state.size(), " and ", c.adam_steps.size()));
  }
  if (options_.tier == nullptr && static_cast<int64_t>(n) > RowLimit()) {
    return absl::ResourceExhaustedError(absl::StrCat(table, n, " rows pass max_rows ", RowLimit()));
  }
  std::vector<uint64_t> sorted(c.ids.begin(), c.ids.end());
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return absl::InvalidArgumentError(absl::StrCat(table, "id ", *dup, " repeats"));
  }

  Clear();
  if (options_.tier != nullptr) RETURN_IF_ERROR(options_.tier->Clear());
  GrowIndexFor(std::min(static_cast<int64_t>(n), RowLimit()));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t slot = NewSlot(c.ids[i]);
    float* row = RowOf(slot);
    std::memcpy(row, c.values.data() + i * dim, dim * sizeof(float));
    if (state > 0) std::memcpy(row + dim, c.state.data() + i * state, state * sizeof(float));
    if (uint32_t* step = StepOf(slot)) *step = c.adam_steps[i];
    IndexInsert(slot);
    if (options_.evict_lru) PushFront(slot);
  }
  return absl::OkStatus();
}

}  // namespace ps
