#include "server/core/prefetcher.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(Prefetcher, RunsJobsInOrderOnItsThread) {
  Prefetcher p;
  std::vector<int> ran;  // written by the prefetcher's thread only
  for (int i = 0; i < 5; ++i) p.Add([&ran, i] { ran.push_back(i); });
  ASSERT_TRUE(p.WaitIdle(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p.dropped(), 0);
}

TEST(Prefetcher, AFullQueueDropsTheOldestWaitingJob) {
  Prefetcher p(/*max_jobs=*/2);
  absl::Notification started, release;
  std::vector<int> ran;
  p.Add([&] {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();  // the first runs; the next wait
  for (int i = 1; i <= 3; ++i) p.Add([&ran, i] { ran.push_back(i); });
  release.Notify();
  ASSERT_TRUE(p.WaitIdle(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(ran, (std::vector<int>{2, 3}));
  EXPECT_EQ(p.dropped(), 1);
}

TEST(Prefetcher, TheDestructorLetsTheRunningJobEnd) {
  std::atomic<int> ran{0};
  absl::Notification started, release;
  {
    Prefetcher p;
    p.Add([&] {
      started.Notify();
      release.WaitForNotification();
      ++ran;
    });
    started.WaitForNotification();
    p.Add([&] { ran += 100; });  // dropped, or run before the destructor locks
    release.Notify();
  }
  EXPECT_EQ(ran.load() % 100, 1);
}

}  // namespace
}  // namespace ps
