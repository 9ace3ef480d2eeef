#include "common/parallel.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

// Every index once, whatever the size and chunk.
void ExpectEachIndexOnce(size_t n, size_t min_chunk) {
  std::vector<std::atomic<int>> seen(n);
  ParallelFor(n, min_chunk, [&](size_t begin, size_t end) {
    ASSERT_LE(begin, end);
    ASSERT_LE(end, n);
    for (size_t i = begin; i < end; ++i) seen[i].fetch_add(1);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << "index " << i << " of " << n;
}

TEST(ParallelFor, RunsEachIndexOnce) {
  for (size_t n : {0, 1, 7, 100, 4096, 100000}) {
    for (size_t min_chunk : {0, 1, 3, 1000}) ExpectEachIndexOnce(n, min_chunk);
  }
}

TEST(ParallelFor, ChunksAreContiguousAndAtLeastMinChunk) {
  std::atomic<int> calls{0};
  std::atomic<bool> small{false};
  ParallelFor(10000, 2500, [&](size_t begin, size_t end) {
    calls.fetch_add(1);
    if (end - begin < 2500) small = true;
  });
  EXPECT_GE(calls.load(), 1);
  EXPECT_LE(calls.load(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_FALSE(small.load());
}

TEST(ParallelFor, ManyCallersAtOnceEachGetTheirOwnRanges) {
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        const size_t n = 1000 + 37 * t + round;
        std::vector<std::atomic<int>> seen(n);
        ParallelFor(n, 10, [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) seen[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i) failures += seen[i].load() != 1;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ParallelFor, NestedCallsFinish) {
  // A chunk that calls ParallelFor itself, with every pool thread busy in
  // the outer call: the inner callers run their own chunks.
  std::atomic<int64_t> sum{0};
  ParallelFor(64, 1, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      ParallelFor(1000, 1, [&](size_t b, size_t e) { sum.fetch_add(static_cast<int64_t>(e - b)); });
    }
  });
  EXPECT_EQ(sum.load(), 64 * 1000);
}

}  // namespace
}  // namespace ps
