// ps_bench sparse --sparse_workload=cold: embedding rows on ps-lite's own
// workload (tools/bench/rows_pool.h), against real ps_server processes, so
// that what it measures is what a trainer gets from a long-running server:
// a working set of about a million rows (created before timing) that no
// cache holds, requests of K distinct sorted ids cycling through it, SGD on
// the server, one request in flight per client process.
//
// For each id distribution, K and dim: S ps_server processes (async, SGD
// at --sparse_lr), listening on loopback TCP or on unix sockets, and W
// client processes forked from this one before it makes any gRPC object.
// The clients create the pool's rows (each a share of the populating
// pushes), then measure each operation together: a warm-up, a barrier, the
// timed phase. A figure is the clients' rows per second summed.
//
// With --pslite_bench=PATH (../shared/pslite/build.sh builds it), ps-lite's
// driver runs the same workload (its --ks, --dims, --dists, --ops,
// --seconds) in the same run, over ZMQ on loopback TCP, and each figure's
// baseline is ps-lite's; nothing of ps-lite is linked in. Not thread-safe:
// it owns the process (and forks) while it measures.
#ifndef PS_TOOLS_BENCH_BENCH_ROWS_COLD_H_
#define PS_TOOLS_BENCH_BENCH_ROWS_COLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_common.h"

namespace ps {

struct ColdRowsBenchOptions {
  std::string server_binary;                        // ps_server
  std::vector<int64_t> ks = {1000, 10000, 100000};  // ids per request
  std::vector<int64_t> dims = {16, 64};
  std::vector<std::string> dists = {"uniform", "zipf"};
  std::vector<std::string> ops = {"pull", "push", "push_pull"};
  std::vector<std::string> sockets = {"tcp"};  // "tcp" (loopback) and/or "unix"
  std::string transport = "stream";            // the client's: stream or unary
  int shards = 1;                              // S server processes
  int clients = 1;                             // W client processes
  int64_t pool_rows = 1000000;                 // about this many ids per pool
  int64_t id_space = 10000000;                 // ids in [0, id_space)
  double zipf_s = 1.05;
  double lr = 0.01;                                 // the servers' SGD rate
  absl::Duration warmup = absl::Milliseconds(500);  // per figure, untimed
  absl::Duration duration = absl::Seconds(2);       // per figure, timed
  std::string pslite_bench;                         // ps-lite's driver; "" = no baseline
  // The servers' --table_memory_budget, bytes (0: none); with one, each
  // row's name adds the hot tier's hit rate and the servers' peak RSS.
  int64_t table_budget = 0;
  // The servers' --table_parallel_ids; -1: ps_server's default.
  int64_t parallel_ids = -1;
};

// A row per distribution, K, dim, socket and operation: value in M rows/s
// (all clients), baseline ps-lite's M rows/s (0 without --pslite_bench),
// p50 and p99 latency of client 0. INVALID_ARGUMENT naming the flag of a
// bad option; the servers' or clients' failure otherwise.
absl::StatusOr<std::vector<Row>> RunColdRowsBench(const ColdRowsBenchOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_ROWS_COLD_H_
