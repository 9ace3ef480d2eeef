// ps_bench elastic: what a worker joining or leaving a running sync job
// costs (docs/elastic.md). It starts a real etcd (tools/process/
// etcd_process.h), `num_shards` ps_server processes with --coordinator,
// and `base_workers` ps_worker processes training the built-in MLP; it reads
// shard 0's version (the step) every 10 ms (StatusPoller). After a steady
// window it starts `joining_workers` more ps_workers (they register, load
// their data, and take a share from the next epoch on: the steps wait for
// them from then), and later stops them with SIGTERM (they leave the job at
// once). For each event it reports the throughput of the window a window
// after it took effect (the joiners' keys all ready; a leave at once)
// against the steady one measured in the same run, and the pause: the
// longest time between two steps from the event to the end of its window.
//
// Rows (samples/s = steps/s x workers x batch):
//   steady            the base workers alone (its own baseline)
//   join +J           the second half of the window after the join
//   leave -J          the second half of the window after the leave
// Not thread-safe.
#ifndef PS_TOOLS_BENCH_BENCH_ELASTIC_H_
#define PS_TOOLS_BENCH_BENCH_ELASTIC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_common.h"
#include "worker/mlp/dataset.h"

namespace ps {

struct ElasticBenchOptions {
  std::string server_binary;  // path of ps_server
  std::string worker_binary;  // path of ps_worker
  int num_shards = 2;
  int base_workers = 1;     // train from the start to the end (>= 1)
  int joining_workers = 1;  // join after the steady window, leave later (>= 1)
  // Each window: the steady one, and after each event twice this (the pause
  // in it, the throughput in its second half).
  absl::Duration window = absl::Seconds(5);
  int batch_size = 64;  // per worker
  int threads = 1;      // ps_worker --threads, each
  std::string dataset_dir = kDefaultDatasetDir;

  // INVALID_ARGUMENT naming the flag of a value out of range.
  absl::Status Validate() const;
};

absl::StatusOr<std::vector<Row>> RunElasticBench(const ElasticBenchOptions& options);

// ps_bench's flags (bench_elastic_flags.cc, bench_flags.h).
absl::StatusOr<ElasticBenchOptions> ElasticBenchOptionsFromFlags();

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_ELASTIC_H_
