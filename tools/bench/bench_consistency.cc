#include "tools/bench/bench_consistency.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/admin_client.h"
#include "common/status_macros.h"
#include "tools/process/child_process.h"
#include "tools/process/runfiles.h"
#include "tools/process/server_process.h"

namespace ps {
namespace {

constexpr absl::Duration kStopGrace = absl::Seconds(10);

std::string RowTag(const ConsistencyResult& r) {
  return absl::StrCat(r.mode_key, "_", r.optimizer.name);
}

// The flag names ps_server lists in --helpfull.
absl::StatusOr<std::set<std::string>> ServerFlagNames(const std::string& binary,
                                                      const std::string& log_dir) {
  auto p = ChildProcess::Spawn({binary, "--helpfull"}, log_dir + "/ps_server_helpfull.err",
                               /*pipe_stdout=*/true);
  if (!p.ok()) return p.status();
  std::string help;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (std::optional<std::string> line = (*p)->ReadLine(deadline)) {
    absl::StrAppend(&help, *line, "\n");
  }
  (*p)->Wait(deadline);
  std::set<std::string> names = FlagNamesFromHelp(help);
  if (names.count("mode") == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(binary, " --helpfull lists no --mode flag: is it ps_server?"));
  }
  return names;
}

// The processes of one row; stopped (workers first) on destruction.
struct Cluster {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<ChildProcess>> workers;  // worker 0 first

  ~Cluster() {
    for (auto& w : workers) w->Stop(kStopGrace);
  }
};

// Where a row's processes log: DIR/PREFIX<process>.log.
struct RowLogs {
  std::string dir;
  std::string prefix;  // "<mode>_<optimizer>_run<N>_"
};

// Starts shard `shard` and waits until it serves; on success appends it to
// `c`. A server that refuses its flags (a value it does not take, or a flag
// this build lacks) makes the row unsupported: `*unsupported` gets its
// refusal line.
absl::Status StartServer(const ConsistencyBenchOptions& o, const std::vector<std::string>& flags,
                         int shard, const RowLogs& logs, Cluster* c, std::string* unsupported) {
  ServerProcessOptions so;
  so.binary = o.server_binary;
  so.flags = {absl::StrCat("--shard_id=", shard), absl::StrCat("--num_shards=", o.num_shards),
              absl::StrCat("--num_workers=", o.num_workers)};
  so.flags.insert(so.flags.end(), flags.begin(), flags.end());
  so.dir = logs.dir;
  so.name = absl::StrCat(logs.prefix, "server", shard);
  so.stop_grace = kStopGrace;
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(so);
  if (absl::IsInvalidArgument(server.status())) {
    *unsupported = std::string(server.status().message());
    return absl::OkStatus();
  }
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("shard ", shard, ": ", server.status().message()));
  }
  c->addresses.push_back((*server)->address());
  c->servers.push_back(*std::move(server));
  return absl::OkStatus();
}

absl::Status StartWorkers(const ConsistencyBenchOptions& o, const RowLogs& logs, Cluster* c) {
  for (int w = 0; w < o.num_workers; ++w) {
    std::vector<std::string> argv = {o.worker_binary,
                                     absl::StrCat("--servers=", absl::StrJoin(c->addresses, ",")),
                                     absl::StrCat("--worker_id=", w),
                                     absl::StrCat("--num_workers=", o.num_workers),
                                     absl::StrCat("--epochs=", o.epochs),
                                     absl::StrCat("--max_steps=", o.max_steps),
                                     absl::StrCat("--batch_size=", o.batch_size),
                                     absl::StrCat("--threads=", o.threads),
                                     absl::StrCat("--dataset_dir=", o.dataset_dir),
                                     "--device=cpu",
                                     "--log_every=0"};
    if (w == 0) argv.push_back(absl::StrCat("--eval_every=", o.eval_every));
    if (o.straggler_slowdown > 0 && (o.rotating_straggler || w == o.num_workers - 1)) {
      argv.push_back(absl::StrCat("--slowdown=", o.straggler_slowdown));
      argv.push_back(absl::StrCat("--slowdown_of=", o.slowdown_of_step ? "step" : "compute"));
      if (o.rotating_straggler) argv.push_back(absl::StrCat("--slowdown_every=", o.num_workers));
    }
    auto p =
        ChildProcess::Spawn(argv, absl::StrCat(logs.dir, "/", logs.prefix, "worker", w, ".log"),
                            /*pipe_stdout=*/w == 0);
    if (!p.ok()) return p.status();
    c->workers.push_back(*std::move(p));
  }
  return absl::OkStatus();
}

