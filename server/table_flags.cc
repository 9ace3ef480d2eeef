#include "server/table_flags.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/tier/rocksdb_row_tier.h"

ABSL_FLAG(int64_t, max_rows, 0,
          "Embedding tables: most rows one table keeps on this shard. A pull or push that "
          "would create more fails with RESOURCE_EXHAUSTED naming the table, unless "
          "--evict_lru. 0 = no bound (but memory).");
ABSL_FLAG(bool, evict_lru, false,
          "Embedding tables: at --max_rows, a new row replaces the least recently used one "
          "(its values and optimizer state are lost; it comes back as a new row) instead of "
          "failing.");
ABSL_FLAG(std::string, sparse_optimizer, "adagrad",
          "Embedding tables: the per-row update rule, applied to the rows a push touches "
          "only: sgd, adagrad (per-element accumulator), adam (lazy: a row's step count "
          "advances only when it is updated; betas 0.9, 0.999, eps 1e-8) or ftrl "
          "(FTRL-Proximal, --ftrl_*). See docs/embeddings.md.");
ABSL_FLAG(double, sparse_lr, 0.05, "Embedding tables: the learning rate (FTRL's alpha), > 0.");
ABSL_FLAG(double, sparse_initial_accumulator, 0.1,
          "Embedding tables, --sparse_optimizer=adagrad: a new row's accumulator (>= 0).");
ABSL_FLAG(double, ftrl_l1, 0, "Embedding tables, --sparse_optimizer=ftrl: L1 strength (>= 0).");
ABSL_FLAG(double, ftrl_l2, 0, "Embedding tables, --sparse_optimizer=ftrl: L2 strength (>= 0).");
ABSL_FLAG(double, ftrl_beta, 1, "Embedding tables, --sparse_optimizer=ftrl: beta (>= 0).");
ABSL_FLAG(int64_t, table_memory_budget, 0,
          "Embedding tables: bytes of memory each table's rows may take on this shard (its "
          "index included; docs/embeddings.md has the bytes per row). The least recently "
          "used rows past it are kept on disk in RocksDB under --table_dir and read back on "
          "their next touch, so answers are as with every row in memory. 0 = no budget "
          "(--max_rows and --evict_lru rule).");
ABSL_FLAG(std::string, table_dir, "",
          "Embedding tables, with --table_memory_budget: the directory of the on-disk tier "
          "(one RocksDB database per table and shard, under shard-<id>/). Emptied at start: "
          "the rows' state survives a restart through --checkpoint_dir, not here.");
ABSL_FLAG(std::string, table_admission, "none",
          "Embedding tables: feature admission, which ids get a row. none; count:N (an id's "
          "row is made at its Nth pull, counted exactly: ~20 bytes per id waiting); bloom:N (a "
          "counting Bloom filter of --admission_bloom_bytes per table and shard, N <= 15; may "
          "admit an id early, never late). Until admitted, a pull answers the row's initial "
          "value and its gradients are dropped (counted on /metrics). Per table: "
          "TABLE=KIND:N, comma-separated, e.g. count:2,ads=bloom:3.");
ABSL_FLAG(int64_t, admission_bloom_bytes, int64_t{1} << 20,
          "Embedding tables, --table_admission=bloom:N: the filter's bytes per table and shard; "
          "4 bytes per distinct id keep ids seen once from passing bloom:2 early to about 3% "
          "(docs/embeddings.md).");
ABSL_FLAG(
    int64_t, table_ttl_steps, 0,
    "Embedding tables: evict rows not updated for more than this many steps of the shard "
    "(its version: a sync step, an async dense push). Incremental: each rows call looks at a few "
    "rows (docs/embeddings.md). 0 = off; not with --table_ttl_secs.");
ABSL_FLAG(int64_t, table_ttl_secs, 0,
          "Embedding tables: evict rows not updated for more than this many seconds. 0 = off; "
          "not with --table_ttl_steps.");
ABSL_FLAG(double, table_evict_l2_below, 0,
          "Embedding tables: evict rows whose values' L2 norm is below this (rows that learned "
          "little), incrementally as --table_ttl_steps. 0 = off.");
