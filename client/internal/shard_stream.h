// ShardStream: a worker's long-lived stream to one shard (rpc Stream, see
// StreamRequest in proto/ps.proto), running calls one at a time.
//
// Call() queues a call's request messages, and hands each response message to
// `on_response` as it arrives (so the caller copies chunk k while chunk k+1 is
// on the wire), then reports the call's result to `done`. If the stream
// breaks, the call in flight fails with the stream's status and the stream
// stays broken (the stream transport opens a new one). Cancel() breaks it on
// purpose, e.g. when a caller's deadline passed.
//
// Thread-safe. The destructor closes the stream and waits (bounded) for gRPC
// to finish with it; no callback runs after it returns.
#ifndef PS_CLIENT_INTERNAL_SHARD_STREAM_H_
#define PS_CLIENT_INTERNAL_SHARD_STREAM_H_

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/client_callback.h"
#include "rpc/raw_wire.h"

namespace ps {

class ShardStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  using ResponseHandler = std::function<absl::Status(const RawStreamResponse&)>;
  using DoneHandler = std::function<void(absl::Status)>;

  // Opens the stream on `stub`'s channel; borrowed only during construction.
  explicit ShardStream(grpc::GenericStub* stub);
  ~ShardStream() override;

  ShardStream(const ShardStream&) = delete;
  ShardStream& operator=(const ShardStream&) = delete;

  // Runs one call: `requests` carry its call_id. `on_response` sees each
  // response message (an error from it fails the call); `done` runs once
  // with the call's result. REQUIRES: no other call in flight.
  void Call(uint64_t call_id, std::vector<grpc::ByteBuffer> requests, ResponseHandler on_response,
            DoneHandler done);

  // Adds messages to call `call_id` if it is still in flight (dropped
  // otherwise: its done handler has run or will run with the reason).
  void Append(uint64_t call_id, std::vector<grpc::ByteBuffer> requests);

  // Breaks the stream: the call in flight fails with CANCELLED.
  void Cancel();

  // True once the stream failed or was cancelled; make a new one.
  bool broken();

  // True while a call is in flight (Call started it, its done handler has
  // not run).
  bool busy();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // Marks the next queued request as being written, if one can start now.
  // Writes are started outside mu_.
  const grpc::ByteBuffer* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the call in flight with `s`, outside the lock.
  void EndCall(absl::Status s);
  // Drops the hold taken at construction once the stream is broken and no
  // write is in flight, so that gRPC can end it.
  void MaybeReleaseHold();

  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;  // the response being read; only the read path touches it

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // OnDone ran
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t call_id_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no call in flight
  ResponseHandler on_response_ ABSL_GUARDED_BY(mu_);
  DoneHandler on_done_ ABSL_GUARDED_BY(mu_);
  absl::Status call_status_ ABSL_GUARDED_BY(mu_);  // first error of the call in flight
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_SHARD_STREAM_H_
