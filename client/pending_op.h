// PendingOp: the handle of a client operation in flight on every shard
// (PsClient::PullAsync, PushPullAsync). Wait() returns once all shards
// answered or their deadlines passed: OK, or the first error, naming the
// shard. With ClientOptions::retry_timeout, a PsClient's Wait() first
// retries a failed operation as the blocking calls do (client/ps_client.h).
//
// Thread safety: Wait() from one thread, once. Destroying a PendingOp that
// was not waited on cancels its calls and waits for them to end. The
// PsClient that made it must outlive it. Implementations live with the
// transports (client/internal/pending_calls.h) and in client/ps_client.cc.
#ifndef PS_CLIENT_PENDING_OP_H_
#define PS_CLIENT_PENDING_OP_H_

#include "absl/status/status.h"

namespace ps {

class PendingOp {
 public:
  virtual ~PendingOp() = default;  // implementations wait for calls in flight
  PendingOp(const PendingOp&) = delete;
  PendingOp& operator=(const PendingOp&) = delete;

  virtual absl::Status Wait() = 0;

 protected:
  PendingOp() = default;
};

}  // namespace ps

#endif  // PS_CLIENT_PENDING_OP_H_
