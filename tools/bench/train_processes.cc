#include "tools/bench/train_processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tools/process/child_process.h"
#include "tools/process/server_process.h"

namespace ps {
namespace {

constexpr absl::Duration kStopGrace = absl::Seconds(10);

// The run's processes; stopped (workers first) on destruction.
struct Processes {
  std::unique_ptr<ServerProcess> server;
  std::vector<std::unique_ptr<ChildProcess>> workers;

  ~Processes() {
    for (auto& w : workers) w->Stop(kStopGrace);
  }
};

// The last non-empty line of `path`; "" if there is none.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Starts the server (its log DIR/server.log) and waits until it serves.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartServer(const TrainProcessesOptions& o,
                                                           const std::string& dir) {
  ServerProcessOptions so;
  so.binary = o.server_binary;
  so.listen = o.unix_socket ? absl::StrCat("unix:", dir, "/shard-0.sock") : "127.0.0.1:0";
  so.flags = {absl::StrCat("--num_workers=", o.workers), absl::StrCat("--mode=", ModeName(o.mode)),
              absl::StrCat("--lr=", o.lr)};
  so.dir = dir;
  so.name = "server";
  so.stop_grace = kStopGrace;
  return ServerProcess::Start(so);
}

std::string MetricsPath(const std::string& dir, int worker) {
  return absl::StrCat(dir, "/worker", worker, ".metrics.jsonl");
}

absl::StatusOr<TrainProcessesResult> Run(const TrainProcessesOptions& o, const std::string& dir) {
  Processes p;
  ASSIGN_OR_RETURN(p.server, StartServer(o, dir));
  const std::string address = p.server->address();
  for (int w = 0; w < o.workers; ++w) {
    const std::vector<std::string> argv = {o.worker_binary,
                                           absl::StrCat("--servers=", address),
                                           absl::StrCat("--worker_id=", w),
                                           absl::StrCat("--num_workers=", o.workers),
                                           absl::StrCat("--epochs=", o.epochs),
                                           absl::StrCat("--max_steps=", o.max_steps),
                                           absl::StrCat("--batch_size=", o.batch_size),
                                           absl::StrCat("--threads=", o.threads),
                                           absl::StrCat("--dataset_dir=", o.dataset_dir),
                                           absl::StrCat("--metrics_file=", MetricsPath(dir, w)),
                                           "--device=cpu",
                                           "--log_every=0",
                                           "--progress=off"};
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> worker,
                     ChildProcess::Spawn(argv, absl::StrCat(dir, "/worker", w, ".log"), false));
    p.workers.push_back(std::move(worker));
  }
  const absl::Time deadline = absl::Now() + o.timeout;
  TrainProcessesResult result;
  for (int w = 0; w < o.workers; ++w) {
    ChildProcess& worker = *p.workers[w];
    const std::optional<int> st = worker.Wait(deadline);
    if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
      return absl::InternalError(
          absl::StrCat("ps_worker ", w,
                       !st ? absl::StrCat(" still ran after ", absl::FormatDuration(o.timeout))
                           : absl::StrCat(" ended with ", DescribeExit(st)),
                       ":\n", worker.LogTail(8), "\nps_server:\n", p.server->process().LogTail(4)));
    }
    const std::string last = LastLine(MetricsPath(dir, w));
    const std::optional<double> sps = MetricsValue(last, "samples_per_sec");
    const std::optional<double> accuracy = MetricsValue(last, "test_accuracy");
    if (!sps || (w == 0 && !accuracy)) {
      return absl::InternalError(absl::StrCat("ps_worker ", w, "'s metrics file ",
                                              MetricsPath(dir, w),
                                              " ends without samples_per_sec or (worker 0) "
                                              "test_accuracy: '", last, "'"));
    }
    result.samples_per_sec += *sps;
    if (w == 0) result.accuracy = *accuracy;
  }
  return result;
}

}  // namespace

std::optional<double> MetricsValue(const std::string& line, const std::string& key) {
  const std::string quoted = absl::StrCat("\"", key, "\":");
  const size_t at = line.find(quoted);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = line.c_str() + at + quoted.size();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return v;
}

absl::StatusOr<TrainProcessesResult> RunTrainProcesses(const TrainProcessesOptions& o) {
  if (o.workers < 1) return absl::InvalidArgumentError("train --processes: need >= 1 worker");
  for (const std::string& bin : {o.server_binary, o.worker_binary}) {
    if (access(bin.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("train --processes: no executable ", bin));
    }
  }
  // Mode 0700, as a server on a unix socket requires of its folder.
  char tmpl[] = "/tmp/ps_bench_train.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary folder");
  const std::string dir = tmpl;
  absl::StatusOr<TrainProcessesResult> r = Run(o, dir);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat(r.status().message(), "\n(logs kept in ", dir, ")"));
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return r;
}

}  // namespace ps
