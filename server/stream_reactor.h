// The server side of the streaming transport (rpc Stream, see StreamRequest
// in proto/ps.proto): one reactor per worker stream.
//
// It decodes each call's header into a ShardCall (server/core/pipeline.h, the
// same pipeline as the unary calls) and feeds it the call's chunks one
// message at a time, each copied straight into the call's flat gradient
// buffer while the next chunk is still on the wire; on the call's last chunk
// the pipeline pushes the gradient into the Shard and, for pulls, the
// reactor answers with the weights in chunks that point into the shard's
// snapshot, or are narrowed from it when the call's header asked for bf16
// (server/replies.h). Embedding-row calls (CALL_PULL_ROWS, CALL_PUSH_ROWS)
// are one message each: the reactor runs them on the Shard (PullRows,
// PushRows, with the unary calls' checks) as soon as they arrive and
// answers at once, the pulled rows in ~1 MB chunks; one cut into several
// messages ends the stream (INVALID_ARGUMENT).
// Calls on a stream run one at a time: a call that starts before
// the previous one was answered ends the stream (INVALID_ARGUMENT). A failed
// call is answered with its error and the stream stays open. A waiting pull
// holds no thread.
//
// Nothing a client does can keep a call's resources forever: a call whose
// last message has not arrived `call_timeout` after its first ends the stream
// with DEADLINE_EXCEEDED, a stream half-closed in the middle of a call ends
// with INVALID_ARGUMENT, and an exception below a callback ends the stream
// with RESOURCE_EXHAUSTED or INTERNAL. Each frees the call's gradient buffer.
//
// Thread-safe (gRPC and the shard's callbacks call in from several threads).
// The reactor deletes itself when gRPC is done with it; the Shard must outlive
// the server.
#ifndef PS_SERVER_STREAM_REACTOR_H_
#define PS_SERVER_STREAM_REACTOR_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "server/rpc_metrics.h"
#include "server/core/shard.h"

namespace ps {

// `call_timeout` > 0: the longest a call may take to arrive in full.
// `may_act_as` (null: anyone may) says whether the stream's caller may act
// as a call's worker id; its error ends the stream. `metrics` (null: none;
// must outlive the stream) records the stream as one Stream call when it
// ends (server/rpc_metrics.h).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    Shard* shard, absl::Duration call_timeout,
    std::function<absl::Status(int worker_id)> may_act_as = nullptr,
    RpcMetrics* metrics = nullptr);

}  // namespace ps

#endif  // PS_SERVER_STREAM_REACTOR_H_
