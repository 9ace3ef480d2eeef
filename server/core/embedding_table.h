// EmbeddingTable: one server's rows of one embedding table.
//
// A table has a name, a row dimension and a key space of 64-bit ids; the
// servers split the ids by ShardOfId (common/embedding_shard.h) and each
// keeps its rows here. A row is created on first touch (Pull or Apply) with
// InitRow(seed, id) and its optimizer's initial state, so any shard and any
// restart creates the same row. Apply updates only the rows it names, by
// the sparse optimizer of common/sparse_optimizer.h.
//
// Memory is bounded by max_rows: a call that would create rows past it gets
// RESOURCE_EXHAUSTED naming the table, and changes nothing (capacity is
// checked before any row is made), unless evict_lru is on; then each new
// row past the bound replaces the least recently used row (touched last by
// Pull, Apply or Import the longest ago). Only a table with evict_lru keeps
// the recency list: without it a row touched is not written to but for its
// values, which is what keeps a cold working set fast.
//
// Layout, per row: the id (8 bytes) and right after it the row's floats
// (dim values, then the optimizer's state), so that a lookup's check of the
// id and the row's read share cache lines, in fixed-size chunks of slots
// (about 64 KiB each, so no slack grows with the table), with evict_lru the LRU list's prev/next
// slot numbers (4 + 4), adam's step count (4, adam only), and an open-addressing index (linear
// probing, backward-shift deletion) of uint32 slot numbers, kept at load factor in (0.375, 0.75],
// so at most 10.7 bytes per row: at most 31 bytes of overhead per row beyond its floats (23 without
// evict_lru; 4 more with ttl, its stamp) once the table is past its first chunk and 16 buckets (the
// last chunk's unused slots add less than one chunk in all). MemoryBytes counts all of it;
// server/core/embedding_table_test.cc and tools/bench/embedding_memory_bench.cc measure it.
//
// With a tier (options.tier, server/core/row_tier.h) max_rows is the memory
// budget, not a bound: the row evicted from memory is written to the tier,
// and a row missing from memory is read back from it (values, state and
// step bit for bit) before it would be created, so a tiered table answers
// exactly as one that kept every row in memory. A tier that fails to
// write keeps the row in memory (past the budget; tier_error() says why)
// and the call goes on; one that fails to read fails the call with its
// error, before any row is written to `out` or updated (the rows it moved
// between memory and the tier stay as they are: that changes no answer).
// A call's rows are in memory together: one that names more distinct ids
// than the budget holds takes memory past it until it returns (then the
// least recently used rows go back to the tier, and their slots are reused:
// the chunks stay allocated).
//
// With admission (options.admission, server/core/admission.h) a row is
// created only for an id its filter admits: each id a Pull names is one
// sighting, and until an id's sightings reach the filter's count a Pull
// answers the row's initial value (what the row will start from) without
// making it, and Apply drops its gradient (both counted in counters()).
// An existing row (in memory or the tier) needs no admission.
//
// Eviction beyond LRU, by age (ttl: a row not updated, by Apply, Import or
// its creation, for more than ttl units of the table's clock, SetClock) and
// by score (min_l2: a row whose values' L2 norm is below it), is
// incremental: each Pull, Apply and Prepare first looks at a few slots
// (one per id the call names, and 16) past where the last one left off, so
// a table of R rows is looked through every R / (K + 16) calls of K ids and
// no call sweeps it. An evicted row is gone, from memory and the tier (it
// comes back as a new row). A row read back from the tier is checked as
// it arrives. Counted in counters(): evicted_ttl, evicted_score.
//
// Export and Import move every row with its optimizer state and its order
// (with evict_lru the LRU order, else the order rows were made), for
// checkpoints: Import then Pull gives the same rows bit for bit,
// and training continues bit for bit as it would have. With ttl each row's
// stamp travels too, so a row past its ttl is in the export (the table
// still serves it) and the restored table's sweep evicts it.
//
// With track_changes, the table keeps the ids of the rows it made or
// updated (Pull's and Prepare's new rows, Apply's rows) and of those it
// removed (evict_lru without a tier, ttl, min_l2) since the last
// ResetChanges, for incremental checkpoints: ExportChanges gives those
// rows as they are now and the removed ids. It costs a hash-set insert per
// row a call makes or updates and 8 to 16 bytes per id kept (MemoryBytes
// leaves the sets out); rows moving between memory and the tier are not
// changes.
//
// Thread-compatible: no internal locking; the shard's lock guards it. A
// call of options.parallel_ids ids or more may run part of its lookups on
// ParallelFor's pool threads (common/parallel.h), all done before it
// returns.
#ifndef PS_SERVER_CORE_EMBEDDING_TABLE_H_
#define PS_SERVER_CORE_EMBEDDING_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/embedding_shard.h"
#include "common/sparse_optimizer.h"
#include "server/core/admission.h"
#include "server/core/row_tier.h"

