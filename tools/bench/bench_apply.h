// ps_bench apply: the optimizer's apply rate over a shard's weights, on one
// thread and split over the cores as a shard applies, against a plain axpy
// loop (y += a * x: the same bytes) in the same run. Not thread-safe.
#ifndef PS_TOOLS_BENCH_BENCH_APPLY_H_
#define PS_TOOLS_BENCH_BENCH_APPLY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_common.h"

namespace ps {

struct ApplyBenchOptions {
  std::string elements = "1048576,16777216";   // shard sizes in float32 elements
  absl::Duration duration = absl::Seconds(1);  // per figure
};

// Two rows per size ("sgd_apply", "sgd_shard"), in GB/s counting 12 bytes
// an element; INVALID_ARGUMENT for a bad list.
absl::StatusOr<std::vector<Row>> RunApplyBench(const ApplyBenchOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_APPLY_H_
