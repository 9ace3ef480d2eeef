#include "server/checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/float_bytes.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "common/sparse_optimizer.h"
#include "common/status_macros.h"
#include "proto/checkpoint.pb.h"
#include "rpc/wire.h"
#include "server/core/embedding_table.h"

namespace ps {
namespace {

void TableToProto(const EmbeddingTableState& t, v1::EmbeddingTableSnapshot* p) {
  const EmbeddingTableOptions& o = t.options;
  p->set_name(o.name);
  p->set_dim(o.dim);
  p->set_seed(o.seed);
  p->set_init_scale(o.init_scale);
  p->set_max_rows(o.max_rows);
  p->set_evict_lru(o.evict_lru);
  v1::SparseOptimizerSnapshot* opt = p->mutable_optimizer();
  opt->set_kind(std::string(SparseOptimizerName(o.optimizer.kind)));
  opt->set_lr(o.optimizer.lr);
  opt->set_adagrad_initial_accumulator(o.optimizer.adagrad_initial_accumulator);
  opt->set_adam_beta1(o.optimizer.adam_beta1);
  opt->set_adam_beta2(o.optimizer.adam_beta2);
  opt->set_adam_eps(o.optimizer.adam_eps);
  opt->set_ftrl_l1(o.optimizer.ftrl_l1);
  opt->set_ftrl_l2(o.optimizer.ftrl_l2);
  opt->set_ftrl_beta(o.optimizer.ftrl_beta);
  const EmbeddingTableContents& c = t.contents;
  p->set_num_rows(static_cast<int64_t>(c.ids.size()));
  p->mutable_ids()->Add(c.ids.begin(), c.ids.end());
  EncodeFloats(c.values, p->mutable_values());
  EncodeFloats(c.state, p->mutable_state());
  p->mutable_adam_steps()->Add(c.adam_steps.begin(), c.adam_steps.end());
  p->mutable_removed_ids()->Add(t.removed.begin(), t.removed.end());
  p->mutable_stamps()->Add(c.stamps.begin(), c.stamps.end());
  p->set_tier_snapshot(t.tier_snapshot);
}

// `a * b` in *out, or false if it passes int64. REQUIRES: a, b >= 0.
bool CheckedMul(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// The options of table snapshot `p`, after checking everything it holds
// against them (but not its name's uniqueness, nor the limit on all
// tables); its rows' values count in *value_floats.
absl::StatusOr<EmbeddingTableOptions> CheckTable(const v1::EmbeddingTableSnapshot& p,
                                                 int64_t* value_floats) {
  const std::string table = absl::StrCat("checkpoint embedding table \"", p.name(), "\": ");
  if (p.dim() < 1 || p.dim() > kMaxCheckpointEmbeddingDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, "dim must be in [1, ", kMaxCheckpointEmbeddingDim, "], got ", p.dim()));
  }
  absl::StatusOr<SparseOptimizerKind> kind = ParseSparseOptimizerKind(p.optimizer().kind());
  if (!kind.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(table, kind.status().message()));
  }
  EmbeddingTableOptions o;
  o.name = p.name();
  o.dim = p.dim();
  o.seed = p.seed();
  o.init_scale = p.init_scale();
  o.max_rows = p.max_rows();
  o.evict_lru = p.evict_lru();
  o.optimizer.kind = *kind;
  o.optimizer.lr = p.optimizer().lr();
  o.optimizer.adagrad_initial_accumulator = p.optimizer().adagrad_initial_accumulator();
  o.optimizer.adam_beta1 = p.optimizer().adam_beta1();
  o.optimizer.adam_beta2 = p.optimizer().adam_beta2();
  o.optimizer.adam_eps = p.optimizer().adam_eps();
  o.optimizer.ftrl_l1 = p.optimizer().ftrl_l1();
  o.optimizer.ftrl_l2 = p.optimizer().ftrl_l2();
  o.optimizer.ftrl_beta = p.optimizer().ftrl_beta();
  absl::Status valid = o.Validate();  // names the table itself
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("checkpoint ", valid.message()));

  const int64_t rows = p.num_rows();
  if (rows < 0) return absl::InvalidArgumentError(absl::StrCat(table, "num_rows ", rows));
  int64_t values = 0, state = 0, values_bytes = 0, state_bytes = 0;
  if (!CheckedMul(rows, o.dim, &values) ||
      !CheckedMul(values, o.optimizer.StateFloatsPerElement(), &state) ||
      !CheckedMul(values, sizeof(float), &values_bytes) ||
      !CheckedMul(state, sizeof(float), &state_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, rows, " rows of dim ", o.dim, " overflow the sizes"));
  }
  const int64_t row_limit = o.max_rows > 0 ? o.max_rows : EmbeddingTable::kMaxRows;
  if (rows > row_limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, rows, " rows pass max_rows ", row_limit));
  }
  const int64_t steps = o.optimizer.HasRowStep() ? rows : 0;
  if (p.ids_size() != rows || static_cast<int64_t>(p.values().size()) != values_bytes ||
      static_cast<int64_t>(p.state().size()) != state_bytes || p.adam_steps_size() != steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, rows, " rows need ", rows, " ids, ", values_bytes, " bytes of values, ",
        state_bytes, " bytes of state and ", steps, " adam steps; got ", p.ids_size(), ", ",
        p.values().size(), ", ", p.state().size(), " and ", p.adam_steps_size()));
  }
  if (!p.tier_snapshot().empty()) {
    const std::filesystem::path snapshot(p.tier_snapshot());
    if (snapshot.is_absolute() ||
        std::any_of(snapshot.begin(), snapshot.end(), [](const auto& c) { return c == ".."; })) {
      return absl::InvalidArgumentError(absl::StrCat(table, "tier snapshot \"", p.tier_snapshot(),
                                                     "\" is not a path below the checkpoint's"));
    }
  }
  if (p.stamps_size() != 0 && p.stamps_size() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, rows, " rows need none or ", rows, " stamps; got ", p.stamps_size()));
  }
  // Removed ids (deltas only) are neither repeated nor among the rows.
  std::vector<uint64_t> sorted(p.ids().begin(), p.ids().end());
  sorted.insert(sorted.end(), p.removed_ids().begin(), p.removed_ids().end());
  std::sort(sorted.begin(), sorted.end());
  auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    return absl::InvalidArgumentError(absl::StrCat(table, "id ", *dup, " repeats"));
  }
  *value_floats = values;
  return o;
}

