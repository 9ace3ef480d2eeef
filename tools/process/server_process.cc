#include "tools/process/server_process.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tools/process/cpu_affinity.h"

namespace ps {
namespace {

// The re-check interval where the kernel gives no inotify or no pidfd.
constexpr absl::Duration kFallbackInterval = absl::Milliseconds(20);

absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// An inotify watch of a folder for files closed after writing or renamed
// into it; fd() is -1 where the kernel refuses one.
class FolderWatch {
 public:
  explicit FolderWatch(const std::string& dir) : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0 && inotify_add_watch(fd_, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~FolderWatch() {
    if (fd_ >= 0) close(fd_);
  }
  FolderWatch(const FolderWatch&) = delete;
  FolderWatch& operator=(const FolderWatch&) = delete;

  int fd() const { return fd_; }

  // Reads the pending events (the caller looks at the folder itself).
  void Drain() {
    alignas(inotify_event) char buf[4096];
    while (read(fd_, buf, sizeof(buf)) > 0) {
    }
  }

 private:
  int fd_;
};

// The address in the port file; "" while there is none.
std::string ReadPortFile(const std::string& path) {
  std::ifstream in(path);
  std::string address;
  std::getline(in, address);
  return address;
}

// Waits until the port file holds an address (returned), the child exits
// (UNAVAILABLE) or `deadline` passes (DEADLINE_EXCEEDED).
absl::StatusOr<std::string> AwaitPortFile(ChildProcess& child, FolderWatch& watch,
                                          const std::string& port_file, absl::Time deadline) {
  while (true) {
    // Before the exit check: a server that wrote the file and then died is
    // seen dead by its first caller, not here.
    if (std::string address = ReadPortFile(port_file); !address.empty()) return address;
    if (child.Poll()) return absl::UnavailableError("exited");
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("no port file");
    pollfd fds[2];
    nfds_t n = 0;
    if (watch.fd() >= 0) fds[n++] = {watch.fd(), POLLIN, 0};
    if (child.exit_fd() >= 0) fds[n++] = {child.exit_fd(), POLLIN, 0};
    const absl::Time wake = n == 2 ? deadline : std::min(deadline, absl::Now() + kFallbackInterval);
    if (poll(fds, n, PollTimeoutMs(wake)) < 0 && errno != EINTR) return ErrnoError("poll");
    if (watch.fd() >= 0) watch.Drain();
  }
}

// Spawns `argv` from a thread of its own pinned to `cpus` (when set): the
// child inherits that thread's mask, and the caller's stays as it was.
absl::StatusOr<std::unique_ptr<ChildProcess>> SpawnOn(const std::optional<cpu_set_t>& cpus,
                                                      const std::vector<std::string>& argv,
                                                      const std::string& log) {
  if (!cpus) return ChildProcess::Spawn(argv, log, /*pipe_stdout=*/false);
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      absl::InternalError("the spawning thread did not run");
  std::thread spawner([&] {
    if (sched_setaffinity(0, sizeof(*cpus), &*cpus) != 0) {
      child = ErrnoError(absl::StrCat("cannot run ps_server on CPUs ", CpuListString(*cpus)));
      return;
    }
    child = ChildProcess::Spawn(argv, log, /*pipe_stdout=*/false);
  });
  spawner.join();
  return child;
}

// A server that exited with status 2 refused a flag's value (ps_server's
// exit status for a bad command line); one that exited with 1 naming an
// unknown flag was given a flag this build lacks (Abseil's exit).
bool RefusedItsFlags(int wait_status, const std::string& log_text) {
  if (!WIFEXITED(wait_status)) return false;
  const int code = WEXITSTATUS(wait_status);
  return code == 2 || (code == 1 && absl::StrContains(log_text, "Unknown command line flag"));
}

// The line of a refusing server's log that says why: the first error line,
// else the last line.
std::string RefusalLine(const std::string& log_text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(log_text, '\n')) {
    if (absl::StartsWith(line, "ERROR:") || absl::StartsWith(line, "ps_server:")) {
      return std::string(line);
    }
    if (!line.empty()) last = std::string(line);
  }
  return last;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::Status CheckOptions(const ServerProcessOptions& o) {
  if (o.binary.empty()) return absl::InvalidArgumentError("ServerProcessOptions: no binary");
  if (o.dir.empty()) return absl::InvalidArgumentError("ServerProcessOptions: no dir");
  if (o.name.empty() || absl::StrContains(o.name, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerProcessOptions: name '", o.name, "' is not a file name"));
  }
  if (o.start_timeout <= absl::ZeroDuration() || o.stop_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "ServerProcessOptions: start_timeout must be > 0 and stop_grace >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const ServerProcessOptions& o) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  if (access(o.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("no executable ps_server at ", o.binary));
  }
  const std::string base = absl::StrCat(o.dir, "/", o.name);
  const std::string port_file = base + ".port";
  std::remove(port_file.c_str());  // a previous run's
  std::vector<std::string> argv = {o.binary, absl::StrCat("--listen=", o.listen),
                                   absl::StrCat("--port_file=", port_file)};
  argv.insert(argv.end(), o.flags.begin(), o.flags.end());
  // Watching before the spawn: the file cannot appear unseen.
  FolderWatch watch(o.dir);
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = SpawnOn(o.cpus, argv, base + ".log");
  if (!child.ok()) return child.status();
  std::unique_ptr<ServerProcess> server(
      new ServerProcess(*std::move(child), absl::StrJoin(argv, " "), o.stop_grace));
  if (o.address_space > 0) {
    const rlimit as = {o.address_space, o.address_space};
    // ESRCH: it already exited, which the wait below reports.
    if (prlimit(server->pid(), RLIMIT_AS, &as, nullptr) != 0 && errno != ESRCH) {
      return ErrnoError("prlimit");
    }
  }
  absl::StatusOr<std::string> address =
      AwaitPortFile(*server->process_, watch, port_file, absl::Now() + o.start_timeout);
  if (address.ok()) {
    server->address_ = *std::move(address);
    return server;
  }
  if (absl::IsDeadlineExceeded(address.status())) {
    const std::optional<int> st = server->Stop();
    return absl::DeadlineExceededError(
        absl::StrCat("ps_server did not start: no port file within ",
                     absl::FormatDuration(o.start_timeout), " (then ", DescribeExit(st),
                     "): ", server->command_line(), "\n", server->process_->LogTail(10)));
  }
  if (!absl::IsUnavailable(address.status())) return address.status();
  const int st = *server->process_->Poll();
  const std::string log_text = ReadAll(server->process_->log());
  if (RefusedItsFlags(st, log_text)) return absl::InvalidArgumentError(RefusalLine(log_text));
  return absl::UnavailableError(absl::StrCat("ps_server did not start (", DescribeExit(st),
                                             "): ", server->command_line(), "\n",
                                             server->process_->LogTail(10)));
}

ServerProcess::~ServerProcess() {
  if (!process_->Poll()) Stop();
}

std::optional<int> ServerProcess::Stop() {
  process_->Stop(stop_grace_);
  return process_->Poll();
}

}  // namespace ps
