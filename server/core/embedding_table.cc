#include "server/core/embedding_table.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"
#include "common/parallel.h"
#include "common/status_macros.h"

namespace ps {

namespace {

// Bytes of floats a chunk of slots aims at.
constexpr size_t kChunkTargetBytes = 64 * 1024;

int ChunkShift(const EmbeddingTableOptions& o) {
  const size_t row_bytes =
      static_cast<size_t>(o.dim) * (1 + o.optimizer.StateFloatsPerElement()) * sizeof(float);
  int shift = 0;
  while (row_bytes << (shift + 1) <= kChunkTargetBytes && shift < 20) ++shift;
  return shift;
}

}  // namespace

// One chunk of slots: slot (c << shift) + k lives at index k of chunk c.
struct EmbeddingTable::Chunk {
  // Per slot, slot_bytes: its id (8 bytes, unaligned), then row_floats
  // floats, so that finding a row and reading it touch the same lines.
  std::unique_ptr<unsigned char[]> slots;
  std::unique_ptr<uint32_t[]> prev;   // toward the most recently used (LRU only)
  std::unique_ptr<uint32_t[]> next;   // toward the least recently used (LRU only)
  std::unique_ptr<uint32_t[]> steps;  // adam only
  std::unique_ptr<uint32_t[]> stamps;  // ttl only: the clock at its last update
};

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::Create(
    const EmbeddingTableOptions& options) {
  absl::Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<EmbeddingTable>(new EmbeddingTable(options));
}

EmbeddingTable::EmbeddingTable(const EmbeddingTableOptions& options)
    : options_(options),
      row_floats_(options.dim * (1 + options.optimizer.StateFloatsPerElement())),
      slot_bytes_(sizeof(uint64_t) + row_floats_ * sizeof(float)),
      chunk_shift_(ChunkShift(options)),
      slow_path_(options.tier != nullptr ||
                 options.admission.kind != AdmissionOptions::Kind::kNone || options.ttl > 0 ||
                 options.min_l2 > 0),
      tier_floats_(row_floats_ + (options.ttl > 0 ? 1 : 0)),
      head_(kNone),
      tail_(kNone) {
  if (options_.tier != nullptr) tier_row_.resize(tier_floats_);
  if (options_.tier != nullptr && options_.ttl > 0) spill_row_.resize(tier_floats_);
  if (options_.admission.kind != AdmissionOptions::Kind::kNone) {
    admission_ = AdmissionFilter::Create(options_.admission);
  }
  if (options_.track_changes) changes_ = std::make_unique<ChangeSet>();
}

EmbeddingTable::~EmbeddingTable() = default;

int64_t EmbeddingTable::RowLimit() const {
  return options_.max_rows > 0 ? options_.max_rows : kMaxRows;
}

// --- Slots -----------------------------------------------------------------

inline void EmbeddingTable::SetId(uint32_t slot, uint64_t id) {
  std::memcpy(SlotOf(slot), &id, sizeof(id));
}

uint32_t& EmbeddingTable::PrevOf(uint32_t slot) const {
  return chunks_[slot >> chunk_shift_]->prev[slot & ((1u << chunk_shift_) - 1)];
}

uint32_t& EmbeddingTable::NextOf(uint32_t slot) const {
  return chunks_[slot >> chunk_shift_]->next[slot & ((1u << chunk_shift_) - 1)];
}

uint32_t* EmbeddingTable::StampOf(uint32_t slot) const {
  if (options_.ttl <= 0) return nullptr;
  return &chunks_[slot >> chunk_shift_]->stamps[slot & ((1u << chunk_shift_) - 1)];
}

uint32_t* EmbeddingTable::StepOf(uint32_t slot) const {
  if (!options_.optimizer.HasRowStep()) return nullptr;
  return &chunks_[slot >> chunk_shift_]->steps[slot & ((1u << chunk_shift_) - 1)];
}

bool EmbeddingTable::SpillTail() {
  const uint32_t* step = StepOf(tail_);
  absl::Span<const float> row(RowOf(tail_), row_floats_);
  if (const uint32_t* stamp = StampOf(tail_)) {  // the stamp travels as the last float's bits
    std::memcpy(spill_row_.data(), row.data(), row_floats_ * sizeof(float));
    std::memcpy(&spill_row_[row_floats_], stamp, sizeof(*stamp));
    row = spill_row_;
  }
  absl::Status s = options_.tier->Put(IdOf(tail_), row, step ? *step : 0);
  if (s.ok()) {
    ++counters_.written;
    return true;
  }
  ++counters_.write_errors;
  tier_error_ = std::move(s);
  return false;
}

uint32_t EmbeddingTable::NewSlot(uint64_t id) {
  uint32_t slot;
  const int64_t limit = std::max(RowLimit(), call_rows_);
  // Full: the least recently used row gives up its slot (with evict_lru;
  // CheckCapacity let no other case through), once the tier has it. One
  // the tier cannot take stays in memory, past the budget, while slots last.
  const bool full = num_rows_ >= limit;
  const bool spilled = full && options_.tier != nullptr && SpillTail();
  if (full && (options_.tier == nullptr || spilled || num_rows_ >= kMaxRows)) {
    slot = tail_;
    if (!spilled) MarkRemoved(IdOf(slot));  // gone: evicted, not moved
    IndexErase(IdOf(slot));
    Unlink(slot);
  } else if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    GrowIndexFor(num_rows_ + 1);
    ++num_rows_;
  } else {
    GrowIndexFor(num_rows_ + 1);
    slot = static_cast<uint32_t>(num_rows_);
    if ((slot >> chunk_shift_) == chunks_.size()) {
      const size_t n = size_t{1} << chunk_shift_;
      auto chunk = std::make_unique<Chunk>();
      chunk->slots.reset(new unsigned char[n * slot_bytes_]);
      if (options_.evict_lru) {
        chunk->prev.reset(new uint32_t[n]);
        chunk->next.reset(new uint32_t[n]);
      }
      if (options_.optimizer.HasRowStep()) chunk->steps.reset(new uint32_t[n]);
      if (options_.ttl > 0) chunk->stamps.reset(new uint32_t[n]);
      slot_bases_.push_back(chunk->slots.get());
      chunks_.push_back(std::move(chunk));
    }
    ++num_rows_;
  }
  SetId(slot, id);
  if (uint32_t* step = StepOf(slot)) *step = 0;
  if (uint32_t* stamp = StampOf(slot)) *stamp = static_cast<uint32_t>(clock_);
  return slot;
}

