// Reporter: everything a worker's run tells the outside, for every workload,
// from one place:
//   - plain lines on `log`: the startup line, warnings, evaluations, the
//     workload's loss lines, and the last line;
//   - the progress line redrawn in place on a terminal (worker/progress.h);
//   - --metrics_file's JSON lines, one at each --log_every point, evaluation
//     and at the end;
//   - /metrics (worker/worker_metrics.h; served by rpc/metrics_endpoint.h
//     when options.metrics.listen is set, from Create until the reporter is
//     destroyed), and Linger (--metrics_linger).
//
// The lines (W worker id, S step, E epoch, L mean training loss since the
// previous point, X this worker's samples/s since then, evaluation time
// left out, T seconds since training started):
//   JSON      {"worker_id": W, "step": S, "epoch": E, "train_loss": L,
//              "samples_per_sec": X, "wall_s": T, "<key>": V, ...}
//             ("epoch" only for a workload with epochs; one "<key>": V per
//             EvalField of an evaluation made at that point)
//   evaluated step S epoch E loss L <Evaluation::line> samples/s X
//   loss      worker W step S loss L samples/s X   (WorkloadPlan::log_loss_lines)
//   last      worker W done: mode M, steps S, version V, samples/s X, wall_s T
//             [, gradients dropped D, steps skipped K][, final <Evaluation::summary>]
//
// It reads no clock: the run loop (worker/run_loop.h) passes the times in.
// Thread-compatible: one thread calls it, except for the function LogSink
// returns, which any thread may call (as the client's threads do).
#ifndef PS_WORKER_REPORTER_H_
#define PS_WORKER_REPORTER_H_

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/model_spec.h"
#include "rpc/metrics_endpoint.h"
#include "worker/progress.h"
#include "worker/train/workload.h"
#include "worker/worker_metrics.h"

namespace ps {

struct ReporterOptions {
  int worker_id = 0;
  std::string metrics_file;     // JSON lines; empty = none
  std::ostream* log = nullptr;  // plain lines; nullptr = silent
  // Redraw the progress line on `log` (a terminal) between the plain lines.
  bool progress_line = false;
  // --metrics_listen and the TLS it serves with; listen empty: no port.
  MetricsEndpointOptions metrics;
  absl::Duration metrics_linger;  // how long Linger keeps the port up
  // Record into this WorkerMetrics (a caller's port: ps_bench) instead of
  // the reporter's own; borrowed, must outlive the reporter.
  WorkerMetrics* external_metrics = nullptr;
};

// What a run did: the run loop returns it, the last line says it.
struct RunResult {
  std::string mode;            // "sync", "async", "ssp" or "standalone"
  int64_t steps = 0;           // the step reached (sync: from the servers' step at start)
  int64_t final_version = 0;   // of the weights at the end
  double samples_per_sec = 0;  // this worker's, evaluations excluded
  double wall_s = 0;
  double compute_s = 0;  // in Compute (forward, backward; a straggler's sleep)
  double comm_s = 0;     // in Exchange (communication and, sync, the peers)
  // Sync: steps whose gradient some shard dropped (its step had closed
  // without it), and steps skipped because the servers had moved on.
  int64_t steps_dropped = 0;
  int64_t steps_skipped = 0;
  std::optional<Evaluation> evaluation;  // the last one (worker 0)
  TensorList weights;                    // the dense weights at the end
};

// One trained step, for /metrics and the progress line.
struct StepReport {
  int64_t step = 0;     // the step reached (past skipped steps)
  int64_t samples = 0;  // examples trained
  double loss = 0;      // the batch's mean loss
  absl::Duration compute, communication;
  int64_t version = 0;                  // of the weights now held
  int64_t retries = 0, recoveries = 0;  // the client's totals
};

class Reporter {
 public:
  // Opens the metrics file and the /metrics port (and says where, on
  // `log`). INVALID_ARGUMENT for a metrics file that cannot be written or
  // a bad address; the endpoint's errors.
  static absl::StatusOr<std::unique_ptr<Reporter>> Create(const ReporterOptions& options);
  // Silent: no lines, no file, no port (tests, benchmarks).
  static std::unique_ptr<Reporter> Silent();

  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // A plain line (`text` without its newline), after erasing the progress
  // line; the next redraw brings it back.
  void Line(absl::string_view text);
  // A sink for other threads' lines: each erases the progress line (an ANSI
  // "erase in line") before it. Lives as long as `log`.
  std::function<void(absl::string_view)> LogSink() const;

  // Training starts at `now`, in `mode`, holding weights of `version`, at
  // step `first_step` (> 0: a sync resume) of plan.total_steps.
  void Start(const WorkloadPlan& plan, absl::string_view mode, int64_t version, int64_t first_step,
             absl::Time now);
  // A step was trained (it ended at `now`).
  void Step(const StepReport& step, absl::Time now);
  // A point at step `step` (epoch `epoch` of a workload with epochs) as of
  // `at`, with the evaluation made there, if any (nullptr). Training resumes
  // at `resume`: the time between, spent evaluating, is not training.
  void Point(int64_t step, int64_t epoch, const Evaluation* evaluation, absl::Time at,
             absl::Time resume);
  // After the last step: the progress line stays on screen, ended, so that
  // the lines after it start on a fresh line.
  void EndSteps();
  // The last line, and the final version on /metrics.
  void Done(const RunResult& result);
  // With a /metrics port and a linger: says so, and serves it that long.
  void Linger();

 private:
  Reporter(const ReporterOptions& options, std::unique_ptr<std::ofstream> file);
  void Write(const std::string& text);  // to `log`, clearing the progress line first

  const ReporterOptions options_;
  const std::unique_ptr<std::ofstream> file_;  // null without --metrics_file
  WorkerMetrics own_metrics_;
  WorkerMetrics* const metrics_;  // own_metrics_ or options_.external_metrics
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::optional<ProgressLine> progress_;  // from Start, with progress_line
  WorkloadPlan plan_;
  absl::Time start_, window_start_;
  // Since the previous point.
  int64_t window_samples_ = 0, window_batches_ = 0;
  double window_loss_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_REPORTER_H_
