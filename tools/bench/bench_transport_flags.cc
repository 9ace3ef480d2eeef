// ps_bench transport's own flags (bench_transport.h); the shared ones are in
// bench_flags.h.
#include "absl/flags/flag.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_transport.h"

ABSL_FLAG(std::string, sizes, "4096,65536,1048576,4194304,16777216,67108864",
          "transport: payload sizes in bytes (multiples of 4).");
ABSL_FLAG(int, shards, 1, "transport: number of in-process server shards (S).");
ABSL_FLAG(int, clients, 1, "transport: number of client threads (W), one connection each.");
ABSL_FLAG(std::string, transports, "stream,unary",
          "transport: client transports to measure (stream and/or unary).");
ABSL_FLAG(std::string, wire_dtype, "f32",
          "transport: wire dtypes to measure (f32 and/or bf16, e.g. f32,bf16); a bf16 row's "
          "baseline is the f32 row of the same operation and transport.");
ABSL_FLAG(bool, unix, false,
          "transport: also measure each operation over unix sockets (a 0700 folder under "
          "/tmp), against plaintext loopback TCP in the same run (\"+unix\" rows).");
ABSL_FLAG(bool, server_process, false,
          "transport (with --tls): TLS per side: the shards as real ps_server processes "
          "(--server_binary) pinned to --server_cpus, the clients pinned to --client_cpus; each "
          "side's CPU us/MB, TLS against plaintext.");
ABSL_FLAG(std::string, server_cpus, "",
          "transport --server_process: CPUs of the ps_server processes, as taskset -c takes "
          "them (e.g. 0 or 0-3); empty: not pinned.");
ABSL_FLAG(std::string, client_cpus, "",
          "transport --server_process: CPUs of this process (the clients), pinned before any "
          "gRPC object exists; empty: not pinned.");

namespace ps {

absl::StatusOr<TransportBenchOptions> TransportBenchOptionsFromFlags() {
  TransportBenchOptions o;
  o.sizes = absl::GetFlag(FLAGS_sizes);
  o.shards = absl::GetFlag(FLAGS_shards);
  o.clients = absl::GetFlag(FLAGS_clients);
  o.ops = absl::GetFlag(FLAGS_ops);
  o.transports = absl::GetFlag(FLAGS_transports);
  o.unix_socket = absl::GetFlag(FLAGS_unix);
  o.wire_dtypes = absl::GetFlag(FLAGS_wire_dtype);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  ASSIGN_OR_RETURN(o.duration, SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  o.tls = BenchTlsFromFlags();
  o.server_process = absl::GetFlag(FLAGS_server_process);
  o.server_cpus = absl::GetFlag(FLAGS_server_cpus);
  o.client_cpus = absl::GetFlag(FLAGS_client_cpus);
  if (o.server_process) {
    ASSIGN_OR_RETURN(o.server_binary, ServerBinaryFromFlags());
  }
  return o;
}

}  // namespace ps