namespace ps {

struct EmbeddingTableOptions {
  std::string name;          // names the table in errors; non-empty
  int dim = 0;               // floats per row, >= 1
  uint64_t seed = 0;         // InitRow's seed
  float init_scale = 0.01f;  // new rows are uniform in [-init_scale, init_scale); >= 0
  // Most rows this server keeps, 0 = no bound but the slot numbers'
  // (EmbeddingTable::kMaxRows). At most kMaxRows.
  int64_t max_rows = 0;
  // At max_rows, replace the least recently used row instead of failing.
  bool evict_lru = false;
  SparseOptimizerOptions optimizer;
  // Not owned; null: none. Where the rows past max_rows live: requires
  // evict_lru and max_rows > 0. Must outlive the table, which may write it
  // in any call (and Clear it in Import).
  RowTier* tier = nullptr;
  // Which ids get a row (none: every id at first touch).
  AdmissionOptions admission;
  // > 0: evict rows not updated for more than this many clock units (see
  // SetClock), in [0, 2^31).
  int64_t ttl = 0;
  // > 0: evict rows whose values' L2 norm is below this; finite, >= 0.
  float min_l2 = 0;
  // Keep the ids of the rows changed and removed since the last
  // ResetChanges, for incremental checkpoints (ExportChanges).
  bool track_changes = false;
  // A Pull, Apply or ApplyAndPull of at least this many ids, on a table in
  // memory only and without evict_lru, looks its rows up on up to a thread
  // per core (chunks of kMinParallelChunk ids at least); 0 = always on the
  // caller's thread. >= 0.
  static constexpr int64_t kDefaultParallelIds = 4096;
  static constexpr size_t kMinParallelChunk = 256;
  int64_t parallel_ids = kDefaultParallelIds;

  // INVALID_ARGUMENT naming the table and the first bad field.
  absl::Status Validate() const;
};

// All rows of a table: with evict_lru least recently used first (so
// Import, inserting in order, rebuilds the LRU order), else in the order
// they were made. Row i is ids[i]; its values are
// values[i*dim, (i+1)*dim), its state state[i*dim*s, (i+1)*dim*s) with s the
// optimizer's StateFloatsPerElement, and for adam its step count
// adam_steps[i] (empty for the other rules), and with ttl stamps[i], when
// it was last updated by the table's clock (empty: none saved; Import then
// stamps every row with the clock now).
// What a table with a tier or admission did since it was made, for
// operators (zero for a table with neither): the rows its Pull and Apply
// looked up, by where they were (memory, the tier, nowhere: created, or
// not admitted), and its writes to the tier.
struct TableCounters {
  int64_t in_memory = 0;
  int64_t from_tier = 0;
  int64_t created = 0;
  int64_t not_admitted = 0;   // Pull answered the initial value
  int64_t dropped_grads = 0;  // Apply dropped a row's gradient: not admitted
  int64_t written = 0;        // rows evicted to the tier
  int64_t write_errors = 0;   // rows the tier refused (kept in memory)
  int64_t read_errors = 0;    // calls the tier's read error failed
  int64_t evicted_ttl = 0;    // rows removed: not updated within ttl
  int64_t evicted_score = 0;  // rows removed: L2 norm under min_l2
  int64_t prefetched = 0;     // rows Prefetch read back from the tier
};

struct EmbeddingTableContents {
  int dim = 0;
  SparseOptimizerKind optimizer = SparseOptimizerKind::kSgd;
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<float> state;
  std::vector<uint32_t> adam_steps;
  std::vector<uint32_t> stamps;
};

class EmbeddingTable {
 public:
  // The most rows one table can hold (slot numbers are uint32, one value
  // reserved).
  static constexpr int64_t kMaxRows = 0xfffffffeLL;
  // INVALID_ARGUMENT for options that do not validate.
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> Create(
      const EmbeddingTableOptions& options);

  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;
  ~EmbeddingTable();

