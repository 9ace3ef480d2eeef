// ps_bench train --model=ctr: CTR training throughput (worker/ctr/workload.h)
// on the synthetic generator: standalone (one process, a LocalParamStore, the
// baseline), then 2 worker threads against 1 and 2 in-process servers, in
// sync and in async mode, each row samples/s of all workers against the
// standalone row, with worker 0's held-out AUC. The servers apply Adam
// (dense_lr) to the MLP and AdaGrad (the servers' default, lr 0.05) to the
// rows, as the standalone trainer does. With tier_ratio > 0, the async and
// sync one-server runs are run again with the embedding table tier_ratio
// times its memory budget (the rows past it in RocksDB, server/tier/), each
// against its all-memory run, with the hot tier's hit rate, without and
// with the workers prefetching each next batch (CtrOptions::prefetch_rows);
// with admission, again all in memory with that admission, against the
// same run without (resident rows and AUC). Not thread-safe.
#ifndef PS_TOOLS_BENCH_BENCH_CTR_TRAIN_H_
#define PS_TOOLS_BENCH_BENCH_CTR_TRAIN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/admission.h"
#include "tools/bench/bench_common.h"

namespace ps {

struct CtrTrainBenchOptions {
  int64_t steps = 2000;         // per worker, each configuration; >= 1
  int batch = 128;              // examples per step per worker (standalone: 2x)
  uint64_t vocab = 1000000;     // generator ids per feature
  int64_t examples = 1000000;   // generator training examples
  int eval_examples = 10000;    // held-out examples for the AUC, >= 2
  double dense_lr = 1e-3;       // Adam, on the servers and standalone
  bool print_workers = true;    // each worker's samples/s to stdout
  // Rows of the table over rows its memory budget holds, for the tiered
  // runs (--ctr_tier_ratio); 0: none.
  double tier_ratio = 10;
  // The admission of the admission runs (--ctr_admission); none: no runs.
  AdmissionOptions admission;
};

// The standalone row first (its own baseline), then one row per
// configuration against it.
absl::StatusOr<std::vector<Row>> RunCtrTrainBench(const CtrTrainBenchOptions& options);

// ps_bench's flags (bench_ctr_train_flags.cc, bench_flags.h).
absl::StatusOr<CtrTrainBenchOptions> CtrTrainBenchOptionsFromFlags();

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_CTR_TRAIN_H_