ABSL_FLAG(int64_t, table_parallel_ids, ps::EmbeddingTableOptions::kDefaultParallelIds,
          "Embedding tables: a pull or push of at least this many ids on one table looks its "
          "rows up on up to a thread per core (tables in memory only, without --evict_lru); "
          "faster when the server has cores to spare, slower when it shares them with busy "
          "workers (docs/benchmarks.md). 0 = one thread per call.");
ABSL_FLAG(int64_t, max_ids_per_request, int64_t{1} << 20,
          "Embedding tables: most ids one PullRows or PushRows may name (INVALID_ARGUMENT "
          "past it).");

namespace ps {

namespace {

// --table_admission's value into o->admission and o->admission_by_table.
absl::Status ParseTableAdmission(absl::string_view text, SparseTablesOptions* o) {
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    const size_t eq = entry.find('=');
    AdmissionOptions a;
    a.bloom_bytes = absl::GetFlag(FLAGS_admission_bloom_bytes);
    absl::Status s =
        ParseAdmissionKind(entry.substr(eq == absl::string_view::npos ? 0 : eq + 1), &a);
    if (!s.ok())
      return absl::InvalidArgumentError(absl::StrCat("--table_admission: ", s.message()));
    if (eq == absl::string_view::npos) {
      o->admission = a;
    } else if (eq == 0 ||
               !o->admission_by_table.emplace(std::string(entry.substr(0, eq)), a).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--table_admission: \"", entry, "\" names no table or one named before"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SparseTablesOptions> SparseTablesOptionsFromFlags() {
  SparseTablesOptions o;
  o.max_rows = absl::GetFlag(FLAGS_max_rows);
  o.evict_lru = absl::GetFlag(FLAGS_evict_lru);
  ASSIGN_OR_RETURN(o.optimizer.kind,
                   ParseSparseOptimizerKind(absl::GetFlag(FLAGS_sparse_optimizer)));
  o.optimizer.lr = static_cast<float>(absl::GetFlag(FLAGS_sparse_lr));
  o.optimizer.adagrad_initial_accumulator =
      static_cast<float>(absl::GetFlag(FLAGS_sparse_initial_accumulator));
  o.optimizer.ftrl_l1 = static_cast<float>(absl::GetFlag(FLAGS_ftrl_l1));
  o.optimizer.ftrl_l2 = static_cast<float>(absl::GetFlag(FLAGS_ftrl_l2));
  o.optimizer.ftrl_beta = static_cast<float>(absl::GetFlag(FLAGS_ftrl_beta));
  o.max_ids_per_request = absl::GetFlag(FLAGS_max_ids_per_request);
  RETURN_IF_ERROR(ParseTableAdmission(absl::GetFlag(FLAGS_table_admission), &o));
  o.ttl_steps = absl::GetFlag(FLAGS_table_ttl_steps);
  o.ttl_seconds = absl::GetFlag(FLAGS_table_ttl_secs);
  o.min_l2 = static_cast<float>(absl::GetFlag(FLAGS_table_evict_l2_below));
  o.parallel_ids = absl::GetFlag(FLAGS_table_parallel_ids);
  o.memory_budget_bytes = absl::GetFlag(FLAGS_table_memory_budget);
  const std::string dir = absl::GetFlag(FLAGS_table_dir);
  if (!dir.empty() && o.memory_budget_bytes == 0) {
    return absl::InvalidArgumentError("--table_dir needs --table_memory_budget > 0");
  }
  if (o.memory_budget_bytes > 0) {
    if (dir.empty()) {
      return absl::InvalidArgumentError(
          "--table_memory_budget needs --table_dir, where the rows past it are kept");
    }
    // Made now, so that a directory that cannot be is an error at start.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("--table_dir: cannot make ", dir, ": ", ec.message()));
    }
    o.make_tier = RocksDbTiersUnder(dir);
  }
  // A checkpoint's tier snapshot restores into a server with or without a
  // budget.
  o.read_tier_snapshot = ReadRocksDbSnapshot;
  return o;
}

}  // namespace ps
