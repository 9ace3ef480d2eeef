// EmbeddingTable's eviction beyond LRU (ttl and min_l2): the clock, the
// rule, and the sweep that applies it a few slots a call. Apart from its
// calls.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "server/core/embedding_table.h"

namespace ps {

void EmbeddingTable::SetClock(int64_t now) { clock_ = now; }

EmbeddingTable::Expiry EmbeddingTable::ExpiryOf(const float* row, uint32_t stamp) const {
  // Ages are modulo 2^32 (ttl < 2^31): right for any clock within 2^31 of
  // the stamp.
  if (options_.ttl > 0 && static_cast<uint32_t>(clock_) - stamp > options_.ttl) {
    return Expiry::kTtl;
  }
  if (options_.min_l2 > 0) {
    double sq = 0;
    for (int j = 0; j < options_.dim; ++j) sq += static_cast<double>(row[j]) * row[j];
    if (sq < static_cast<double>(options_.min_l2) * options_.min_l2) return Expiry::kScore;
  }
  return Expiry::kKeep;
}

void EmbeddingTable::CountEviction(Expiry why) {
  if (why == Expiry::kTtl) ++counters_.evicted_ttl;
  if (why == Expiry::kScore) ++counters_.evicted_score;
}

bool EmbeddingTable::Evict(uint32_t slot) {
  const uint64_t id = IdOf(slot);
  if (options_.tier != nullptr) {  // an older copy may be there
    absl::Status s = options_.tier->Delete(id);
    if (!s.ok()) {
      ++counters_.write_errors;
      tier_error_ = std::move(s);
      return false;
    }
  }
  IndexErase(id);
  MarkRemoved(id);
  if (options_.evict_lru) Unlink(slot);
  free_slots_.push_back(slot);
  --num_rows_;
  return true;
}

void EmbeddingTable::Sweep(size_t n) {
  const size_t made = static_cast<size_t>(num_rows_) + free_slots_.size();
  if (made == 0) return;
  for (size_t k = 0; k < std::min(n, made); ++k) {
    if (hand_ >= made) hand_ = 0;
    const uint32_t slot = hand_++;
    if (!Live(slot)) continue;
    const uint32_t* stamp = StampOf(slot);
    const Expiry why = ExpiryOf(RowOf(slot), stamp ? *stamp : 0);
    if (why != Expiry::kKeep && Evict(slot)) CountEviction(why);
  }
}

}  // namespace ps
