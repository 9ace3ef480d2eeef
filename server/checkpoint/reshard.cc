#include "server/checkpoint/reshard.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/core/sparse_tables.h"

namespace ps {

namespace {

bool SameTable(const EmbeddingTableState& a, const EmbeddingTableState& b) {
  const EmbeddingTableOptions &x = a.options, &y = b.options;
  return x.name == y.name && x.dim == y.dim && x.seed == y.seed && x.init_scale == y.init_scale &&
         x.optimizer.kind == y.optimizer.kind;
}

}  // namespace

absl::StatusOr<std::vector<EmbeddingTableState>> TablesForShard(
    const std::vector<ShardState>& states, int shard_id, int num_shards) {
  if (num_shards < 1 || shard_id < 0 || shard_id >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("reshard: shard ", shard_id, " of ", num_shards, " is no position"));
  }
  if (states.empty()) return absl::InvalidArgumentError("reshard: no checkpoint states");
  const int from = states[0].num_shards;
  std::vector<bool> seen(from, false);
  for (const ShardState& s : states) {
    if (s.num_shards != from || s.shard_id < 0 || s.shard_id >= from || seen[s.shard_id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("reshard: the states are not one of each position of ", from,
                       " shards (shard ", s.shard_id, " of ", s.num_shards, ")"));
    }
    seen[s.shard_id] = true;
    if (s.tables.size() != states[0].tables.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reshard: shard ", s.shard_id, " holds ", s.tables.size(), " tables, shard ",
                       states[0].shard_id, " ", states[0].tables.size()));
    }
  }
  if (static_cast<int>(states.size()) != from) {
    return absl::InvalidArgumentError(
        absl::StrCat("reshard: ", states.size(), " states of a checkpoint of ", from, " shards"));
  }
  std::vector<EmbeddingTableState> out;
  for (size_t t = 0; t < states[0].tables.size(); ++t) {
    const EmbeddingTableState& first = states[0].tables[t];
    EmbeddingTableState table;
    table.options = first.options;
    EmbeddingTableContents& c = table.contents;
    c.dim = first.contents.dim;
    c.optimizer = first.contents.optimizer;
    absl::flat_hash_set<uint64_t> ids;
    for (const ShardState& s : states) {
      const EmbeddingTableState& part = s.tables[t];
      if (!SameTable(part, first) || part.contents.dim != c.dim ||
          part.contents.optimizer != c.optimizer) {
        return absl::InvalidArgumentError(
            absl::StrCat("reshard: table ", t, " of shard ", s.shard_id, " (\"", part.options.name,
                         "\") differs from shard ", states[0].shard_id, "'s"));
      }
      const EmbeddingTableContents& p = part.contents;
      const size_t n = p.ids.size(), dim = p.dim, st = n == 0 ? 0 : p.state.size() / n;
      for (size_t i = 0; i < n; ++i) {
        if (!ids.insert(p.ids[i]).second) {
          return absl::InvalidArgumentError(absl::StrCat("reshard: table \"", first.options.name,
                                                         "\": id ", p.ids[i],
                                                         " is held by two shards"));
        }
        if (ShardOfId(p.ids[i], num_shards) != shard_id) continue;
        c.ids.push_back(p.ids[i]);
        c.values.insert(c.values.end(), p.values.begin() + i * dim,
                        p.values.begin() + (i + 1) * dim);
        c.state.insert(c.state.end(), p.state.begin() + i * st, p.state.begin() + (i + 1) * st);
        if (!p.adam_steps.empty()) c.adam_steps.push_back(p.adam_steps[i]);
        if (!p.stamps.empty()) c.stamps.push_back(p.stamps[i]);
      }
    }
    out.push_back(std::move(table));
  }
  return out;
}

absl::StatusOr<ReshardedTables> LoadTablesForShard(const std::string& dir, int from_shards,
                                                   int shard_id, int num_shards,
                                                   const SpecLimits& limits,
                                                   const TierSnapshotReader& read) {
  if (from_shards < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reshard: the checkpoint's shard count must be >= 1, got ", from_shards));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("reshard: ", dir, " is not a directory"));
  }
  int64_t version = std::numeric_limits<int64_t>::max();
  // The newest version every position has: each position's newest at or
  // below the candidate, until they agree.
  for (;;) {
    std::vector<ShardState> states;
    int64_t lowest = version;
    for (int s = 0; s < from_shards; ++s) {
      CheckpointStoreOptions o;
      o.dir = dir;
      o.shard_id = s;
      o.num_shards = from_shards;
      ASSIGN_OR_RETURN(std::unique_ptr<CheckpointStore> store, CheckpointStore::Open(o));
      ASSIGN_OR_RETURN(std::optional<CheckpointStore::Loaded> loaded,
                       store->LoadNewest(limits, version));
      if (!loaded.has_value()) {
        return absl::NotFoundError(absl::StrCat("reshard: no checkpoint of shard ", s, " of ",
                                                from_shards, " in ", dir,
                                                version == std::numeric_limits<int64_t>::max()
                                                    ? ""
                                                    : absl::StrCat(" at version <= ", version)));
      }
      lowest = std::min(lowest, loaded->state.version);
      states.push_back(std::move(loaded->state));
    }
    const bool agree = std::all_of(states.begin(), states.end(),
                                   [&](const ShardState& s) { return s.version == lowest; });
    if (agree) {
      for (ShardState& s : states) {
        for (EmbeddingTableState& t : s.tables) RETURN_IF_ERROR(MaterializeTierSnapshot(read, &t));
      }
      ASSIGN_OR_RETURN(std::vector<EmbeddingTableState> tables,
                       TablesForShard(states, shard_id, num_shards));
      return ReshardedTables{lowest, std::move(tables)};
    }
    version = lowest;
  }
}

}  // namespace ps
