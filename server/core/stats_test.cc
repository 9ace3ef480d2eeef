#include "server/core/stats.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(Histogram, CountsEachDurationInTheFirstBucketThatHoldsIt) {
  Histogram h;
  h.Record(absl::Microseconds(20));   // <= 50 us
  h.Record(absl::Microseconds(50));   // <= 50 us: bounds are inclusive
  h.Record(absl::Milliseconds(5));    // <= 5 ms, the 7th bound
  h.Record(absl::Hours(1));           // +Inf
  h.Record(-absl::Seconds(1));        // clock went back: counted as 0
  const Histogram::Snapshot s = h.Read();
  ASSERT_EQ(s.counts.size(), s.bounds.size() + 1);
  EXPECT_EQ(s.counts[0], 3);
  EXPECT_EQ(s.bounds[6], 5000);
  EXPECT_EQ(s.counts[6], 1);
  EXPECT_EQ(s.counts.back(), 1);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(s.sum, 20 + 50 + 5000 + int64_t{3600} * 1000 * 1000);
}

TEST(Histogram, CountBucketsHoldSmallIntegers) {
  Histogram h(Histogram::kCountBounds);
  for (int64_t v : {0, 0, 1, 3, 200}) h.RecordValue(v);
  const Histogram::Snapshot s = h.Read();
  ASSERT_EQ(s.bounds.size(), Histogram::kCountBounds.size());
  EXPECT_EQ(s.counts[0], 2);  // <= 0
  EXPECT_EQ(s.counts[1], 1);  // <= 1
  EXPECT_EQ(s.counts[3], 1);  // <= 4
  EXPECT_EQ(s.counts.back(), 1);
  EXPECT_EQ(s.sum, 204);
}

TEST(ShardMetrics, StalenessKeepsMeanAndMax) {
  ShardMetrics m;
  EXPECT_EQ(m.MeanStaleness(), 0.0);
  for (int64_t s : {0, 3, 1}) m.RecordStaleness(s);
  EXPECT_DOUBLE_EQ(m.MeanStaleness(), 4.0 / 3);
  EXPECT_EQ(m.staleness_max.Get(), 3);
  EXPECT_EQ(m.staleness.Read().count, 3);
}

TEST(Gauge, RaiseToFromManyThreadsKeepsTheLargest) {
  Gauge g;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&g, t] {
      for (int i = 0; i < 1000; ++i) g.RaiseTo(t * 1000 + i);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(g.Get(), 3999);
}

}  // namespace
}  // namespace ps
