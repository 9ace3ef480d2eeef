// Embedding tables with a memory budget (--table_memory_budget, the rest in
// RocksDB under --table_dir) through real servers and PsClient: the rows
// pulled are bit for bit those of servers that keep every row in memory,
// in async and in sync steps, while each shard keeps at most its budget's
// rows in memory.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/core/embedding_table.h"
#include "server/core/table_testing.h"
#include "server/tier/rocksdb_row_tier.h"
#include "tests/metrics_sum.h"
#include "tests/table_client.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kDim = 8;
constexpr int kBudgetRows = 40;  // per table and shard, of ~1,000 rows each
const TableSpec kTable{"clicks", kDim, /*seed=*/11, /*init_scale=*/0.5f};

std::string TempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/table_tier_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

ServerOptions Base(Mode mode, const std::string& tier_dir) {
  ServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  o.shard.num_workers = 1;
  o.shard.mode = mode;
  o.shard.optimizer.learning_rate = 0.1f;
  o.shard.tables.optimizer.kind = SparseOptimizerKind::kAdam;  // state and a step per row
  o.shard.tables.optimizer.lr = 0.05f;
  if (!tier_dir.empty()) {
    EmbeddingTableOptions row;
    row.dim = kDim;
    row.evict_lru = true;
    row.optimizer = o.shard.tables.optimizer;
    o.shard.tables.memory_budget_bytes =
        kBudgetRows * static_cast<int64_t>(EmbeddingTable::MemoryBytesPerRow(row));
    o.shard.tables.make_tier = RocksDbTiersUnder(tier_dir);
  }
  return o;
}

std::unique_ptr<PsClient> Connect(const LocalServers& servers) {
  return ConnectTableClient(servers, kTable);
}

class TableTierTest : public ::testing::TestWithParam<Mode> {};

TEST_P(TableTierTest, ServersWithABudgetAnswerBitForBitAsServersWithout) {
  const std::string dir = TempDir();
  absl::StatusOr<LocalServers> all = LocalServers::Start(Base(GetParam(), ""), 2);
  absl::StatusOr<LocalServers> tiered = LocalServers::Start(Base(GetParam(), dir), 2);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_TRUE(tiered.ok()) << tiered.status();
  std::unique_ptr<PsClient> a = Connect(*all), b = Connect(*tiered);
  ASSERT_TRUE(a && b);
  std::mt19937_64 rng(7);
  for (int step = 0; step < 60; ++step) {
    std::vector<uint64_t> ids;
    const int n = 5 + static_cast<int>(rng() % 100);  // repeats; past the budget at times
    for (int i = 0; i < n; ++i) ids.push_back(rng() % 2000);
    std::vector<float> grads(ids.size() * kDim);
    for (float& g : grads) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000;
    std::vector<float> ra(grads.size()), rb(grads.size());
    for (PsClient* c : {a.get(), b.get()}) {
      std::vector<float>& rows = c == a.get() ? ra : rb;
      const absl::Status pulled = c->PullRows("clicks", ids, absl::MakeSpan(rows));
      ASSERT_TRUE(pulled.ok()) << pulled;
      ASSERT_TRUE(c->PushRows("clicks", ids, grads).ok());
      if (GetParam() == Mode::kSync) {  // the step closes with the dense push
        TensorList dense = {std::vector<float>(4, 0.0f)}, weights;
        ASSERT_TRUE(c->PushPull(dense, &weights).ok());
      }
    }
    for (size_t i = 0; i < ra.size(); ++i) {
      ASSERT_EQ(ra[i], rb[i]) << "step " << step << " id " << ids[i / kDim];
    }
  }
  // /metrics: rows in memory within the budget, the rest on disk, and
  // where the lookups found their rows.
  EXPECT_LE(SumMetric(*tiered, "ps_server_embedding_rows{table=\"clicks\"}"), 2 * kBudgetRows);
  EXPECT_GT(SumMetric(*tiered, "ps_server_embedding_disk_rows{table=\"clicks\"}"), 2 * kBudgetRows);
  const double memory =
      SumMetric(*tiered, "ps_server_embedding_lookups_total{table=\"clicks\",where=\"memory\"}");
  const double disk =
      SumMetric(*tiered, "ps_server_embedding_lookups_total{table=\"clicks\",where=\"disk\"}");
  const double none =
      SumMetric(*tiered, "ps_server_embedding_lookups_total{table=\"clicks\",where=\"none\"}");
  EXPECT_GT(memory, 0);
  EXPECT_GT(disk, 0);
  EXPECT_GT(none, 0);
  EXPECT_GT(
      SumMetric(*tiered, "ps_server_embedding_tier_writes_total{table=\"clicks\",result=\"ok\"}"),
      0);
  EXPECT_EQ(SumMetric(*tiered,
                      "ps_server_embedding_tier_writes_total{table=\"clicks\",result=\"failed\"}"),
            0);
  EXPECT_EQ(SumMetric(*all, "ps_server_embedding_disk_rows{table=\"clicks\"}"), 0);
  // Every row touched, once more, after the last push.
  std::vector<uint64_t> every(2000);
  for (uint64_t i = 0; i < every.size(); ++i) every[i] = i;
  std::vector<float> ra(every.size() * kDim), rb(every.size() * kDim);
  ASSERT_TRUE(a->PullRows("clicks", every, absl::MakeSpan(ra)).ok());
  // 2,000 ids, far more than the budget holds: in memory for the call only.
  ASSERT_TRUE(b->PullRows("clicks", every, absl::MakeSpan(rb)).ok());
  EXPECT_EQ(ra, rb);
  EXPECT_LE(SumMetric(*tiered, "ps_server_embedding_rows{table=\"clicks\"}"), 2 * kBudgetRows);
}

