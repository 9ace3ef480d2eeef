// CPU affinity for ps_bench's per-side measurements: a CPU list as taskset
// -c takes it ("1", "0-3", "0,2"), and pinning the calling thread to it.
// A thread's mask is inherited by the threads it starts afterwards and by
// the processes it spawns, so pinning the main thread before any gRPC object
// exists pins every gRPC thread of the process, and spawning from a thread
// pinned elsewhere pins the child from its first instruction (no race with
// the child's own threads). Stateless; thread-safe.
#ifndef PS_TOOLS_PROCESS_CPU_AFFINITY_H_
#define PS_TOOLS_PROCESS_CPU_AFFINITY_H_

#include <sched.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// The CPUs of `text` (comma-separated numbers and ranges, each < CPU_SETSIZE),
// or INVALID_ARGUMENT naming --`flag`.
absl::StatusOr<cpu_set_t> ParseCpuList(absl::string_view text, absl::string_view flag);

// Pins the calling thread to `cpus`; INVALID_ARGUMENT naming --`flag` when
// the kernel refuses (e.g. none of them is online or allowed).
absl::Status PinCallingThread(const cpu_set_t& cpus, absl::string_view flag);

// "0-1,3": the CPUs of `cpus`, as taskset -c prints them.
std::string CpuListString(const cpu_set_t& cpus);

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_CPU_AFFINITY_H_