// A worker that ended by itself with a failure, with its log's tail; "" if
// none did.
std::string FailedWorkers(const Cluster& c) {
  std::string out;
  for (size_t w = 0; w < c.workers.size(); ++w) {
    std::optional<int> st = c.workers[w]->Wait(absl::Now());
    if (st && !(WIFEXITED(*st) && WEXITSTATUS(*st) == 0)) {
      absl::StrAppend(&out, "worker ", w, " ended with ", DescribeExit(st), ":\n",
                      c.workers[w]->LogTail(8));
    }
  }
  return out;
}

void RunRow(const ConsistencyBenchOptions& o, const std::vector<std::string>& flags,
            const RowLogs& logs, ConsistencyResult* r) {
  Cluster c;
  for (int s = 0; s < o.num_shards; ++s) {
    std::string unsupported;
    absl::Status st = StartServer(o, flags, s, logs, &c, &unsupported);
    if (!st.ok()) {
      r->message = st.ToString();
      return;
    }
    if (!unsupported.empty()) {
      r->outcome = RowOutcome::kNotSupported;
      r->message = unsupported;
      return;
    }
  }
  absl::Time start = absl::Now();
  if (absl::Status st = StartWorkers(o, logs, &c); !st.ok()) {
    r->message = st.ToString();
    return;
  }
  ChildProcess& w0 = *c.workers[0];
  const absl::Time deadline = start + o.row_timeout;
  bool started = false;
  while (std::optional<std::string> line = w0.ReadLine(deadline)) {
    if (!started && absl::StartsWith(*line, "worker 0/")) {
      // Worker 0 has loaded the data set and initialized the shards, and
      // starts training: time 0 of the row.
      started = true;
      start = absl::Now();
    }
    std::optional<EvalLine> e = ParseEvalLine(*line);
    if (!e) continue;
    const AccuracyPoint p{absl::ToDoubleSeconds(absl::Now() - start), e->step, e->accuracy};
    r->points.push_back(p);
    if (o.progress) {
      std::printf("  %s / %s: %6.1f s  step %5lld  test_accuracy %.4f\n", r->mode.c_str(),
                  r->optimizer.name.c_str(), p.t_s, static_cast<long long>(p.step), p.accuracy);
      std::fflush(stdout);
    }
    if (o.stop_at_target && p.accuracy >= o.target) break;
  }
  if (w0.timed_out())
    r->message = absl::StrCat("timed out after ", absl::FormatDuration(o.row_timeout));
  // The servers still run: read their staleness before stopping anything.
  absl::StatusOr<std::vector<v1::StatusResponse>> status =
      QueryStatus(c.addresses, absl::Seconds(10));
  if (status.ok()) {
    std::vector<ShardStaleness> shards;
    for (const v1::StatusResponse& s : *status) {
      shards.push_back({s.pushes_accepted(), s.mean_staleness(), s.max_staleness()});
    }
    r->staleness = CombineStaleness(shards);
  }
  const std::string failed = FailedWorkers(c);
  r->summary = Summarize(r->points, o.target);
  if (!failed.empty()) {
    r->message = failed;
    return;
  }
  if (r->points.empty()) {
    r->message = absl::StrCat("worker 0 printed no evaluation:\n", w0.LogTail(8));
    return;
  }
  if (!status.ok()) {
    r->message = absl::StrCat("ps_server status: ", status.status().ToString());
    return;
  }
  r->outcome = RowOutcome::kRan;
}

std::string Seconds(std::optional<double> s) {
  return s ? absl::StrFormat("%.1f", *s) : std::string("not reached");
}

}  // namespace