// The rows of shard `s`'s checkpoint state, by id, as bits (values, state,
// step): equal iff the shards hold the same rows.
std::map<uint64_t, std::vector<uint32_t>> CheckpointRows(LocalServers& servers, int s) {
  absl::StatusOr<ShardState> state = servers.servers[s]->shard()->ExportState();
  EXPECT_TRUE(state.ok()) << state.status();
  if (!state.ok() || state->tables.size() != 1) return {};
  return RowBits(state->tables[0].contents);
}

TEST(TableTier, ACheckpointHoldsTheRowsOnDiskAndRestoresIntoATieredShard) {
  const std::string dir = TempDir();
  absl::StatusOr<LocalServers> all = LocalServers::Start(Base(Mode::kAsync, ""), 1);
  absl::StatusOr<LocalServers> tiered = LocalServers::Start(Base(Mode::kAsync, dir + "/a"), 1);
  ASSERT_TRUE(all.ok() && tiered.ok());
  std::unique_ptr<PsClient> a = Connect(*all), b = Connect(*tiered);
  ASSERT_TRUE(a && b);
  std::vector<uint64_t> ids(500);
  for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i * 7;
  const std::vector<float> grads(ids.size() * kDim, 0.25f);
  for (PsClient* c : {a.get(), b.get()}) {
    for (int round = 0; round < 3; ++round) ASSERT_TRUE(c->PushRows("clicks", ids, grads).ok());
  }
  const auto want = CheckpointRows(*all, 0);
  ASSERT_EQ(want.size(), ids.size());
  EXPECT_EQ(CheckpointRows(*tiered, 0), want);  // 40 rows in memory, 460 on disk

  absl::StatusOr<ShardState> exported = tiered->servers[0]->shard()->ExportState();
  ASSERT_TRUE(exported.ok());
  // Through the bytes a checkpoint file holds: a tiered table holds more
  // rows than its memory budget, and that is no reason to refuse it.
  absl::StatusOr<ShardState> state = DecodeShardState(EncodeShardState(*exported), SpecLimits());
  ASSERT_TRUE(state.ok()) << state.status();
  absl::StatusOr<LocalServers> restored = LocalServers::Start(Base(Mode::kAsync, dir + "/b"), 1);
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE(restored->servers[0]->shard()->LoadCheckpoint(*state).ok());
  EXPECT_EQ(CheckpointRows(*restored, 0), want);
  EXPECT_LE(restored->servers[0]->shard()->Stats().tables[0].rows, kBudgetRows);

  // A shard whose tables are tiered already installs a checkpoint over
  // them: the new tiers do not share the old ones' databases.
  ASSERT_TRUE(b->PushRows("clicks", ids, grads).ok());
  EXPECT_NE(CheckpointRows(*tiered, 0), want);
  const absl::Status loaded = tiered->servers[0]->shard()->LoadCheckpoint(*state);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(CheckpointRows(*tiered, 0), want);
}

