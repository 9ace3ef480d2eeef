// Test helpers for embedding tables (testonly): MemoryRowTier, a RowTier in
// memory that keeps rows bit for bit as RocksDB does and fails on demand,
// and RowBits, a table's rows as bits for exact comparison.
//
// Thread-compatible, as RowTier.
#ifndef PS_SERVER_CORE_TABLE_TESTING_H_
#define PS_SERVER_CORE_TABLE_TESTING_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/core/embedding_table.h"
#include "server/core/row_tier.h"

namespace ps {

class MemoryRowTier final : public RowTier {
 public:
  // Puts fail as a full disk does, Gets as a failing one; nothing else
  // changes.
  bool fail_put = false, fail_get = false;

  absl::Status Put(uint64_t id, absl::Span<const float> row, uint32_t step) override {
    if (fail_put) return absl::UnavailableError("row tier /t: write: No space left on device");
    rows_[id] = {std::vector<float>(row.begin(), row.end()), step};
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Get(uint64_t id, absl::Span<float> row, uint32_t* step) override {
    if (fail_get) return absl::UnavailableError("row tier /t: read: IO error");
    auto it = rows_.find(id);
    if (it == rows_.end()) return false;
    std::copy(it->second.first.begin(), it->second.first.end(), row.begin());
    *step = it->second.second;
    return true;
  }
  absl::Status ForEach(
      const std::function<void(uint64_t, absl::Span<const float>, uint32_t)>& v) const override {
    for (const auto& [id, r] : rows_) v(id, r.first, r.second);
    return absl::OkStatus();
  }
  absl::Status Delete(uint64_t id) override {
    rows_.erase(id);
    return absl::OkStatus();
  }
  absl::Status Clear() override {
    rows_.clear();
    return absl::OkStatus();
  }
  int64_t num_rows() const override { return static_cast<int64_t>(rows_.size()); }

 private:
  std::map<uint64_t, std::pair<std::vector<float>, uint32_t>> rows_;
};

// Every row of `c` by id, as the bits of its values, its state, its adam
// step and its ttl stamp (the last two when present): equal iff the rows
// are the same bit for bit.
inline std::map<uint64_t, std::vector<uint32_t>> RowBits(const EmbeddingTableContents& c) {
  std::map<uint64_t, std::vector<uint32_t>> rows;
  const size_t n = c.ids.size(), dim = c.dim, st = n == 0 ? 0 : c.state.size() / n;
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint32_t> r(dim + st);
    std::memcpy(r.data(), c.values.data() + i * dim, dim * sizeof(float));
    std::memcpy(r.data() + dim, c.state.data() + i * st, st * sizeof(float));
    if (!c.adam_steps.empty()) r.push_back(c.adam_steps[i]);
    if (!c.stamps.empty()) r.push_back(c.stamps[i]);
    rows[c.ids[i]] = std::move(r);
  }
  return rows;
}

}  // namespace ps

#endif  // PS_SERVER_CORE_TABLE_TESTING_H_