  // Writes row ids[i] to out[i*dim, (i+1)*dim) for each i, creating missing
  // rows and (evict_lru) making each the most recently used, in order. Ids may repeat.
  // RESOURCE_EXHAUSTED naming the table, with nothing created or touched,
  // when the new rows would pass max_rows and evict_lru is off, or (with
  // evict_lru) when the call names more distinct ids than max_rows.
  absl::Status Pull(absl::Span<const uint64_t> ids, float* out);

  // Applies grads[i*dim, (i+1)*dim) to row ids[i] by the sparse optimizer,
  // creating missing rows first as Pull does and making each the most
  // recently used. INVALID_ARGUMENT naming the table and the id when an id
  // repeats; RESOURCE_EXHAUSTED as Pull; either way nothing changes.
  absl::Status Apply(absl::Span<const uint64_t> ids, const float* grads);

  // Apply(ids, grads), then Pull(ids, out): the same errors, rows and
  // state. A table in memory only (no tier, admission, ttl or min_l2;
  // InMemoryOnly) looks each row up once and reads it right after its
  // update; any other makes the two calls (so with a tier a read error in
  // the Pull leaves the push applied).
  absl::Status ApplyAndPull(absl::Span<const uint64_t> ids, const float* grads, float* out);
  // No tier, admission, ttl or min_l2: ApplyAndPull cannot fail once
  // CheckCapacity passed and the ids are distinct.
  bool InMemoryOnly() const { return !slow_path_; }

  // With a tier: reads the rows of `ids` that are there back into memory
  // (made the most recently used), for a Pull to come; makes no row and
  // counts no sighting (counters().prefetched, not the lookups). Without a
  // tier: nothing. The tier's read error as Pull.
  absl::Status Prefetch(absl::Span<const uint64_t> ids);

  // Makes the rows of `ids` that Apply would make, counting no sighting
  // (a sync push's rows, made when it arrives so that its step's close
  // finds room). RESOURCE_EXHAUSTED or the tier's error as Pull.
  absl::Status Prepare(absl::Span<const uint64_t> ids);

  // The RESOURCE_EXHAUSTED that Pull or Apply of `ids` would return for
  // want of room, or OK; changes nothing (so a caller can check before it
  // allocates the call's output).
  absl::Status CheckCapacity(absl::Span<const uint64_t> ids) const;

  // The table's clock for ttl (the shard's step or seconds: its owner
  // chooses the unit); rows are stamped with it when made or updated.
  void SetClock(int64_t now);

  // Rows in memory (with a tier, the tier holds the rest, and more).
  int64_t num_rows() const { return num_rows_; }
  // The tier's last write error since the table was made (OK: none): rows
  // kept in memory past the budget because the tier could not take them.
  const absl::Status& tier_error() const { return tier_error_; }
  // The tier's last read error since the table was made (OK: none): the
  // calls it failed are counters().read_errors.
  const absl::Status& tier_read_error() const { return tier_read_error_; }
  // Zero without a tier or admission.
  const TableCounters& counters() const { return counters_; }
  // Null without admission.
  const AdmissionFilter* admission() const { return admission_.get(); }
  const EmbeddingTableOptions& options() const { return options_; }

