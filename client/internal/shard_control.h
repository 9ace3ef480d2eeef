// ShardControl: a PsClient's control calls to its shards, those that carry
// no tensors on the hot path: Register, InitParams (to create the
// parameters, to restore a shard from the client's copy, to roll one back)
// and Heartbeat. Unary protobuf calls (proto/ps.grpc.pb.h) on the channels
// the transport uses too. PsClient (client/ps_client.cc) decides what to
// call, with client/internal/recovery.h; this class only makes the calls
// and says what came back.
//
// Thread safety: HeartbeatAll may run on another thread than the rest (it
// reads only the options, constant after Connect). Borrows `state`, which
// must outlive it; owns its stubs.
#ifndef PS_CLIENT_INTERNAL_SHARD_CONTROL_H_
#define PS_CLIENT_INTERNAL_SHARD_CONTROL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/internal/shard_transport.h"
#include "grpcpp/channel.h"
#include "proto/ps.grpc.pb.h"

namespace ps {

class ShardControl {
 public:
  // Shard i's calls go over channels[i].
  ShardControl(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
               const ClientState* state);

  // Registers with every shard, waiting for each up to `timeout`, and fills
  // `replies` by shard. `wait_for_ready`: wait for servers that are not up
  // yet (their connection errors, e.g. a failed TLS handshake, then show
  // only as DEADLINE_EXCEEDED).
  absl::Status RegisterAll(absl::Duration timeout, bool wait_for_ready,
                           std::vector<v1::RegisterResponse>* replies);

  // Init on every shard with the state's spec and, from worker 0,
  // `initial`'s slices (null from the others); fills `versions` by shard.
  absl::Status InitAll(const ConstTensorViews* initial, std::vector<int64_t>* versions);

  // InitRequest.restore: puts the client's copy of shard `shard`'s slices
  // (ClientState::held) back, at held_version. An error names the shard.
  absl::StatusOr<v1::InitResponse> Restore(int shard);

  // InitRequest.rollback: asks shard `shard` to roll back to its newest
  // checkpoint at or below `version`.
  absl::StatusOr<v1::InitResponse> RollBack(int shard, int64_t version);

  // One Heartbeat to every shard, each with `timeout`; errors are ignored.
  void HeartbeatAll(absl::Duration timeout);

 private:
  const ClientState* const state_;                                 // not owned
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;  // by shard
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_SHARD_CONTROL_H_
