#include "tools/bench/bench_server_process.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tools/process/proc.h"

namespace ps {

absl::StatusOr<std::unique_ptr<BenchServerProcesses>> BenchServerProcesses::Start(
    const BenchServerProcessOptions& o) {
  char tmpl[] = "/tmp/ps_bench_servers.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary folder");
  std::unique_ptr<BenchServerProcesses> p(new BenchServerProcesses(tmpl));
  for (int s = 0; s < o.shards; ++s) {
    ServerProcessOptions so;
    so.binary = o.binary;
    so.flags = {absl::StrCat("--shard_id=", s), absl::StrCat("--num_shards=", o.shards),
                absl::StrCat("--num_workers=", o.num_workers), "--mode=async", "--lr=1e-6"};
    so.flags.insert(so.flags.end(), o.flags.begin(), o.flags.end());
    if (o.unix_socket) so.listen = absl::StrCat("unix:", p->dir_, "/shard-", s, ".sock");
    if (o.security.tls()) {
      so.flags.push_back(absl::StrCat("--tls_cert=", o.security.tls_cert));
      so.flags.push_back(absl::StrCat("--tls_key=", o.security.tls_key));
      so.flags.push_back(absl::StrCat("--tls_ca=", o.security.tls_ca));
    }
    so.dir = p->dir_;
    so.name = absl::StrCat("server-", s);
    so.cpus = o.cpus;
    ASSIGN_OR_RETURN(std::unique_ptr<ServerProcess> server, ServerProcess::Start(so));
    p->addresses_.push_back(server->address());
    p->servers_.push_back(std::move(server));
  }
  return p;
}

BenchServerProcesses::~BenchServerProcesses() {
  servers_.clear();  // stops them
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

absl::StatusOr<double> BenchServerProcesses::CpuSeconds() const {
  absl::Duration total;
  for (const auto& s : servers_) {
    ASSIGN_OR_RETURN(const absl::Duration cpu, ProcCpuTime(s->pid()));
    total += cpu;
  }
  return absl::ToDoubleSeconds(total);
}

absl::StatusOr<std::vector<std::string>> BenchServerProcesses::MetricsAddresses() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) {
    // ps_server's description line: "...; metrics on http://HOST:PORT/metrics".
    const std::string log = s->process().LogTail(100);
    const std::string kMark = "metrics on http://";
    const size_t at = log.find(kMark);
    const size_t end = at == std::string::npos ? at : log.find("/metrics", at + kMark.size());
    if (end == std::string::npos) {
      return absl::NotFoundError(
          absl::StrCat("no plaintext /metrics port in the log of ", s->command_line()));
    }
    out.push_back(log.substr(at + kMark.size(), end - at - kMark.size()));
  }
  return out;
}

absl::StatusOr<int64_t> BenchServerProcesses::PeakRssBytes() const {
  int64_t peak = 0;
  for (const auto& s : servers_) {
    ASSIGN_OR_RETURN(const int64_t hwm, ProcStatusBytes(s->pid(), "VmHWM"));
    peak = std::max(peak, hwm);
  }
  return peak;
}

absl::StatusOr<std::string> BenchServerProcesses::AllowedCpus() const {
  if (servers_.empty()) return absl::FailedPreconditionError("no ps_server process");
  return ProcAllowedCpus(servers_[0]->pid());
}

}  // namespace ps
