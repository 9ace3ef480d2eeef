// RawTcpBench: the loopback ceiling for ps_bench transport. Plain TCP
// sockets move the same payloads as the parameter-server calls, in the same
// request/response pattern, so every gRPC figure can be reported as a ratio of
// what the kernel's loopback does in the same run.
//
// Patterns (one "op" each, per connection, back to back; an op ends when
// its full reply has arrived):
//   kSend:     client writes P bytes, server answers 1 byte   (like Push)
//   kFetch:    client writes 1 byte, server answers P bytes   (like Pull)
//   kExchange: client writes P bytes, server answers P bytes  (like PushPull)
//
// Made to be hard to beat, so that no gRPC figure can exceed it by an
// artifact of the baseline: 4 MB socket buffers each way (where the kernel
// allows that much), TCP_NODELAY, one send/recv call per message (the
// kernel may split it; the loops finish it), message buffers on pages of
// their own (transparent huge pages where the kernel gives them), touched
// before the timed ops. From kDuplexFrom bytes on, an exchange is full
// duplex, as gRPC's HTTP/2 streams are: the client sends on its own thread
// while a reader thread per connection takes the reply in, and the server
// answers as soon as the first MB of the request has arrived, writing its
// reply on a second thread while it still reads the request. Smaller
// exchanges are a write then a read on one thread: on the 2-core machine
// this was measured on (docs/benchmarks.md), the two directions there only
// compete for the same cores, and the hand-offs between threads made
// 4 KB-256 KB exchanges slower; duplex won from 16 MB, and tied at 1-4 MB.
//
// Every blocking socket call gives up after kIoTimeout without progress;
// any failure (a short connection, a timeout, an errno) is the run's Status.
// Thread-compatible: RunRawTcp is called from one thread and starts its own.
#ifndef PS_TOOLS_BENCH_RAW_TCP_H_
#define PS_TOOLS_BENCH_RAW_TCP_H_

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

// Exchanges of at least this many bytes each way are full duplex.
inline constexpr int64_t kDuplexFrom = 4 << 20;
// The longest any socket call or hand-off may wait without progress.
inline constexpr absl::Duration kIoTimeout = absl::Seconds(30);

// Runs `clients` connections in parallel for about `duration` after `warmup`
// ops each (at least one timed op each), moving `payload_bytes` per op as
// `pattern` says. INVALID_ARGUMENT for payload_bytes < 1, clients < 1 or
// warmup < 0; otherwise the first socket error of any thread.
absl::StatusOr<OpTimings> RunRawTcp(RawPattern pattern, int64_t payload_bytes, int clients,
                                    int warmup, absl::Duration duration);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_RAW_TCP_H_
