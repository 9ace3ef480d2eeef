// Raw wire path for the tensor-carrying messages (PushRequest,
// PushPullRequest, PullResponse and the stream's messages of proto/ps.proto).
//
// The bytes are exactly the protobuf encoding of those messages, so the wire
// stays a valid, documented, reflectable ps.v1 message and generated stubs
// interoperate. But tensor data never passes through a protobuf object:
// encoders build a grpc::ByteBuffer whose data slices point at the caller's
// floats (borrowed, or kept alive by a shared owner), so sending copies
// nothing in user space; decoders walk a received ByteBuffer's slices in
// place (Receive), handing out the data fields as lists of pieces that are
// copied once, straight into their destination. Malformed bytes are
// INVALID_ARGUMENT "malformed <Message>: <what>", never a crash.
//
// This header is the one callers include; the code is in layers:
//   rpc/proto_codec.h  the generic writer, reader and field loop;
//   rpc/raw_fields.h   TensorSlice and the reply info the messages share;
//   rpc/raw_unary.h    Push, PushPull, Pull and their responses;
//   rpc/raw_stream.h   StreamRequest / StreamResponse and chunking.
//
// Not thread-safe; each writer and reader belongs to one call.
#ifndef PS_RPC_RAW_WIRE_H_
#define PS_RPC_RAW_WIRE_H_

#include "rpc/proto_codec.h"  // IWYU pragma: export
#include "rpc/raw_fields.h"   // IWYU pragma: export
#include "rpc/raw_stream.h"   // IWYU pragma: export
#include "rpc/raw_unary.h"    // IWYU pragma: export

#endif  // PS_RPC_RAW_WIRE_H_
