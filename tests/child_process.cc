#include "tests/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

extern char** environ;

namespace ps {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log));
}

ChildProcess::~ChildProcess() {
  if (!Poll()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::optional<int> ChildProcess::Poll() {
  int st;
  if (!status_ && waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
  return status_;
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  // Polls: a child's exit has no descriptor to block on here, and a test
  // waits for few children.
  const absl::Time deadline = absl::Now() + timeout;
  while (!Poll() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  return status_;
}

void ChildProcess::Signal(int sig) {
  if (!Poll()) kill(pid_, sig);
}

std::string ChildProcess::LogTail(int lines) const {
  std::ifstream in(log_);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  const size_t from = all.size() > size_t(lines) ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) absl::StrAppend(&out, "    | ", all[i], "\n");
  return out;
}

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
  auto child = ChildProcess::Spawn(argv, absl::StrCat(dir, "/", tag, "_server.log"));
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

std::string DescribeExit(std::optional<int> status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return absl::StrCat("exit status ", WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(*status), " (", strsignal(WTERMSIG(*status)),
                        ")");
  }
  return absl::StrCat("wait status ", *status);
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
