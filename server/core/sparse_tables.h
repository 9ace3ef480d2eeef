// SparseTables: a shard's embedding tables, and their part of each step.
//
// The model's tables (common/table_spec.h) are declared once, by the first
// InitParams that names them; later declarations must match. Each table's
// rows that this shard owns (ShardOfId) live in an EmbeddingTable
// (server/core/embedding_table.h) made with the servers' settings (Options).
//
// Pull reads rows now, creating missing ones. Push checks a worker's row
// gradients (the table exists, ids owned by this shard and unique, sizes
// right, values finite if asked) and then:
//   - async and SSP: applies them at once, deduplicated by the worker's
//     row-push seq (one counter per worker over all tables);
//   - sync: holds them for the worker's step `version`, at most one push
//     per (worker, table, step). The Shard tells which workers' dense
//     gradients the step accepted (NoteDenseAccepted) and when it closes
//     (CloseStep): the held gradients of those workers are applied, each
//     row's sum over workers (in worker-id order) divided by the number of
//     gradients the step applied, as the dense mean is; the others are
//     dropped. A row push for a closed step is a duplicate if that step
//     applied this worker's rows of that table, else dropped; one for a
//     later step is FAILED_PRECONDITION.
// A sync push creates its rows at once (so a step cannot fail to close for
// want of room: without eviction the bound is met at the push); with
// evict_lru a row evicted before its step closes is created again.
//
// Thread-compatible: the Shard's lock guards it.
#ifndef PS_SERVER_CORE_SPARSE_TABLES_H_
#define PS_SERVER_CORE_SPARSE_TABLES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "common/sparse_optimizer.h"
#include "common/table_spec.h"
#include "server/core/admission.h"
#include "server/core/embedding_table.h"
#include "server/core/row_tier.h"
#include "server/core/shard_state.h"

namespace ps {

// The servers' settings for every table (ps_server flags).
struct SparseTablesOptions {
  // Rows one table keeps on this shard; 0 = no bound but
  // EmbeddingTable::kMaxRows (--max_rows).
  int64_t max_rows = 0;
  // At max_rows, evict the least recently used row (--evict_lru).
  bool evict_lru = false;
  // The per-row update rule and its hyperparameters (--sparse_optimizer,
  // --sparse_lr, --ftrl_*).
  SparseOptimizerOptions optimizer{SparseOptimizerKind::kAdagrad, 0.05f};
  // Ids one PullRows or PushRows may name (--max_ids_per_request).
  int64_t max_ids_per_request = 1 << 20;
  // What a model may declare.
  TableLimits limits;
  // Bytes of memory one table's rows may take on this shard
  // (--table_memory_budget; EmbeddingTable::MemoryBytesPerRow each); the
  // rest live in a tier that make_tier opens. 0: no budget (max_rows and
  // evict_lru rule). With a budget, max_rows and evict_lru are unused.
  int64_t memory_budget_bytes = 0;
  // Opens the tier of table `table` (rows of `row_floats` floats) on shard
  // `shard_id` (ps_server: RocksDB under --table_dir). Required with a
  // budget.
  using TierFactory = std::function<absl::StatusOr<std::unique_ptr<RowTier>>(
      int shard_id, const std::string& table, int row_floats)>;
  TierFactory make_tier;
  // Eviction beyond LRU (EmbeddingTable's ttl and min_l2): rows not
  // updated for more than ttl_steps steps of the shard (--table_ttl_steps)
  // or ttl_seconds (--table_ttl_secs), at most one of them; rows whose
  // values' L2 norm is below min_l2 (--table_evict_l2_below). 0: off.
  int64_t ttl_steps = 0;
  int64_t ttl_seconds = 0;
  float min_l2 = 0;
  // Calls of at least this many ids look rows up on a thread per core
  // (EmbeddingTableOptions::parallel_ids; --table_parallel_ids).
  int64_t parallel_ids = EmbeddingTableOptions::kDefaultParallelIds;
  // Which ids get a row, for every table (--table_admission), but those
  // named in admission_by_table.
  AdmissionOptions admission;
  std::map<std::string, AdmissionOptions> admission_by_table;
  // Keep each table's changed and removed rows for incremental checkpoints
  // (EmbeddingTable's track_changes; --checkpoint_full_every > 1).
  bool track_changes = false;
  // Where a checkpoint's snapshots of the tiers are made
  // (RowTier::Snapshot, in a new directory under it; ps_server: under
  // --checkpoint_dir, so the checkpoint store can move them next to its
  // file). Empty: a checkpoint reads the tiers' rows instead.
  std::string tier_snapshot_dir;
  // Reads a checkpoint's tier snapshot for a table without a tier (a
  // server started without --table_memory_budget). Null: such a
  // checkpoint is refused, naming the table.
  TierSnapshotReader read_tier_snapshot;

