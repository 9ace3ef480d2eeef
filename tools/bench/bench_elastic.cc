#include "tools/bench/bench_elastic.h"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/admin_client.h"
#include "common/status_macros.h"
#include "coord/key_wait.h"
#include "coord/registration.h"
#include "tools/process/child_process.h"
#include "tools/process/etcd_process.h"
#include "tools/process/server_process.h"

namespace ps {
namespace {

// Shard 0's version every 10 ms, on a thread of its own, until destroyed.
class VersionTrace {
 public:
  explicit VersionTrace(std::unique_ptr<StatusPoller> poller)
      : poller_(std::move(poller)), thread_([this] { Run(); }) {}
  ~VersionTrace() {
    stop_.Notify();
    thread_.join();
  }

  // The version at `t` (the last sample at or before it; 0 before any).
  int64_t At(absl::Time t) const {
    absl::MutexLock l(&mu_);
    int64_t v = 0;
    for (const auto& [when, version] : samples_) {
      if (when > t) break;
      v = version;
    }
    return v;
  }
  // The longest time from one version change to the next (or to `to`, if
  // none comes) between `from` and `to`, counting from the last change at
  // or before `from`.
  absl::Duration LongestGap(absl::Time from, absl::Time to) const {
    absl::MutexLock l(&mu_);
    absl::Time last = from;  // the last change seen
    int64_t version = -1;
    absl::Duration longest = absl::ZeroDuration();
    for (const auto& [when, v] : samples_) {
      if (when > to) break;
      if (v == version) continue;
      version = v;
      if (when > from) longest = std::max(longest, when - last);
      last = when;
    }
    return std::max(longest, to - last);
  }
  // Waits until the version reaches `v` or `deadline` passes; whether it did.
  bool AwaitVersion(int64_t v, absl::Time deadline) const {
    while (absl::Now() < deadline) {
      if (At(absl::Now()) >= v) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

 private:
  void Run() {
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
      std::vector<absl::StatusOr<v1::StatusResponse>> r = poller_->Poll(absl::Seconds(1));
      if (r.empty() || !r[0].ok()) continue;
      absl::MutexLock l(&mu_);
      samples_.emplace_back(absl::Now(), r[0]->version());
    }
  }

  std::unique_ptr<StatusPoller> poller_;
  absl::Notification stop_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<absl::Time, int64_t>> samples_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace

absl::Status ElasticBenchOptions::Validate() const {
  if (num_shards < 1) return absl::InvalidArgumentError("--elastic_shards must be >= 1");
  if (base_workers < 1) return absl::InvalidArgumentError("--elastic_base_workers must be >= 1");
  if (joining_workers < 1) {
    return absl::InvalidArgumentError("--elastic_joining_workers must be >= 1");
  }
  if (window < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--elastic_window must be at least 1 second");
  }
  if (batch_size < 1 || threads < 1) {
    return absl::InvalidArgumentError("--batch_size and --threads must be >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Row>> RunElasticBench(const ElasticBenchOptions& o) {
  RETURN_IF_ERROR(o.Validate());
  ASSIGN_OR_RETURN(TempDir temp, TempDir::Make("ps_bench_elastic"));
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdProcess> etcd, EtcdProcess::Start(temp.path + "/etcd"));
  const int max_workers = o.base_workers + o.joining_workers;
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<std::string> addresses;
  for (int s = 0; s < o.num_shards; ++s) {
    ServerProcessOptions so;
    so.binary = o.server_binary;
    so.dir = temp.path;
    so.name = absl::StrCat("server", s);
    so.flags = {absl::StrCat("--shard_id=", s),
                absl::StrCat("--num_shards=", o.num_shards),
                absl::StrCat("--num_workers=", max_workers),
                "--mode=sync",
                absl::StrCat("--coordinator=", etcd->url()),
                "--job=bench"};
    ASSIGN_OR_RETURN(std::unique_ptr<ServerProcess> server, ServerProcess::Start(so));
    addresses.push_back(server->address());
    servers.push_back(std::move(server));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StatusPoller> poller,
                   StatusPoller::Create({addresses[0]}, SecurityOptions()));
  VersionTrace trace(std::move(poller));
  int started = 0;
  const auto start_worker = [&]() -> absl::StatusOr<std::unique_ptr<ChildProcess>> {
    const int k = started++;
    return ChildProcess::Spawn(
        {o.worker_binary, absl::StrCat("--coordinator=", etcd->url()), "--job=bench",
         "--epochs=100000", absl::StrCat("--batch_size=", o.batch_size),
         absl::StrCat("--threads=", o.threads), absl::StrCat("--dataset_dir=", o.dataset_dir),
         "--progress=off", "--log_every=0"},
        absl::StrCat(temp.path, "/worker", k, ".log"), /*pipe_stdout=*/false);
  };
  std::vector<std::unique_ptr<ChildProcess>> base, joining;
  for (int w = 0; w < o.base_workers; ++w) {
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> p, start_worker());
    base.push_back(std::move(p));
  }
  // Steady: from a second after the first step.
  if (!trace.AwaitVersion(1, absl::Now() + absl::Seconds(120))) {
    return absl::DeadlineExceededError(absl::StrCat(
        "elastic: the base workers did not train a step in 120 s:\n", base[0]->LogTail(10)));
  }
  absl::SleepFor(absl::Seconds(1));
  const double per_step = static_cast<double>(o.batch_size);
  const auto rate = [&](absl::Time a, absl::Time b, int workers) {
    return static_cast<double>(trace.At(b) - trace.At(a)) / absl::ToDoubleSeconds(b - a) *
           per_step * workers;
  };
  const absl::Time s0 = absl::Now();
  absl::SleepFor(o.window);
  const absl::Time s1 = absl::Now();
  Row steady;
  steady.name = absl::StrCat("steady W=", o.base_workers);
  steady.value = steady.baseline = rate(s0, s1, o.base_workers);
  steady.pause_ms = absl::ToDoubleMilliseconds(trace.LongestGap(s0, s1));
  std::vector<Row> rows = {steady};

  // Each event: the pause from it to two windows after it took effect,
  // the throughput in the second.
  const auto after = [&](const std::string& name, absl::Time event, absl::Time effect,
                         int workers) {
    absl::SleepFor(2 * o.window - (absl::Now() - effect));
    const absl::Time end = absl::Now();
    Row r;
    r.name = absl::StrCat(name, " W=", workers);
    r.value = rate(end - o.window, end, workers);
    r.baseline = steady.value;
    r.pause_ms = absl::ToDoubleMilliseconds(trace.LongestGap(event, end));
    return r;
  };
  const absl::Time join = absl::Now();
  for (int w = 0; w < o.joining_workers; ++w) {
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> p, start_worker());
    joining.push_back(std::move(p));
  }
  // A joiner trains from the next epoch on (docs/elastic.md, "Data
  // shares"): the join takes effect when every worker's key is ready.
  ASSIGN_OR_RETURN(const std::unique_ptr<EtcdClient> etcd_client, ConnectPlain(*etcd));
  ASSIGN_OR_RETURN(const bool joined, WaitForKeys(
                                          etcd_client.get(), RolePrefix("bench", "workers"),
                                          [&](const KeyMap& keys) {
                                            int ready = 0;
                                            for (const auto& [key, value] : keys)
                                              ready += WorkerReady(value);
                                            return ready == max_workers;
                                          },
                                          absl::Now() + absl::Seconds(300)));
  if (!joined) {
    return absl::DeadlineExceededError(absl::StrCat(
        "elastic: the joining workers took no share in 300 s:\n", joining[0]->LogTail(10)));
  }
  rows.push_back(after(absl::StrCat("join +", o.joining_workers), join, absl::Now(), max_workers));
  const absl::Time leave = absl::Now();
  for (auto& p : joining) p->Signal(SIGTERM);  // they leave the job at once
  rows.push_back(after(absl::StrCat("leave -", o.joining_workers), leave, leave, o.base_workers));
  for (auto& p : joining) p->Stop(absl::Seconds(10));
  if (rows.back().pause_ms > absl::ToDoubleMilliseconds(o.window)) {
    std::cerr << "elastic: the steps stopped after the leave; a leaving worker's log:\n"
              << joining[0]->LogTail(10) << "\nserver 0:\n"
              << servers[0]->process().LogTail(4) << "\nserver 1:\n"
              << servers.back()->process().LogTail(4) << "\nworker 0:\n"
              << base[0]->LogTail(10) << std::endl;
  }
  for (auto& p : base) p->Stop(absl::Seconds(10));
  return rows;
}

}  // namespace ps
