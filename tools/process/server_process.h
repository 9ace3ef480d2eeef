// ServerProcess: the one way the tools and tests start a real ps_server as a
// child process and know that it serves.
//
// Readiness has one protocol: ps_server --port_file. The server writes its
// bound address to a temporary file and renames it to the port file once it
// serves (server/ps_server_main.cc), so the file appears whole or not at
// all. Start waits for it in poll(2) on an inotify watch of the file's
// folder and on the child's pidfd: it wakes when the file is renamed into
// place or when the child exits, never on a timer. Where the kernel offers
// no inotify or no pidfd it re-checks every 20 ms instead (the only
// interval). The wait has a deadline (`start_timeout`).
//
// The child's stdout and stderr go to DIR/NAME.log; the port file is
// DIR/NAME.port. An address-space limit is applied with prlimit right after
// the spawn: the server may have started running, but not serving.
// CPU pinning is inherited from a thread pinned for the spawn, so the child
// runs on those CPUs from its first instruction.
//
// The object owns the process: destroying it stops the server (SIGTERM,
// then SIGKILL after `stop_grace`). Not thread-safe: one thread owns it.
#ifndef PS_TOOLS_PROCESS_SERVER_PROCESS_H_
#define PS_TOOLS_PROCESS_SERVER_PROCESS_H_

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/process/child_process.h"

namespace ps {

struct ServerProcessOptions {
  std::string binary;              // path of ps_server
  std::vector<std::string> flags;  // its flags besides --listen and --port_file
  // --listen: "127.0.0.1:0" (a free port) or "unix:/ABS/PATH" (a socket in a
  // folder of mode 0700); the address the server serves on comes back from
  // its port file either way.
  std::string listen = "127.0.0.1:0";
  std::string dir;                // an existing folder for NAME.log and NAME.port
  std::string name = "server";    // a file name: no '/'
  uint64_t address_space = 0;     // RLIMIT_AS in bytes; 0 = as this process's
  std::optional<cpu_set_t> cpus;  // where it runs; unset = where this thread may
  absl::Duration start_timeout = absl::Seconds(30);  // until it serves
  absl::Duration stop_grace = absl::Seconds(10);     // SIGTERM to SIGKILL
};

class ServerProcess {
 public:
  // Starts the server and waits until it serves. Errors:
  //   INVALID_ARGUMENT  options that cannot work (no binary, no folder, a
  //                     name with '/', a timeout <= 0); or the server refused
  //                     its command line: it exited with status 2 (a flag
  //                     value ps_server refuses) or named an unknown flag
  //                     (a flag this build lacks). The message is then its
  //                     refusal line ("ps_server: ..." or "ERROR: ...").
  //   NOT_FOUND         no executable at `binary`.
  //   UNAVAILABLE       it exited before it served; how, with the command
  //                     and its log's tail.
  //   DEADLINE_EXCEEDED no port file within start_timeout (the process is
  //                     stopped); with the command and its log's tail.
  //   INTERNAL          the spawn, prlimit or pinning failed.
  // Every message about the server starts with "ps_server did not start"
  // except a refusal's.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const ServerProcessOptions& options);
  ~ServerProcess();

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // HOST:PORT or unix:PATH, as the server wrote it to its port file.
  const std::string& address() const { return address_; }
  pid_t pid() const { return process_->pid(); }
  // The command it runs, for messages.
  const std::string& command_line() const { return command_line_; }
  // The child: its log, signals, waits and exit status.
  ChildProcess& process() { return *process_; }

  // SIGTERM, then SIGKILL if it has not exited within stop_grace; reaps it.
  // Its wait status (as from waitpid).
  std::optional<int> Stop();

 private:
  ServerProcess(std::unique_ptr<ChildProcess> process, std::string command_line,
                absl::Duration stop_grace)
      : process_(std::move(process)),
        command_line_(std::move(command_line)),
        stop_grace_(stop_grace) {}

  const std::unique_ptr<ChildProcess> process_;
  const std::string command_line_;
  const absl::Duration stop_grace_;
  std::string address_;
};

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_SERVER_PROCESS_H_
