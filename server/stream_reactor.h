// The server side of the streaming transport (rpc Stream, see StreamRequest
// in proto/ps.proto): one reactor per worker stream.
//
// It reads a call's chunks one message at a time and copies each straight
// into the call's flat gradient buffer while the next chunk is still on the
// wire; on the call's last chunk it pushes the gradient into the Shard and,
// for pulls, answers with the weights in chunks that point into the shard's
// snapshot. Calls on a stream run one at a time; a failed call is answered
// with its error and the stream stays open. A waiting pull holds no thread.
//
// Thread-safe (gRPC and the shard's callbacks call in from several threads).
// The reactor deletes itself when gRPC is done with it; the Shard must outlive
// the server.
#ifndef PS_SERVER_STREAM_REACTOR_H_
#define PS_SERVER_STREAM_REACTOR_H_

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "server/shard.h"

namespace ps {

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(Shard* shard);

}  // namespace ps

#endif  // PS_SERVER_STREAM_REACTOR_H_