// The tables of `snap`, all checked (CheckTable, unique names, the rows'
// values of all tables within limits.max_model_elements) before any is
// built.
absl::StatusOr<std::vector<EmbeddingTableState>> DecodeTables(const v1::ShardSnapshot& snap,
                                                              const SpecLimits& limits) {
  std::vector<EmbeddingTableOptions> options;
  options.reserve(snap.tables_size());
  absl::flat_hash_set<std::string> names;
  int64_t total_values = 0;
  for (int i = 0; i < snap.tables_size(); ++i) {
    const v1::EmbeddingTableSnapshot& p = snap.tables(i);
    if (p.name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint embedding table ", i, " has no name"));
    }
    if (!names.insert(p.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint embedding table \"", p.name(), "\" appears twice"));
    }
    int64_t values = 0;
    ASSIGN_OR_RETURN(EmbeddingTableOptions o, CheckTable(p, &values));
    total_values += values;  // each at most kMaxRows * kMaxCheckpointEmbeddingDim
    if (total_values > limits.max_model_elements) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpoint embedding table \"", p.name(), "\": the tables' rows hold ",
          total_values, " values, past max_model_elements ", limits.max_model_elements));
    }
    options.push_back(std::move(o));
  }
  std::vector<EmbeddingTableState> tables(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    const v1::EmbeddingTableSnapshot& p = snap.tables(static_cast<int>(i));
    EmbeddingTableState& t = tables[i];
    t.options = std::move(options[i]);
    EmbeddingTableContents& c = t.contents;
    c.dim = t.options.dim;
    c.optimizer = t.options.optimizer.kind;
    c.ids.assign(p.ids().begin(), p.ids().end());
    c.values.resize(p.values().size() / sizeof(float));
    CopyPieces({p.values()}, c.values.data());
    c.state.resize(p.state().size() / sizeof(float));
    CopyPieces({p.state()}, c.state.data());
    c.adam_steps.assign(p.adam_steps().begin(), p.adam_steps().end());
    c.stamps.assign(p.stamps().begin(), p.stamps().end());
    t.tier_snapshot = p.tier_snapshot();
    t.removed.assign(p.removed_ids().begin(), p.removed_ids().end());
    std::sort(t.removed.begin(), t.removed.end());
  }
  return tables;
}

}  // namespace