void EmbeddingTable::ShrinkToBudget() {
  while (num_rows_ > RowLimit() && tail_ != kNone && SpillTail()) {
    const uint32_t slot = tail_;
    IndexErase(IdOf(slot));
    Unlink(slot);
    free_slots_.push_back(slot);
    --num_rows_;
  }
}

inline uint32_t EmbeddingTable::FindOrCreate(uint64_t id) {
  uint32_t slot = Find(id);
  if (slot != kNone) {
    if (!options_.evict_lru) return slot;
    Unlink(slot);
  } else {
    bool stored = false;
    uint32_t stored_step = 0;
    if (options_.tier != nullptr) {
      absl::StatusOr<bool> got = options_.tier->Get(id, absl::MakeSpan(tier_row_), &stored_step);
      if (!got.ok()) {
        read_error_ = got.status();
        return kNone;
      }
      stored = *got;
      uint32_t stamp = 0;
      if (stored && options_.ttl > 0) std::memcpy(&stamp, &tier_row_[row_floats_], sizeof(stamp));
      if (stored && (options_.ttl > 0 || options_.min_l2 > 0)) {
        const Expiry why = ExpiryOf(tier_row_.data(), stamp);
        if (why != Expiry::kKeep) {  // gone: made anew
          CountEviction(why);
          (void)options_.tier->Delete(id);  // if it fails, it is expired again next time
          MarkRemoved(id);
          stored = false;
        }
      }
    }
    if (!stored && lookup_ == Lookup::kPrefetch) return kPending;
    if (!stored && admission_ != nullptr) {
      if (!(lookup_ == Lookup::kPull ? admission_->Sight(id) : admission_->Admitted(id))) {
        return kPending;
      }
      admission_->Forget(id);
    }
    ++(stored ? counters_.from_tier : counters_.created);
    slot = NewSlot(id);
    float* row = RowOf(slot);
    if (stored) {
      std::memcpy(row, tier_row_.data(), row_floats_ * sizeof(float));
      if (uint32_t* step = StepOf(slot)) *step = stored_step;
      if (uint32_t* stamp = StampOf(slot)) {
        std::memcpy(stamp, &tier_row_[row_floats_], sizeof(*stamp));
      }
    } else {
      InitRow(options_.seed, id, options_.dim, options_.init_scale, row);
      InitSparseState(options_.optimizer, options_.dim, row + options_.dim);
      MarkChanged(id);
    }
    IndexInsert(slot);
    if (!options_.evict_lru) return slot;
  }
  PushFront(slot);
  return slot;
}

