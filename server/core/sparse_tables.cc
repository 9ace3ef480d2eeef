#include "server/core/sparse_tables.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"
#include "common/model_spec.h"
#include "common/slice_assembler.h"
#include "common/status_macros.h"

namespace ps {
namespace {

std::string Quoted(absl::string_view table) {
  return absl::StrCat("embedding table \"", EscapeName(table), "\"");
}

}  // namespace

absl::Status SparseTablesOptions::Validate() const {
  if (max_rows < 0 || max_rows > EmbeddingTable::kMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_rows must be in [0, ", EmbeddingTable::kMaxRows, "], got ", max_rows));
  }
  if (max_ids_per_request < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_ids_per_request must be >= 1, got ", max_ids_per_request));
  }
  if (memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table_memory_budget must be >= 0, got ", memory_budget_bytes));
  }
  if (parallel_ids < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table_parallel_ids must be >= 0, got ", parallel_ids));
  }
  if (memory_budget_bytes > 0 && !make_tier) {
    return absl::InvalidArgumentError(
        "--table_memory_budget needs a tier for the other rows (--table_dir)");
  }
  if (ttl_steps < 0 || ttl_seconds < 0 || (ttl_steps > 0 && ttl_seconds > 0) ||
      ttl_steps >= (int64_t{1} << 31) || ttl_seconds >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table_ttl_steps and --table_ttl_secs: at most one, in [0, 2^31); got ",
                     ttl_steps, " and ", ttl_seconds));
  }
  if (!(min_l2 >= 0.0f) || min_l2 > 3.0e38f) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table_evict_l2_below must be >= 0 and finite, got ", min_l2));
  }
  RETURN_IF_ERROR(admission.Validate());
  for (const auto& [table, a] : admission_by_table) {
    if (absl::Status s = a.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("table \"", table, "\": ", s.message()));
    }
  }
  return optimizer.Validate();
}

SparseTables::SparseTables(const SparseTablesOptions& options, Mode mode, int shard_id,
                           int num_shards, int num_workers, bool reject_nonfinite)
    : options_(options),
      mode_(mode),
      shard_id_(shard_id),
      num_shards_(num_shards),
      num_workers_(num_workers),
      reject_nonfinite_(reject_nonfinite),
      dense_accepted_(num_workers, false),
      last_row_seq_(num_workers, 0) {}

EmbeddingTableOptions SparseTables::TableOptions(const TableSpec& spec) const {
  EmbeddingTableOptions o;
  o.name = spec.name;
  o.dim = spec.dim;
  o.seed = spec.seed;
  o.init_scale = spec.init_scale;
  o.max_rows = options_.max_rows;
  o.evict_lru = options_.evict_lru;
  o.optimizer = options_.optimizer;
  o.ttl = options_.ttl_steps > 0 ? options_.ttl_steps : options_.ttl_seconds;
  o.min_l2 = options_.min_l2;
  o.track_changes = options_.track_changes;
  o.parallel_ids = options_.parallel_ids;
  auto a = options_.admission_by_table.find(spec.name);
  o.admission = a != options_.admission_by_table.end() ? a->second : options_.admission;
  if (options_.memory_budget_bytes > 0) {
    // The rows the budget holds, at least one; the tier holds the rest.
    o.evict_lru = true;
    o.max_rows = std::clamp<int64_t>(
        options_.memory_budget_bytes / static_cast<int64_t>(EmbeddingTable::MemoryBytesPerRow(o)),
        1, EmbeddingTable::kMaxRows);
  }
  return o;
}

absl::Status SparseTables::Declare(const std::vector<TableSpec>& specs) {
  if (specs.empty()) return absl::OkStatus();
  if (!specs_.empty()) return CompareTableSpecs(specs_, specs);
  return Install(specs, /*contents=*/nullptr);
}

