#include "tools/bench/bench_ctr_train.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/core/embedding_table.h"
#include "server/tier/rocksdb_row_tier.h"
#include "tools/process/local_servers.h"
#include "worker/ctr/trainer.h"
#include "worker/ctr/workload.h"
#include "worker/run_loop.h"

namespace ps {
namespace {

struct CtrRun {
  double samples_per_sec = 0;  // all workers together
  double auc = 0;
  int64_t table_rows = 0;  // in memory, all shards
  TableCounters tier;      // with a budget, all shards
};

// The servers' table settings of a run beyond the defaults: a budget
// (bytes per table and shard, and the tiers' folder), admission.
struct TableSettings {
  int64_t budget_bytes = 0;
  std::string dir;
  AdmissionOptions admission;
  bool prefetch = false;  // the workers name each next batch's ids
};

// One worker of `workers` with batch `batch`, through ps_worker's run loop:
// against `client`'s servers, or alone (Adam at b.dense_lr, AdaGrad 0.05).
absl::StatusOr<RunResult> Train(const CtrTrainBenchOptions& b, int worker_id, int workers,
                                int batch, const ClientOptions* client, bool prefetch = false) {
  CtrOptions o;
  o.prefetch_rows = prefetch;
  o.worker_id = worker_id;
  o.num_workers = workers;
  o.data.vocab_sizes = {b.vocab};
  o.data.num_examples = b.examples;
  o.batch_size = batch;
  o.steps = b.steps;
  o.eval_examples = b.eval_examples;
  o.threads = 1;  // the workers share the machine's cores
  ASSIGN_OR_RETURN(std::unique_ptr<CtrWorkload> workload, CtrWorkload::Create(o));
  RunOptions r;
  r.worker_id = worker_id;
  r.num_workers = workers;
  r.log_every = 0;
  return RunWorker(r, workload.get(), client, CtrStandaloneStore(b.dense_lr));
}

double Auc(const RunResult& r) {
  return r.evaluation.has_value() ? r.evaluation->Get("auc").value_or(0) : 0;
}

absl::StatusOr<CtrRun> Distributed(const CtrTrainBenchOptions& b, Mode mode, int servers,
                                   const TableSettings& tables = {}) {
  constexpr int kWorkers = 2;
  ServerOptions so;
  so.shard.num_workers = kWorkers;
  so.shard.mode = mode;
  so.shard.optimizer.name = "adam";
  so.shard.optimizer.learning_rate = b.dense_lr;
  if (tables.budget_bytes > 0) {
    so.shard.tables.memory_budget_bytes = tables.budget_bytes;
    so.shard.tables.make_tier = RocksDbTiersUnder(tables.dir);
  }
  so.shard.tables.admission = tables.admission;
  ASSIGN_OR_RETURN(LocalServers local, LocalServers::Start(so, servers));
  std::vector<absl::StatusOr<RunResult>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co;
      co.servers = local.addresses;
      co.worker_id = w;
      co.num_workers = kWorkers;
      results[w] = Train(b, w, kWorkers, b.batch, &co, tables.prefetch);
    });
  }
  for (auto& t : threads) t.join();
  CtrRun run;
  for (int w = 0; w < kWorkers; ++w) {
    if (!results[w].ok()) return results[w].status();
    run.samples_per_sec += results[w]->samples_per_sec;
    if (b.print_workers) {
      std::printf("  %s, %d server(s): worker %d %.0f samples/s\n", ModeName(mode).c_str(),
                  servers, w, results[w]->samples_per_sec);
    }
  }
  run.auc = Auc(*results[0]);
  for (const auto& server : local.servers) {
    for (const TableUsage& t : server->shard()->Stats().tables) {
      run.table_rows += t.rows;
      run.tier.in_memory += t.counters.in_memory;
      run.tier.from_tier += t.counters.from_tier;
      run.tier.created += t.counters.created;
    }
  }
  return run;
}

