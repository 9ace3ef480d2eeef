// Async mode loses no update: concurrent pushes from several workers are all
// applied, the version counts them, and the weights equal init - lr * sum.
#include <thread>

#include "gtest/gtest.h"
#include "tests/test_cluster.h"
#include "worker/ps_client.h"

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
      // Alternate plain pushes and push-pulls: both paths must apply.
      for (int k = 0; s.ok() && k < kPushes; ++k) {
        s = k % 2 == 0 ? (*client)->Push(Gradient(w, k))
                       : (*client)->PushPull(Gradient(w, k), &weights);
      }
      status[w] = s;
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(status[w].ok()) << "worker " << w << ": " << status[w];

  auto stats = QueryStatus(cluster.addresses(), absl::Seconds(10));
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const v1::StatusResponse& st : *stats) {
    EXPECT_EQ(st.version(), kWorkers * kPushes) << "shard " << st.shard_id();
    EXPECT_EQ(st.pushes_applied(), kWorkers * kPushes);
    EXPECT_GE(st.max_staleness(), 0);
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
