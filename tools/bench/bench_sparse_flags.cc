// ps_bench sparse's own flags (bench_sparse.h, bench_rows_cold.h,
// rows_client.h); the shared ones are in bench_flags.h.
#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_sparse.h"

ABSL_FLAG(std::string, sparse_workload, "cold",
          "sparse: cold (ps-lite's workload: ps_server processes, a working set of --pool_rows "
          "rows created before timing, requests of K distinct sorted ids cycling through it; "
          "bench_rows_cold.h) or warm (in-process shards, one id set per figure, so its rows "
          "stay in cache; against the dense path).");
ABSL_FLAG(std::string, sparse_ids, "1000,10000,100000",
          "sparse: ids per request (each size is a cluster of its own).");
ABSL_FLAG(std::string, dims, "16,64", "sparse: row dims of the table.");
ABSL_FLAG(std::string, dists, "uniform,zipf",
          "sparse: id distributions: uniform or Zipf over the ids (cold: --id_space and "
          "--zipf_s; warm: --vocab, s = 1.1).");
ABSL_FLAG(int, sparse_shards, 0, "sparse: server shards (0 = 1 for cold, 2 for warm).");
ABSL_FLAG(int64_t, vocab, 1000000, "sparse warm: ids are drawn from [0, vocab).");
ABSL_FLAG(int, sparse_clients, 1, "sparse cold: client processes (W), one request in flight each.");
ABSL_FLAG(std::string, sockets, "tcp", "sparse cold: tcp (loopback) and/or unix (unix sockets).");
ABSL_FLAG(std::string, rows_transport, "stream",
          "sparse cold: the clients' transport: stream or unary.");
ABSL_FLAG(int64_t, pool_rows, 1000000, "sparse cold: ids in a pool of requests (the working set).");
ABSL_FLAG(int64_t, id_space, 10000000, "sparse cold: ids are drawn from [0, id_space).");
ABSL_FLAG(double, zipf_s, 1.05, "sparse cold: the Zipf exponent of --dists=zipf.");
ABSL_FLAG(double, sparse_lr, 0.01, "sparse cold: the servers' SGD rate for rows.");
ABSL_FLAG(int64_t, sparse_table_budget, 0,
          "sparse cold: the servers' --table_memory_budget in bytes (the rows past it on disk "
          "in RocksDB); each row then names the hot tier's hit rate and the servers' peak RSS. "
          "0 = every row in memory.");
ABSL_FLAG(int64_t, sparse_parallel_ids, -1,
          "sparse cold: the servers' --table_parallel_ids (calls of this many ids or more look "
          "rows up on a thread per core); -1 = ps_server's default.");
ABSL_FLAG(double, warmup_seconds, 0.5, "sparse cold: untimed seconds before each figure.");
ABSL_FLAG(std::string, pslite_bench, "",
          "sparse cold: ps-lite's driver (../shared/pslite/build.sh builds it); when given, it "
          "runs the same workload first and its figures are the baselines.");
ABSL_FLAG(int, rows_client, -1,
          "sparse cold, internal: run as client N of a parent ps_bench (rows_client.h).");
ABSL_FLAG(std::string, rows_servers, "", "sparse cold, internal: the servers of --rows_client.");
ABSL_FLAG(std::string, rows_go_fifo, "", "sparse cold, internal: the FIFO of --rows_client's gos.");