// The tiered rerun of `mode` with one server, against `all_memory`: the
// table's rows over tier_ratio as the budget.
absl::StatusOr<Row> Tiered(const CtrTrainBenchOptions& b, Mode mode, const CtrRun& all_memory,
                           bool prefetch) {
  ASSIGN_OR_RETURN(const TempDir temp, TempDir::Make("ps_bench_tier"));
  EmbeddingTableOptions row;
  row.dim = CtrOptions().model.dim;
  row.evict_lru = true;
  row.optimizer.kind = SparseOptimizerKind::kAdagrad;  // the servers' default
  const int64_t budget_rows = std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(all_memory.table_rows) / b.tier_ratio));
  TableSettings budget;
  budget.budget_bytes = budget_rows * static_cast<int64_t>(EmbeddingTable::MemoryBytesPerRow(row));
  budget.dir = temp.path;
  budget.prefetch = prefetch;
  ASSIGN_OR_RETURN(CtrRun run, Distributed(b, mode, 1, budget));
  const TableCounters& t = run.tier;
  const double lookups = static_cast<double>(t.in_memory + t.from_tier + t.created);
  Row r;
  r.name = absl::StrFormat(
      "ctr %s (1 server, %stable %lld rows = %.1fx its memory budget of %.1f MiB; hit rate "
      "%.1f%%, reads from disk %.1f%%) vs all in memory",
      ModeName(mode), prefetch ? "prefetching each next batch, " : "",
      static_cast<long long>(all_memory.table_rows),
      static_cast<double>(all_memory.table_rows) / static_cast<double>(budget_rows),
      static_cast<double>(budget.budget_bytes) / (1 << 20),
      lookups > 0 ? 100.0 * static_cast<double>(t.in_memory) / lookups : 0.0,
      lookups > 0 ? 100.0 * static_cast<double>(t.from_tier) / lookups : 0.0);
  r.value = run.samples_per_sec;
  r.baseline = all_memory.samples_per_sec;
  r.accuracy = run.auc;
  return r;
}

// The rerun of `mode` with one server and admission, against `all_memory`:
// the rows each keeps and the AUC.
absl::StatusOr<Row> Admitted(const CtrTrainBenchOptions& b, Mode mode, const CtrRun& all_memory) {
  TableSettings settings;
  settings.admission = b.admission;
  ASSIGN_OR_RETURN(CtrRun run, Distributed(b, mode, 1, settings));
  Row r;
  r.name = absl::StrFormat(
      "ctr %s (1 server, admission %s: %lld rows resident vs %lld, %.1f%% fewer; AUC %.4f vs "
      "%.4f) vs no admission",
      ModeName(mode), AdmissionToString(b.admission), static_cast<long long>(run.table_rows),
      static_cast<long long>(all_memory.table_rows),
      all_memory.table_rows > 0 ? 100.0 * (1.0 - static_cast<double>(run.table_rows) /
                                                     static_cast<double>(all_memory.table_rows))
                                : 0.0,
      run.auc, all_memory.auc);
  r.value = run.samples_per_sec;
  r.baseline = all_memory.samples_per_sec;
  r.accuracy = run.auc;
  return r;
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunCtrTrainBench(const CtrTrainBenchOptions& b) {
  if (b.steps < 1) return absl::InvalidArgumentError("--max_steps must be >= 1 for --model=ctr");
  // The baseline: one process, one thread, the two workers' batch in one.
  ASSIGN_OR_RETURN(RunResult standalone, Train(b, 0, 1, 2 * b.batch, nullptr));
  std::vector<Row> rows;
  Row base;
  base.name = absl::StrCat("ctr standalone (1 process, 1 thread, batch ", 2 * b.batch, ")");
  base.value = base.baseline = standalone.samples_per_sec;
  base.accuracy = Auc(standalone);
  rows.push_back(base);
  std::vector<std::pair<Mode, CtrRun>> one_server;
  for (int servers : {1, 2}) {
    for (Mode mode : {Mode::kSync, Mode::kAsync}) {
      ASSIGN_OR_RETURN(CtrRun run, Distributed(b, mode, servers));
      Row r;
      r.name = absl::StrCat("ctr ", ModeName(mode), " (", servers, servers == 1 ? " server" : " servers",
                            ", 2 workers, batch ", b.batch, " each)");
      r.value = run.samples_per_sec;
      r.baseline = standalone.samples_per_sec;
      r.accuracy = run.auc;
      rows.push_back(r);
      if (servers == 1) one_server.emplace_back(mode, run);
    }
  }
  if (b.tier_ratio > 0) {
    for (const auto& [mode, run] : one_server) {
      for (bool prefetch : {false, true}) {
        ASSIGN_OR_RETURN(Row r, Tiered(b, mode, run, prefetch));
        rows.push_back(r);
      }
    }
  }
  if (b.admission.kind != AdmissionOptions::Kind::kNone) {
    for (const auto& [mode, run] : one_server) {
      ASSIGN_OR_RETURN(Row r, Admitted(b, mode, run));
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace ps
