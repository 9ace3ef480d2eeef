// ps_bench train: Fashion-MNIST MLP training throughput and accuracy:
// standalone (one process, the baseline), then 1 in-process server and 2
// worker threads in sync and async mode (with scrape_every, also sync with
// /metrics scraped), a fault-tolerant sync run
// (checkpoints, leases, retries) and, with TLS, sync and async over mutual
// TLS; with `processes`, sync and async again as separate ps_server and
// ps_worker processes (tools/bench/train_processes.h), on a unix socket and/or
// loopback TCP. Not thread-safe.
#ifndef PS_TOOLS_BENCH_BENCH_TRAIN_H_
#define PS_TOOLS_BENCH_BENCH_TRAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_common.h"
#include "worker/mlp/dataset.h"

namespace ps {

struct TrainBenchOptions {
  int epochs = 3;               // for each configuration
  int64_t max_steps = 0;        // per configuration; 0 = all
  float lr = 0.1f;
  // The fault-tolerant row's checkpoint interval, in versions; 0 = no row.
  int64_t checkpoint_every = 100;
  std::string dataset_dir = kDefaultDatasetDir;
  BenchTls tls;
  // > 0: a sync row with /metrics on the server and the workers, each
  // scraped this often, against the plain sync row: run A-B-B-A (the plain
  // row, two scraped runs, one more plain run), the row the ratio of the
  // means, so neither the order nor a drift of the machine favours a side.
  absl::Duration scrape_every = absl::ZeroDuration();
  // Rounds of A-B-B-A for that row (its figures the means over all runs).
  int scrape_rounds = 1;
  // Print each distributed worker's compute and wait time to stdout.
  bool print_workers = true;
  // Also run the real binaries: 1 ps_server and 2 ps_worker processes, sync
  // and async, with the in-process rows' batch, threads, epochs, steps and
  // learning rate; over a unix socket (`process_unix`) and/or 127.0.0.1
  // TCP, plaintext (`process_tcp`).
  bool processes = false;
  bool process_unix = true;
  bool process_tcp = true;
  std::string server_binary;  // ps_server, with `processes`
  std::string worker_binary;  // ps_worker, with `processes`
  absl::Duration process_timeout = absl::Minutes(15);  // per process row
};

// The standalone row first (its own baseline), then a row per
// configuration against it.
absl::StatusOr<std::vector<Row>> RunTrainBench(const TrainBenchOptions& options);

// What ps_bench train trains (--model): the MLP here, or the CTR model of
// bench_ctr_train.h. INVALID_ARGUMENT for another name.
enum class TrainModel { kMlp, kCtr };
absl::StatusOr<TrainModel> TrainModelFromFlags();

// ps_bench's flags (bench_train_flags.cc, bench_flags.h): INVALID_ARGUMENT
// naming a bad --process_sockets (checked with or without --processes),
// --scrape_every or --repeats; NOT_FOUND for --processes without the
// binaries to run.
absl::StatusOr<TrainBenchOptions> TrainBenchOptionsFromFlags();

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_TRAIN_H_
