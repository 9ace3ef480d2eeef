#include "tools/bench/bench_server_process.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tools/process/cpu_affinity.h"

namespace ps {
namespace {

constexpr absl::Duration kServerStart = absl::Seconds(30);
constexpr absl::Duration kStopGrace = absl::Seconds(10);

// Spawns `argv` from a thread of its own pinned to `cpus` (when set): the
// child inherits that thread's mask, and the caller's stays as it was.
absl::StatusOr<std::unique_ptr<ChildProcess>> SpawnOn(const std::optional<cpu_set_t>& cpus,
                                                      const std::vector<std::string>& argv,
                                                      const std::string& log) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      absl::InternalError("the spawning thread did not run");
  std::thread spawner([&] {
    if (cpus) {
      if (absl::Status s = PinCallingThread(*cpus, "server_cpus"); !s.ok()) {
        child = s;
        return;
      }
    }
    child = ChildProcess::Spawn(argv, log, /*pipe_stdout=*/true);
  });
  spawner.join();
  return child;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BenchServerProcesses>> BenchServerProcesses::Start(
    const BenchServerProcessOptions& o) {
  if (access(o.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("--server_process: no executable ps_server at ", o.binary,
                     " (give --server_binary)"));
  }
  char tmpl[] = "/tmp/ps_bench_servers.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary folder");
  std::unique_ptr<BenchServerProcesses> p(new BenchServerProcesses(tmpl));
  for (int s = 0; s < o.shards; ++s) {
    std::vector<std::string> argv = {o.binary, "--listen=127.0.0.1:0",
                                     absl::StrCat("--shard_id=", s),
                                     absl::StrCat("--num_shards=", o.shards),
                                     absl::StrCat("--num_workers=", o.num_workers),
                                     "--mode=async", "--lr=1e-6"};
    if (o.security.tls()) {
      argv.push_back(absl::StrCat("--tls_cert=", o.security.tls_cert));
      argv.push_back(absl::StrCat("--tls_key=", o.security.tls_key));
      argv.push_back(absl::StrCat("--tls_ca=", o.security.tls_ca));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> server,
                     SpawnOn(o.cpus, argv, absl::StrCat(p->dir_, "/server-", s, ".log")));
    const absl::Time deadline = absl::Now() + kServerStart;
    std::string address;
    while (std::optional<std::string> line = server->ReadLine(deadline)) {
      absl::string_view rest = *line;
      if (absl::ConsumePrefix(&rest, "listening on ")) {
        // "listening on HOST:PORT; ..." or "listening on HOST:PORT (...)".
        address = std::string(rest.substr(0, rest.find_first_of("; (")));
        break;
      }
    }
    if (address.empty()) {
      const std::optional<int> st = server->Wait(absl::Now() + kStopGrace);
      return absl::UnavailableError(absl::StrCat(
          "ps_server did not start (", server->timed_out() ? "no address within 30 s, " : "",
          DescribeExit(st), "): ", absl::StrJoin(argv, " "), "\n", server->LogTail(8)));
    }
    p->addresses_.push_back(address);
    p->servers_.push_back(std::move(server));
  }
  return p;
}

BenchServerProcesses::~BenchServerProcesses() {
  for (auto& s : servers_) s->Stop(kStopGrace);
  servers_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

absl::StatusOr<double> BenchServerProcesses::CpuSeconds() const {
  static const double kTicks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  for (const auto& s : servers_) {
    const std::string path = absl::StrCat("/proc/", s->pid(), "/stat");
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    // "PID (COMM) STATE ...": fields after the command's closing parenthesis,
    // from field 3 (state); utime and stime are fields 14 and 15.
    const std::string all = text.str();
    const size_t paren = all.rfind(')');
    if (paren == std::string::npos) {
      return absl::InternalError(absl::StrCat("cannot read ", path, " (did ps_server exit?)"));
    }
    std::vector<std::string> f =
        absl::StrSplit(absl::string_view(all).substr(paren + 1), ' ', absl::SkipEmpty());
    double utime = 0, stime = 0;
    if (f.size() < 13 || !absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime)) {
      return absl::InternalError(absl::StrCat("unexpected contents of ", path));
    }
    total += (utime + stime) / kTicks;
  }
  return total;
}

std::string BenchServerProcesses::AllowedCpus() const {
  if (servers_.empty()) return "";
  std::ifstream in(absl::StrCat("/proc/", servers_[0]->pid(), "/status"));
  for (std::string line; std::getline(in, line);) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "Cpus_allowed_list:")) {
      return std::string(absl::StripAsciiWhitespace(rest));
    }
  }
  return "?";
}

}  // namespace ps
