// RawTcpBench: the loopback ceiling for ps_bench transport. Plain TCP
// sockets move the same payloads as the parameter-server calls, in the same
// request/response pattern, so every gRPC figure can be reported as a ratio of
// what the kernel's loopback does in the same run.
//
// Patterns (one "op" each, per connection, back to back):
//   kSend:     client writes P bytes, server answers 1 byte   (like Push)
//   kFetch:    client writes 1 byte, server answers P bytes   (like Pull)
//   kExchange: client writes P bytes, server answers P bytes  (like PushPull)
//
// Thread-compatible: Run() is called from one thread and starts its own.
#ifndef PS_TOOLS_RAW_TCP_H_
#define PS_TOOLS_RAW_TCP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

enum class RawPattern { kSend, kFetch, kExchange };

struct OpTimings {
  absl::Duration wall;                   // first op start to last op end, all clients
  int64_t ops = 0;                       // completed ops, all clients
  std::vector<absl::Duration> latencies;  // one per op
};

// Runs `clients` connections in parallel for about `duration` after `warmup`
// ops each, moving `payload_bytes` per op as `pattern` says.
absl::StatusOr<OpTimings> RunRawTcp(RawPattern pattern, int64_t payload_bytes, int clients,
                                    int warmup, absl::Duration duration);

}  // namespace ps

#endif  // PS_TOOLS_RAW_TCP_H_
