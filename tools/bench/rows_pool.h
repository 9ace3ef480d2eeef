// RowsPool: the requests of ps_bench sparse's cold workload, the one
// ps-lite's driver (../shared/pslite/pslite_sparse_bench.cc) measures: ids
// drawn uniformly or Zipf(s) over [0, id_space), cut into requests of K
// distinct ids, each sorted, about pool_rows ids in all, so that cycling
// through the requests touches a working set of about a million rows that
// no cache holds. `populate` holds every distinct id of the pool once, in
// random order, in sorted chunks: pushing them creates every row before
// timing, scattered in the server's memory as in a long-running server.
//
// Pure and deterministic: the same options give the same pool on any
// machine (the ids come from Mix64 of a counter, not from <random>).
#ifndef PS_TOOLS_BENCH_ROWS_POOL_H_
#define PS_TOOLS_BENCH_ROWS_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ps {

struct RowsPoolOptions {
  int64_t ids_per_request = 1000;  // K, >= 1
  int64_t pool_rows = 1000000;     // requests = max(1, pool_rows / K)
  int64_t id_space = 10000000;     // ids in [0, id_space); >= K
  bool zipf = false;               // else uniform
  double zipf_s = 1.05;            // > 0
  uint64_t seed = 1;
  int64_t populate_chunk = 4096;  // ids per populating push, >= 1
};

struct RowsPool {
  std::vector<std::vector<uint64_t>> requests;  // K distinct ids each, ascending
  std::vector<std::vector<uint64_t>> populate;  // every distinct id once, chunks ascending
  int64_t distinct_ids = 0;                     // the working set, in rows
  double draws_per_request = 0;                 // ids drawn to collect K distinct
};

// INVALID_ARGUMENT naming the option that is out of range.
absl::StatusOr<RowsPool> MakeRowsPool(const RowsPoolOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_ROWS_POOL_H_
