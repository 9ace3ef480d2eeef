// Table checkpoints through real servers: consistent and incremental.
//
// A checkpoint is one cut of the shard: two workers push rows and dense
// gradients while the server writes checkpoints every millisecond (full
// ones and deltas; with the table in memory or mostly on disk, its tier
// snapshotted by RocksDB), and every checkpoint on disk, restored (a full
// one and the deltas up to it), holds each row's values and optimizer
// state as they were after the same number of pushes, for all rows alike,
// and that
// number agrees with the dense version: in sync mode equal, in async and
// SSP within the pushes in flight. Incremental checkpoints write only the
// changed rows (measured against changed rows x row bytes), and a server
// restarted on full + deltas holds the live table bit for bit.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/core/embedding_table.h"
#include "server/core/sparse_tables.h"
#include "server/core/table_testing.h"
#include "server/tier/rocksdb_row_tier.h"
#include "tests/table_client.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kDim = 4;
const TableSpec kTable{"ads", kDim, /*seed=*/31, /*init_scale=*/0.5f};

std::string TempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/tckpt_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

ServerOptions Options(Mode mode, int workers, const std::string& dir) {
  ServerOptions o;
  o.shard.num_workers = workers;
  o.shard.mode = mode;
  o.shard.tables.optimizer.kind = SparseOptimizerKind::kAdam;  // moments and a step per row
  o.shard.tables.optimizer.lr = 0.05f;
  o.checkpoints.dir = dir;
  o.checkpoints.every_versions = 0;
  o.checkpoints.full_every = 3;
  o.checkpoints.keep = 1 << 20;  // every checkpoint stays, to be checked
  return o;
}

std::unique_ptr<PsClient> Connect(const LocalServers& s, int worker, int workers) {
  return ConnectTableClient(s, kTable, ClientOptions::Transport::kStream, worker, workers);
}

// The gradient of row `id` in every push, from every worker: the same each
// time, so a row's state after n pushes does not depend on their order.
std::vector<float> Grads(const std::vector<uint64_t>& ids) {
  std::vector<float> g;
  for (uint64_t id : ids) {
    for (int j = 0; j < kDim; ++j) g.push_back(static_cast<float>((id * 7 + j) % 11) / 4 - 1.25f);
  }
  return g;
}

// The checkpoints written to `dir` so far (its .ckpt files), read while the
// server writes them: not through a CheckpointStore, whose Open empties the
// tier staging folder a checkpoint of the server may be using.
int CheckpointFiles(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    n += e.path().extension() == ".ckpt";
  }
  return n;
}