std::string EncodeShardState(const ShardState& state,
                             const std::function<std::string(const std::string&)>& snapshot_path) {
  v1::ShardSnapshot snap;
  snap.set_shard_id(state.shard_id);
  snap.set_num_shards(state.num_shards);
  ModelSpecToProto(state.spec, snap.mutable_spec());
  snap.set_version(state.version);
  AppendFlatSlices(state.spec, ShardSlices(state.spec, state.num_shards, state.shard_id),
                   state.weights, snap.mutable_weights());
  snap.set_num_workers(state.num_workers);
  snap.mutable_workers_seen()->Add(state.workers_seen.begin(), state.workers_seen.end());
  snap.set_optimizer(state.optimizer);
  snap.set_optimizer_state(state.optimizer_state);
  snap.mutable_incarnation()->set_run_id(state.incarnation.run_id);
  snap.mutable_incarnation()->set_start(state.incarnation.start);
  snap.mutable_last_seq()->Add(state.last_seq.begin(), state.last_seq.end());
  snap.mutable_last_row_seq()->Add(state.last_row_seq.begin(), state.last_row_seq.end());
  for (const EmbeddingTableState& t : state.tables) {
    v1::EmbeddingTableSnapshot* p = snap.add_tables();
    TableToProto(t, p);
    if (snapshot_path && !t.tier_snapshot.empty())
      p->set_tier_snapshot(snapshot_path(t.tier_snapshot));
  }
  if (state.delta_base >= 0) {
    snap.set_delta(true);
    snap.set_delta_base(state.delta_base);
  }
  return snap.SerializeAsString();
}

absl::StatusOr<ShardState> DecodeShardState(absl::string_view bytes, const SpecLimits& limits) {
  v1::ShardSnapshot snap;
  if (!snap.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("checkpoint does not parse as a ps.v1.ShardSnapshot");
  }
  if (snap.num_shards() < 1 || snap.shard_id() < 0 || snap.shard_id() >= snap.num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint names shard ", snap.shard_id(),
                                                   " of ", snap.num_shards()));
  }
  if (snap.num_workers() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint names num_workers ", snap.num_workers()));
  }
  if (snap.delta() && (snap.delta_base() < 0 || snap.delta_base() > snap.version())) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint delta of version ", snap.version(),
                                                   " names base version ", snap.delta_base()));
  }
  ASSIGN_OR_RETURN(std::vector<EmbeddingTableState> tables, DecodeTables(snap, limits));
  if (!snap.delta()) {
    for (const EmbeddingTableState& t : tables) {
      if (!t.removed.empty() && t.tier_snapshot.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint embedding table \"", t.options.name,
                         "\": removed ids in a full checkpoint (only deltas have them)"));
      }
    }
  }
  ShardState state;
  state.delta_base = snap.delta() ? snap.delta_base() : -1;
  state.tables = std::move(tables);
  state.shard_id = snap.shard_id();
  state.num_shards = snap.num_shards();
  state.num_workers = snap.num_workers();
  state.workers_seen.assign(snap.workers_seen().begin(), snap.workers_seen().end());
  state.spec = ModelSpecFromProto(snap.spec());
  RETURN_IF_ERROR(ValidateModelSpec(state.spec, limits));
  state.version = snap.version();
  state.optimizer = snap.optimizer();
  state.optimizer_state = snap.optimizer_state();
  state.incarnation = Incarnation{snap.incarnation().run_id(), snap.incarnation().start()};
  if (snap.last_seq_size() > state.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has ", snap.last_seq_size(),
                                                   " push seqs for ", state.num_workers,
                                                   " workers"));
  }
  state.last_seq.assign(snap.last_seq().begin(), snap.last_seq().end());
  if (snap.last_row_seq_size() > state.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has ", snap.last_row_seq_size(),
                                                   " row-push seqs for ", state.num_workers,
                                                   " workers"));
  }
  state.last_row_seq.assign(snap.last_row_seq().begin(), snap.last_row_seq().end());
  SliceAssembler::Options ao;
  ao.what = "checkpoint";
  SliceAssembler assembler(MakeSliceLayout(state.spec, state.num_shards, state.shard_id), ao);
  state.weights.resize(assembler.layout().num_elements);
  for (const v1::TensorSlice& w : snap.weights()) {
    const RawTensorSlice slice{w.name(), {w.shape().begin(), w.shape().end()}, w.offset(),
                               w.length(), {w.data()}};
    RETURN_IF_ERROR(assembler.Add(slice, [&state](const SliceRange& r) -> absl::StatusOr<float*> {
      return state.weights.data() + r.flat_offset;
    }));
  }
  RETURN_IF_ERROR(assembler.Finish());
  return state;
}

absl::StatusOr<std::string> EncodeCheckpoint(const Shard& shard) {
  ASSIGN_OR_RETURN(ShardState state, shard.ExportState());
  return EncodeShardState(state);
}

absl::Status RestoreCheckpoint(absl::string_view bytes, Shard* shard) {
  ASSIGN_OR_RETURN(ShardState state, DecodeShardState(bytes, shard->options().spec_limits));
  return shard->LoadCheckpoint(state);
}

}  // namespace ps