  // Bytes this table has allocated on the heap for its rows and index (not
  // the object itself, nor a call's temporary scratch).
  size_t MemoryBytes() const;
  // At most this many bytes of MemoryBytes per row, past the first chunk:
  // the slot and the index's share at its fullest (4 / 0.375 bytes).
  static size_t MemoryBytesPerRow(const EmbeddingTableOptions& options);
  // Floats a row takes in the tier (RowTier's row_floats): its values and
  // state, and with ttl one more, its stamp's bits.
  static int TierRowFloats(const EmbeddingTableOptions& options);
  // Appends row `id` as the tier of a table with `options` stores it
  // (TierRowFloats floats and `step`) to *c: values, state, and the step
  // and stamp where the options keep them.
  static void AppendTierRow(const EmbeddingTableOptions& options, uint64_t id,
                            absl::Span<const float> row, uint32_t step, EmbeddingTableContents* c);

  // Every row with its state, in EmbeddingTableContents' order (with a
  // tier: the tier's rows not in memory first, in id order, then memory's,
  // least recently used first), or the tier's read error. Without
  // `tier_rows`, only the rows in memory (a checkpoint that snapshots the
  // tier itself, RowTier::Snapshot).
  absl::StatusOr<EmbeddingTableContents> Export(bool tier_rows = true) const;
  // Replaces every row by `contents`. INVALID_ARGUMENT (dim, optimizer or
  // sizes not this table's, a repeated id) or RESOURCE_EXHAUSTED (more rows
  // than max_rows, without a tier), leaving the table as it was; with a
  // tier, the tier's error (the table then holds part of `contents`).
  // With `keep_tier` the tier's rows stay (a restored RowTier::Snapshot),
  // overlaid by `contents`.
  absl::Status Import(const EmbeddingTableContents& contents, bool keep_tier = false);

  // With track_changes: the rows made or updated since the last
  // ResetChanges (or the table's making, or Import), as they are now, and
  // the ids of the rows removed since (a row removed and then made again
  // is changed; one changed and then removed, or past its ttl or min_l2
  // now, is removed), both by ascending id; or the tier's read error.
  // Without: FAILED_PRECONDITION.
  struct Changes {
    EmbeddingTableContents changed;
    std::vector<uint64_t> removed;
  };
  absl::StatusOr<Changes> ExportChanges() const;
  // Forgets the changes so far (after a checkpoint took them).
  void ResetChanges();

 private:
  struct Chunk;

  // Not slots (kMaxRows slots are 0 .. kMaxRows - 1): no row; a row
  // admission refused to make.
  static constexpr uint32_t kNone = 0xffffffffu;
  static constexpr uint32_t kPending = 0xfffffffeu;
  // Keeps the index's bucket choice independent of ShardOfId's high bits.
  static constexpr uint64_t kIndexSalt = 0x2545f4914f6cdd1dULL;

  explicit EmbeddingTable(const EmbeddingTableOptions& options);

  int64_t RowLimit() const;
  // Bytes per slot outside the index: floats, id, LRU links, adam's step.
  static size_t SlotBytes(const EmbeddingTableOptions& options);
  // What a call's lookups are for: a Pull's count sightings; a Pull's and
  // Prepare's make rows the filter admits, Apply's too.
  // kPrefetch's make no row at all.
  enum class Lookup { kPull, kApply, kPrefetch };

