#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/model_spec.h"
#include "common/status_macros.h"
#include "server/core/sparse_tables.h"

// SparseTables' Export and Import (checkpoints), apart from its calls.

namespace ps {

EmbeddingTableOptions SparseTables::SavedOptions(const Table& t) {
  // As saved: no tier, and a tiered table's rows bounded by nothing but
  // the restoring server's settings (its budget bounds memory, not rows).
  EmbeddingTableOptions saved = t.rows->options();
  saved.tier = nullptr;
  if (t.tier != nullptr) saved.max_rows = 0;
  return saved;
}

absl::Status SparseTables::SnapshotTier(const Table& t, EmbeddingTableState* state) const {
  // Unique in the process: tables installed again (a restore) count on.
  static std::atomic<int64_t> made{0};
  const std::string dir =
      absl::StrCat(options_.tier_snapshot_dir, "/shard-", shard_id_, "-", ++made);
  RETURN_IF_ERROR(t.tier->Snapshot(dir));
  state->tier_snapshot = dir;
  // Removed with the last copy of the state, unless a checkpoint took it.
  state->tier_snapshot_owner = std::shared_ptr<const void>(nullptr, [dir](const void*) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<EmbeddingTableState>> SparseTables::Export(bool snapshot_tiers) const {
  std::vector<EmbeddingTableState> out;
  out.reserve(specs_.size());
  for (const TableSpec& spec : specs_) {
    const Table& t = tables_.at(spec.name);
    EmbeddingTableState state{SavedOptions(t), {}, {}, {}, nullptr};
    bool snapshot = false;
    if (snapshot_tiers && t.tier != nullptr && !options_.tier_snapshot_dir.empty()) {
      absl::Status s = SnapshotTier(t, &state);
      if (!s.ok() && !absl::IsUnimplemented(s)) return s;
      snapshot = s.ok();
    }
    ASSIGN_OR_RETURN(state.contents, t.rows->Export(/*tier_rows=*/!snapshot));
    out.push_back(std::move(state));
  }
  return out;
}

absl::Status MaterializeTierSnapshot(const TierSnapshotReader& read, EmbeddingTableState* state) {
  if (state->tier_snapshot.empty()) return absl::OkStatus();
  const EmbeddingTableOptions& o = state->options;
  if (!read) {
    return absl::FailedPreconditionError(
        absl::StrCat("embedding table \"", EscapeName(o.name),
                     "\": its rows on disk are a tier snapshot (", state->tier_snapshot,
                     "), which this server cannot read: start it with --table_memory_budget and "
                     "--table_dir"));
  }
  absl::flat_hash_set<uint64_t> skip(state->contents.ids.begin(), state->contents.ids.end());
  skip.insert(state->removed.begin(), state->removed.end());
  RETURN_IF_ERROR(read(state->tier_snapshot, EmbeddingTable::TierRowFloats(o),
                       [&](uint64_t id, absl::Span<const float> row, uint32_t step) {
                         if (!skip.contains(id)) {
                           EmbeddingTable::AppendTierRow(o, id, row, step, &state->contents);
                         }
                       }));
  state->tier_snapshot.clear();
  state->tier_snapshot_owner.reset();
  state->removed.clear();
  return absl::OkStatus();
}

absl::Status SparseTables::InstallRows(const EmbeddingTableState& state, Table* t) const {
  if (state.tier_snapshot.empty()) return t->rows->Import(state.contents);
  if (t->tier != nullptr) {
    absl::Status restored = t->tier->RestoreFrom(state.tier_snapshot);
    if (restored.ok()) {
      RETURN_IF_ERROR(t->rows->Import(state.contents, /*keep_tier=*/true));
      for (uint64_t id : state.removed) RETURN_IF_ERROR(t->tier->Delete(id));
      return absl::OkStatus();
    }
    if (!absl::IsUnimplemented(restored)) return restored;
  }
  EmbeddingTableState whole = state;
  RETURN_IF_ERROR(MaterializeTierSnapshot(options_.read_tier_snapshot, &whole));
  return t->rows->Import(whole.contents);
}

absl::StatusOr<std::vector<EmbeddingTableState>> SparseTables::ExportChanges() const {
  std::vector<EmbeddingTableState> out;
  out.reserve(specs_.size());
  for (const TableSpec& spec : specs_) {
    const Table& t = tables_.at(spec.name);
    ASSIGN_OR_RETURN(EmbeddingTable::Changes changes, t.rows->ExportChanges());
    EmbeddingTableState state{SavedOptions(t), std::move(changes.changed),
                              std::move(changes.removed)};
    out.push_back(std::move(state));
  }
  return out;
}

void SparseTables::ResetChanges() {
  for (auto& [name, t] : tables_) t.rows->ResetChanges();
}

absl::Status SparseTables::Import(const std::vector<EmbeddingTableState>& tables,
                                  const std::vector<int64_t>& last_row_seq) {
  if (last_row_seq.size() > static_cast<size_t>(num_workers_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the state holds row-push seqs of ", last_row_seq.size(), " workers, not ", num_workers_));
  }
  std::vector<TableSpec> specs;
  for (const EmbeddingTableState& s : tables) {
    specs.push_back(TableSpec{s.options.name, s.options.dim, s.options.seed, s.options.init_scale});
  }
  if (absl::Status s = Install(std::move(specs), &tables); !s.ok()) return s;
  last_row_seq_ = last_row_seq;
  last_row_seq_.resize(num_workers_, 0);
  dense_accepted_.assign(num_workers_, false);
  return absl::OkStatus();
}

}  // namespace ps
