#include "client/internal/call_canceller.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(CallCanceller, CancelRunsTheCancelOfEveryRegisteredCall) {
  CallCanceller canceller;
  canceller.BeginOperation();
  int a = 0, b = 0;
  CallCanceller::Registration ra(&canceller, [&a] { ++a; });
  {
    CallCanceller::Registration rb(&canceller, [&b] { ++b; });
    EXPECT_FALSE(canceller.cancelled());
    canceller.Cancel();
  }
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  EXPECT_TRUE(canceller.cancelled());
  canceller.Cancel();  // rb is gone: only ra's cancel runs again
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 1);
}

TEST(CallCanceller, ACallOfACancelledOperationIsCancelledAsItRegisters) {
  CallCanceller canceller;
  canceller.BeginOperation();
  canceller.Cancel();
  int cancels = 0;
  CallCanceller::Registration r(&canceller, [&cancels] { ++cancels; });
  EXPECT_EQ(cancels, 1);
}

TEST(CallCanceller, TheNextOperationStartsAfresh) {
  CallCanceller canceller;
  canceller.Cancel();  // no operation in progress: nothing to end
  canceller.BeginOperation();
  EXPECT_FALSE(canceller.cancelled());
  int cancels = 0;
  CallCanceller::Registration r(&canceller, [&cancels] { ++cancels; });
  EXPECT_EQ(cancels, 0);
  canceller.Cancel();
  canceller.BeginOperation();
  EXPECT_FALSE(canceller.cancelled());
}

TEST(CallCanceller, ANullCancellerRegistersNothing) {
  CallCanceller::Registration r(nullptr, [] { FAIL() << "never cancelled"; });
}

TEST(CallCanceller, CancelWakesASleepAtOnce) {
  CallCanceller canceller;
  canceller.BeginOperation();
  EXPECT_TRUE(canceller.SleepUnlessCancelled(absl::Milliseconds(1)));
  std::thread t([&canceller] {
    absl::SleepFor(absl::Milliseconds(50));
    canceller.Cancel();
  });
  const absl::Time start = absl::Now();
  EXPECT_FALSE(canceller.SleepUnlessCancelled(absl::Seconds(30)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  t.join();
  EXPECT_FALSE(canceller.SleepUnlessCancelled(absl::Seconds(30)));  // still cancelled
}

TEST(CallCanceller, WithoutAnInterruptCheckAWaitNeverPolls) {
  CallCanceller canceller;
  EXPECT_EQ(canceller.interrupt_every(), absl::InfiniteDuration());
  EXPECT_FALSE(canceller.PollInterrupt());
}

TEST(CallCanceller, ASleepPollsTheInterruptCheckAndEndsWhenItAnswersTrue) {
  CallCanceller canceller;
  int polls = 0;
  canceller.SetInterrupt([&polls] { return ++polls == 3; }, absl::Milliseconds(1));
  canceller.BeginOperation();
  int cancels = 0;
  CallCanceller::Registration r(&canceller, [&cancels] { ++cancels; });
  const absl::Time start = absl::Now();
  EXPECT_FALSE(canceller.SleepUnlessCancelled(absl::Seconds(30)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(polls, 3);    // on the sleeping thread, until it said true
  EXPECT_EQ(cancels, 1);  // the operation's calls were cancelled, as by Cancel()
  EXPECT_TRUE(canceller.cancelled());
}

TEST(CallCanceller, ACheckThatAnswersFalseLetsTheSleepRunItsCourse) {
  CallCanceller canceller;
  int polls = 0;
  canceller.SetInterrupt(
      [&polls] {
        ++polls;
        return false;
      },
      absl::Milliseconds(5));
  canceller.BeginOperation();
  EXPECT_TRUE(canceller.SleepUnlessCancelled(absl::Milliseconds(60)));
  EXPECT_GE(polls, 1);
  EXPECT_FALSE(canceller.cancelled());
}

}  // namespace
}  // namespace ps
