// ps_bench sparse: embedding rows by id. --sparse_workload=cold (the
// default) is ps-lite's workload against ps_server processes
// (tools/bench/bench_rows_cold.h); --sparse_workload=warm, this file, keeps
// one id set per figure, so its rows stay in cache:
//
// Warm: pulls and pushes of embedding rows by id against S in-process gRPC
// shards (async, so nothing waits), each against the dense path moving the
// same bytes of values in the same run.
//
// For each size (ids per request), dim and id distribution, one cluster
// holds a table of that dim and a dense tensor of ids * dim floats; one
// client measures PullRows, PushRows and PushRows-then-PullRows (push_pull)
// on the table, then Pull, Push and PushPull of the tensor: the dense row is
// the baseline. Ids are uniform over a vocabulary, or Zipf(1.1) over it
// (ranks shuffled by a hash, so the hot ids are not the small ones); a
// request's ids repeat under Zipf, and the client sends each once, so its
// rows/s counts the caller's ids and GB/s the caller's values (ids * dim * 4
// bytes per request). Not thread-safe (it owns the process while it
// measures).
#ifndef PS_TOOLS_BENCH_BENCH_SPARSE_H_
#define PS_TOOLS_BENCH_BENCH_SPARSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_common.h"
#include "tools/bench/bench_rows_cold.h"
#include "tools/bench/rows_client.h"

namespace ps {

struct SparseBenchOptions {
  std::string workload = "cold";  // cold (the options in `cold`) or warm (the rest)
  ColdRowsBenchOptions cold;
  std::string ids = "1000,10000,100000";  // ids per request
  std::string dims = "16,64";
  std::string dists = "uniform,zipf";  // id distributions
  std::string ops = "pull,push,push_pull";
  int shards = 2;                              // S
  int64_t vocab = 1000000;                     // ids drawn from [0, vocab)
  int warmup = 3;                              // untimed operations per figure
  absl::Duration duration = absl::Seconds(1);  // per figure
};

// A row per size, dim, distribution and operation: value GB/s of values,
// baseline the dense operation's GB/s for the same bytes; rows_per_s and
// unique_fraction (the share of a request's ids that are distinct) filled.
// INVALID_ARGUMENT naming the flag of a bad option.
absl::StatusOr<std::vector<Row>> RunSparseBench(const SparseBenchOptions& options);

// ps_bench's flags (bench_sparse_flags.cc, bench_flags.h); INVALID_ARGUMENT
// naming a flag that cannot be converted. Values are checked by
// RunSparseBench.
absl::StatusOr<SparseBenchOptions> SparseBenchOptionsFromFlags();

// Whether this ps_bench runs as a cold workload's client (--rows_client),
// and that client's options from the flags its parent gave it.
bool IsRowsClient();
absl::StatusOr<RowsClientOptions> RowsClientOptionsFromFlags();

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_SPARSE_H_
