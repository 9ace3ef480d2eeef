// ServerProcess: a real ps_server run by a test as a child process
// (tools/process/child_process.h), and readings of a process's memory and CPU from
// /proc, for tests that run the real binaries.
#ifndef PS_TOOLS_PROCESS_SERVER_PROCESS_H_
#define PS_TOOLS_PROCESS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/process/child_process.h"

namespace ps {

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

// A field of /proc/<pid>/status in bytes (key "VmHWM:", "VmRSS:", ...); -1 if
// it cannot be read (e.g. the process was reaped).
int64_t ProcStatusBytes(pid_t pid, absl::string_view key);

// User plus system CPU time that process `pid` used so far; zero if unknown.
absl::Duration ProcCpuTime(pid_t pid);

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_SERVER_PROCESS_H_