namespace ps {
namespace {

std::vector<std::string> Names(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipWhitespace());
}

absl::StatusOr<ColdRowsBenchOptions> ColdFromFlags() {
  ColdRowsBenchOptions o;
  ASSIGN_OR_RETURN(o.ks, ParseNonEmptyList(absl::GetFlag(FLAGS_sparse_ids), "sparse_ids"));
  ASSIGN_OR_RETURN(o.dims, ParseNonEmptyList(absl::GetFlag(FLAGS_dims), "dims"));
  o.dists = Names(absl::GetFlag(FLAGS_dists));
  o.ops = Names(absl::GetFlag(FLAGS_ops));
  o.sockets = Names(absl::GetFlag(FLAGS_sockets));
  o.transport = absl::GetFlag(FLAGS_rows_transport);
  o.shards = absl::GetFlag(FLAGS_sparse_shards) == 0 ? 1 : absl::GetFlag(FLAGS_sparse_shards);
  o.clients = absl::GetFlag(FLAGS_sparse_clients);
  o.pool_rows = absl::GetFlag(FLAGS_pool_rows);
  o.id_space = absl::GetFlag(FLAGS_id_space);
  o.zipf_s = absl::GetFlag(FLAGS_zipf_s);
  o.lr = absl::GetFlag(FLAGS_sparse_lr);
  o.table_budget = absl::GetFlag(FLAGS_sparse_table_budget);
  o.parallel_ids = absl::GetFlag(FLAGS_sparse_parallel_ids);
  ASSIGN_OR_RETURN(o.warmup,
                   SecondsFromFlag("warmup_seconds", absl::GetFlag(FLAGS_warmup_seconds)));
  ASSIGN_OR_RETURN(o.duration, SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  o.pslite_bench = absl::GetFlag(FLAGS_pslite_bench);
  for (const std::string& d : o.dists) {
    if (d != "uniform" && d != "zipf") {
      return absl::InvalidArgumentError(absl::StrCat("--dists: unknown entry '", d, "'"));
    }
  }
  for (const std::string& op : o.ops) {
    if (op != "pull" && op != "push" && op != "push_pull") {
      return absl::InvalidArgumentError(absl::StrCat("--ops: unknown entry '", op, "'"));
    }
  }
  if (o.dists.empty() || o.ops.empty() || o.sockets.empty()) {
    return absl::InvalidArgumentError("--dists, --ops and --sockets must not be empty");
  }
  return o;
}

}  // namespace

absl::StatusOr<SparseBenchOptions> SparseBenchOptionsFromFlags() {
  SparseBenchOptions o;
  o.workload = absl::GetFlag(FLAGS_sparse_workload);
  if (o.workload == "cold") {
    ASSIGN_OR_RETURN(o.cold, ColdFromFlags());
    ASSIGN_OR_RETURN(o.cold.server_binary, ServerBinaryFromFlags());
    return o;
  }
  if (o.workload != "warm") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sparse_workload: unknown '", o.workload, "' (cold or warm)"));
  }
  o.ids = absl::GetFlag(FLAGS_sparse_ids);
  o.dims = absl::GetFlag(FLAGS_dims);
  o.dists = absl::GetFlag(FLAGS_dists);
  o.ops = absl::GetFlag(FLAGS_ops);
  o.shards = absl::GetFlag(FLAGS_sparse_shards) == 0 ? 2 : absl::GetFlag(FLAGS_sparse_shards);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  ASSIGN_OR_RETURN(o.duration, SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  return o;
}

bool IsRowsClient() { return absl::GetFlag(FLAGS_rows_client) >= 0; }

absl::StatusOr<RowsClientOptions> RowsClientOptionsFromFlags() {
  RowsClientOptions o;
  ASSIGN_OR_RETURN(const ColdRowsBenchOptions cold, ColdFromFlags());
  if (cold.ks.size() != 1 || cold.dims.size() != 1 || cold.dists.size() != 1) {
    return absl::InvalidArgumentError("--rows_client takes one --sparse_ids, --dims and --dists");
  }
  o.servers = Names(absl::GetFlag(FLAGS_rows_servers));
  if (o.servers.empty()) return absl::InvalidArgumentError("--rows_client needs --rows_servers");
  o.client = absl::GetFlag(FLAGS_rows_client);
  o.go_fifo = absl::GetFlag(FLAGS_rows_go_fifo);
  if (o.go_fifo.empty()) return absl::InvalidArgumentError("--rows_client needs --rows_go_fifo");
  o.clients = cold.clients;
  if (o.client >= o.clients) {
    return absl::InvalidArgumentError("--rows_client must be below --sparse_clients");
  }
  o.transport = cold.transport;
  o.dim = static_cast<int>(cold.dims[0]);
  o.pool.ids_per_request = cold.ks[0];
  o.pool.pool_rows = cold.pool_rows;
  o.pool.id_space = cold.id_space;
  o.pool.zipf = cold.dists[0] == "zipf";
  o.pool.zipf_s = cold.zipf_s;
  o.ops = cold.ops;
  o.warmup = cold.warmup;
  o.duration = cold.duration;
  return o;
}

}  // namespace ps
