// ps_bench transport: push, pull and push-pull throughput and latency of W
// clients against S in-process gRPC shards (async, so nothing waits), each
// against raw loopback TCP moving the same bytes in the same run; with TLS,
// each operation again over mutual TLS against plaintext gRPC; with unix,
// each operation again over unix sockets (in a 0700 folder of its own under
// /tmp) against plaintext gRPC on loopback TCP. Not thread-safe (it owns
// the process while it measures).
//
// With server_process (and TLS), TLS as each side pays it: the shards run as
// real ps_server processes (tools/bench/bench_server_process.h) pinned to
// server_cpus, the clients in this process pinned to client_cpus, each
// operation in plaintext then over mutual TLS against servers started alike;
// a "+tls" row per operation carries both sides' CPU per MB, TLS and
// plaintext, and the throughput ratio TLS / plaintext.
#ifndef PS_TOOLS_BENCH_BENCH_TRANSPORT_H_
#define PS_TOOLS_BENCH_BENCH_TRANSPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/bench_common.h"

namespace ps {

struct TransportBenchOptions {
  std::string sizes = "4096,65536,1048576,4194304,16777216,67108864";  // bytes, multiples of 4
  int shards = 1;                              // S
  int clients = 1;                             // W, one connection each
  std::string ops = "push,pull,push_pull";     // operations to measure
  std::string transports = "stream,unary";     // client transports to measure
  // Wire dtypes to measure (f32 and/or bf16). Sizes and GB/s count the
  // float32 tensors moved, whatever travels; a bf16 row's baseline is the
  // f32 row of its operation and transport in the same run, if measured.
  std::string wire_dtypes = "f32";
  int warmup = 3;                              // untimed operations per client
  absl::Duration duration = absl::Seconds(1);  // per figure
  BenchTls tls;
  // Also measure each operation over unix sockets: "+unix" rows whose
  // baseline is the same operation on loopback TCP, plaintext, just measured.
  bool unix_socket = false;
  // Per side: shards as ps_server processes (needs tls; no unix_socket, f32
  // only). Both sides see the same payloads, only their own CPU time.
  bool server_process = false;
  std::string server_binary;  // path of ps_server
  // CPUs as taskset -c takes them ("1", "0-3"); empty: not pinned. The
  // clients' apply to this whole process, from the start of the run.
  std::string server_cpus, client_cpus;
};

// A row per size, operation, transport and wire dtype ("+bf16" rows; "+tls"
// rows with TLS, "+unix" rows with unix sockets), or
// INVALID_ARGUMENT naming the flag of a bad option.
absl::StatusOr<std::vector<Row>> RunTransportBench(const TransportBenchOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_TRANSPORT_H_
