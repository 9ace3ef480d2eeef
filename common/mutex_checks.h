// SkipMutexDeadlockDetection: switches off Abseil's mutex deadlock detection
// for the whole process.
//
// Debian's Abseil is built without NDEBUG, so by default every absl::Mutex
// acquisition (ours and gRPC's, whose locks are absl::Mutex) records
// lock-order edges in a process-wide graph, and a cycle in that graph aborts
// the process. That is a debugging aid Abseil's optimized builds leave off;
// here it cost about 1% of a training cluster's CPU (perf, 2026-11-27). The
// binaries (through ParseCommandLine) and the Python module call this once
// at start. Unit tests do not, so they still catch lock-order inversions.
//
// Thread-safe; call before the process starts its threads.
#ifndef PS_COMMON_MUTEX_CHECKS_H_
#define PS_COMMON_MUTEX_CHECKS_H_

namespace ps {

void SkipMutexDeadlockDetection();

}  // namespace ps

#endif  // PS_COMMON_MUTEX_CHECKS_H_