absl::StatusOr<std::vector<ConsistencyResult>> RunConsistencyBench(
    const ConsistencyBenchOptions& o) {
  if (o.num_workers < 2 || o.num_shards < 1) {
    return absl::InvalidArgumentError("consistency needs at least 1 shard and 2 workers");
  }
  for (const std::string& bin : {o.server_binary, o.worker_binary}) {
    if (access(bin.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("no executable ", bin));
    }
  }
  std::string dir = o.log_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/ps_bench_consistency.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary folder");
    dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot make --log_dir=", dir, ": ", ec.message()));
    }
  }
  std::printf("logs: %s\n", dir.c_str());
  absl::StatusOr<std::set<std::string>> known = ServerFlagNames(o.server_binary, dir);
  if (!known.ok()) return known.status();
  std::vector<ConsistencyResult> results;
  std::set<std::string> unsupported;  // RowTag of the rows this build cannot run
  // Runs outer, so that the machine's load drifts over every row alike.
  for (int run = 1; run <= o.repeats; ++run) {
    for (const ConsistencyMode& mode : o.modes) {
      for (const OptimizerRun& opt : o.optimizers) {
        ConsistencyResult r;
        r.mode = mode.name;
        r.mode_key = mode.key;
        r.optimizer = opt;
        r.run = run;
        if (unsupported.count(RowTag(r)) > 0) continue;
        const RowFlags flags = ServerFlagsFor(mode, opt, *known);
        if (!flags.unsupported_flag.empty()) {
          r.outcome = RowOutcome::kNotSupported;
          r.message = absl::StrCat("flag ", flags.unsupported_flag);
        } else {
          RunRow(o, flags.flags, RowLogs{dir, absl::StrCat(RowTag(r), "_run", run, "_")}, &r);
        }
        if (r.outcome == RowOutcome::kNotSupported) unsupported.insert(RowTag(r));
        if (r.outcome == RowOutcome::kFailed) {
          std::fprintf(stderr, "ps_bench consistency: %s / %s, run %d failed: %s\n", r.mode.c_str(),
                       opt.name.c_str(), run, r.message.c_str());
        }
        results.push_back(std::move(r));
      }
    }
  }
  return results;
}

void PrintConsistencyTable(const std::vector<ConsistencyResult>& results, double target) {
  // The rows in order of first appearance, each with its runs.
  std::vector<std::vector<const ConsistencyResult*>> rows;
  std::map<std::string, size_t> index;
  int repeats = 1;
  for (const ConsistencyResult& r : results) {
    auto [it, added] = index.emplace(RowTag(r), rows.size());
    if (added) rows.emplace_back();
    rows[it->second].push_back(&r);
    repeats = std::max(repeats, r.run);
  }
  std::vector<RepeatedRow> combined(rows.size());
  // The sync row's (median) time to target, per optimizer: the baseline of
  // "vs sync".
  std::map<std::string, double> sync_time;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<AccuracySummary> summaries;
    std::vector<StalenessSummary> staleness;
    for (const ConsistencyResult* r : rows[i]) {
      if (r->outcome != RowOutcome::kRan) continue;
      summaries.push_back(r->summary);
      staleness.push_back(r->staleness);
    }
    if (summaries.empty()) continue;
    combined[i] = CombineRuns(summaries, staleness);
    const ConsistencyResult& r = *rows[i][0];
    if (r.mode_key == "sync" && combined[i].median_time_to_target_s) {
      sync_time[r.optimizer.name] = *combined[i].median_time_to_target_s;
    }
  }
  if (repeats > 1) {
    std::printf("medians of %d runs (a run that did not reach %.2f counts as the slowest)\n",
                repeats, target);
  }
  const std::string to = absl::StrFormat("to %.2f (s)", target);
  std::printf("%-26s %-9s %8s %12s %7s %6s %9s %8s %10s %9s%s\n", "mode", "optimizer", "lr",
              to.c_str(), "vs sync", "step", "final acc", "at (s)", "mean stale", "max stale",
              repeats > 1 ? "  each run (s)" : "");
  for (size_t i = 0; i < rows.size(); ++i) {
    const ConsistencyResult& r = *rows[i][0];
    std::string head = absl::StrFormat("%-26s %-9s %8g ", r.mode, r.optimizer.name, r.optimizer.lr);
    if (r.outcome == RowOutcome::kNotSupported) {
      std::printf("%snot supported by this build (%s)\n", head.c_str(), r.message.c_str());
      continue;
    }
    std::string notes, each;
    bool failed = false;
    for (const ConsistencyResult* run : rows[i]) {
      failed = failed || run->outcome != RowOutcome::kRan;
      if (!run->message.empty())
        absl::StrAppend(&notes, "  (run ", run->run, ": ", run->message, ")");
      absl::StrAppend(&each, " ",
                      run->summary.time_to_target_s
                          ? absl::StrFormat("%.1f", *run->summary.time_to_target_s)
                          : std::string("-"));
    }
    if (failed) {
      std::printf("%sfailed (see above)\n", head.c_str());
      continue;
    }
    const RepeatedRow& c = combined[i];
    auto base = sync_time.find(r.optimizer.name);
    const std::string ratio =
        c.median_time_to_target_s && base != sync_time.end()
            ? absl::StrFormat("%.2f", *c.median_time_to_target_s / base->second)
            : "-";
    const std::string step =
        c.median_step_at_target >= 0 ? absl::StrCat(c.median_step_at_target) : "-";
    std::printf("%s%12s %7s %6s %9.4f %8.1f %10.2f %9d%s%s\n", head.c_str(),
                Seconds(c.median_time_to_target_s).c_str(), ratio.c_str(), step.c_str(),
                c.median_final_accuracy, c.median_final_t_s, c.staleness.mean, c.staleness.max,
                repeats > 1 ? absl::StrCat(" ", each).c_str() : "", notes.c_str());
  }
}

