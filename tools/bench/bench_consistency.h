// ps_bench consistency: time to accuracy of each consistency mode with a
// straggler. For every (mode, optimizer) row it starts the real binaries on
// 127.0.0.1: `num_shards` ps_server processes and `num_workers` ps_worker
// processes training the built-in MLP, the last worker slowed down
// (ps_worker --slowdown: after each step it sleeps `straggler_slowdown`
// times its usual whole step, with `slowdown_of_step` (worker/straggler.h),
// so that its steps take 1 + straggler_slowdown times as long; or times its
// compute, which is less where a step is mostly communication), or,
// with `rotating_straggler`, every worker slowed so on every num_workers-th
// step, in turn (ps_worker --slowdown_every): each step has one straggler,
// never the same twice in a row.
// Worker 0 evaluates on the test set every `eval_every` steps; the bench
// times each evaluation line as it arrives, from worker 0's first line
// ("worker 0/W: mlp ..."), which it prints once it has loaded the data set
// and initialized the shards, right before its first step. A row ends when the accuracy reaches
// `target` (with `stop_at_target`), when worker 0 finishes its steps, or at `row_timeout`; then the
// bench reads the shards' staleness (QueryStatus) and stops every process.
//
// A row whose server flags this build's ps_server does not list in
// --helpfull, or that ps_server refuses at startup (exit status 2), is
// reported as not supported, and the other rows still run. Not thread-safe.
#ifndef PS_TOOLS_BENCH_BENCH_CONSISTENCY_H_
#define PS_TOOLS_BENCH_BENCH_CONSISTENCY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/consistency_rows.h"
#include "worker/mlp/dataset.h"

namespace ps {

struct ConsistencyBenchOptions {
  std::string server_binary;  // path of ps_server
  std::string worker_binary;  // path of ps_worker
  std::vector<ConsistencyMode> modes;
  std::vector<OptimizerRun> optimizers;
  int num_shards = 2;
  int num_workers = 4;
  double straggler_slowdown = 2;  // ps_worker --slowdown of the last worker
  bool rotating_straggler = false;  // every worker, on its turn (see above)
  bool slowdown_of_step = true;     // ps_worker --slowdown_of=step (else compute)
  double target = 0.85;           // test accuracy
  bool stop_at_target = true;
  int epochs = 5;           // ps_worker --epochs: the step limit with max_steps
  int64_t max_steps = 0;    // ps_worker --max_steps; 0 = the epochs'
  int64_t eval_every = 20;  // worker 0's ps_worker --eval_every, in steps
  int batch_size = 64;      // per worker
  int threads = 1;          // ps_worker --threads, each
  // Runs of every row; all rows' run 1, then all rows' run 2, ...
  int repeats = 1;
  absl::Duration row_timeout = absl::Minutes(15);
  std::string dataset_dir = kDefaultDatasetDir;
  // Where the processes' logs go; a new folder under /tmp when empty.
  std::string log_dir;
  // Print each evaluation as it arrives.
  bool progress = true;
};

enum class RowOutcome { kRan, kNotSupported, kFailed };

struct ConsistencyResult {
  std::string mode;      // ConsistencyMode::name
  std::string mode_key;  // ConsistencyMode::key
  OptimizerRun optimizer;
  int run = 1;  // 1 .. repeats; a row this build cannot run appears once
  RowOutcome outcome = RowOutcome::kFailed;
  // kNotSupported: the flag this build lacks, or ps_server's message;
  // kFailed: what failed, with log tails; kRan: "" or a note ("timed out").
  std::string message;
  std::vector<AccuracyPoint> points;  // worker 0's evaluations, in order
  AccuracySummary summary;
  StalenessSummary staleness;
};

// Runs every (mode, optimizer) row `repeats` times: runs outer, then modes,
// then optimizers. Errors only for a setup that no row can run with
// (missing binaries, no log folder).
absl::StatusOr<std::vector<ConsistencyResult>> RunConsistencyBench(
    const ConsistencyBenchOptions& options);

// The table, a line per (mode, optimizer): the time to the target accuracy
// (and its ratio to the sync row with the same optimizer), worker 0's step
// then, the final accuracy and when it was measured, and the mean and
// largest staleness; with several runs, their medians (CombineRuns) and
// each run's time to target.
void PrintConsistencyTable(const std::vector<ConsistencyResult>& results, double target);

// "mode,optimizer,lr,run,t_s,step,test_accuracy" lines, one per evaluation
// of every run that ran.
absl::Status WriteConsistencyCsv(const std::vector<ConsistencyResult>& results,
                                 const std::string& path);

// `ps_bench consistency` as its command line asks: the bench, and where its
// figures go besides the table.
struct ConsistencyCommand {
  ConsistencyBenchOptions bench;
  std::string csv;  // every evaluation (WriteConsistencyCsv); "" = none
  std::string png;  // accuracy against time, drawn from the CSV; "" = none
};

// ps_bench's flags (bench_consistency_flags.cc, bench_flags.h):
// INVALID_ARGUMENT naming a bad value (or --json); NOT_FOUND when there is
// no ps_server or ps_worker to run.
absl::StatusOr<ConsistencyCommand> ConsistencyCommandFromFlags();

// "2 shards, 4 workers of batch 64 (worker 3 sleeps 2x its usual step
// time), until test accuracy 0.85 or 1500 steps per worker".
std::string ConsistencySetupLine(const ConsistencyBenchOptions& options);

// Prints the setup line, runs the bench, prints the table, then writes the
// CSV and draws the PNG (tools/bench/plot_consistency.py with
// /usr/bin/python3, within 2 minutes). An error when the bench cannot run,
// an output cannot be written, or a row failed (the outputs are written
// first).
absl::Status RunConsistencyCommand(const ConsistencyCommand& command);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_CONSISTENCY_H_
