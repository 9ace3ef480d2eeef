#include "server/checkpoint/reshard.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"
#include "common/optimizer.h"
#include "common/partition.h"
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

namespace {

// The states of every position of the checkpoint of `from_shards` in `dir`
// at the newest version they all have, their tier snapshots read in.
absl::StatusOr<std::vector<ShardState>> LoadCompleteStates(const std::string& dir, int from_shards,
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
      return states;
    }
    version = lowest;
  }
}

// Where each element of shard `shard` of `num_shards` lives in the whole
// tensors: calls f(tensor, offset in the tensor, offset in the shard's
// flat buffer, length) for each slice.
template <typename F>
void ForEachSlice(const ModelSpec& spec, int num_shards, int shard, F f) {
  for (const SliceRange& r : ShardSlices(spec, num_shards, shard)) {
    f(r.tensor_index, r.offset, r.flat_offset, r.length);
  }
}

}  // namespace

absl::StatusOr<ReshardedTables> LoadTablesForShard(const std::string& dir, int from_shards,
                                                   int shard_id, int num_shards,
                                                   const SpecLimits& limits,
                                                   const TierSnapshotReader& read) {
  ASSIGN_OR_RETURN(std::vector<ShardState> states,
                   LoadCompleteStates(dir, from_shards, limits, read));
  ASSIGN_OR_RETURN(std::vector<EmbeddingTableState> tables,
                   TablesForShard(states, shard_id, num_shards));
  return ReshardedTables{states[0].version, std::move(tables)};
}

absl::StatusOr<ShardState> StateForShard(const std::vector<ShardState>& states, int shard_id,
                                         int num_shards) {
  ASSIGN_OR_RETURN(std::vector<EmbeddingTableState> tables,
                   TablesForShard(states, shard_id, num_shards));  // checks the positions
  std::vector<const ShardState*> by_id(states.size());
  for (const ShardState& s : states) by_id[s.shard_id] = &s;
  const ShardState& first = *by_id[0];
  const int from = first.num_shards;
  ShardState out;
  out.shard_id = shard_id;
  out.num_shards = num_shards;
  out.num_workers = first.num_workers;
  out.spec = first.spec;
  out.version = first.version;
  out.optimizer = first.optimizer;
  out.incarnation = first.incarnation;
  out.last_seq = first.last_seq;
  out.last_row_seq = first.last_row_seq;
  out.tables = std::move(tables);
  std::set<int> seen;
  for (const ShardState* s : by_id) {
    const std::string who = absl::StrCat("reshard: shard ", s->shard_id, " of ", from, " ");
    const auto differs = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(who, "differs from shard 0 in its ", what));
    };
    if (s->version != first.version) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, "is at version ", s->version, ", shard 0 at ", first.version));
    }
    if (!CompareModelSpecs(first.spec, s->spec).ok()) return differs("model spec");
    if (s->optimizer != first.optimizer) return differs("optimizer");
    if (s->num_workers != first.num_workers) return differs("worker count");
    if (s->last_seq != first.last_seq) {
      return differs("last push seqs (a push some shards applied and others not)");
    }
    // Row pushes go only to the shards that own some of their ids, so the
    // shards' row seqs differ: the newest per worker (see the header).
    if (s->last_row_seq.size() > out.last_row_seq.size()) {
      out.last_row_seq.resize(s->last_row_seq.size(), 0);
    }
    for (size_t w = 0; w < s->last_row_seq.size(); ++w) {
      out.last_row_seq[w] = std::max(out.last_row_seq[w], s->last_row_seq[w]);
    }
    if (s->delta_base >= 0) return absl::InvalidArgumentError(absl::StrCat(who, "is a delta"));
    // Each shard has a run of its own: this one continues shard 0's, past
    // every incarnation the old shards reached.
    out.incarnation.start = std::max(out.incarnation.start, s->incarnation.start);
    seen.insert(s->workers_seen.begin(), s->workers_seen.end());
  }
  out.workers_seen.assign(seen.begin(), seen.end());
  if (first.spec.empty()) return out;  // no parameters yet

  // The whole tensors, and the optimizer's buffers of each, from the slices.
  std::vector<std::vector<float>> weights(first.spec.size());
  for (size_t t = 0; t < first.spec.size(); ++t) weights[t].resize(first.spec[t].num_elements());
  OptimizerStateParts parts;
  std::vector<std::vector<std::vector<float>>> buffers;  // [buffer][tensor][element]
  for (const ShardState* s : by_id) {
    const std::string who = absl::StrCat("reshard: shard ", s->shard_id, " of ", from, ": ");
    const int64_t mine = SliceElements(ShardSlices(first.spec, from, s->shard_id));
    if (static_cast<int64_t>(s->weights.size()) != mine) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, s->weights.size(), " weights where its slices hold ", mine));
    }
    absl::StatusOr<OptimizerStateParts> p = SplitOptimizerState(s->optimizer_state);
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(who, p.status().message()));
    if (!p->name.empty() && p->elements != mine) {
      return absl::InvalidArgumentError(absl::StrCat(who, "an optimizer state of ", p->elements,
                                                     " elements where its slices hold ", mine));
    }
    if (s == by_id[0]) {
      parts = *p;
      buffers.assign(p->buffers.size(), std::vector<std::vector<float>>(weights.size()));
      for (auto& b : buffers) {
        for (size_t t = 0; t < weights.size(); ++t) b[t].resize(weights[t].size());
      }
    } else if (p->name != parts.name || p->start != parts.start ||
               p->buffers.size() != parts.buffers.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, "its optimizer state differs from shard 0's in kind or start"));
    }
    ForEachSlice(
        first.spec, from, s->shard_id, [&](int t, int64_t offset, int64_t flat, int64_t length) {
          std::copy_n(s->weights.begin() + flat, length, weights[t].begin() + offset);
          for (size_t k = 0; k < buffers.size(); ++k) {
            std::copy_n(p->buffers[k].begin() + flat, length, buffers[k][t].begin() + offset);
          }
        });
  }
  // Cut again as this shard owns them.
  const int64_t n = SliceElements(ShardSlices(first.spec, num_shards, shard_id));
  out.weights.resize(n);
  for (std::vector<float>& b : parts.buffers) b.assign(n, 0.0f);
  parts.elements = n;
  ForEachSlice(
      first.spec, num_shards, shard_id, [&](int t, int64_t offset, int64_t flat, int64_t length) {
        std::copy_n(weights[t].begin() + offset, length, out.weights.begin() + flat);
        for (size_t k = 0; k < buffers.size(); ++k) {
          std::copy_n(buffers[k][t].begin() + offset, length, parts.buffers[k].begin() + flat);
        }
      });
  out.optimizer_state = JoinOptimizerState(parts);
  return out;
}

absl::StatusOr<ShardState> LoadStateForShard(const std::string& dir, int from_shards, int shard_id,
                                             int num_shards, const SpecLimits& limits,
                                             const TierSnapshotReader& read) {
  ASSIGN_OR_RETURN(std::vector<ShardState> states,
                   LoadCompleteStates(dir, from_shards, limits, read));
  return StateForShard(states, shard_id, num_shards);
}

}  // namespace ps