  // INVALID_ARGUMENT naming the first bad field.
  absl::Status Validate() const;
};

// One table's size on this shard, for operators.
struct TableUsage {
  std::string name;
  int64_t rows = 0;         // in memory
  size_t memory_bytes = 0;  // EmbeddingTable::MemoryBytes
  bool tiered = false;      // with --table_memory_budget
  int64_t tier_rows = 0;    // RowTier::num_rows
  bool admits = false;      // with admission (--table_admission)
  int64_t admission_pending_ids = -1;  // AdmissionFilter::pending_ids
  size_t admission_bytes = 0;          // AdmissionFilter::MemoryBytes
  bool evicts = false;                 // with a ttl or --table_evict_l2_below
  TableCounters counters;              // zero unless tiered, admits or evicts
};

// Makes `state` (a table's rows saved with a tier snapshot) hold every row
// itself: the snapshot's rows (read by `read`), less state->removed, that
// contents does not hold are added; tier_snapshot and removed are cleared.
// The reader's error, or FAILED_PRECONDITION naming the table when `read`
// is null.
absl::Status MaterializeTierSnapshot(const TierSnapshotReader& read, EmbeddingTableState* state);

class SparseTables {
 public:
  // The tables of shard `shard_id` of `num_shards`, for `num_workers`
  // workers in `mode`. REQUIRES: options.Validate() is OK.
  SparseTables(const SparseTablesOptions& options, Mode mode, int shard_id, int num_shards,
               int num_workers, bool reject_nonfinite);

  // Creates the tables of `specs` if none were declared; otherwise
  // FAILED_PRECONDITION unless `specs` are the declared ones. An empty list
  // declares nothing and checks nothing. INVALID_ARGUMENT for specs that
  // ValidateTableSpecs refuses.
  absl::Status Declare(const std::vector<TableSpec>& specs);
  const std::vector<TableSpec>& specs() const { return specs_; }

  // Floats one Pull may return (1 GiB; a protobuf message stays under 2 GiB).
  static constexpr int64_t kMaxFloatsPerPull = int64_t{1} << 28;

  // Writes the rows of `ids` to `out` (ids.size() * dim floats), in order.
  // NOT_FOUND for a table not declared; INVALID_ARGUMENT for too many ids,
  // an id this shard does not own, or a repeated one; RESOURCE_EXHAUSTED
  // for more than kMaxFloatsPerPull floats, or as EmbeddingTable::Pull,
  // either way before `out` grows. The dim is the table's (DimOf).
  //
  // With `piece`: the rows go to piece(rows, last) instead, in pieces of at
  // most `piece_ids` ids (0: one piece), each as soon as it is read, so a
  // caller can send one while the next is looked up; every check is made on
  // the whole request first, so a refused pull hands out nothing.
  using RowsPiece = std::function<void(std::vector<float> rows, bool last)>;
  absl::Status Pull(absl::string_view table, absl::Span<const uint64_t> ids,
                    std::vector<float>* out, size_t piece_ids = 0,
                    const RowsPiece& piece = nullptr);

  // Prefetch (PullRowsRequest.prefetch): CheckPrefetch checks `ids` as
  // Pull does (the same errors) and says whether the table has a tier (a
  // prefetch does something); Prefetch reads the rows of `ids` on disk back
  // into memory (EmbeddingTable::Prefetch).
  absl::StatusOr<bool> CheckPrefetch(absl::string_view table, absl::Span<const uint64_t> ids);
  absl::Status Prefetch(absl::string_view table, absl::Span<const uint64_t> ids);

  // A push-pull's rows (async and SSP): a push that applies reads its rows
  // too, as Pull would after it (its checks first, then into `out` or in
  // pieces), each right after its update; in a table in memory only
  // (EmbeddingTable::InMemoryOnly) that is one lookup a row. `answered`
  // says it did; otherwise (sync, a duplicate, a table with a tier,
  // admission, ttl or min_l2) the caller pulls.
  struct RowsAnswer {
    std::vector<float>* out = nullptr;
    size_t piece_ids = 0;
    RowsPiece piece;
    bool answered = false;
  };

  // A worker's row gradients: `grads` holds ids.size() * dim floats. See the
  // contract above; `current_version` is the shard's version (sync: the open
  // step). REQUIRES: 0 <= worker_id < num_workers.
  absl::StatusOr<PushOutcome> Push(int worker_id, absl::string_view table, int64_t version,
                                   int64_t seq, int64_t current_version,
                                   absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                                   RowsAnswer* answer = nullptr);