// --- Calls -------------------------------------------------------------------

inline void EmbeddingTable::PrefetchSlot(uint32_t slot) const {
  // The slot's cache lines (its id and row), up to five (dim 64, SGD).
  const unsigned char* p = SlotOf(slot);
  const size_t bytes = std::min<size_t>(slot_bytes_, 320);
  for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b);
  __builtin_prefetch(p + bytes - 1);
  if (options_.evict_lru) __builtin_prefetch(&PrevOf(slot));
}

void EmbeddingTable::FindOrCreateMany(absl::Span<const uint64_t> ids, uint32_t* slots) {
  LookupMany</*create=*/true>(ids, slots);
}

template <bool create>
void EmbeddingTable::LookupMany(absl::Span<const uint64_t> ids, uint32_t* slots) {
  // Three stages a group apart: group k+2's index buckets are fetched,
  // group k+1's buckets read and their slots fetched, group k resolved, so
  // that each group's misses overlap one another and the work before them.
  constexpr size_t kGroup = 16;
  const size_t n = ids.size();
  size_t home[3][kGroup];
  const auto fetch_buckets = [&](size_t g) {
    if (g >= n || buckets_.empty()) return;
    size_t* h = home[(g / kGroup) % 3];
    for (size_t j = 0; j < kGroup && g + j < n; ++j) {
      h[j] = HomeBucket(ids[g + j]);
      __builtin_prefetch(&buckets_[h[j]]);
    }
  };
  const auto fetch_slots = [&](size_t g) {
    if (g >= n || buckets_.empty()) return;
    const size_t* h = home[(g / kGroup) % 3];
    for (size_t j = 0; j < kGroup && g + j < n; ++j) {
      if (h[j] >= buckets_.size()) continue;  // the index grew since
      const uint32_t slot = buckets_[h[j]];
      if (slot == kNone) continue;
      PrefetchSlot(slot);
      // The next bucket's id too: a probe that goes on reads it.
      const uint32_t next = buckets_[(h[j] + 1) & (buckets_.size() - 1)];
      if (next != kNone) __builtin_prefetch(SlotOf(next));
    }
  };
  fetch_buckets(0);
  fetch_buckets(kGroup);
  fetch_slots(0);
  for (size_t g = 0; g < n; g += kGroup) {
    fetch_buckets(g + 2 * kGroup);
    fetch_slots(g + kGroup);
    for (size_t j = 0; j < kGroup && g + j < n; ++j) {
      slots[g + j] = create ? FindOrCreate(ids[g + j]) : Find(ids[g + j]);
    }
  }
}