absl::Status SparseTables::Install(std::vector<TableSpec> specs,
                                   const std::vector<EmbeddingTableState>* contents) {
  if (absl::Status s = ValidateTableSpecs(specs, options_.limits); !s.ok()) return s;
  absl::flat_hash_map<std::string, Table> made;
  for (size_t i = 0; i < specs.size(); ++i) {
    // The servers' settings now, the table's own spec (and rows).
    EmbeddingTableOptions options = TableOptions(specs[i]);
    std::unique_ptr<RowTier> tier;
    if (options_.memory_budget_bytes > 0) {
      ASSIGN_OR_RETURN(tier, options_.make_tier(shard_id_, specs[i].name,
                                                EmbeddingTable::TierRowFloats(options)));
      options.tier = tier.get();
    }
    absl::StatusOr<std::unique_ptr<EmbeddingTable>> rows = EmbeddingTable::Create(options);
    if (!rows.ok()) return rows.status();
    Table& t = made[specs[i].name];
    t.tier = std::move(tier);
    t.rows = *std::move(rows);
    if (contents != nullptr) RETURN_IF_ERROR(InstallRows((*contents)[i], &t));
    t.applied_step.assign(num_workers_, -1);
  }
  specs_ = std::move(specs);
  tables_ = std::move(made);
  return absl::OkStatus();
}

absl::StatusOr<SparseTables::Table*> SparseTables::Find(absl::string_view table) {
  auto it = tables_.find(table);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat(
        Quoted(table), " does not exist", specs_.empty() ? " (the model declares no tables)" : ""));
  }
  return &it->second;
}

absl::StatusOr<int> SparseTables::DimOf(absl::string_view table) const {
  auto it = tables_.find(table);
  if (it == tables_.end())
    return absl::NotFoundError(absl::StrCat(Quoted(table), " does not exist"));
  return it->second.rows->options().dim;
}

absl::Status SparseTables::CheckIds(absl::string_view table, absl::Span<const uint64_t> ids) const {
  if (static_cast<int64_t>(ids.size()) > options_.max_ids_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(table), ": ", ids.size(), " ids in one request; at most ",
                     options_.max_ids_per_request, " (--max_ids_per_request)"));
  }
  bool ascending = true;  // what PsClient sends: no repeat by construction
  for (size_t i = 0; i < ids.size(); ++i) {
    if (num_shards_ > 1) {
      if (const int owner = ShardOfId(ids[i], num_shards_); owner != shard_id_) {
        return absl::InvalidArgumentError(absl::StrCat(
            Quoted(table), ": id ", ids[i], " belongs to shard ", owner, ", not ", shard_id_));
      }
    }
    if (i > 0 && ids[i] <= ids[i - 1]) ascending = false;
  }
  if (ascending) return absl::OkStatus();
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(ids.size());
  for (uint64_t id : ids) {
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(table), ": id ", id, " appears twice in one request"));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTables::Pull(absl::string_view table, absl::Span<const uint64_t> ids,
                                std::vector<float>* out, size_t piece_ids, const RowsPiece& piece) {
  ASSIGN_OR_RETURN(Table * t, Find(table));
  RETURN_IF_ERROR(CheckIds(table, ids));
  EmbeddingTable& rows = *t->rows;
  return ReadRows(
      table, *t, ids, out, piece_ids, piece,
      [&rows](absl::Span<const uint64_t> part, float* values) { return rows.Pull(part, values); });
}

