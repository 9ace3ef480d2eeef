// PendingCalls: the PendingOp (client/pending_op.h) of an operation that
// makes one call per shard, on either transport. It tracks which shards have
// not answered, keeps the first error (prefixed with the shard and its
// address), and then cancels the calls still running (the operation failed;
// waiting on them could wait on workers that wait for this one), and past
// the operation's deadline cancels what is left and says which shards were
// silent. It is registered with the client's CallCanceller
// (client/internal/call_canceller.h) while it lives, so that PsClient::Cancel
// ends, from another thread, the calls not answered yet.
//
// StartUnaryCalls starts one unary gRPC call per shard and returns their
// PendingCalls; the unary transport and PsClient's own control calls
// (Register, InitParams) use it.
//
// Thread safety: Done() may be called from any thread (gRPC callbacks), and
// the canceller may cancel the calls from any thread at any time, setup
// included; the setup calls (AddCancel, AddUnaryCall) come from the thread
// that made it, before it is handed out. Owns the unary calls' contexts and
// messages; the destructor cancels calls still in flight and waits for
// their callbacks.
#ifndef PS_CLIENT_INTERNAL_PENDING_CALLS_H_
#define PS_CLIENT_INTERNAL_PENDING_CALLS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/internal/call_canceller.h"
#include "client/pending_op.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "rpc/wire.h"

namespace ps {

class PendingCalls final : public PendingOp {
 public:
  // One call per server (shard i at servers[i]), all done by `deadline`,
  // which `why` (a string literal) explains in the message of a call that is
  // not. Registered with `canceller` (borrowed, may be null: then only the
  // deadline and the destructor cancel) until destroyed.
  PendingCalls(const std::vector<std::string>& servers, absl::Time deadline, const char* why,
               CallCanceller* canceller);
  ~PendingCalls() override;

  // An operation that failed before starting: Wait() returns `s`.
  static std::unique_ptr<PendingCalls> Failed(absl::Status s);

  // OK, or the first error naming its shard (the other calls cancelled);
  // DEADLINE_EXCEEDED naming the silent shards once the deadline passed.
  // Polls the canceller's interrupt check while it waits, until it answers
  // true once (the calls are cancelled; their ends are waited for).
  absl::Status Wait() override;

  // Shard `shard`'s call ended with `s`. Once per shard.
  void Done(int shard, absl::Status s);

  // Setup, before the operation is handed out: how to cancel one call. Runs
  // at once if the canceller cancelled the operation already.
  void AddCancel(std::function<void()> cancel);

  // Setup: a unary call's context and messages, owned here until the
  // operation ends (its cancel is added too).
  struct UnaryCall {
    grpc::ClientContext ctx;
    std::shared_ptr<void> req;   // the request message or ByteBuffer
    std::shared_ptr<void> resp;  // the response message or ByteBuffer
  };
  UnaryCall* AddUnaryCall();

 private:
  PendingCalls() = default;

  // Cancels the calls not answered yet, now and as they are added.
  void CancelUnanswered() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // Shards whose call has not ended, with their addresses.
  std::map<int, std::string> unanswered_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> cancels_ ABSL_GUARDED_BY(mu_);  // one per call
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // by the canceller: cancel added calls too

  // Constant once handed out.
  absl::Time started_ = absl::Now();
  absl::Time deadline_;            // latest call deadline, plus a margin
  const char* deadline_why_ = "";  // what deadline_ is made of, for the message
  std::vector<std::unique_ptr<UnaryCall>> calls_;
  CallCanceller* canceller_ = nullptr;  // borrowed; may be null
  // With the canceller; reset first in the destructor.
  std::unique_ptr<CallCanceller::Registration> registration_;
};

// Starts one unary call per server, each with deadline now + `timeout`:
// build(s, &request) fills shard s's request, start(s, ctx, req, resp,
// callback) issues it, and on_reply(s, response) consumes a successful reply
// (may be null). The PendingCalls waits up to 5 s past the calls' deadline;
// `canceller` as for PendingCalls.
template <typename Req, typename Resp, typename Start>
std::unique_ptr<PendingCalls> StartUnaryCalls(
    const std::vector<std::string>& servers, absl::Duration timeout, bool wait_for_ready,
    CallCanceller* canceller, const std::function<void(int, Req*)>& build, Start start,
    std::function<absl::Status(int, const Resp&)> on_reply) {
  const absl::Time deadline = absl::Now() + timeout;
  auto op = std::make_unique<PendingCalls>(servers, deadline + absl::Seconds(5),
                                           "the call timeout plus 5 s", canceller);
  for (int s = 0; s < static_cast<int>(servers.size()); ++s) {
    PendingCalls::UnaryCall* call = op->AddUnaryCall();
    auto req = std::make_shared<Req>();
    build(s, req.get());
    auto resp = std::make_shared<Resp>();
    call->ctx.set_deadline(absl::ToChronoTime(deadline));
    call->ctx.set_wait_for_ready(wait_for_ready);
    const Req* req_ptr = req.get();
    Resp* resp_ptr = resp.get();
    call->req = std::move(req);
    call->resp = std::move(resp);
    start(s, &call->ctx, req_ptr, resp_ptr,
          [op = op.get(), s, resp_ptr, on_reply](grpc::Status g) {
            absl::Status st = FromGrpcStatus(g);
            if (st.ok() && on_reply) st = on_reply(s, *resp_ptr);
            op->Done(s, st);
          });
  }
  return op;
}

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_PENDING_CALLS_H_
