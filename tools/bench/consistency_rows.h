// The rows of `ps_bench consistency` and the pure rules that turn what the
// real binaries print into its table: which server flags a row needs (and
// whether this build's ps_server has them), worker 0's evaluation lines,
// time to a target accuracy, and the staleness the shards report.
//
// No clock, no processes: tools/bench/bench_consistency.h runs the binaries and
// feeds these. Stateless; thread-safe.
#ifndef PS_TOOLS_BENCH_CONSISTENCY_ROWS_H_
#define PS_TOOLS_BENCH_CONSISTENCY_ROWS_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// A consistency mode, as ps_server flags.
struct ConsistencyMode {
  std::string key;                        // for --modes: "sync", "ssp1", ...
  std::string name;                       // in the table: "sync, quorum 3"
  std::vector<std::string> server_flags;  // "--mode=ssp", "--staleness=1"
};

// sync; sync --sync_quorum=3; ssp S=1; ssp S=3; async; async
// --staleness_lr=inverse. For 4 workers (the quorum of 3 is one backup).
const std::vector<ConsistencyMode>& AllConsistencyModes();

// The modes named by a comma-separated list of keys, in the list's order;
// INVALID_ARGUMENT naming --`flag` for an unknown or repeated key or an
// empty list.
absl::StatusOr<std::vector<ConsistencyMode>> ParseModes(absl::string_view keys,
                                                        absl::string_view flag);

// An optimizer and the learning rate a row runs it with.
struct OptimizerRun {
  std::string name;  // passed to ps_server --optimizer as it is
  double lr = 0;     // ps_server --lr
};

// "sgd:0.1,adam:0.001": NAME:LR pairs, LR > 0; the same errors.
absl::StatusOr<std::vector<OptimizerRun>> ParseOptimizers(absl::string_view pairs,
                                                          absl::string_view flag);

// The flag names (without "--") that a binary's --helpfull lists.
std::set<std::string> FlagNamesFromHelp(absl::string_view helpfull);

// The server flags of one row, or why this build cannot run it.
struct RowFlags {
  std::vector<std::string> flags;
  // Empty when runnable; else the first flag the server does not have, as
  // "--name=value".
  std::string unsupported_flag;
};

// `mode`'s flags plus --optimizer=NAME and --lr=LR, checked
// against `known` (FlagNamesFromHelp of ps_server). A server without
// --optimizer applies SGD, so --optimizer=sgd is left out there rather
// than refused.
RowFlags ServerFlagsFor(const ConsistencyMode& mode, const OptimizerRun& optimizer,
                        const std::set<std::string>& known);

// Worker 0's evaluation line ("step N epoch E loss L test_accuracy A
// test_loss T samples/s S"): step and accuracy; nullopt for other lines.
struct EvalLine {
  int64_t step = 0;
  double accuracy = 0;
};
std::optional<EvalLine> ParseEvalLine(absl::string_view line);

// One evaluation, timed by the bench from the start of the workers.
struct AccuracyPoint {
  double t_s = 0;
  int64_t step = 0;
  double accuracy = 0;
};

// What a row's evaluations say.
struct AccuracySummary {
  std::optional<double> time_to_target_s;  // first point with accuracy >= target
  int64_t step_at_target = -1;
  double final_accuracy = -1;  // the last point's; -1 with no points
  double final_t_s = 0;
};
AccuracySummary Summarize(const std::vector<AccuracyPoint>& points, double target);

// One shard's staleness figures, from its StatusResponse (proto/ps.proto).
struct ShardStaleness {
  int64_t pushes_accepted = 0;
  double mean_staleness = 0;
  int64_t max_staleness = 0;
};

// The staleness of the gradients the shards applied: the largest over the
// shards, and the mean over every applied push (each shard's mean weighted
// by its pushes_accepted).
struct StalenessSummary {
  double mean = 0;
  int64_t max = 0;
};
StalenessSummary CombineStaleness(const std::vector<ShardStaleness>& shards);

// A row over its repeated runs (ps_bench consistency --repeats).
struct RepeatedRow {
  // The median time to target, a run that never reached it counting as
  // later than any that did: nullopt when half the runs or more did not
  // (with an even count, the mean of the two middle values, so both must
  // have reached it).
  std::optional<double> median_time_to_target_s;
  int reached = 0;                     // runs that reached the target
  int64_t median_step_at_target = -1;  // over the runs that reached it
  double median_final_accuracy = -1;
  double median_final_t_s = 0;
  StalenessSummary staleness;  // mean of the runs' means, largest max
};
// REQUIRES: runs.size() == staleness.size() > 0.
RepeatedRow CombineRuns(const std::vector<AccuracySummary>& runs,
                        const std::vector<StalenessSummary>& staleness);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_CONSISTENCY_ROWS_H_