  // The slot of `id`, creating the row (evicting if needed) when missing,
  // made the most recently used. REQUIRES: CheckCapacity passed. kNone
  // when the tier failed to read it (read_error_ says why; nothing changed
  // for `id`); kPending when admission refused to make it.
  uint32_t FindOrCreate(uint64_t id);
  // A slot for `id` (its step 0), not yet in the LRU list or the index:
  // the least recently used row's once full (written to the tier first, if
  // there is one and it takes it), else a freed one or a new one.
  uint32_t NewSlot(uint64_t id);
  // Pull's and Apply's lookups with a tier: slots[i] for every id, or the
  // tier's read error before any row is used. Lets the call's rows exceed
  // the budget (call_rows_): the caller resets it and calls ShrinkToBudget.
  absl::Status FindOrCreateAll(absl::Span<const uint64_t> ids, std::vector<uint32_t>* slots);
  // Writes the tail row to the tier: false (counted, tier_error_) if refused.
  bool SpillTail();
  // With a tier: least recently used rows to the tier, their slots to
  // free_slots_, until max_rows are left or the tier refuses one.
  void ShrinkToBudget();

  // Slot accessors.
  unsigned char* SlotOf(uint32_t slot) const;  // the id, then the row
  uint64_t IdOf(uint32_t slot) const;
  void SetId(uint32_t slot, uint64_t id);
  float* RowOf(uint32_t slot) const;  // dim values, then the state
  uint32_t& PrevOf(uint32_t slot) const;
  uint32_t& NextOf(uint32_t slot) const;
  uint32_t* StepOf(uint32_t slot) const;  // null unless adam
  uint32_t* StampOf(uint32_t slot) const;  // null unless ttl
  // Why a row (its values; stamp: when it was last updated) is to be
  // evicted, or kKeep.
  enum class Expiry { kKeep, kTtl, kScore };
  Expiry ExpiryOf(const float* row, uint32_t stamp) const;
  void CountEviction(Expiry why);
  // Looks at `n` slots past hand_, evicting those Expired.
  void Sweep(size_t n);
  // Removes the row in `slot` from memory and the tier: false (nothing
  // changed) when the tier refuses to forget it.
  bool Evict(uint32_t slot);

  // LRU list: head_ most recent, tail_ least.
  void Unlink(uint32_t slot);
  void PushFront(uint32_t slot);

  // Index.
  size_t HomeBucket(uint64_t id) const;
  uint32_t Find(uint64_t id) const;  // kNone if absent
  // Whether made slot `slot` holds a row (a freed one holds a stale id).
  bool Live(uint32_t slot) const;
  // Appends the row in `slot` (values, state, step, stamp) to *c.
  void AppendSlot(uint32_t slot, EmbeddingTableContents* c) const;
  // Starts fetching a slot's cache lines (id, values, LRU links).
  void PrefetchSlot(uint32_t slot) const;
  // slots[i] = FindOrCreate(ids[i]) for each i, in order, in groups whose
  // cache misses overlap instead of following one another.
  // REQUIRES: CheckCapacity passed; slots holds ids.size() entries.
  void FindOrCreateMany(absl::Span<const uint64_t> ids, uint32_t* slots);
  // FindOrCreateMany's pipeline; without `create`, Find's (kNone: absent),
  // which changes nothing, so threads may run it at once.
  template <bool create>
  void LookupMany(absl::Span<const uint64_t> ids, uint32_t* slots);
  // The fast path's calls: use(i, slot of ids[i]) for each i, the row made
  // first when missing. Without evict_lru (where a use reorders the LRU
  // list), a call of at least options.parallel_ids ids uses the rows that
  // exist on up to a thread per core (`use` must touch only its row), then
  // makes and uses the missing ones in order on this thread: the rows,
  // state and order of making are those of one thread.
  template <typename Use>
  void ForEachRow(absl::Span<const uint64_t> ids, Use use);
  void IndexInsert(uint32_t slot);  // REQUIRES: its id absent
  void IndexErase(uint64_t id);     // REQUIRES: present
  void GrowIndexFor(int64_t rows);

  void Clear();
  // With track_changes: records that id's row was made or updated, or
  // removed.
  void MarkChanged(uint64_t id);
  void MarkRemoved(uint64_t id);
  // Pull, Apply and Prepare with a tier or admission: their rows are
  // looked up first (FindOrCreateAll), then `use(i, slot)` for each.
  template <typename Use>
  absl::Status CallWithLookups(absl::Span<const uint64_t> ids, Lookup lookup, Use use);

