// EmbeddingTable's limits: what its options may be, whether a call's rows
// fit, and what its rows take in memory. Apart from its calls.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/embedding_table.h"

namespace ps {

size_t EmbeddingTable::SlotBytes(const EmbeddingTableOptions& o) {
  const size_t floats = static_cast<size_t>(o.dim) * (1 + o.optimizer.StateFloatsPerElement());
  return floats * sizeof(float) + sizeof(uint64_t) + (o.evict_lru ? 2 * sizeof(uint32_t) : 0) +
         (o.optimizer.HasRowStep() ? sizeof(uint32_t) : 0) + (o.ttl > 0 ? sizeof(uint32_t) : 0);
}

int EmbeddingTable::TierRowFloats(const EmbeddingTableOptions& o) {
  return o.dim * (1 + o.optimizer.StateFloatsPerElement()) + (o.ttl > 0 ? 1 : 0);
}

namespace {

// Sorted distinct copy of `ids`.
std::vector<uint64_t> Distinct(absl::Span<const uint64_t> ids) {
  std::vector<uint64_t> v(ids.begin(), ids.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

absl::Status EmbeddingTableOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("embedding table name must be non-empty");
  const std::string table = absl::StrCat("embedding table \"", name, "\": ");
  if (dim < 1)
    return absl::InvalidArgumentError(absl::StrCat(table, "dim must be >= 1, got ", dim));
  if (!(init_scale >= 0.0f) || init_scale > 3.0e38f) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "init_scale must be >= 0 and finite, got ", init_scale));
  }
  if (max_rows < 0 || max_rows > EmbeddingTable::kMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat(table, "max_rows must be in [0, ",
                                                   EmbeddingTable::kMaxRows, "], got ", max_rows));
  }
  if (tier != nullptr && (!evict_lru || max_rows == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, "a tier needs LRU eviction and max_rows > 0 (the rows kept in memory)"));
  }
  if (ttl < 0 || ttl >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(table, "ttl must be in [0, 2^31), got ", ttl));
  }
  if (parallel_ids < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "parallel_ids must be >= 0, got ", parallel_ids));
  }
  if (!(min_l2 >= 0.0f) || min_l2 > 3.0e38f) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "min_l2 must be >= 0 and finite, got ", min_l2));
  }
  absl::Status s = optimizer.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(table, s.message()));
  s = admission.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(table, s.message()));
  return absl::OkStatus();
}

absl::Status EmbeddingTable::CheckCapacity(absl::Span<const uint64_t> ids) const {
  const int64_t limit = RowLimit();
  const int64_t n = static_cast<int64_t>(ids.size());
  // With a tier, a call's rows fit in memory past the budget until it ends.
  if (options_.tier != nullptr) return absl::OkStatus();
  if (options_.evict_lru) {
    if (n <= limit) return absl::OkStatus();
    const int64_t distinct = static_cast<int64_t>(Distinct(ids).size());
    if (distinct <= limit) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrCat("embedding table \"", options_.name, "\": one call names ", distinct,
                     " distinct ids, more than max_rows ", limit, " even with LRU eviction"));
  }
  if (num_rows_ + n <= limit) return absl::OkStatus();
  std::vector<uint64_t> missing;
  for (uint64_t id : ids) {
    if (Find(id) == kNone) missing.push_back(id);
  }
  if (num_rows_ + static_cast<int64_t>(missing.size()) <= limit) return absl::OkStatus();
  const int64_t fresh = static_cast<int64_t>(Distinct(missing).size());
  if (num_rows_ + fresh <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "embedding table \"", options_.name, "\": ", fresh, " new rows would pass max_rows ", limit,
      " (it holds ", num_rows_, "); raise max_rows or turn on LRU eviction"));
}

size_t EmbeddingTable::MemoryBytesPerRow(const EmbeddingTableOptions& options) {
  return SlotBytes(options) + 11;  // 4 bytes a bucket, at least 0.375 used
}

}  // namespace ps
