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

void EmbeddingTable::AppendTierRow(const EmbeddingTableOptions& options, uint64_t id,
                                   absl::Span<const float> row, uint32_t step,
                                   EmbeddingTableContents* c) {
  const size_t dim = options.dim;
  const size_t row_floats = dim * (1 + options.optimizer.StateFloatsPerElement());
  c->ids.push_back(id);
  c->values.insert(c->values.end(), row.begin(), row.begin() + dim);
  c->state.insert(c->state.end(), row.begin() + dim, row.begin() + row_floats);
  if (options.optimizer.HasRowStep()) c->adam_steps.push_back(step);
  if (options.ttl > 0) {  // the stamp's bits, after the row
    uint32_t stamp;
    std::memcpy(&stamp, &row[row_floats], sizeof(stamp));
    c->stamps.push_back(stamp);
  }
}

void EmbeddingTable::AppendSlot(uint32_t slot, EmbeddingTableContents* c) const {
  const float* row = RowOf(slot);
  c->ids.push_back(IdOf(slot));
  c->values.insert(c->values.end(), row, row + options_.dim);
  c->state.insert(c->state.end(), row + options_.dim, row + row_floats_);
  if (const uint32_t* step = StepOf(slot)) c->adam_steps.push_back(*step);
  if (const uint32_t* stamp = StampOf(slot)) c->stamps.push_back(*stamp);
}

absl::StatusOr<EmbeddingTableContents> EmbeddingTable::Export(bool tier_rows) const {
  EmbeddingTableContents c;
  c.dim = options_.dim;
  c.optimizer = options_.optimizer.kind;
  c.ids.reserve(num_rows_);
  c.values.reserve(num_rows_ * options_.dim);
  c.state.reserve(num_rows_ * (row_floats_ - options_.dim));
  if (options_.tier != nullptr && tier_rows) {
    // The tier's copy of a row in memory is older: memory's wins.
    RETURN_IF_ERROR(
        options_.tier->ForEach([&](uint64_t id, absl::Span<const float> row, uint32_t step) {
          if (Find(id) == kNone) AppendTierRow(options_, id, row, step, &c);
        }));
  }
  if (options_.evict_lru) {
    for (uint32_t slot = tail_; slot != kNone; slot = PrevOf(slot)) AppendSlot(slot, &c);
  } else {
    // In the order made; slots freed by ttl or min_l2 hold no row.
    const int64_t made = num_rows_ + static_cast<int64_t>(free_slots_.size());
    for (int64_t slot = 0; slot < made; ++slot) {
      if (Live(static_cast<uint32_t>(slot))) AppendSlot(static_cast<uint32_t>(slot), &c);
    }
  }
  return c;
}

absl::StatusOr<EmbeddingTable::Changes> EmbeddingTable::ExportChanges() const {
  if (changes_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("embedding table \"", options_.name, "\" keeps no changes"));
  }
  Changes out;
  EmbeddingTableContents& c = out.changed;
  c.dim = options_.dim;
  c.optimizer = options_.optimizer.kind;
  std::vector<uint64_t> ids(changes_->changed.begin(), changes_->changed.end());
  std::sort(ids.begin(), ids.end());
  // Rows in memory, and (evict_lru) those in the tier first, by id, then
  // memory's least recently used first: the order ApplyDelta keeps.
  std::vector<float> tier_row(tier_floats_);
  for (uint64_t id : ids) {
    const uint32_t slot = Find(id);
    if (slot != kNone) {
      if (!options_.evict_lru) AppendSlot(slot, &c);  // else by the LRU walk below
      continue;
    }
    uint32_t step = 0;
    absl::StatusOr<bool> got = options_.tier != nullptr
                                   ? options_.tier->Get(id, absl::MakeSpan(tier_row), &step)
                                   : absl::StatusOr<bool>(false);
    if (!got.ok()) return got.status();
    if (!*got) {
      return absl::InternalError(
          absl::StrCat("embedding table \"", options_.name, "\": changed row ", id, " is nowhere"));
    }
    AppendTierRow(options_, id, tier_row, step, &c);
  }
  if (options_.evict_lru && !ids.empty()) {
    for (uint32_t slot = tail_; slot != kNone; slot = PrevOf(slot)) {
      if (changes_->changed.contains(IdOf(slot))) AppendSlot(slot, &c);
    }
  }
  out.removed.insert(out.removed.end(), changes_->removed.begin(), changes_->removed.end());
  std::sort(out.removed.begin(), out.removed.end());
  return out;
}

void EmbeddingTable::ResetChanges() {
  if (changes_ == nullptr) return;
  absl::flat_hash_set<uint64_t>().swap(changes_->changed);
  absl::flat_hash_set<uint64_t>().swap(changes_->removed);
}

absl::Status EmbeddingTable::Import(const EmbeddingTableContents& c, bool keep_tier) {
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
  if (!c.stamps.empty() && c.stamps.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, n, " ids need none or ", n, " stamps; got ", c.stamps.size()));
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
  if (options_.tier != nullptr && !keep_tier) RETURN_IF_ERROR(options_.tier->Clear());
  GrowIndexFor(std::min(static_cast<int64_t>(n), RowLimit()));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t slot = NewSlot(c.ids[i]);
    float* row = RowOf(slot);
    std::memcpy(row, c.values.data() + i * dim, dim * sizeof(float));
    if (state > 0) std::memcpy(row + dim, c.state.data() + i * state, state * sizeof(float));
    if (uint32_t* step = StepOf(slot)) *step = c.adam_steps[i];
    if (uint32_t* stamp = StampOf(slot); stamp != nullptr && !c.stamps.empty()) {
      *stamp = c.stamps[i];
    }
    IndexInsert(slot);
    if (options_.evict_lru) PushFront(slot);
  }
  ResetChanges();  // the new base
  return absl::OkStatus();
}

}  // namespace ps
