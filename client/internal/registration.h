// Registration: what a PsClient learns from the shards' RegisterResponses,
// checked. At Connect, ReadRegistration checks that the servers form one
// cluster in the order the client lists them (each is shard s of S at
// position s, all in one mode) and gathers what the client keeps: mode,
// learning rate, incarnations, where its async seqs resume, and the lease
// that asks for heartbeats. While recovering, ToShardRegistrations hands the
// replies to the recovery plan (client/internal/recovery.h).
// ConnectTimeoutError says why Connect heard nothing.
//
// Pure functions on protobuf messages: no gRPC calls, no clock.
#ifndef PS_CLIENT_INTERNAL_REGISTRATION_H_
#define PS_CLIENT_INTERNAL_REGISTRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/internal/recovery.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "proto/ps.pb.h"

namespace ps {

struct Registration {
  Mode mode = Mode::kSync;
  float learning_rate = 0;                // shard 0's
  std::vector<Incarnation> incarnations;  // by shard
  // Async: the highest push seq any shard accepted from this worker (a
  // restarted worker numbers its pushes after it); 0: none.
  int64_t last_seq = 0;
  // The same for row pushes (PushRowsRequest.seq).
  int64_t last_row_seq = 0;
  // The shortest worker_timeout of the shards that set one (sync leases);
  // zero: none, no heartbeats.
  absl::Duration lease = absl::ZeroDuration();
};

// `replies[s]` is the answer of `servers[s]` (the same size, not empty).
// FAILED_PRECONDITION naming the server when one is not shard s of
// servers.size() or runs another mode than shard 0; shard 0's error, naming
// it, for a mode this build does not know.
absl::StatusOr<Registration> ReadRegistration(const std::vector<std::string>& servers,
                                              const std::vector<v1::RegisterResponse>& replies);

// By shard: incarnation, whether it has parameters, and their version.
std::vector<ShardRegistration> ToShardRegistrations(
    const std::vector<v1::RegisterResponse>& replies);

// DEADLINE_EXCEEDED for Connect's registration that got no answer within
// `connect_timeout`, with `why`, the error of one more try that did not
// wait for the servers to be ready (the connection's last error), and a
// hint at mismatched TLS flags when the server closed the connection.
absl::Status ConnectTimeoutError(absl::Duration connect_timeout, const absl::Status& why);

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_REGISTRATION_H_
