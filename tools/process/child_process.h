// ChildProcess: a real binary (ps_server, ps_worker, python3) run as a child
// process by ps_bench or by a test, its stdout read line by line through a
// pipe (so a bench can time each line as it arrives) or sent to a log file
// with its stderr. Started with posix_spawn, so it is safe in a process that
// runs other threads (gRPC's).
//
// Every wait takes a deadline; waiting for a line or for the exit blocks in
// poll(2) on the pipe or on a pidfd, never in a sleeping loop. The child is
// killed (SIGKILL) and reaped when the object is destroyed while it still
// runs. Not thread-safe: one thread owns each object.
#ifndef PS_TOOLS_PROCESS_CHILD_PROCESS_H_
#define PS_TOOLS_PROCESS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with `argv` and stdin from /dev/null. With
  // `pipe_stdout`, stdout goes to a pipe that ReadLine reads and stderr to
  // `log`, where ReadLine also appends each line it returns; without, both
  // go to `log`. The log is created or truncated.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::string& log,
                                                             bool pipe_stdout);
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }

  // REQUIRES: started with pipe_stdout. The next stdout line (without its
  // newline); nullopt at end of file (the child closed stdout: it exited)
  // or when `deadline` passes first (then timed_out() is true).
  std::optional<std::string> ReadLine(absl::Time deadline);
  bool timed_out() const { return timed_out_; }

  // The wait status (as from waitpid) once the child exited, reaping it;
  // nullopt while it runs. Does not block.
  std::optional<int> Poll();

  // Waits until `deadline` for the child to exit; its wait status (as from
  // waitpid) if it did.
  std::optional<int> Wait(absl::Time deadline);

  // Sends `sig` if the child still runs.
  void Signal(int sig);

  // SIGTERM, then SIGKILL if it has not exited within `grace`; reaps it.
  void Stop(absl::Duration grace);

  // The last `lines` lines of the log file, each indented and prefixed by
  // "| ".
  std::string LogTail(int lines) const;

 private:
  ChildProcess(pid_t pid, std::string log, int out_fd);

  const pid_t pid_;
  const std::string log_;
  int out_fd_;           // read end of the stdout pipe; -1 without one
  int pid_fd_;           // pidfd_open(pid_), or -1 where the kernel has none
  std::string pending_;  // read from the pipe, not yet returned as a line
  bool eof_ = false;
  bool timed_out_ = false;
  std::optional<int> status_;  // set once reaped
};

// "exit status N", "killed by signal N (Name)" or "still running".
std::string DescribeExit(std::optional<int> wait_status);

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_CHILD_PROCESS_H_