template <typename Use>
void EmbeddingTable::ForEachRow(absl::Span<const uint64_t> ids, Use use) {
  constexpr size_t kBatch = 256;  // slots looked up before their rows are used
  if (options_.evict_lru || options_.parallel_ids == 0 ||
      ids.size() < static_cast<size_t>(options_.parallel_ids)) {
    uint32_t slots[kBatch];
    for (size_t i = 0; i < ids.size(); i += kBatch) {
      const size_t m = std::min(kBatch, ids.size() - i);
      FindOrCreateMany(ids.subspan(i, m), slots);
      for (size_t j = 0; j < m; ++j) use(i + j, slots[j]);
    }
    return;
  }
  // The rows there, on up to a thread per core: Find changes nothing, and
  // each use touches its own row. Then the missing ones, made in order.
  std::vector<char> missing(ids.size(), 0);
  ParallelFor(ids.size(), EmbeddingTableOptions::kMinParallelChunk, [&](size_t begin, size_t end) {
    uint32_t slots[kBatch];
    for (size_t i = begin; i < end; i += kBatch) {
      const size_t m = std::min(kBatch, end - i);
      LookupMany</*create=*/false>(ids.subspan(i, m), slots);
      for (size_t j = 0; j < m; ++j) {
        if (slots[j] == kNone) {
          missing[i + j] = 1;
        } else {
          use(i + j, slots[j]);
        }
      }
    }
  });
  for (size_t i = 0; i < ids.size(); ++i) {
    if (missing[i]) use(i, FindOrCreate(ids[i]));
  }
}

absl::Status EmbeddingTable::FindOrCreateAll(absl::Span<const uint64_t> ids,
                                             std::vector<uint32_t>* slots) {
  slots->resize(ids.size());
  read_error_ = absl::OkStatus();
  // The call's rows stay in memory together, past the budget if they must
  // (its distinct ids are at most ids.size()): it is its most recently
  // used rows, so the tail is never one of them. ShrinkToBudget after.
  if (options_.tier != nullptr) call_rows_ = static_cast<int64_t>(ids.size());
  const int64_t before = counters_.from_tier + counters_.created;
  constexpr size_t kBatch = 256;
  for (size_t i = 0; i < ids.size() && read_error_.ok(); i += kBatch) {
    FindOrCreateMany(ids.subspan(i, std::min(kBatch, ids.size() - i)), slots->data() + i);
  }
  if (read_error_.ok()) {
    const int64_t pending = std::count(slots->begin(), slots->end(), kPending);
    counters_.in_memory += static_cast<int64_t>(ids.size()) - pending -
                           (counters_.from_tier + counters_.created - before);
  }
  return read_error_;
}

template <typename Use>
absl::Status EmbeddingTable::CallWithLookups(absl::Span<const uint64_t> ids, Lookup lookup,
                                             Use use) {
  if (options_.ttl > 0 || options_.min_l2 > 0) Sweep(ids.size() + 16);
  std::vector<uint32_t> slots;
  lookup_ = lookup;
  absl::Status s = FindOrCreateAll(ids, &slots);
  if (s.ok()) {
    for (size_t i = 0; i < ids.size(); ++i) use(i, slots[i]);
  }
  call_rows_ = 0;
  ShrinkToBudget();
  if (!s.ok()) {
    ++counters_.read_errors;
    tier_read_error_ = s;
  }
  return s;
}

absl::Status EmbeddingTable::Pull(absl::Span<const uint64_t> ids, float* out) {
  absl::Status s = CheckCapacity(ids);
  if (!s.ok()) return s;
  const size_t dim = options_.dim;
  if (slow_path_) {
    return CallWithLookups(ids, Lookup::kPull, [&](size_t i, uint32_t slot) {
      if (slot != kPending) {
        std::memcpy(out + i * dim, RowOf(slot), dim * sizeof(float));
        return;
      }
      InitRow(options_.seed, ids[i], options_.dim, options_.init_scale, out + i * dim);
      ++counters_.not_admitted;
    });
  }
  ForEachRow(ids, [&](size_t i, uint32_t slot) {
    std::memcpy(out + i * dim, RowOf(slot), dim * sizeof(float));
  });
  return absl::OkStatus();
}

