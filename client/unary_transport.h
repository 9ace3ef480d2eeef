// The unary transport (client/shard_transport.h): each push, pull and
// push-pull is one unary call per shard, on the raw path of rpc/raw_wire.h
// (gradients sent without a copy, weights copied once). A layer-wise
// push-pull sends everything with its last tensor.
//
// Thread safety and ownership as ShardTransport's: it makes its own stubs on
// `channels` (shard i's at channels[i]) and borrows `state`, which must
// outlive it.
#ifndef PS_CLIENT_UNARY_TRANSPORT_H_
#define PS_CLIENT_UNARY_TRANSPORT_H_

#include <memory>
#include <vector>

#include "client/shard_transport.h"
#include "grpcpp/channel.h"

namespace ps {

std::unique_ptr<ShardTransport> NewUnaryTransport(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, ClientState* state);

}  // namespace ps

#endif  // PS_CLIENT_UNARY_TRANSPORT_H_
