// The one reader of /proc for the C++ tools and tests: a process's status
// fields (memory, allowed CPUs), its CPU time and thread count, integer
// kernel settings (sysctl), and this program's executable.
//
// Every call reads its file afresh and returns an error rather than a
// made-up value: NOT_FOUND naming the path when the process or setting does
// not exist (a child that exited and was reaped), DATA_LOSS when the
// contents are not what the kernel writes there, INVALID_ARGUMENT for a bad
// name. Linux only. Stateless; thread-safe.
//
// The parsers of the files' text are exposed (...FromText) so that tests can
// feed them hand-made contents.
#ifndef PS_TOOLS_PROCESS_PROC_H_
#define PS_TOOLS_PROCESS_PROC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ps {

// The value of field `name` ("VmHWM", "Cpus_allowed_list"; no colon) of
// /proc/PID/status, without surrounding blanks, units kept ("1234 kB").
absl::StatusOr<std::string> ProcStatusField(pid_t pid, absl::string_view name);

// A memory field of /proc/PID/status ("VmRSS", "VmHWM", ...) in bytes.
absl::StatusOr<int64_t> ProcStatusBytes(pid_t pid, absl::string_view name);

// The CPUs process `pid` may run on, as the kernel lists them ("0-1,3").
absl::StatusOr<std::string> ProcAllowedCpus(pid_t pid);

// User plus system CPU time of process `pid` so far, all its threads
// (/proc/PID/stat), at the kernel's clock-tick resolution (usually 10 ms).
absl::StatusOr<absl::Duration> ProcCpuTime(pid_t pid);

// The threads of process `pid` now (the entries of /proc/PID/task).
absl::StatusOr<int> ProcThreadCount(pid_t pid);

// An integer kernel setting by its sysctl name ("net.core.wmem_max":
// /proc/sys/net/core/wmem_max). INVALID_ARGUMENT for a name with an empty
// component or a character other than [A-Za-z0-9_-].
absl::StatusOr<int64_t> SysctlInt(absl::string_view name);

// The absolute path of this program's executable (/proc/self/exe).
absl::StatusOr<std::string> SelfExecutable();

// Field `name` of the text of a /proc/PID/status file; NOT_FOUND without it.
absl::StatusOr<std::string> StatusFieldFromText(absl::string_view text, absl::string_view name);

// "1234 kB" (a status memory field) in bytes; DATA_LOSS for anything else.
absl::StatusOr<int64_t> KilobytesFromText(absl::string_view value);

// utime + stime, in clock ticks, from the text of a /proc/PID/stat file
// (whose second field, the command, may hold spaces and parentheses).
absl::StatusOr<int64_t> CpuTicksFromStatText(absl::string_view text);

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_PROC_H_