absl::Status SparseTables::ReadRows(absl::string_view table, Table& t,
                                    absl::Span<const uint64_t> ids, std::vector<float>* out,
                                    size_t piece_ids, const RowsPiece& piece,
                                    const ReadRowsFn& read) {
  // Refused before the output is allocated: a hostile pull names many ids
  // of a wide table.
  const int64_t dim = t.rows->options().dim;
  if (static_cast<int64_t>(ids.size()) > SparseTables::kMaxFloatsPerPull / dim) {
    return absl::ResourceExhaustedError(
        absl::StrCat(Quoted(table), ": ", ids.size(), " ids of dim ", dim, " in one pull; at most ",
                     SparseTables::kMaxFloatsPerPull, " floats (1 GiB) per pull"));
  }
  RETURN_IF_ERROR(t.rows->CheckCapacity(ids));
  if (piece_ids == 0 || !piece || ids.size() <= piece_ids) {
    out->resize(ids.size() * static_cast<size_t>(dim));
    RETURN_IF_ERROR(read(ids, out->data()));
    if (piece) piece(std::move(*out), /*last=*/true);
    return absl::OkStatus();
  }
  // Every check passed on the whole request: the pieces cannot be refused
  // for room half way (the caller holds the lock throughout).
  for (size_t i = 0; i < ids.size(); i += piece_ids) {
    const absl::Span<const uint64_t> part = ids.subspan(i, piece_ids);
    std::vector<float> rows(part.size() * static_cast<size_t>(dim));
    RETURN_IF_ERROR(read(part, rows.data()));
    piece(std::move(rows), i + part.size() == ids.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> SparseTables::CheckPrefetch(absl::string_view table,
                                                 absl::Span<const uint64_t> ids) {
  ASSIGN_OR_RETURN(Table * t, Find(table));
  RETURN_IF_ERROR(CheckIds(table, ids));
  return t->tier != nullptr;
}

absl::Status SparseTables::Prefetch(absl::string_view table, absl::Span<const uint64_t> ids) {
  ASSIGN_OR_RETURN(Table * t, Find(table));
  return t->rows->Prefetch(ids);
}

absl::StatusOr<PushOutcome> SparseTables::Push(int worker_id, absl::string_view table,
                                               int64_t version, int64_t seq,
                                               int64_t current_version,
                                               absl::Span<const uint64_t> ids,
                                               absl::Span<const float> grads, RowsAnswer* answer) {
  absl::StatusOr<Table*> found = Find(table);
  if (!found.ok()) return found.status();
  Table& t = **found;
  if (absl::Status s = CheckIds(table, ids); !s.ok()) return s;
  const int dim = t.rows->options().dim;
  if (grads.size() != ids.size() * static_cast<size_t>(dim)) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(table), ": ", grads.size(),
                                                   " gradient floats for ", ids.size(),
                                                   " ids of dim ", dim));
  }
  if (reject_nonfinite_ && !AllFinite(grads.data(), grads.size())) {
    const size_t i =
        std::find_if(grads.begin(), grads.end(), [](float g) { return !std::isfinite(g); }) -
        grads.begin();
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(table), ": the gradient of id ", ids[i / dim], " is not finite"));
  }
  if (mode_ != Mode::kSync) {
    if (seq > 0 && seq <= last_row_seq_[worker_id]) return PushOutcome::kDuplicate;
    if (answer != nullptr && t.rows->InMemoryOnly()) {
      // Pieces are applied one after another: only a table that cannot
      // fail past the checks (made on the whole request) takes them.
      EmbeddingTable& rows = *t.rows;
      RETURN_IF_ERROR(ReadRows(table, t, ids, answer->out, answer->piece_ids, answer->piece,
                               [&](absl::Span<const uint64_t> part, float* values) {
                                 const size_t at = static_cast<size_t>(part.data() - ids.data());
                                 return rows.ApplyAndPull(part, grads.data() + at * dim, values);
                               }));
      answer->answered = true;
    } else if (absl::Status s = t.rows->Apply(ids, grads.data()); !s.ok()) {
      return s;
    }
    if (seq > 0) last_row_seq_[worker_id] = seq;
    return PushOutcome::kApplied;
  }
  if (version > current_version) {
    return absl::FailedPreconditionError(absl::StrCat(Quoted(table), ": rows pushed for step ",
                                                      version, " while shard ", shard_id_,
                                                      " is at step ", current_version));
  }
  if (version < current_version) {
    return t.applied_step[worker_id] == version ? PushOutcome::kDuplicate : PushOutcome::kDropped;
  }
  if (t.held.count(worker_id) > 0) return PushOutcome::kDuplicate;
  // Create the rows now, so that the step's close cannot run out of room.
  if (absl::Status s = t.rows->Prepare(ids); !s.ok()) return s;
  Held& h = t.held[worker_id];
  h.ids.assign(ids.begin(), ids.end());
  h.grads.assign(grads.begin(), grads.end());
  return PushOutcome::kApplied;
}

PushOutcome SparseTables::StepOutcome(absl::string_view table, int worker_id, int64_t step) const {
  auto it = tables_.find(table);
  if (it == tables_.end() || worker_id < 0 ||
      worker_id >= static_cast<int>(it->second.applied_step.size())) {
    return PushOutcome::kDropped;
  }
  return it->second.applied_step[worker_id] == step ? PushOutcome::kApplied : PushOutcome::kDropped;
}

void SparseTables::NoteDenseAccepted(int worker_id) {
  if (mode_ == Mode::kSync) dense_accepted_[worker_id] = true;
}