// A checkpoint of a tiered table holds its rows in memory and RocksDB's own
// checkpoint of the tier (hard links next to the file), with deltas after
// it; a restart restores the rows bit for bit into a tiered shard, into a
// shard without a budget (the snapshot read) and onto another shard count.
TEST(TableTier, ACheckpointSnapshotsTheTierThroughRocksDb) {
  const std::string dir = TempDir();
  ServerOptions o = Base(Mode::kAsync, dir + "/a");
  o.checkpoints.dir = dir + "/ckpt";
  o.checkpoints.every_versions = 1;
  o.checkpoints.full_every = 2;
  o.shard.tables.read_tier_snapshot = ReadRocksDbSnapshot;
  std::map<uint64_t, std::vector<uint32_t>> live;
  {
    LoggedServers servers = StartLoggedServers(o, 1);
    ASSERT_EQ(servers.servers.size(), 1u);
    std::unique_ptr<PsClient> c = Connect(servers);
    ASSERT_TRUE(c);
    std::vector<uint64_t> ids(500);
    for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i * 7;
    const std::vector<float> grads(ids.size() * kDim, 0.25f);
    for (int round = 0; round < 3; ++round) ASSERT_TRUE(c->PushRows("clicks", ids, grads).ok());
    const TensorList dense = {std::vector<float>(4, 1.0f)};
    ASSERT_TRUE(c->Push(dense).ok());  // v1: full, the tier as a snapshot
    ASSERT_TRUE(servers.AwaitLine("checkpoint v1 written", absl::Seconds(60)));
    const std::vector<uint64_t> some(ids.begin(), ids.begin() + 50);
    ASSERT_TRUE(c->PushRows("clicks", some, std::vector<float>(some.size() * kDim, -1)).ok());
    ASSERT_TRUE(c->Push(dense).ok());  // v2: a delta of 50 rows
    ASSERT_TRUE(servers.AwaitLine("checkpoint v2 written", absl::Seconds(60)));
    live = CheckpointRows(servers, 0);
    ASSERT_EQ(live.size(), ids.size());
    c.reset();
    ASSERT_TRUE(servers.servers[0]->Shutdown().ok());
  }
  // On disk: the full file holds the rows in memory, the tier is RocksDB's
  // files beside it.
  const std::string tiers = o.checkpoints.dir + "/shard-0-of-1-v00000000000000000001.tiers/0";
  int sst = 0;
  for (const auto& f : std::filesystem::directory_iterator(tiers)) {
    sst += f.path().extension() == ".sst";
  }
  EXPECT_GT(sst, 0) << tiers;
  CheckpointStoreOptions so;
  so.dir = o.checkpoints.dir;
  auto store = CheckpointStore::Open(so);
  ASSERT_TRUE(store.ok());
  auto loaded = (*store)->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->deltas, 1);
  EXPECT_EQ((*loaded)->state.tables[0].tier_snapshot, tiers);
  EXPECT_LE((*loaded)->state.tables[0].contents.ids.size(), kBudgetRows + 50u);

  ServerOptions again = o;  // another tier folder, the same checkpoints
  again.shard.tables.make_tier = RocksDbTiersUnder(dir + "/b");
  absl::StatusOr<LocalServers> tiered = LocalServers::Start(again, 1);
  ASSERT_TRUE(tiered.ok()) << tiered.status();
  EXPECT_EQ(CheckpointRows(*tiered, 0), live);
  EXPECT_LE(tiered->servers[0]->shard()->Stats().tables[0].rows, kBudgetRows);
  tiered = absl::UnknownError("stopped");

  ServerOptions no_budget = Base(Mode::kAsync, "");
  no_budget.checkpoints = o.checkpoints;
  no_budget.shard.tables.read_tier_snapshot = ReadRocksDbSnapshot;
  absl::StatusOr<LocalServers> all = LocalServers::Start(no_budget, 1);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(CheckpointRows(*all, 0), live);
  all = absl::UnknownError("stopped");

  ServerOptions two = Base(Mode::kAsync, "");
  two.checkpoints.restore_from = o.checkpoints.dir;
  two.checkpoints.restore_from_shards = 1;
  two.checkpoints.tables_only = true;
  two.shard.tables.read_tier_snapshot = ReadRocksDbSnapshot;
  absl::StatusOr<LocalServers> resharded = LocalServers::Start(two, 2);
  ASSERT_TRUE(resharded.ok()) << resharded.status();
  std::unique_ptr<PsClient> declared = Connect(*resharded);  // the model, and its table
  ASSERT_TRUE(declared);
  std::map<uint64_t, std::vector<uint32_t>> both = CheckpointRows(*resharded, 0);
  for (auto& row : CheckpointRows(*resharded, 1)) both.insert(row);
  EXPECT_EQ(both, live);
}

