// TrainProcesses: one row of `ps_bench train --processes`: the real
// binaries as users run them, one ps_server process and `workers` ps_worker
// processes on this host, on a unix socket (in a 0700 folder of its own,
// as deploy/local_cluster.sh runs them) or on 127.0.0.1 TCP (plaintext),
// training the built-in MLP as the in-process rows of ps_bench train do
// (same batch, threads, epochs, steps and learning rate).
//
// Its figures come from the workers' --metrics_file: each worker's last
// line holds its samples/s over the whole run (from its first step, after
// the data set is loaded and the shards initialized, as in-process);
// worker 0's also holds the final test accuracy.
//
// Every wait has a deadline (the server ready within 30 s, the
// workers within `timeout`); the processes are stopped on every return.
// The temporary folder (socket, logs, metrics) is removed after a
// successful run and kept, named in the error, after a failed one.
// Not thread-safe.
#ifndef PS_TOOLS_BENCH_TRAIN_PROCESSES_H_
#define PS_TOOLS_BENCH_TRAIN_PROCESSES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mode.h"
#include "worker/mlp/dataset.h"

namespace ps {

struct TrainProcessesOptions {
  std::string server_binary;  // path of ps_server
  std::string worker_binary;  // path of ps_worker
  Mode mode = Mode::kSync;    // ps_server --mode
  bool unix_socket = true;    // else 127.0.0.1:0, plaintext
  int workers = 2;            // ps_worker processes; ps_server --num_workers
  int batch_size = 64;        // ps_worker --batch_size, each
  int threads = 1;            // ps_worker --threads, each
  int epochs = 3;             // ps_worker --epochs
  int64_t max_steps = 0;      // ps_worker --max_steps; 0 = all
  float lr = 0.1f;            // ps_server --lr (SGD)
  std::string dataset_dir = kDefaultDatasetDir;
  absl::Duration timeout = absl::Minutes(15);  // for the workers to finish
};

struct TrainProcessesResult {
  double samples_per_sec = 0;  // all workers together
  double accuracy = 0;         // worker 0's final test accuracy
};

// Runs the processes to the end. NOT_FOUND for a binary that is not there;
// an error naming the process (with its log's tail) for one that fails.
absl::StatusOr<TrainProcessesResult> RunTrainProcesses(const TrainProcessesOptions& options);

// From a --metrics_file line (JSON), the number after "key": ; nullopt
// where the key is missing.
std::optional<double> MetricsValue(const std::string& line, const std::string& key);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_TRAIN_PROCESSES_H_
