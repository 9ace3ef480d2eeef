// CallCanceller: the calls a PsClient has in flight for its operation in
// progress, so that PsClient::Cancel (client/ps_client.h) can end them from
// another thread.
//
// The training thread calls BeginOperation() as each operation (a pull, a
// push, a push-pull, Init, a rows call) begins. While it runs, every group
// of calls it makes (a PendingCalls, client/internal/pending_calls.h, on
// either transport) and every blocking call made outside one registers how
// to cancel itself (grpc::ClientContext::TryCancel, ShardStream::Cancel)
// until it ends. Cancel() runs every registered cancel and marks the
// operation cancelled: a call it registers afterwards is cancelled as it
// registers, its retries stop (cancelled()), and its backoff sleeps wake
// (SleepUnlessCancelled). The next BeginOperation() starts afresh, so an
// operation that begins after Cancel() returned is not affected.
//
// An interrupt check (ClientOptions::interrupt), set once before the first
// operation, is polled by the waiting thread itself: PollInterrupt() every
// interrupt_every() while a wait lasts (PendingCalls::Wait, the backoff
// sleeps), and a true answer cancels the operation as Cancel() does.
//
// Thread-safe. A registered cancel must stay callable until its
// Registration is destroyed; Cancel() runs the cancels under the
// canceller's lock, so destroying a Registration waits for a Cancel() in
// progress. A cancel must not call back into the canceller.
#ifndef PS_CLIENT_INTERNAL_CALL_CANCELLER_H_
#define PS_CLIENT_INTERNAL_CALL_CANCELLER_H_

#include <cstdint>
#include <functional>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ps {

class CallCanceller {
 public:
  CallCanceller() = default;
  CallCanceller(const CallCanceller&) = delete;
  CallCanceller& operator=(const CallCanceller&) = delete;

  // The training thread, as an operation begins: Cancel() ends it from now
  // on, and a Cancel() before this no longer counts.
  void BeginOperation();

  // Whether Cancel() was called since the operation in progress began.
  bool cancelled() const;

  // From any thread: cancels every registered call, and those the
  // operation in progress registers later. Operations that begin
  // afterwards are not affected.
  void Cancel();

  // Waits for `timeout`, or less if the operation in progress is cancelled
  // meanwhile (polling the interrupt check); returns false if it was
  // cancelled.
  bool SleepUnlessCancelled(absl::Duration timeout);

  // Before the first operation (PsClient::Connect): the interrupt check and
  // how often a wait polls it (> 0). Null: none.
  void SetInterrupt(std::function<bool()> check, absl::Duration every);
  // How long a wait may block between polls (InfiniteDuration: no check).
  absl::Duration interrupt_every() const { return check_ ? every_ : absl::InfiniteDuration(); }
  // The waiting thread, holding no lock: runs the check, and when it
  // answers true cancels the operation (Cancel()) and returns true.
  bool PollInterrupt();

  // Registers `cancel` for a call in flight while it lives. With a null
  // canceller it does nothing (calls no operation owns: heartbeats).
  class Registration {
   public:
    Registration(CallCanceller* canceller, std::function<void()> cancel);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    CallCanceller* const canceller_;  // not owned; may be null
    uint64_t id_ = 0;
  };

 private:
  mutable absl::Mutex mu_;
  uint64_t cancels_ ABSL_GUARDED_BY(mu_) = 0;         // Cancel() calls so far
  uint64_t operation_from_ ABSL_GUARDED_BY(mu_) = 0;  // cancels_ at BeginOperation
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::function<void()>> calls_ ABSL_GUARDED_BY(mu_);
  // Constant after SetInterrupt, which precedes every operation.
  std::function<bool()> check_;
  absl::Duration every_ = absl::InfiniteDuration();
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_CALL_CANCELLER_H_
