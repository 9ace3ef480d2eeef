// ps_bench sparse: pulls and pushes of embedding rows by id against S
// in-process gRPC shards (async, so nothing waits), each against the dense
// path moving the same bytes of values in the same run.
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

namespace ps {

struct SparseBenchOptions {
  std::string ids = "1000,10000,100000";  // ids per request
  std::string dims = "16,64";
  std::string dists = "uniform,zipf";     // id distributions
  std::string ops = "pull,push,push_pull";
  int shards = 2;                         // S
  int64_t vocab = 1000000;                // ids drawn from [0, vocab)
  int warmup = 3;                         // untimed operations per figure
  absl::Duration duration = absl::Seconds(1);  // per figure
};

// A row per size, dim, distribution and operation: value GB/s of values,
// baseline the dense operation's GB/s for the same bytes; rows_per_s and
// unique_fraction (the share of a request's ids that are distinct) filled.
// INVALID_ARGUMENT naming the flag of a bad option.
absl::StatusOr<std::vector<Row>> RunSparseBench(const SparseBenchOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_SPARSE_H_
