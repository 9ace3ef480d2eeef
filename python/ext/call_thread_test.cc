#include "python/ext/call_thread.h"

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(CallThread, RunsEachCallAndHandsBackItsStatus) {
  CallThread t;
  EXPECT_TRUE(t.idle());
  EXPECT_TRUE(t.Wait(absl::ZeroDuration()));  // nothing to wait for
  for (int i = 0; i < 3; ++i) {
    t.Start([i] { return i == 1 ? absl::CancelledError("one") : absl::OkStatus(); });
    EXPECT_FALSE(t.idle());
    ASSERT_TRUE(t.Wait(absl::Seconds(30)));
    EXPECT_FALSE(t.idle());  // finished, status not taken
    EXPECT_EQ(t.Take().code(), i == 1 ? absl::StatusCode::kCancelled : absl::StatusCode::kOk);
    EXPECT_TRUE(t.idle());
  }
}

TEST(CallThread, WaitReturnsAtItsTimeoutWhileTheCallRuns) {
  CallThread t;
  absl::Notification release;
  t.Start([&release] {
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
    return absl::OkStatus();
  });
  EXPECT_FALSE(t.Wait(absl::Milliseconds(50)));
  release.Notify();
  EXPECT_TRUE(t.Wait(absl::Seconds(30)));
  EXPECT_TRUE(t.Take().ok());
}

TEST(CallThread, DestroyingItWithACallRunningDoesNotWaitForTheCall) {
  auto release = std::make_shared<absl::Notification>();
  auto ran = std::make_shared<std::atomic<bool>>(false);
  const absl::Time start = absl::Now();
  {
    CallThread t;
    t.Start([release, ran] {
      release->WaitForNotificationWithTimeout(absl::Seconds(30));
      *ran = true;
      return absl::OkStatus();
    });
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(*ran);
  release->Notify();  // the detached call ends on its own, with what it shares
}

}  // namespace
}  // namespace ps
