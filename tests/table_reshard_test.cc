// Embedding tables restored on another shard count through real servers:
// the checkpoint of 2 shards, loaded by 3 (ServerOptions::Checkpoints::
// tables_from, ps_server's --restore_tables_from), answers every row bit for
// bit, and trains on bit for bit (the rows' optimizer state came too).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/table_client.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kDim = 4;
const TableSpec kTable{"users", kDim, /*seed=*/21, /*init_scale=*/0.5f};

std::string TempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/reshard_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

ServerOptions Base() {
  ServerOptions o;
  o.shard.num_workers = 1;
  o.shard.mode = Mode::kAsync;
  o.shard.tables.optimizer.kind = SparseOptimizerKind::kAdam;  // state and a step per row
  o.shard.tables.optimizer.lr = 0.05f;
  return o;
}

std::vector<float> Pull(PsClient* c, const std::vector<uint64_t>& ids) {
  std::vector<float> rows(ids.size() * kDim);
  const absl::Status s = c->PullRows("users", ids, absl::MakeSpan(rows));
  EXPECT_TRUE(s.ok()) << s;
  return rows;
}

TEST(TableReshard, ACheckpointOfTwoShardsRestoresOntoThreeBitForBit) {
  absl::StatusOr<LocalServers> two = LocalServers::Start(Base(), 2);
  ASSERT_TRUE(two.ok()) << two.status();
  std::unique_ptr<PsClient> a = ConnectTableClient(*two, kTable);
  ASSERT_TRUE(a);
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 300; ++i) ids.push_back(i * 1000003);
  std::mt19937_64 rng(5);
  const auto grads = [&] {
    std::vector<float> g(ids.size() * kDim);
    for (float& x : g) x = static_cast<float>(static_cast<int>(rng() % 201) - 100) / 50;
    return g;
  };
  for (int round = 0; round < 3; ++round) ASSERT_TRUE(a->PushRows("users", ids, grads()).ok());
  // The checkpoint, as ps_server writes it at a version: each shard's file.
  const std::string dir = TempDir();
  for (int s = 0; s < 2; ++s) {
    absl::StatusOr<ShardState> state = two->servers[s]->shard()->ExportState();
    ASSERT_TRUE(state.ok()) << state.status();
    CheckpointStoreOptions so;
    so.dir = dir;
    so.shard_id = s;
    so.num_shards = 2;
    auto store = CheckpointStore::Open(so);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Write(*state).ok());
  }

  ServerOptions o = Base();
  o.checkpoints.tables_from = dir;
  o.checkpoints.tables_from_shards = 2;
  absl::StatusOr<LocalServers> three = LocalServers::Start(o, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  int64_t rows = 0;
  for (const auto& server : three->servers) {
    const std::vector<TableUsage> usage = server->shard()->Stats().tables;
    ASSERT_EQ(usage.size(), 1u);
    EXPECT_GT(usage[0].rows, 0);  // the rows are spread over all three
    rows += usage[0].rows;
  }
  EXPECT_EQ(rows, static_cast<int64_t>(ids.size()));
  std::unique_ptr<PsClient> b = ConnectTableClient(*three, kTable);  // declares the same table
  ASSERT_TRUE(b);
  EXPECT_EQ(Pull(a.get(), ids), Pull(b.get(), ids));
  const std::vector<float> g = grads();
  ASSERT_TRUE(a->PushRows("users", ids, g).ok());
  ASSERT_TRUE(b->PushRows("users", ids, g).ok());
  EXPECT_EQ(Pull(a.get(), ids), Pull(b.get(), ids));  // adam's moments and steps came along

  // A directory that is not there fails the start, naming it.
  o.checkpoints.tables_from = dir + "/none";
  absl::StatusOr<LocalServers> bad = LocalServers::Start(o, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(dir + "/none"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace ps