std::unique_ptr<CheckpointStore> OpenStore(const std::string& dir) {
  CheckpointStoreOptions o;
  o.dir = dir;
  o.keep = 1 << 20;
  auto store = CheckpointStore::Open(o);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

struct Cut {
  Mode mode;
  bool tier;  // 16 of the 64 rows in memory, the rest in RocksDB
};

class ConsistentCut : public testing::TestWithParam<Cut> {};

TEST_P(ConsistentCut, EveryCheckpointHoldsEachRowAsAfterTheSameNumberOfPushes) {
  const Mode mode = GetParam().mode;
  // At least kRounds rounds, and on until 6 checkpoints are on disk (a
  // loaded machine writes fewer in the same rounds), kMaxRounds at most.
  constexpr int kWorkers = 2, kRounds = 300, kMaxRounds = 30000, kCheckpoints = 6;
  const std::string dir = TempDir();
  ServerOptions o = Options(mode, kWorkers, dir);
  o.checkpoints.period = absl::Milliseconds(1);
  if (GetParam().tier) {
    EmbeddingTableOptions row;
    row.dim = kDim;
    row.evict_lru = true;
    row.optimizer = o.shard.tables.optimizer;
    o.shard.tables.memory_budget_bytes =
        16 * static_cast<int64_t>(EmbeddingTable::MemoryBytesPerRow(row));
    o.shard.tables.make_tier = RocksDbTiersUnder(dir + "/tier");
  }
  absl::StatusOr<LocalServers> servers = LocalServers::Start(o, 1);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 64; ++i) ids.push_back(i * 1000003);
  const std::vector<float> grads = Grads(ids);
  std::vector<std::thread> workers;
  std::atomic<int> stop_at{kMaxRounds};  // the rounds every worker does
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::unique_ptr<PsClient> c = Connect(*servers, w, kWorkers);
      ASSERT_TRUE(c);
      TensorList weights;
      ASSERT_TRUE(c->Pull(0, &weights).ok());
      const TensorList dense = {std::vector<float>(4, 0.25f)};
      // Worker 0 ends the run 2 rounds on: in sync mode the other is at
      // most one round ahead of it (a step needs both), so both do the
      // same rounds.
      for (int r = 0; r < stop_at.load(); ++r) {
        ASSERT_TRUE(c->PushRows(kTable.name, ids, grads).ok());
        ASSERT_TRUE(c->PushPull(dense, &weights).ok());
        if (w == 0 && r + 1 >= kRounds && r % 16 == 15 && CheckpointFiles(dir) >= kCheckpoints) {
          stop_at = std::min(stop_at.load(), r + 2);
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
  ASSERT_TRUE(servers->servers[0]->Shutdown().ok());

  // Every checkpoint on disk, as a restore would load it.
  std::unique_ptr<CheckpointStore> store = OpenStore(dir);
  ASSERT_TRUE(store);
  std::map<int64_t, ShardState> states;  // by version
  int deltas = 0;
  for (const std::string& path : store->List()) {
    deltas += path.find(".delta.ckpt") != std::string::npos;
    const int64_t v = std::strtoll(path.c_str() + path.rfind("-v") + 2, nullptr, 10);
    auto loaded = store->LoadNewest(SpecLimits(), v);
    ASSERT_TRUE(loaded.ok() && loaded->has_value()) << path;
    ASSERT_EQ((*loaded)->state.version, v) << path;
    for (EmbeddingTableState& t : (*loaded)->state.tables) {
      if (GetParam().tier) EXPECT_FALSE(t.tier_snapshot.empty()) << path;
      ASSERT_TRUE(MaterializeTierSnapshot(ReadRocksDbSnapshot, &t).ok()) << path;
    }
    states[v] = std::move((*loaded)->state);
  }
  ASSERT_GE(states.size(), static_cast<size_t>(kCheckpoints)) << "too few checkpoints to tell";
  EXPECT_GT(deltas, 0);

  // The pushes each checkpoint's rows saw: one step for all rows.
  std::map<int64_t, uint32_t> pushes;  // version -> row pushes
  for (const auto& [v, state] : states) {
    ASSERT_EQ(state.tables.size(), 1u);
    const EmbeddingTableContents& c = state.tables[0].contents;
    if (c.ids.empty()) {
      pushes[v] = 0;
      continue;
    }
    ASSERT_EQ(c.ids.size(), ids.size()) << "v" << v;
    const std::set<uint32_t> steps(c.adam_steps.begin(), c.adam_steps.end());
    ASSERT_EQ(steps.size(), 1u) << "rows of v" << v << " from different moments";
    pushes[v] = *steps.begin();
    // Sync: each step applies every worker's rows as one mean (one adam
    // step); else each push is one, and a worker's row push comes before
    // its dense one: v <= pushes <= v + workers.
    if (mode == Mode::kSync) {
      EXPECT_EQ(pushes[v], v);
    } else {
      EXPECT_GE(pushes[v], v);
      EXPECT_LE(pushes[v], v + kWorkers);
    }
  }
  // Each row as a fresh table has it after that many pushes, bit for bit.
  EmbeddingTableOptions to = states.rbegin()->second.tables[0].options;
  auto replay = EmbeddingTable::Create(to);
  ASSERT_TRUE(replay.ok());
  std::vector<float> rows(ids.size() * kDim);
  ASSERT_TRUE((*replay)->Pull(ids, rows.data()).ok());
  std::map<uint32_t, std::map<uint64_t, std::vector<uint32_t>>> after;  // pushes -> rows
  const uint32_t most = std::max_element(pushes.begin(), pushes.end(), [](auto& a, auto& b) {
                          return a.second < b.second;
                        })->second;
  for (uint32_t n = 0; n <= most; ++n) {
    if (n > 0) ASSERT_TRUE((*replay)->Apply(ids, grads.data()).ok());
    after[n] = RowBits(*(*replay)->Export());
  }
  for (const auto& [v, n] : pushes) {
    if (n == 0) continue;
    EXPECT_EQ(RowBits(states[v].tables[0].contents), after[n]) << "v" << v << " after " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ConsistentCut,
                         testing::Values(Cut{Mode::kAsync, false}, Cut{Mode::kSsp, false},
                                         Cut{Mode::kSync, false}, Cut{Mode::kAsync, true},
                                         Cut{Mode::kSync, true}),
                         [](const testing::TestParamInfo<Cut>& p) {
                           return ModeName(p.param.mode) + (p.param.tier ? "_tier" : "");
                         });

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST(IncrementalCheckpoints, DeltasHoldTheChangedRowsAndRestoreTheLiveTable) {
  constexpr int kRows = 20000, kChanged = 1000;
  const std::string dir = TempDir();
  ServerOptions o = Options(Mode::kAsync, 1, dir);
  o.checkpoints.every_versions = 1;     // each dense push: a checkpoint
  o.shard.tables.max_rows = kRows / 2;  // with LRU eviction: removed rows too
  o.shard.tables.evict_lru = true;
  LoggedServers servers = StartLoggedServers(o, 1);
  ASSERT_EQ(servers.servers.size(), 1u);
  std::unique_ptr<PsClient> c = Connect(servers, 0, 1);
  ASSERT_TRUE(c);
  // Each checkpoint written before the next is offered (else the writer
  // folds deltas waiting behind it into one).
  const auto written = [&servers](int v) {
    return servers.AwaitLine(absl::StrCat("checkpoint v", v, " written"), absl::Seconds(60));
  };
  std::vector<uint64_t> all;
  for (uint64_t i = 0; i < kRows; ++i) all.push_back(i * 7919);
  std::vector<float> out(kRows * kDim);
  ASSERT_TRUE(c->PullRows(kTable.name, absl::MakeSpan(all).subspan(0, kRows / 2),
                          absl::MakeSpan(out).subspan(0, kRows / 2 * kDim))
                  .ok());
  const TensorList dense = {std::vector<float>(4, 0.5f)};
  ASSERT_TRUE(c->Push(dense).ok());  // v1: full
  ASSERT_TRUE(written(1));
  std::mt19937_64 rng(3);
  for (int k = 0; k < 5; ++k) {  // v2, v3 deltas; v4 full; v5, v6 deltas
    std::set<uint64_t> pick;
    while (pick.size() < kChanged) pick.insert(all[rng() % all.size()]);
    const std::vector<uint64_t> ids(pick.begin(), pick.end());
    ASSERT_TRUE(c->PushRows(kTable.name, ids, Grads(ids)).ok());
    ASSERT_TRUE(c->Push(dense).ok());
    ASSERT_TRUE(written(k + 2));
  }
  absl::StatusOr<ShardState> live = servers.servers[0]->shard()->ExportState();
  ASSERT_TRUE(live.ok());
  c.reset();
  ASSERT_TRUE(servers.servers[0]->Shutdown().ok());

  std::unique_ptr<CheckpointStore> store = OpenStore(dir);
  ASSERT_TRUE(store);
  for (const std::string& line : servers.Lines()) std::printf("%s\n", line.c_str());
  const std::vector<std::string> files = store->List();
  ASSERT_EQ(files.size(), 6u);
  // Row bytes with state: the id, the values, adam's two moments, its step.
  const int64_t row_bytes = 8 + 3 * kDim * 4 + 4;
  for (const std::string& f : files) {
    if (f.find(".delta.ckpt") == std::string::npos) continue;
    // Pushed rows (each made anew if evicted) and the rows their making
    // evicted: at most 2 x kChanged ids, kChanged rows.
    const double ratio = static_cast<double>(FileBytes(f)) / (kChanged * row_bytes);
    std::printf("%s: %lld bytes, %.3f x changed rows x row bytes (%lld)\n",
                f.substr(f.rfind('/') + 1).c_str(), static_cast<long long>(FileBytes(f)), ratio,
                static_cast<long long>(row_bytes));
    EXPECT_LE(ratio, 1.2);
  }
  // Restarted on full + deltas: the live table, bit for bit.
  absl::StatusOr<LocalServers> again = LocalServers::Start(o, 1);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<ShardState> restored = again->servers[0]->shard()->ExportState();
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->version, 6);
  EXPECT_EQ(RowBits(restored->tables[0].contents), RowBits(live->tables[0].contents));
  EXPECT_EQ(restored->tables[0].contents.ids, live->tables[0].contents.ids) << "LRU order";
}

}  // namespace
}  // namespace ps
