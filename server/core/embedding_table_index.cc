#include <cstdint>
#include <vector>

#include "server/core/embedding_table.h"

// EmbeddingTable's LRU list and index, apart from its calls.

namespace ps {

// --- LRU list ----------------------------------------------------------------

void EmbeddingTable::Unlink(uint32_t slot) {
  const uint32_t p = PrevOf(slot), n = NextOf(slot);
  if (p != kNone)
    NextOf(p) = n;
  else
    head_ = n;
  if (n != kNone)
    PrevOf(n) = p;
  else
    tail_ = p;
}

void EmbeddingTable::PushFront(uint32_t slot) {
  PrevOf(slot) = kNone;
  NextOf(slot) = head_;
  if (head_ != kNone)
    PrevOf(head_) = slot;
  else
    tail_ = slot;
  head_ = slot;
}

// --- Index -------------------------------------------------------------------

void EmbeddingTable::IndexInsert(uint32_t slot) {
  const size_t mask = buckets_.size() - 1;
  size_t b = HomeBucket(IdOf(slot));
  while (buckets_[b] != kNone) b = (b + 1) & mask;
  buckets_[b] = slot;
}

void EmbeddingTable::IndexErase(uint64_t id) {
  const size_t mask = buckets_.size() - 1;
  size_t hole = HomeBucket(id);
  while (IdOf(buckets_[hole]) != id) hole = (hole + 1) & mask;
  // Backward shift: move later entries of the probe run into the hole
  // unless their home lies cyclically in (hole, j].
  for (size_t j = (hole + 1) & mask; buckets_[j] != kNone; j = (j + 1) & mask) {
    const size_t home = HomeBucket(IdOf(buckets_[j]));
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    buckets_[hole] = buckets_[j];
    hole = j;
  }
  buckets_[hole] = kNone;
}

void EmbeddingTable::GrowIndexFor(int64_t rows) {
  size_t size = buckets_.size();
  if (static_cast<size_t>(rows) * 4 <= size * 3) return;
  if (size == 0) size = 16;
  while (static_cast<size_t>(rows) * 4 > size * 3) size *= 2;
  std::vector<uint32_t> old(size, kNone);  // exactly `size` allocated
  buckets_.swap(old);
  for (uint32_t slot : old) {
    if (slot != kNone) IndexInsert(slot);
  }
}

}  // namespace ps
