#include "server/core/buffer_pool.h"

#include <thread>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(BufferPool, GivenBufferIsTakenAgainWithoutReallocation) {
  auto pool = BufferPool::Create(1);
  std::vector<float> b = pool->Take(1000);
  ASSERT_EQ(b.size(), 1000u);
  const float* data = b.data();
  pool->Give(std::move(b));
  std::vector<float> again = pool->Take(1000);
  EXPECT_EQ(again.data(), data);
  EXPECT_EQ(again.size(), 1000u);
}

TEST(BufferPool, KeepsAtMostMaxSpare) {
  auto pool = BufferPool::Create(1);
  std::vector<float> a = pool->Take(10), b = pool->Take(10);
  const float* kept = a.data();
  pool->Give(std::move(a));
  pool->Give(std::move(b));  // freed: the pool is full
  std::vector<float> first = pool->Take(10), second = pool->Take(10);
  EXPECT_EQ(first.data(), kept);
  EXPECT_NE(second.data(), kept);
}

TEST(BufferPool, PrefersASpareOfTheRightSize) {
  auto pool = BufferPool::Create(2);
  std::vector<float> small = pool->Take(10), big = pool->Take(100);
  const float* big_data = big.data();
  pool->Give(std::move(big));
  pool->Give(std::move(small));
  EXPECT_EQ(pool->Take(100).data(), big_data);
}

TEST(BufferPool, SharedBufferReturnsWhenLastReferenceGoesEvenAfterThePool) {
  std::shared_ptr<std::vector<float>> shared;
  const float* data;
  {
    auto pool = BufferPool::Create(1);
    shared = pool->Share(pool->Take(64));
    data = shared->data();
    auto reader = shared;
    shared.reset();
    std::thread([r = std::move(reader)]() mutable { r.reset(); }).join();
    EXPECT_EQ(pool->Take(64).data(), data);
    shared = pool->Share(pool->Take(64));
  }
  // The pool is gone from here, but the buffer keeps it alive until released.
  shared.reset();
}

TEST(BufferPool, ClearDropsSpares) {
  auto pool = BufferPool::Create(1);
  std::vector<float> a = pool->Take(1 << 20);
  a.assign(a.size(), 1.0f);
  pool->Give(std::move(a));
  pool->Clear();
  std::vector<float> fresh = pool->Take(1 << 20);
  EXPECT_EQ(fresh[0], 0.0f);  // a fresh allocation, not the spare
}

}  // namespace
}  // namespace ps
