// Incarnation and PushOutcome: the fault-tolerance vocabulary that servers
// and clients share (proto/types.proto's messages of the same names; rpc/
// converts).
//
// An Incarnation names one start of one shard's run: a client that sees it
// change knows the shard restarted (docs/architecture.md, "Failures").
// A PushOutcome says what a shard did with a push that was not an error.
// Plain values; thread-compatible.
#ifndef PS_COMMON_INCARNATION_H_
#define PS_COMMON_INCARNATION_H_

#include <cstdint>
#include <string>

namespace ps {

struct Incarnation {
  // Random and never 0 on a running server; kept in its checkpoints, so a
  // restart from them continues the run. 0 = unknown (no reply yet).
  uint64_t run_id = 0;
  // 1 on the run's first start; the restored checkpoint's start + 1 after.
  int64_t start = 0;

  bool operator==(const Incarnation& o) const { return run_id == o.run_id && start == o.start; }
  bool operator!=(const Incarnation& o) const { return !(*this == o); }
};

// "run 1f2e3d4c5b6a7988 start 2": for logs.
std::string IncarnationName(const Incarnation& incarnation);

// What a shard did with a push (proto PushOutcome; same numbering).
enum class PushOutcome {
  kApplied = 0,    // applied (async) or counted into its step (sync)
  kDuplicate = 1,  // accepted before (a retry); not applied again
  kDropped = 2,    // sync: its step closed without it; not applied
};

// "applied" / "duplicate" / "dropped".
const char* PushOutcomeName(PushOutcome outcome);

}  // namespace ps

#endif  // PS_COMMON_INCARNATION_H_