absl::Status WriteConsistencyCsv(const std::vector<ConsistencyResult>& results,
                                 const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write --csv=", path));
  out << "mode,optimizer,lr,run,t_s,step,test_accuracy\n";
  for (const ConsistencyResult& r : results) {
    if (r.outcome != RowOutcome::kRan) continue;
    for (const AccuracyPoint& p : r.points) {
      out << absl::StrFormat("\"%s\",%s,%g,%d,%.3f,%d,%.4f\n", r.mode, r.optimizer.name,
                             r.optimizer.lr, r.run, p.t_s, p.step, p.accuracy);
    }
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

namespace {

// Renders the CSV at `csv` into `png`; the plotter's log goes to `log`.
absl::Status Plot(const std::string& csv, const std::string& png, double target,
                  const std::string& title, const std::string& log) {
  ASSIGN_OR_RETURN(const std::string script, FindRunfile("tools/bench/plot_consistency.py"));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> p,
      ChildProcess::Spawn({"/usr/bin/python3", script, csv, png, absl::StrCat("--target=", target),
                           absl::StrCat("--title=", title)},
                          log, /*pipe_stdout=*/false));
  const std::optional<int> st = p->Wait(absl::Now() + absl::Minutes(2));
  if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    return absl::InternalError(absl::StrCat(script, " ", DescribeExit(st), ":\n", p->LogTail(10)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ConsistencySetupLine(const ConsistencyBenchOptions& o) {
  const char* slept = o.slowdown_of_step ? "usual step" : "compute";
  const std::string straggler =
      o.rotating_straggler
          ? absl::StrFormat("each worker sleeps %gx its %s time on every %dth step, in turn",
                            o.straggler_slowdown, slept, o.num_workers)
          : absl::StrFormat("worker %d sleeps %gx its %s time", o.num_workers - 1,
                            o.straggler_slowdown, slept);
  return absl::StrFormat(
      "%d shards, %d workers of batch %d (%s), until test accuracy %.2f or %d steps per worker",
      o.num_shards, o.num_workers, o.batch_size, straggler, o.target, o.max_steps);
}

absl::Status RunConsistencyCommand(const ConsistencyCommand& c) {
  const std::string setup = ConsistencySetupLine(c.bench);
  std::printf("%s\n", setup.c_str());
  ASSIGN_OR_RETURN(const std::vector<ConsistencyResult> results, RunConsistencyBench(c.bench));
  std::printf("\n");
  PrintConsistencyTable(results, c.bench.target);
  std::fflush(stdout);
  if (!c.csv.empty()) {
    RETURN_IF_ERROR(WriteConsistencyCsv(results, c.csv));
    std::printf("wrote %s\n", c.csv.c_str());
  }
  if (!c.png.empty()) {
    if (absl::Status s =
            Plot(c.csv, c.png, c.bench.target, "ps_bench consistency: " + setup, c.png + ".log");
        !s.ok()) {
      return absl::InternalError(absl::StrCat("plotting failed: ", s.message()));
    }
    std::printf("wrote %s\n", c.png.c_str());
  }
  const int64_t failed = std::count_if(results.begin(), results.end(), [](const auto& r) {
    return r.outcome == RowOutcome::kFailed;
  });
  if (failed > 0) {
    return absl::InternalError(
        absl::StrCat(failed, " of ", results.size(), " rows failed (see above)"));
  }
  return absl::OkStatus();
}

}  // namespace ps
