// ps_bench consistency's own flags (bench_consistency.h); the shared ones
// are in bench_flags.h.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "tools/bench/bench_consistency.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(std::string, modes, "sync,sync_q3,ssp1,ssp3,async,async_inverse",
          "consistency: the rows' modes, in order: sync; sync_q3 (sync --sync_quorum=3: the "
          "straggler is a backup worker); ssp1, ssp3 (--mode=ssp --staleness=1 or 3); async; "
          "async_inverse (async --staleness_lr=inverse).");
ABSL_FLAG(std::string, optimizers, "sgd:0.1,adam:0.001",
          "consistency: NAME:LR pairs; each mode runs once with each (ps_server "
          "--optimizer=NAME --lr=LR; a ps_server without --optimizer runs sgd rows without it).");
ABSL_FLAG(double, target_accuracy, 0.85, "consistency: the test accuracy to time.");
ABSL_FLAG(bool, stop_at_target, true,
          "consistency: end a row once worker 0 measures --target_accuracy; false: run each row "
          "to --step_limit (final accuracies at equal steps).");
ABSL_FLAG(int64_t, step_limit, 1500,
          "consistency: each worker's step limit (ps_worker --max_steps); 234 steps are an "
          "epoch with 4 workers of batch 64.");
ABSL_FLAG(int64_t, eval_every, 20,
          "consistency: worker 0 evaluates the test set every this many of its steps.");
ABSL_FLAG(double, straggler_slowdown, 2,
          "consistency: the last worker's ps_worker --slowdown (after each step it sleeps this "
          "many times its usual step: 2 = 3x slower). 0 = no straggler.");
ABSL_FLAG(std::string, straggler_slowdown_of, "step",
          "consistency: the stragglers' ps_worker --slowdown_of: step (the whole step, "
          "push-pull included) or compute (forward and backward only: less than 3x slower "
          "when a step is mostly communication).");
ABSL_FLAG(std::string, straggler, "fixed",
          "consistency: fixed (the last worker is slow at every step) or rotating (every "
          "worker is slow, by --straggler_slowdown, on every 4th of its steps, in turn: "
          "one straggler per step, a different one each time).");
ABSL_FLAG(bool, quick, false,
          "consistency: a few steps per row (--step_limit=30 --eval_every=10), for smoke tests.");
ABSL_FLAG(std::string, csv, "",
          "consistency: write every evaluation (mode,optimizer,lr,run,t_s,step,test_accuracy) to "
          "this file; default: --png's path with .csv, else none.");
ABSL_FLAG(std::string, png, "",
          "consistency: draw test accuracy against wall time, one line per row, to this PNG "
          "(tools/bench/plot_consistency.py, /usr/bin/python3 with Debian's python3-matplotlib).");
ABSL_FLAG(
    std::string, log_dir, "",
    "consistency: folder for the processes' logs; default: a new /tmp/ps_bench_consistency.*");

namespace ps {

absl::StatusOr<ConsistencyCommand> ConsistencyCommandFromFlags() {
  if (absl::GetFlag(FLAGS_json)) {
    return absl::InvalidArgumentError("consistency writes its figures with --csv, not --json");
  }
  ConsistencyCommand c;
  ConsistencyBenchOptions& o = c.bench;
  ASSIGN_OR_RETURN(o.modes, ParseModes(absl::GetFlag(FLAGS_modes), "modes"));
  ASSIGN_OR_RETURN(o.optimizers, ParseOptimizers(absl::GetFlag(FLAGS_optimizers), "optimizers"));
  o.target = absl::GetFlag(FLAGS_target_accuracy);
  o.stop_at_target = absl::GetFlag(FLAGS_stop_at_target);
  o.epochs = 1000;  // the limit is --step_limit
  o.max_steps = absl::GetFlag(FLAGS_step_limit);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.straggler_slowdown = absl::GetFlag(FLAGS_straggler_slowdown);
  const std::string straggler = absl::GetFlag(FLAGS_straggler);
  if (straggler != "fixed" && straggler != "rotating") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --straggler=", straggler, ": expected fixed or rotating"));
  }
  o.rotating_straggler = straggler == "rotating";
  const std::string slowdown_of = absl::GetFlag(FLAGS_straggler_slowdown_of);
  if (slowdown_of != "step" && slowdown_of != "compute") {
    return absl::InvalidArgumentError(absl::StrCat("unknown --straggler_slowdown_of=", slowdown_of,
                                                   ": expected step or compute"));
  }
  o.slowdown_of_step = slowdown_of == "step";
  const double timeout = absl::GetFlag(FLAGS_row_timeout);
  o.repeats = absl::GetFlag(FLAGS_repeats);
  if (absl::GetFlag(FLAGS_quick)) {
    o.max_steps = 30;
    o.eval_every = 10;
  }
  if (!(o.target > 0 && o.target <= 1) || o.max_steps <= 0 || o.eval_every <= 0 ||
      !(o.straggler_slowdown >= 0) || !(timeout > 0) || o.repeats < 1) {
    return absl::InvalidArgumentError(
        "need 0 < --target_accuracy <= 1, --step_limit > 0, --eval_every > 0, "
        "--straggler_slowdown >= 0, --row_timeout > 0, --repeats >= 1");
  }
  o.row_timeout = absl::Seconds(timeout);
  o.dataset_dir = absl::GetFlag(FLAGS_dataset_dir);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  ASSIGN_OR_RETURN(o.server_binary, ServerBinaryFromFlags());
  ASSIGN_OR_RETURN(o.worker_binary, WorkerBinaryFromFlags());
  c.png = absl::GetFlag(FLAGS_png);
  c.csv = absl::GetFlag(FLAGS_csv);
  if (c.csv.empty() && !c.png.empty()) {
    absl::string_view stem = c.png;
    absl::ConsumeSuffix(&stem, ".png");
    c.csv = absl::StrCat(stem, ".csv");
  }
  return c;
}

}  // namespace ps