TEST(TableTier, APrefetchBringsTheNextBatchBackFromDiskOnEitherTransport) {
  for (ClientOptions::Transport transport :
       {ClientOptions::Transport::kUnary, ClientOptions::Transport::kStream}) {
    const std::string dir = TempDir();
    absl::StatusOr<LocalServers> servers = LocalServers::Start(Base(Mode::kAsync, dir), 2);
    ASSERT_TRUE(servers.ok()) << servers.status();
    std::unique_ptr<PsClient> c = ConnectTableClient(*servers, kTable, transport);
    ASSERT_TRUE(c);
    std::vector<uint64_t> all(1000), next(30);
    for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
    for (uint64_t i = 0; i < next.size(); ++i) next[i] = 3 * i;  // pulled first: now on disk
    std::vector<float> rows(all.size() * kDim), want(next.size() * kDim), got(want.size());
    ASSERT_TRUE(c->PullRows("clicks", all, absl::MakeSpan(rows)).ok());
    ASSERT_TRUE(c->PullRows("clicks", next, absl::MakeSpan(want)).ok());  // from disk
    ASSERT_TRUE(c->PullRows("clicks", all, absl::MakeSpan(rows)).ok());   // pushed out again
    const std::string lookups = "ps_server_embedding_lookups_total{table=\"clicks\",where=";
    const double memory = SumMetric(*servers, lookups + "\"memory\"}");
    const double disk = SumMetric(*servers, lookups + "\"disk\"}");
    const absl::Status prefetched = c->PrefetchRows("clicks", next);
    ASSERT_TRUE(prefetched.ok()) << prefetched;
    for (const auto& server : servers->servers) {
      ASSERT_TRUE(server->shard()->PrefetchesDone(absl::Now() + absl::Seconds(30)));
    }
    EXPECT_EQ(SumMetric(*servers, "ps_server_embedding_prefetched_rows_total{table=\"clicks\"}"),
              next.size());
    ASSERT_TRUE(c->PullRows("clicks", next, absl::MakeSpan(got)).ok());
    EXPECT_EQ(got, want);  // the same rows, found in memory
    EXPECT_EQ(SumMetric(*servers, lookups + "\"memory\"}"), memory + next.size());
    EXPECT_EQ(SumMetric(*servers, lookups + "\"disk\"}"), disk);
    // Ids it never saw make no row; a table never declared is an error.
    const std::vector<uint64_t> unseen = {5000, 5001};
    ASSERT_TRUE(c->PrefetchRows("clicks", unseen).ok());
    for (const auto& server : servers->servers) {
      ASSERT_TRUE(server->shard()->PrefetchesDone(absl::Now() + absl::Seconds(30)));
    }
    EXPECT_EQ(SumMetric(*servers, lookups + "\"none\"}"), all.size());
    EXPECT_EQ(c->PrefetchRows("views", next).code(), absl::StatusCode::kNotFound);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TableTierTest, ::testing::Values(Mode::kAsync, Mode::kSync),
                         [](const ::testing::TestParamInfo<Mode>& m) {
                           return std::string(ModeName(m.param));
                         });

}  // namespace
}  // namespace ps
