// ChildProcess: a program run as a child of the test, with its stdout and
// stderr going to a log file, for tests that run the real binaries.
//
// The child is killed (SIGKILL) and reaped when the object is destroyed while
// it still runs. Not thread-safe: one thread owns each object.
#ifndef PS_TESTS_CHILD_PROCESS_H_
#define PS_TESTS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ps {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `argv`, stdin from /dev/null, stdout and
  // stderr to `log` (created or truncated). Uses posix_spawn, so it is safe
  // in a process that runs other threads (gRPC's).
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::string& log);
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }

  // The wait status (as from waitpid) once the child exited; nullopt while
  // it runs.
  std::optional<int> Poll();

  // Waits up to `timeout` for the child to exit; its wait status if it did.
  std::optional<int> Wait(absl::Duration timeout);

  // Sends `sig` if the child still runs.
  void Signal(int sig);

  // The last `lines` lines of the log, each indented and prefixed by "| ".
  std::string LogTail(int lines) const;

 private:
  ChildProcess(pid_t pid, std::string log) : pid_(pid), log_(std::move(log)) {}

  const pid_t pid_;
  const std::string log_;
  std::optional<int> status_;  // set once reaped
};

// A real ps_server started by a test on an ephemeral port of 127.0.0.1.
struct ServerProcess {
  std::unique_ptr<ChildProcess> process;
  std::string address;  // 127.0.0.1:PORT, as the server wrote it to --port_file
};

// Starts `binary` with --listen=127.0.0.1:0, --port_file in `dir` and
// `flags`, logging to DIR/TAG_server.log, with its address space limited to
// `address_space` bytes (so a runaway allocation fails there instead of
// exhausting a shared machine), and waits up to 30 s until it serves.
absl::StatusOr<ServerProcess> StartServerProcess(const std::string& binary,
                                                 const std::vector<std::string>& flags,
                                                 const std::string& dir, const std::string& tag,
                                                 uint64_t address_space);

// "exit status N", "killed by signal N (Name)" or "still running".
std::string DescribeExit(std::optional<int> wait_status);

// A field of /proc/<pid>/status in bytes (key "VmHWM:", "VmRSS:", ...); -1 if
// it cannot be read (e.g. the process was reaped).
int64_t ProcStatusBytes(pid_t pid, absl::string_view key);

// User plus system CPU time that process `pid` used so far; zero if unknown.
absl::Duration ProcCpuTime(pid_t pid);

}  // namespace ps

#endif  // PS_TESTS_CHILD_PROCESS_H_