std::vector<std::string> SparseTables::CloseStep(int64_t step, int applied) {
  std::vector<std::string> lines;
  if (mode_ != Mode::kSync) return lines;
  for (auto& [name, t] : tables_) {
    // Sum each row over the accepted workers in worker-id order (held is
    // ordered by worker), then divide by the step's gradient count.
    std::vector<uint64_t> ids;
    std::vector<float> sums;
    absl::flat_hash_map<uint64_t, size_t> index;
    const int dim = t.rows->options().dim;
    for (auto& [worker, h] : t.held) {
      if (!dense_accepted_[worker]) continue;
      t.applied_step[worker] = step;
      for (size_t i = 0; i < h.ids.size(); ++i) {
        auto [it, added] = index.emplace(h.ids[i], ids.size());
        const float* g = h.grads.data() + i * dim;
        if (added) {
          ids.push_back(h.ids[i]);
          sums.insert(sums.end(), g, g + dim);
        } else {
          float* s = sums.data() + it->second * dim;
          for (int j = 0; j < dim; ++j) s[j] += g[j];
        }
      }
    }
    t.held.clear();
    if (ids.empty() || applied <= 0) continue;
    const float n = static_cast<float>(applied);
    for (float& s : sums) s /= n;
    // The rows exist unless evicted since their push; Apply creates those
    // again, and cannot run out of room for ids that fit one push each.
    if (absl::Status s = t.rows->Apply(ids, sums.data()); !s.ok()) {
      lines.push_back(absl::StrCat("shard ", shard_id_, ": step ", step, ": the gradients of ",
                                   Quoted(name), " were not applied: ", s.message()));
    }
  }
  dense_accepted_.assign(num_workers_, false);
  return lines;
}

void SparseTables::SetClock(int64_t version, absl::Time now) {
  if (options_.ttl_steps <= 0 && options_.ttl_seconds <= 0) return;
  const int64_t clock = options_.ttl_steps > 0 ? version : absl::ToUnixSeconds(now);
  for (auto& [name, t] : tables_) t.rows->SetClock(clock);
}

std::vector<std::string> SparseTables::TierNews() {
  std::vector<std::string> lines;
  // The first of each, then one line per 10,000 more.
  const auto news = [](int64_t now, int64_t* logged) {
    if (now == *logged || (*logged > 0 && now - *logged < 10000)) return false;
    *logged = now;
    return true;
  };
  for (const TableSpec& spec : specs_) {
    Table& t = tables_.at(spec.name);
    const TableCounters& c = t.rows->counters();
    if (news(c.write_errors, &t.logged_write_errors)) {
      lines.push_back(absl::StrCat(Quoted(spec.name), ": the tier refused ", c.write_errors,
                                   " row writes since start; ", t.rows->num_rows(),
                                   " rows in memory, past --table_memory_budget until it takes "
                                   "them: ",
                                   t.rows->tier_error().message()));
    }
    if (news(c.read_errors, &t.logged_read_errors)) {
      lines.push_back(absl::StrCat(Quoted(spec.name), ": the tier failed ", c.read_errors,
                                   " calls' reads since start (each such call failed, "
                                   "changing no row): ",
                                   t.rows->tier_read_error().message()));
    }
  }
  return lines;
}

void SparseTables::DropOpenStep() {
  for (auto& [name, t] : tables_) t.held.clear();
  dense_accepted_.assign(num_workers_, false);
}

std::vector<TableUsage> SparseTables::Usage() const {
  std::vector<TableUsage> out;
  for (const TableSpec& spec : specs_) {
    const Table& t = tables_.at(spec.name);
    const EmbeddingTable& rows = *t.rows;
    TableUsage u{spec.name, rows.num_rows(), rows.MemoryBytes()};
    u.tiered = t.tier != nullptr;
    if (u.tiered) u.tier_rows = t.tier->num_rows();
    if (const AdmissionFilter* a = rows.admission()) {
      u.admits = true;
      u.admission_pending_ids = a->pending_ids();
      u.admission_bytes = a->MemoryBytes();
    }
    u.evicts = rows.options().ttl > 0 || rows.options().min_l2 > 0;
    u.counters = rows.counters();
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace ps
