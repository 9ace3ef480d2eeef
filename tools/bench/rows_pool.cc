#include "tools/bench/rows_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"
#include "worker/ctr/data.h"

namespace ps {

absl::StatusOr<RowsPool> MakeRowsPool(const RowsPoolOptions& o) {
  const int64_t k = o.ids_per_request;
  if (k < 1) return absl::InvalidArgumentError("ids per request must be >= 1");
  if (o.pool_rows < 1) return absl::InvalidArgumentError("--pool_rows must be >= 1");
  if (o.id_space < k) {
    return absl::InvalidArgumentError(
        absl::StrCat("--id_space (", o.id_space, ") must be >= the ids per request (", k, ")"));
  }
  if (!(o.zipf_s > 0)) return absl::InvalidArgumentError("--zipf_s must be > 0");
  if (o.populate_chunk < 1) return absl::InvalidArgumentError("populate chunk must be >= 1");
  const ZipfSampler zipf(o.id_space, o.zipf_s);
  uint64_t counter = o.seed * 0x9e3779b97f4a7c15ull;
  auto uniform01 = [&counter] {
    return (static_cast<double>(Mix64(++counter) >> 11) + 0.5) * 0x1.0p-53;
  };
  auto draw = [&]() -> uint64_t {
    if (!o.zipf) return Mix64(++counter) % static_cast<uint64_t>(o.id_space);
    // Rank 1 is the hottest; the ranks are the ids, as ps-lite's driver has them.
    return zipf.Sample([&](int) { return uniform01(); }) - 1;
  };
  RowsPool pool;
  const int64_t n = std::max<int64_t>(1, o.pool_rows / k);
  pool.requests.reserve(n);
  std::vector<uint64_t> all;
  all.reserve(static_cast<size_t>(n * k));
  int64_t draws = 0;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<uint64_t> ids;
    ids.reserve(2 * k);
    while (static_cast<int64_t>(ids.size()) < k) {
      const int64_t need = k - static_cast<int64_t>(ids.size());
      for (int64_t i = 0; i < need; ++i) ids.push_back(draw());
      draws += need;
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    }
    all.insert(all.end(), ids.begin(), ids.end());
    pool.requests.push_back(std::move(ids));
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  pool.distinct_ids = static_cast<int64_t>(all.size());
  pool.draws_per_request = static_cast<double>(draws) / n;
  // A Fisher-Yates shuffle on the same counter, then sorted chunks.
  for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[Mix64(++counter) % i]);
  for (size_t i = 0; i < all.size(); i += o.populate_chunk) {
    const size_t e = std::min(all.size(), i + static_cast<size_t>(o.populate_chunk));
    std::vector<uint64_t> chunk(all.begin() + i, all.begin() + e);
    std::sort(chunk.begin(), chunk.end());
    pool.populate.push_back(std::move(chunk));
  }
  return pool;
}

}  // namespace ps
