// Eviction beyond LRU through real servers and PsClient: --table_ttl_steps
// removes rows not updated for that many of the shard's steps (its
// version), --table_evict_l2_below rows that learned too little; an
// evicted row comes back as new, and /metrics counts each reason.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/embedding_shard.h"
#include "gtest/gtest.h"
#include "tests/metrics_sum.h"
#include "tests/table_client.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kDim = 4;
const TableSpec kTable{"items", kDim, /*seed=*/8, /*init_scale=*/0.01f};

std::unique_ptr<PsClient> Connect(const LocalServers& servers) {
  return ConnectTableClient(servers, kTable);
}

std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> ids;
  for (uint64_t i = from; i < to; ++i) ids.push_back(i);
  return ids;
}

TEST(TableEviction, RowsPastTheirTtlInStepsComeBackAsNew) {
  ServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  o.shard.num_workers = 1;
  o.shard.mode = Mode::kAsync;
  o.shard.tables.optimizer.kind = SparseOptimizerKind::kSgd;
  o.shard.tables.optimizer.lr = 1.0f;
  o.shard.tables.ttl_steps = 3;
  absl::StatusOr<LocalServers> servers = LocalServers::Start(o, 2);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::unique_ptr<PsClient> c = Connect(*servers);
  ASSERT_TRUE(c);
  const std::vector<uint64_t> old_ids = Range(0, 50), live_ids = Range(50, 60);
  const std::vector<float> old_grads(old_ids.size() * kDim, -1.0f);
  ASSERT_TRUE(c->PushRows("items", old_ids, old_grads).ok());  // learned at version 0
  TensorList dense = {std::vector<float>(4, 0.0f)}, weights;
  for (int step = 0; step < 5; ++step) {  // versions 1..5; the live rows learn at each
    ASSERT_TRUE(c->PushPull(dense, &weights).ok());
    const std::vector<float> g(live_ids.size() * kDim, -1.0f);
    ASSERT_TRUE(c->PushRows("items", live_ids, g).ok());
  }
  // Calls look at a few rows each: these sweep the shards' slots.
  for (int call = 0; call < 10; ++call) {
    std::vector<float> rows(live_ids.size() * kDim);
    ASSERT_TRUE(c->PullRows("items", live_ids, absl::MakeSpan(rows)).ok());
  }
  std::vector<float> old_rows(old_ids.size() * kDim), live_rows(live_ids.size() * kDim);
  ASSERT_TRUE(c->PullRows("items", old_ids, absl::MakeSpan(old_rows)).ok());
  ASSERT_TRUE(c->PullRows("items", live_ids, absl::MakeSpan(live_rows)).ok());
  for (size_t i = 0; i < old_ids.size(); ++i) {
    float want[kDim];
    InitRow(kTable.seed, old_ids[i], kDim, kTable.init_scale, want);
    for (int j = 0; j < kDim; ++j) ASSERT_EQ(old_rows[i * kDim + j], want[j]) << old_ids[i];
  }
  for (size_t i = 0; i < live_ids.size(); ++i) {
    float init[kDim];
    InitRow(kTable.seed, live_ids[i], kDim, kTable.init_scale, init);
    for (int j = 0; j < kDim; ++j) EXPECT_FLOAT_EQ(live_rows[i * kDim + j], init[j] + 5.0f);
  }
  EXPECT_EQ(
      SumMetric(*servers, "ps_server_embedding_evictions_total{table=\"items\",reason=\"ttl\"}"),
      old_ids.size());
  EXPECT_EQ(
      SumMetric(*servers, "ps_server_embedding_evictions_total{table=\"items\",reason=\"score\"}"),
      0);
}

}  // namespace
}  // namespace ps