  const EmbeddingTableOptions options_;
  const int row_floats_;     // dim * (1 + state floats per element)
  const size_t slot_bytes_;  // the id, then row_floats_ floats
  const int chunk_shift_;    // slots per chunk = 1 << chunk_shift_
  const bool slow_path_;     // a tier, admission, ttl or min_l2: FindOrCreateAll
  // Floats a row takes in the tier: row_floats_, and with ttl its stamp.
  const int tier_floats_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<unsigned char*> slot_bases_;  // chunks_[c]->slots, one load away
  // Rows in memory. Slots [0, num_rows_ + free_slots_.size()) are made;
  // a table with a tier, ttl or min_l2 frees slots.
  int64_t num_rows_ = 0;
  std::vector<uint32_t> free_slots_;
  int64_t call_rows_ = 0;  // the rows a tiered call may hold past max_rows
  uint32_t head_;
  uint32_t tail_;
  std::vector<uint32_t> buckets_;  // slot numbers; kNone = empty
  absl::Status tier_error_;        // the tier's last write error
  absl::Status tier_read_error_;   // and read error
  TableCounters counters_;
  std::unique_ptr<AdmissionFilter> admission_;  // null: none
  Lookup lookup_ = Lookup::kApply;              // the current call's
  absl::Status read_error_;                     // the current call's tier read error
  std::vector<float> tier_row_;                 // a row read from the tier
  std::vector<float> spill_row_;                // with ttl: a row and its stamp for the tier
  int64_t clock_ = 0;                           // SetClock's
  uint32_t hand_ = 0;                           // Sweep's next slot
  struct ChangeSet;
  std::unique_ptr<ChangeSet> changes_;  // with track_changes; else null
};

// The lookups' accessors, inline in every file of the class.

inline unsigned char* EmbeddingTable::SlotOf(uint32_t slot) const {
  return slot_bases_[slot >> chunk_shift_] +
         static_cast<size_t>(slot & ((1u << chunk_shift_) - 1)) * slot_bytes_;
}

inline uint64_t EmbeddingTable::IdOf(uint32_t slot) const {
  uint64_t id;
  std::memcpy(&id, SlotOf(slot), sizeof(id));
  return id;
}

inline float* EmbeddingTable::RowOf(uint32_t slot) const {
  return reinterpret_cast<float*>(SlotOf(slot) + sizeof(uint64_t));
}

inline size_t EmbeddingTable::HomeBucket(uint64_t id) const {
  return static_cast<size_t>(Mix64(id ^ kIndexSalt)) & (buckets_.size() - 1);
}

inline uint32_t EmbeddingTable::Find(uint64_t id) const {
  if (buckets_.empty()) return kNone;
  const size_t mask = buckets_.size() - 1;
  for (size_t b = HomeBucket(id);; b = (b + 1) & mask) {
    const uint32_t slot = buckets_[b];
    if (slot == kNone || IdOf(slot) == id) return slot;
  }
}

struct EmbeddingTable::ChangeSet {
  absl::flat_hash_set<uint64_t> changed;
  absl::flat_hash_set<uint64_t> removed;
};

inline void EmbeddingTable::MarkChanged(uint64_t id) {
  if (changes_ == nullptr) return;
  changes_->changed.insert(id);
  if (!changes_->removed.empty()) changes_->removed.erase(id);
}

inline void EmbeddingTable::MarkRemoved(uint64_t id) {
  if (changes_ == nullptr) return;
  changes_->removed.insert(id);
  changes_->changed.erase(id);
}

inline bool EmbeddingTable::Live(uint32_t slot) const {
  return free_slots_.empty() || Find(IdOf(slot)) == slot;
}

}  // namespace ps

#endif  // PS_SERVER_CORE_EMBEDDING_TABLE_H_
