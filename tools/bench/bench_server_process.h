// BenchServerProcesses: the shards of `ps_bench transport --server_process`
// (and of ps_bench sparse --sparse_workload=cold) as real ps_server child
// processes on 127.0.0.1 or unix sockets (async mode, so a push is
// applied at once and a pull never waits), optionally pinned to CPUs of
// their own, so that a client process and its servers each pay only their
// own side of the transport, as on a real cluster. Each is started and
// awaited by tools/process/server_process.h; CpuSeconds reads their CPU
// time from /proc (tools/process/proc.h) while they run.
//
// The processes are stopped (SIGTERM, then SIGKILL) and their temporary
// folder (logs) removed when the object is destroyed. Not thread-safe: one
// thread owns it.
#ifndef PS_TOOLS_BENCH_BENCH_SERVER_PROCESS_H_
#define PS_TOOLS_BENCH_BENCH_SERVER_PROCESS_H_

#include <sched.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/security_options.h"
#include "tools/process/server_process.h"

namespace ps {

struct BenchServerProcessOptions {
  std::string binary;             // path of ps_server
  int shards = 1;                 // processes, --shard_id 0..shards-1
  int num_workers = 1;            // ps_server --num_workers
  SecurityOptions security;       // its --tls_cert, --tls_key, --tls_ca; plaintext if none
  std::optional<cpu_set_t> cpus;  // where the processes run; unpinned if unset
  // Listen on unix sockets in the processes' temporary folder (mode 0700)
  // instead of loopback TCP.
  bool unix_socket = false;
  std::vector<std::string> flags;  // more ps_server flags (tables, optimizers)
};

class BenchServerProcesses {
 public:
  // Starts the shards and waits until they serve; ServerProcess::Start's
  // errors (NOT_FOUND for a binary that is not there, the log's tail for
  // one that fails).
  static absl::StatusOr<std::unique_ptr<BenchServerProcesses>> Start(
      const BenchServerProcessOptions& options);
  ~BenchServerProcesses();

  BenchServerProcesses(const BenchServerProcesses&) = delete;
  BenchServerProcesses& operator=(const BenchServerProcesses&) = delete;

  // HOST:PORT (or unix:PATH) of shard 0, 1, ...
  const std::vector<std::string>& addresses() const { return addresses_; }

  // The processes' CPU time so far (user + system, all threads), in seconds,
  // at the kernel's clock-tick resolution (usually 10 ms).
  absl::StatusOr<double> CpuSeconds() const;

  // "0-1": the CPUs shard 0 may run on, as the kernel reports them.
  absl::StatusOr<std::string> AllowedCpus() const;

  // HOST:PORT of each shard's /metrics port, as its log states it (the
  // shards need --metrics_listen among the flags); NOT_FOUND otherwise.
  absl::StatusOr<std::vector<std::string>> MetricsAddresses() const;
  // The largest peak resident set (VmHWM) of the processes, in bytes.
  absl::StatusOr<int64_t> PeakRssBytes() const;

 private:
  explicit BenchServerProcesses(std::string dir) : dir_(std::move(dir)) {}

  const std::string dir_;  // logs; removed on destruction, after the servers
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<std::string> addresses_;
};

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_SERVER_PROCESS_H_
