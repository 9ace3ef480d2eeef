#include "tools/process/server_process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ps {

absl::StatusOr<ServerProcess> StartServerProcess(const std::string& binary,
                                                 const std::vector<std::string>& flags,
                                                 const std::string& dir, const std::string& tag,
                                                 uint64_t address_space) {
  const std::string port_file = absl::StrCat(dir, "/", tag, ".port");
  std::remove(port_file.c_str());
  std::vector<std::string> argv = {binary, "--listen=127.0.0.1:0", "--port_file=" + port_file};
  argv.insert(argv.end(), flags.begin(), flags.end());
  std::cout << "starting " << absl::StrJoin(argv, " ") << std::endl;
  ServerProcess s;
  auto child = ChildProcess::Spawn(argv, absl::StrCat(dir, "/", tag, "_server.log"),
                                   /*pipe_stdout=*/false);
  if (!child.ok()) return child.status();
  s.process = *std::move(child);
  const rlimit as = {address_space, address_space};
  if (prlimit(s.process->pid(), RLIMIT_AS, &as, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("prlimit: ", strerror(errno)));
  }
  // The server writes the file (by rename) once it serves.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && !s.process->Poll()) {
    std::ifstream in(port_file);
    if (in && std::getline(in, s.address) && !s.address.empty()) return s;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::UnavailableError(absl::StrCat("ps_server did not start (",
                                             DescribeExit(s.process->Poll()), "):\n",
                                             s.process->LogTail(20)));
}

int64_t ProcStatusBytes(pid_t pid, absl::string_view key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    absl::string_view v = line;
    int64_t kb;
    if (absl::ConsumePrefix(&v, key) &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(v), " kB"), &kb)) {
      return kb * 1024;
    }
  }
  return -1;
}

absl::Duration ProcCpuTime(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return absl::ZeroDuration();
  // After "pid (comm) " come state (field 3), ..., utime (14) and stime (15).
  const std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::ZeroDuration();
  }
  return absl::Seconds(double(utime + stime) / sysconf(_SC_CLK_TCK));
}

}  // namespace ps
