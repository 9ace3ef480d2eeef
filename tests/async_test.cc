// Async mode loses no update: concurrent pushes from several workers are all
// applied, the version counts them, and the weights equal init - lr * sum.
// The shards measure staleness against the version each push was computed
// on: a push computed on version 0 after all the others is exactly as stale
// as the number of pushes before it.
#include <thread>

#include "client/admin_client.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kWorkers = 4;
constexpr int kShards = 2;
constexpr int kPushes = 50;  // per worker
// Powers of two and small integers keep every sum exact in float32, so the
// expected weights do not depend on the order the pushes arrived in.
constexpr float kLr = 0.5f;

const ModelSpec kSpec = {{"w", {31, 7}}, {"b", {5}}, {"c", {1}}};

// The gradient worker w sends at its k-th push: small integers.
TensorList Gradient(int w, int k) {
  TensorList g;
  for (const TensorSpec& t : kSpec) {
    std::vector<float> v(t.num_elements());
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((w + 1) * ((k + int(i)) % 5 - 1));
    g.push_back(v);
  }
  return g;
}

class Async : public ::testing::TestWithParam<ClientOptions::Transport> {};

TEST_P(Async, ConcurrentPushesAreAllAppliedExactlyOnce) {
  TestCluster cluster(kShards, kWorkers, Mode::kAsync, kLr);
  TensorList init;
  for (const TensorSpec& t : kSpec) {
    std::vector<float> v(t.num_elements());
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 11);
    init.push_back(v);
  }

  // A late worker: it pulls version 0 now, before anyone pushes, and pushes
  // once everybody else is done. It creates the parameters (as worker 0), so
  // nothing can have been applied before its pull.
  auto late = cluster.Connect(0, kWorkers, GetParam());
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_TRUE((*late)->Init(kSpec, &init).ok());
  TensorList late_weights;
  ASSERT_TRUE((*late)->Pull(0, &late_weights).ok());
  ASSERT_EQ((*late)->version(), 0);

  std::vector<absl::Status> status(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto client = cluster.Connect(w, kWorkers, GetParam());
      if (!client.ok()) {
        status[w] = client.status();
        return;
      }
      absl::Status s = (*client)->Init(kSpec, w == 0 ? &init : nullptr);
      TensorList weights;
      if (s.ok()) s = (*client)->Pull(0, &weights);
      // Alternate plain pushes and push-pulls: both paths must apply. A push
      // carries the version of the worker's last pull, so each push-pull
      // (odd k) comes after the worker's own push k-1 was applied on top of
      // that version: its staleness is at least 1, however the pushes of the
      // workers interleave.
      for (int k = 0; s.ok() && k < kPushes; ++k) {
        s = k % 2 == 0 ? (*client)->Push(Gradient(w, k))
                       : (*client)->PushPull(Gradient(w, k), &weights);
      }
      status[w] = s;
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];

  // Every shard is at version N = kWorkers * kPushes now. The late push,
  // computed on version 0, is N versions stale. Every other push was applied
  // at a version below N and computed on one >= 0, so N is the maximum.
  constexpr int kConcurrent = kWorkers * kPushes;
  // Worker 0 again, as after a restart: it numbers its pushes after those
  // the shards accepted from worker 0 (RegisterResponse.last_seq), so its
  // push is applied, not taken for a retry. (`late`, connected before them,
  // would number its push 1: a duplicate of worker 0's first.)
  auto restarted = cluster.Connect(0, kWorkers, GetParam());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  ASSERT_TRUE((*restarted)->Init(kSpec, nullptr).ok());
  ASSERT_EQ((*restarted)->version(), 0);  // it has pulled nothing
  ASSERT_TRUE((*restarted)->Push(Gradient(0, kPushes)).ok());
  for (PushOutcome o : (*restarted)->LastPushOutcomes()) EXPECT_EQ(o, PushOutcome::kApplied);
  ASSERT_TRUE((*late)->Push(Gradient(0, kPushes)).ok());
  for (PushOutcome o : (*late)->LastPushOutcomes()) EXPECT_EQ(o, PushOutcome::kDuplicate);
  auto stats = QueryStatus(cluster.addresses(), absl::Seconds(10));
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), size_t{kShards});
  for (const v1::StatusResponse& st : *stats) {
    EXPECT_EQ(st.version(), kConcurrent + 1) << "shard " << st.shard_id();
    EXPECT_EQ(st.pushes_accepted(), kConcurrent + 1) << "shard " << st.shard_id();
    EXPECT_EQ(st.max_staleness(), kConcurrent) << "shard " << st.shard_id();
    // The staleness sum is at least N (the late push) plus 1 for each of the
    // kConcurrent / 2 push-pulls; the mean cannot exceed the maximum.
    const double min_mean = (kConcurrent + kConcurrent / 2) / double(kConcurrent + 1);
    EXPECT_GE(st.mean_staleness(), min_mean) << "shard " << st.shard_id();
    EXPECT_LE(st.mean_staleness(), st.max_staleness()) << "shard " << st.shard_id();
  }

  TensorList expected = init;
  for (int w = 0; w < kWorkers; ++w) {
    for (int k = 0; k < kPushes; ++k) {
      const TensorList g = Gradient(w, k);
      for (size_t t = 0; t < g.size(); ++t) {
        for (size_t i = 0; i < g[t].size(); ++i) expected[t][i] -= kLr * g[t][i];
      }
    }
  }
  const TensorList late_gradient = Gradient(0, kPushes);
  for (size_t t = 0; t < late_gradient.size(); ++t) {
    for (size_t i = 0; i < late_gradient[t].size(); ++i) {
      expected[t][i] -= kLr * late_gradient[t][i];
    }
  }
  auto reader = cluster.Connect(0, kWorkers);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Init(kSpec, nullptr).ok());
  TensorList final_weights;
  ASSERT_TRUE((*reader)->Pull(0, &final_weights).ok());
  EXPECT_EQ(final_weights, expected);
  EXPECT_NE(final_weights, init);
}

INSTANTIATE_TEST_SUITE_P(Transports, Async, AllTransports(), TransportName);

}  // namespace
}  // namespace ps
