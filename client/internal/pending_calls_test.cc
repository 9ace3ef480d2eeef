// PendingCalls' wait: answers, the first error, and the interrupt check.
#include "client/internal/pending_calls.h"

#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// A call's cancel as gRPC's TryCancel behaves: the call ends soon after, on
// another thread (never inside the cancel, which runs under the op's lock).
class AsyncCancel {
 public:
  explicit AsyncCancel(PendingCalls* op) : op_(op) {}
  ~AsyncCancel() {
    if (t_) t_->join();
  }
  void operator()() {
    if (!t_)
      t_ = std::make_unique<std::thread>(
          [op = op_] { op->Done(0, absl::CancelledError("cancelled")); });
  }

 private:
  PendingCalls* op_;
  std::unique_ptr<std::thread> t_;
};

TEST(PendingCalls, WaitReturnsTheFirstErrorNamingItsShard) {
  PendingCalls op({"a:1", "b:2"}, absl::Now() + absl::Seconds(30), "test", nullptr);
  op.Done(0, absl::OkStatus());
  op.Done(1, absl::UnavailableError("gone"));
  const absl::Status s = op.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), testing::HasSubstr("shard 1 (b:2): gone"));
}

TEST(PendingCalls, AnInterruptCheckThatAnswersTrueCancelsTheCallsBeingWaitedFor) {
  CallCanceller canceller;
  int polls = 0;
  canceller.SetInterrupt([&polls] { return ++polls == 2; }, absl::Milliseconds(1));
  canceller.BeginOperation();
  PendingCalls op({"a:1"}, absl::Now() + absl::Seconds(60), "test", &canceller);
  AsyncCancel cancel(&op);
  op.AddCancel([&cancel] { cancel(); });
  const absl::Time start = absl::Now();
  const absl::Status s = op.Wait();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(polls, 2);
}

TEST(PendingCalls, WithoutACheckTheDeadlineEndsTheWaitNamingTheSilentShard) {
  PendingCalls op({"a:1"}, absl::Now() + absl::Milliseconds(20), "the test's deadline", nullptr);
  AsyncCancel cancel(&op);
  op.AddCancel([&cancel] { cancel(); });
  const absl::Status s = op.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), testing::HasSubstr("shard 0 (a:1)"));
}

}  // namespace
}  // namespace ps
