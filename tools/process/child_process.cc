#include "tools/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace ps {
namespace {

// Milliseconds until `deadline` for poll(2), at least 0, at most a minute
// (the caller loops).
int PollMs(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now()) + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

int OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log, bool pipe_stdout) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  int fds[2] = {-1, -1};
  if (pipe_stdout && pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (pipe_stdout) {
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    // O_APPEND: ReadLine appends the stdout lines to the same file.
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND,
                                     0644);
  } else {
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (pipe_stdout) close(fds[1]);
  if (rc != 0) {
    if (pipe_stdout) close(fds[0]);
    return absl::InternalError(
        absl::StrCat("cannot start ", argv[0], " with its output to ", log, ": ", strerror(rc)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log, fds[0]));
}

ChildProcess::ChildProcess(pid_t pid, std::string log, int out_fd)
    : pid_(pid), log_(std::move(log)), out_fd_(out_fd), pid_fd_(OpenPidFd(pid)) {}

ChildProcess::~ChildProcess() {
  if (!Poll()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (pid_fd_ >= 0) close(pid_fd_);
}

std::optional<std::string> ChildProcess::ReadLine(absl::Time deadline) {
  timed_out_ = false;
  while (true) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      std::ofstream(log_, std::ios::app) << line << "\n";
      return line;
    }
    if (eof_ || out_fd_ < 0) {
      if (pending_.empty()) return std::nullopt;
      return std::exchange(pending_, "");
    }
    pollfd p = {out_fd_, POLLIN, 0};
    const int n = poll(&p, 1, PollMs(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      if (absl::Now() < deadline) continue;
      timed_out_ = true;
      return std::nullopt;
    }
    char buf[4096];
    const ssize_t got = read(out_fd_, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      eof_ = true;
    } else {
      pending_.append(buf, got);
    }
  }
}

std::optional<int> ChildProcess::Poll() {
  int st;
  if (!status_ && waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
  return status_;
}

std::optional<int> ChildProcess::Wait(absl::Time deadline) {
  while (!Poll() && absl::Now() < deadline) {
    if (pid_fd_ >= 0) {
      // Readable once the child has exited.
      pollfd p = {pid_fd_, POLLIN, 0};
      poll(&p, 1, PollMs(deadline));
    } else {
      // No pidfd (a kernel before 5.3): nothing to block on but time.
      absl::SleepFor(std::min(absl::Milliseconds(20), deadline - absl::Now()));
    }
  }
  return status_;
}

void ChildProcess::Signal(int sig) {
  if (!Poll()) kill(pid_, sig);
}

void ChildProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (!Wait(absl::Now() + grace)) {
    Signal(SIGKILL);
    Wait(absl::Now() + absl::Seconds(10));
  }
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

std::string DescribeExit(std::optional<int> status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return absl::StrCat("exit status ", WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(*status), " (", strsignal(WTERMSIG(*status)),
                        ")");
  }
  return absl::StrCat("wait status ", *status);
}

}  // namespace ps