  // Sync, once step `step` closed: kApplied if it applied `worker_id`'s
  // rows of `table`, else kDropped (the step closed without its dense
  // gradient, or the table is gone).
  PushOutcome StepOutcome(absl::string_view table, int worker_id, int64_t step) const;
  // Sync: the open step accepted `worker_id`'s dense gradient.
  void NoteDenseAccepted(int worker_id);
  // Sync: the open step `step` closed, applying `applied` dense gradients
  // (those noted). Applies the held row gradients of the noted workers and
  // forgets the rest. Returns a line for the log per table whose gradients
  // could not be applied (with evict_lru, a step whose workers together
  // named more rows than max_rows). Async: no-op.
  std::vector<std::string> CloseStep(int64_t step, int applied);
  // The shard's step and time now, for the tables' ttl (their clock: the
  // step with ttl_steps, Unix seconds with ttl_seconds). Call before
  // Pull, Push and CloseStep.
  void SetClock(int64_t version, absl::Time now);
  // Lines for the log when a table's tier refused rows or failed reads
  // since the last call (the first, then one line per 10,000 more), naming
  // the table, the count, the rows in memory (refusals) and the tier's
  // error.
  std::vector<std::string> TierNews();
  // The parameters were replaced (a restore or checkpoint): the open step's
  // held gradients are forgotten.
  void DropOpenStep();

  // The table's row width; NOT_FOUND naming it when not declared.
  absl::StatusOr<int> DimOf(absl::string_view table) const;
  // Each table's rows and memory, in declaration order.
  std::vector<TableUsage> Usage() const;

  // Checkpoints: every table with its rows (or a tier's read error), and
  // the async row-push seqs. With `snapshot_tiers` and tier_snapshot_dir, a
  // tiered table's rows on disk are a RowTier::Snapshot (tier_snapshot),
  // not read (a tier that takes none is read).
  absl::StatusOr<std::vector<EmbeddingTableState>> Export(bool snapshot_tiers = false) const;
  // With track_changes: every table with only its rows changed since the
  // last ResetChanges and the ids removed since (a delta's tables,
  // server/core/shard_state.h); FAILED_PRECONDITION without.
  absl::StatusOr<std::vector<EmbeddingTableState>> ExportChanges() const;
  void ResetChanges();
  const std::vector<int64_t>& LastRowSeqs() const { return last_row_seq_; }
  // Replaces the tables by `tables` (made with their own options, as saved)
  // and the seqs by `last_row_seq` (by worker; missing ones are 0); the open
  // step is dropped.
  // INVALID_ARGUMENT or RESOURCE_EXHAUSTED, changing nothing, for contents
  // EmbeddingTable::Import refuses or seqs of the wrong count.
  absl::Status Import(const std::vector<EmbeddingTableState>& tables,
                      const std::vector<int64_t>& last_row_seq);

 private:
  struct Held {
    std::vector<uint64_t> ids;
    std::vector<float> grads;
  };
  struct Table {
    std::unique_ptr<RowTier> tier;    // with a budget; outlives rows
    int64_t logged_write_errors = 0;  // TierNews' last counts
    int64_t logged_read_errors = 0;
    std::unique_ptr<EmbeddingTable> rows;
    // Sync: by worker, this step's held gradient (absent: none yet).
    std::map<int, Held> held;
    // Sync: by worker, the last step that applied its rows (-1: none).
    std::vector<int64_t> applied_step;
  };

  // Replaces every table by new ones of `specs` (checked), holding
  // (*contents)[i]'s rows when `contents` is given. On error nothing
  // changes.
  absl::Status Install(std::vector<TableSpec> specs,
                       const std::vector<EmbeddingTableState>* contents);
  absl::StatusOr<Table*> Find(absl::string_view table);
  // Too many ids, an id not this shard's, a repeat: INVALID_ARGUMENT.
  absl::Status CheckIds(absl::string_view table, absl::Span<const uint64_t> ids) const;
  // Pull's reading of checked `ids` of `t`: its size and capacity checks,
  // then read(part, rows) for the whole of them into *out, or for each
  // piece handed to `piece` (see Pull).
  using ReadRowsFn = std::function<absl::Status(absl::Span<const uint64_t> part, float* rows)>;
  absl::Status ReadRows(absl::string_view table, Table& t, absl::Span<const uint64_t> ids,
                        std::vector<float>* out, size_t piece_ids, const RowsPiece& piece,
                        const ReadRowsFn& read);
  EmbeddingTableOptions TableOptions(const TableSpec& spec) const;
  // A table's options as a checkpoint saves them.
  static EmbeddingTableOptions SavedOptions(const Table& t);
  // Table `t`'s snapshot of its tier, in a new directory under
  // tier_snapshot_dir, into *state; UNIMPLEMENTED if its tier takes none.
  absl::Status SnapshotTier(const Table& t, EmbeddingTableState* state) const;
  // Installs `state` (a table's saved rows) into `t`.
  absl::Status InstallRows(const EmbeddingTableState& state, Table* t) const;

  // Constant after construction (not const: a shard moves in the tables a
  // checkpoint rebuilt).
  SparseTablesOptions options_;
  Mode mode_;
  int shard_id_;
  int num_shards_;
  int num_workers_;
  bool reject_nonfinite_;
  std::vector<TableSpec> specs_;
  absl::flat_hash_map<std::string, Table> tables_;
  std::vector<bool> dense_accepted_;   // sync: by worker, in the open step
  std::vector<int64_t> last_row_seq_;  // async: by worker
};

}  // namespace ps

#endif  // PS_SERVER_CORE_SPARSE_TABLES_H_
