#include "server/checkpoint/checkpoint_delta.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {
namespace {

// Floats per row of values, of state, and step counts per row, of `c`.
struct RowShape {
  size_t values = 0, state = 0, steps = 0, stamps = 0;
};

absl::StatusOr<RowShape> ShapeOf(const EmbeddingTableContents& c, const std::string& name) {
  const size_t n = c.ids.size();
  RowShape s;
  s.values = static_cast<size_t>(c.dim);
  if (n > 0) s.state = c.state.size() / n;
  if (n > 0) s.steps = c.adam_steps.size() / n;
  if (n > 0) s.stamps = c.stamps.size() / n;
  if (c.values.size() != n * s.values || c.state.size() != n * s.state ||
      c.adam_steps.size() != n * s.steps || s.steps > 1 || c.stamps.size() != n * s.stamps ||
      s.stamps > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint delta: table \"", name, "\" holds rows of uneven sizes"));
  }
  return s;
}

// Appends row i of `from` to `to`.
void AppendRow(const EmbeddingTableContents& from, size_t i, const RowShape& s,
               EmbeddingTableContents* to) {
  to->ids.push_back(from.ids[i]);
  to->values.insert(to->values.end(), from.values.begin() + i * s.values,
                    from.values.begin() + (i + 1) * s.values);
  to->state.insert(to->state.end(), from.state.begin() + i * s.state,
                   from.state.begin() + (i + 1) * s.state);
  if (s.steps > 0) to->adam_steps.push_back(from.adam_steps[i]);
  if (s.stamps > 0) to->stamps.push_back(from.stamps[i]);
}

// `delta`'s table applied to `base`'s, into *out (rows and removed ids).
absl::Status MergeTable(const EmbeddingTableState& base, const EmbeddingTableState& delta,
                        bool base_is_delta, EmbeddingTableState* out) {
  // Rows of a tier snapshot are not in base.contents: their removals stay.
  const bool keep_removed = base_is_delta || !base.tier_snapshot.empty();
  out->tier_snapshot = base.tier_snapshot;
  out->tier_snapshot_owner = base.tier_snapshot_owner;
  const std::string& name = base.options.name;
  const EmbeddingTableContents& b = base.contents;
  const EmbeddingTableContents& d = delta.contents;
  if (b.dim != d.dim || b.optimizer != d.optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint delta: table \"", name, "\" has another dim or optimizer than its base"));
  }
  ASSIGN_OR_RETURN(RowShape bs, ShapeOf(b, name));
  ASSIGN_OR_RETURN(RowShape ds, ShapeOf(d, name));
  // A table without rows has no shape of its own: take the other's.
  RowShape s = b.ids.empty() ? ds : bs;
  if (!b.ids.empty() && !d.ids.empty() &&
      (bs.state != ds.state || bs.steps != ds.steps || bs.stamps != ds.stamps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint delta: table \"", name, "\" rows differ in size from its base's"));
  }
  absl::flat_hash_map<uint64_t, size_t> changed;  // id -> row of d
  changed.reserve(d.ids.size());
  for (size_t j = 0; j < d.ids.size(); ++j) changed.emplace(d.ids[j], j);
  const absl::flat_hash_set<uint64_t> removed(delta.removed.begin(), delta.removed.end());
  const bool move_to_end = base.options.evict_lru;

  out->options = delta.options;
  EmbeddingTableContents& c = out->contents;
  c.dim = b.dim;
  c.optimizer = b.optimizer;
  c.ids.reserve(b.ids.size() + d.ids.size());
  c.values.reserve((b.ids.size() + d.ids.size()) * s.values);
  c.state.reserve((b.ids.size() + d.ids.size()) * s.state);
  std::vector<bool> placed(d.ids.size(), false);
  for (size_t i = 0; i < b.ids.size(); ++i) {
    const uint64_t id = b.ids[i];
    if (removed.contains(id)) continue;
    auto it = changed.find(id);
    if (it == changed.end()) {
      AppendRow(b, i, s, &c);
    } else if (!move_to_end) {
      AppendRow(d, it->second, s, &c);
      placed[it->second] = true;
    }
  }
  for (size_t j = 0; j < d.ids.size(); ++j) {
    if (!placed[j]) AppendRow(d, j, s, &c);
  }
  if (keep_removed) {
    // Gone since base's base: gone before and not made again, or gone now.
    absl::flat_hash_set<uint64_t> gone(delta.removed.begin(), delta.removed.end());
    for (uint64_t id : base.removed) {
      if (!changed.contains(id)) gone.insert(id);
    }
    out->removed.assign(gone.begin(), gone.end());
    std::sort(out->removed.begin(), out->removed.end());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyDelta(ShardState delta, ShardState* base) {
  if (delta.delta_base < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint of version ", delta.version, " is not a delta"));
  }
  if (delta.delta_base != base->version) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint delta of version ", delta.version,
                                                      " is on version ", delta.delta_base, ", not ",
                                                      base->version));
  }
  if (delta.shard_id != base->shard_id || delta.num_shards != base->num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint delta of shard ", delta.shard_id, " of ", delta.num_shards,
                     " on a state of shard ", base->shard_id, " of ", base->num_shards));
  }
  if (delta.tables.size() != base->tables.size()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint delta has ", delta.tables.size(),
                                                   " tables, its base ", base->tables.size()));
  }
  std::vector<EmbeddingTableState> tables(base->tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    if (delta.tables[t].options.name != base->tables[t].options.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint delta's table ", t, " is \"", delta.tables[t].options.name,
                       "\", its base's \"", base->tables[t].options.name, "\""));
    }
    RETURN_IF_ERROR(
        MergeTable(base->tables[t], delta.tables[t], base->delta_base >= 0, &tables[t]));
  }
  const int64_t base_of_base = base->delta_base;
  *base = std::move(delta);
  base->tables = std::move(tables);
  base->delta_base = base_of_base;
  return absl::OkStatus();
}

}  // namespace ps
