// ClientOptions: how a PsClient (client/ps_client.h) connects and how long
// it waits. A plain value; copy it freely. ParseTransport reads the
// --transport flag's value; ValidateClientOptions checks the limits that
// PsClient::Connect does not.
#ifndef PS_CLIENT_CLIENT_OPTIONS_H_
#define PS_CLIENT_CLIENT_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "common/wire_dtype.h"

namespace ps {

// The shards' servers as a coordinator knows them.
struct ServersAt {
  std::vector<std::string> servers;  // by shard
  int64_t map_version = 0;           // of the job's shard map they are from
};

struct ClientOptions {
  std::vector<std::string> servers;  // HOST:PORT of shard 0, 1, ... in order
  // The version of the job's shard map `servers` came from (coord/
  // shard_map.h); 0: they were given. Every call carries its shard, the
  // shard count and this version (rpc/route.h), and a server refuses one
  // routed to it by mistake, or by a map older than the one that gave it
  // its shard, before acting on it.
  int64_t shard_map_version = 0;
  int worker_id = 0;                 // 0 <= worker_id < num_workers
  int num_workers = 1;
  // TLS, the worker's certificate or token (rpc/credentials.h).
  SecurityOptions security;
  // How long Connect waits for every server to come up and answer.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Deadline of calls that do not wait for other workers.
  absl::Duration rpc_timeout = absl::Seconds(60);
  // How long a pull may wait for other workers (sync) or for worker 0's init.
  // The server answers DEADLINE_EXCEEDED naming the missing workers past it.
  absl::Duration wait_timeout = absl::Seconds(120);
  // Liveness of each connection: an HTTP/2 ping goes out after this much
  // time without traffic and must be answered within as long again, or the
  // connection is closed and its calls fail with UNAVAILABLE. So a server or
  // link that dies mid-call is noticed within about twice this, not at the
  // call's deadline. Zero: no pings; else at least 1 s (servers refuse
  // pings more frequent than that).
  absl::Duration keepalive = absl::Seconds(10);
  // How Push, Pull and PushPull travel (client/internal/shard_transport.h):
  //   kStream: one long-lived stream per shard, tensors in ~1 MB chunks that
  //            are copied (and applied) while the next is on the wire;
  //   kUnary:  one unary call per shard per operation.
  enum class Transport { kStream, kUnary };
  Transport transport = Transport::kStream;
  // The element type of tensor data on the wire (proto/types.proto WireDtype),
  // either transport: kF32 (default) sends gradients and asks for weights
  // as float32, exactly; kBf16 halves the bytes: the client narrows each
  // gradient to bfloat16 (round to nearest even) before sending and the
  // servers send their float32 weights rounded the same way, widened back
  // into the caller's float buffers on arrival. The servers keep float32
  // weights and optimizer state either way. ParseWireDtype reads the
  // --wire_dtype spelling ("f32" / "bf16").
  WireDtype wire_dtype = WireDtype::kF32;

  // Faults (docs/failures.md). A call that fails because a shard went
  // away (UNAVAILABLE, CANCELLED, ABORTED, or a refusal from a shard that
  // restarted) is retried with backoff for up to this long: the client
  // registers with the shards again and, where one came back behind the
  // version it holds, restores that shard's slices from its copy of the
  // last weights it pulled (InitRequest.restore) before it retries. Pushes
  // are deduplicated by the shards, so a retry is never applied twice.
  // Zero: no retries (and no copy kept).
  absl::Duration retry_timeout = absl::ZeroDuration();
  // With a coordinator: the servers now, by shard (the job's shard map in
  // etcd, coord/shard_map.h), or an error while they cannot be known (a
  // server restarting, etcd unreachable). Recovery asks it each time before
  // it registers again: a shard whose server moved to another address is
  // reached there from then on (and restored from this client's copy, as a
  // restarted one). Another shard count is followed, the client's copy
  // re-cut for it, when the client has no tables and its shards are at
  // one version (PsClient::FollowReshard); otherwise logged and not
  // followed. Null: the servers never move.
  std::function<absl::StatusOr<ServersAt>()> find_servers;
  // Where the client says what it noticed and did about faults (one line
  // each, no newline); null: silent.
  std::function<void(absl::string_view line)> log;

  // For a host language's signal handling: while an operation waits (for
  // answers, or in a retry's backoff), the waiting thread calls
  // interrupt() every interrupt_every, holding no lock of the client; when
  // it returns true the operation is cancelled as by PsClient::Cancel and
  // returns CANCELLED. The `ps` Python package checks for Ctrl-C with it on
  // the calling thread, so that a call runs there without a handoff to
  // another thread. Null: never called.
  std::function<bool()> interrupt;
  absl::Duration interrupt_every = absl::Milliseconds(100);  // > 0 when interrupt is set
};

// "stream" / "unary"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ClientOptions::Transport> ParseTransport(absl::string_view text);

// INVALID_ARGUMENT unless servers is not empty, 0 <= worker_id <
// num_workers, keepalive is zero or in [1 s, 1 day] (naming ps_worker's
// flag), retry_timeout >= 0 and wire_dtype is a known one. PsClient::Connect checks it first.
absl::Status ValidateClientOptions(const ClientOptions& options);

}  // namespace ps

#endif  // PS_CLIENT_CLIENT_OPTIONS_H_
