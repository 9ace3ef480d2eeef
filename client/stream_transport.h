// The stream transport (client/shard_transport.h): one long-lived stream per
// shard (client/shard_stream.h), opened on first use and reopened after it
// broke, running one call at a time. Tensors travel in ~1 MB chunks; pulled
// chunks are copied into the weights while the next is on the wire. A
// layer-wise push-pull opens its call on every shard at once and appends each
// batch of gradient chunks as its tensors are sent, so that communication
// overlaps the rest of the backward pass.
//
// Thread safety and ownership as ShardTransport's: it makes its own stubs on
// `channels` (shard i's at channels[i]) and borrows `state`, which must
// outlive it. Its destructor closes the streams.
#ifndef PS_CLIENT_STREAM_TRANSPORT_H_
#define PS_CLIENT_STREAM_TRANSPORT_H_

#include <memory>
#include <vector>

#include "client/shard_transport.h"
#include "grpcpp/channel.h"

namespace ps {

std::unique_ptr<ShardTransport> NewStreamTransport(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels, ClientState* state);

}  // namespace ps

#endif  // PS_CLIENT_STREAM_TRANSPORT_H_