absl::Status EmbeddingTable::Apply(absl::Span<const uint64_t> ids, const float* grads) {
  return ApplyAndPull(ids, grads, nullptr);
}

absl::Status EmbeddingTable::ApplyAndPull(absl::Span<const uint64_t> ids, const float* grads,
                                          float* out) {
  // Strictly ascending ids (what PsClient sends) repeat none; others are
  // sorted to find a repeat.
  if (ids.size() > 1 &&
      std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<uint64_t>()) != ids.end()) {
    std::vector<uint64_t> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end()) {
      return absl::InvalidArgumentError(absl::StrCat("embedding table \"", options_.name, "\": id ",
                                                     *dup, " repeats in one push"));
    }
  }
  absl::Status s = CheckCapacity(ids);
  if (!s.ok()) return s;
  const size_t dim = options_.dim;
  if (slow_path_) {
    RETURN_IF_ERROR(CallWithLookups(ids, Lookup::kApply, [&](size_t i, uint32_t slot) {
      if (slot == kPending) {
        ++counters_.dropped_grads;
        return;
      }
      float* row = RowOf(slot);
      ApplySparseRow(options_.optimizer, options_.dim, grads + i * dim, row, row + dim,
                     StepOf(slot));
      if (uint32_t* stamp = StampOf(slot)) *stamp = static_cast<uint32_t>(clock_);
      MarkChanged(ids[i]);
    }));
    return out == nullptr ? absl::OkStatus() : Pull(ids, out);
  }
  ForEachRow(ids, [&](size_t i, uint32_t slot) {
    float* row = RowOf(slot);
    ApplySparseRow(options_.optimizer, options_.dim, grads + i * dim, row, row + dim,
                   StepOf(slot));
    if (out != nullptr) std::memcpy(out + i * dim, row, dim * sizeof(float));
  });
  if (changes_ != nullptr) {
    for (uint64_t id : ids) MarkChanged(id);
  }
  return absl::OkStatus();
}

absl::Status EmbeddingTable::Prefetch(absl::Span<const uint64_t> ids) {
  if (options_.tier == nullptr) return absl::OkStatus();
  const TableCounters before = counters_;
  absl::Status s = CallWithLookups(ids, Lookup::kPrefetch, [](size_t, uint32_t) {});
  counters_.prefetched += counters_.from_tier - before.from_tier;
  counters_.in_memory = before.in_memory;
  counters_.from_tier = before.from_tier;
  return s;
}

absl::Status EmbeddingTable::Prepare(absl::Span<const uint64_t> ids) {
  absl::Status s = CheckCapacity(ids);
  if (!s.ok()) return s;
  if (slow_path_) return CallWithLookups(ids, Lookup::kApply, [](size_t, uint32_t) {});
  constexpr size_t kBatch = 256;
  uint32_t slots[kBatch];
  for (size_t i = 0; i < ids.size(); i += kBatch) {
    FindOrCreateMany(ids.subspan(i, std::min(kBatch, ids.size() - i)), slots);
  }
  return absl::OkStatus();
}

size_t EmbeddingTable::MemoryBytes() const {
  const size_t slots = chunks_.size() << chunk_shift_;
  return chunks_.capacity() * sizeof(std::unique_ptr<Chunk>) + chunks_.size() * sizeof(Chunk) +
         slot_bases_.capacity() * sizeof(unsigned char*) + slots * SlotBytes(options_) +
         buckets_.capacity() * sizeof(uint32_t);
}

void EmbeddingTable::Clear() {
  std::vector<std::unique_ptr<Chunk>>().swap(chunks_);
  std::vector<unsigned char*>().swap(slot_bases_);
  std::vector<uint32_t>().swap(buckets_);
  num_rows_ = 0;
  std::vector<uint32_t>().swap(free_slots_);
  head_ = tail_ = kNone;
  hand_ = 0;
}

}  // namespace ps
