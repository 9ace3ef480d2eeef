// Checkpoints restored on another shard count through real servers. The
// tables only (ServerOptions::Checkpoints::tables_only, ps_server's
// --restore_tables_from): the checkpoint of 2 shards, loaded by 3, answers
// every row bit for bit and trains on bit for bit (the rows' optimizer
// state came too). The whole state (--restore_from): a sync run with Adam
// on a dense model and a table, checkpointed on 2 shards and restored onto
// 3 and onto 1, goes on bit for bit as the run on 2 does.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/table_client.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

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

// Writes each shard's state, as ps_server writes a checkpoint, into `dir`.
void WriteCheckpoint(const LocalServers& servers, const std::string& dir) {
  const int shards = static_cast<int>(servers.servers.size());
  for (int s = 0; s < shards; ++s) {
    absl::StatusOr<ShardState> state = servers.servers[s]->shard()->ExportState();
    ASSERT_TRUE(state.ok()) << state.status();
    CheckpointStoreOptions so;
    so.dir = dir;
    so.shard_id = s;
    so.num_shards = shards;
    auto store = CheckpointStore::Open(so);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Write(*state).ok());
  }
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
  WriteCheckpoint(*two, dir);

  ServerOptions o = Base();
  o.checkpoints.restore_from = dir;
  o.checkpoints.restore_from_shards = 2;
  o.checkpoints.tables_only = true;
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
  o.checkpoints.restore_from = dir + "/none";
  absl::StatusOr<LocalServers> bad = LocalServers::Start(o, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(dir + "/none"), std::string::npos) << bad.status();
}

// Sync servers for one worker with Adam on the dense model.
ServerOptions SyncAdam() {
  ServerOptions o;
  o.shard.num_workers = 1;
  o.shard.mode = Mode::kSync;
  o.shard.optimizer.name = "adam";
  o.shard.optimizer.learning_rate = 0.01;
  return o;
}

// A round's gradient of the dense model (7x5 and 3), drawn from `rng`.
TensorList DenseGradients(std::mt19937_64* rng) {
  TensorList g = {std::vector<float>(35), std::vector<float>(3)};
  for (auto& t : g) {
    for (float& x : t) x = static_cast<float>(static_cast<int>((*rng)() % 201) - 100) / 70;
  }
  return g;
}

// A sync worker of `servers` training a dense model (7x5 and 3) with Adam
// and table "users": step() pushes the gradients of `round` (the same on
// every cluster) and returns the new weights and rows.
struct DenseRun {
  std::unique_ptr<PsClient> client;
  std::vector<uint64_t> ids;

  static const ModelSpec& Spec() {
    static const ModelSpec* spec = new ModelSpec{{"w", {7, 5}}, {"b", {3}}};
    return *spec;
  }
  void Connect(const LocalServers& servers) {
    ClientOptions o;
    o.servers = servers.addresses;
    o.wait_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client = *std::move(c);
    ASSERT_TRUE(client->DeclareTables({kTable}).ok());
    TensorList init = {std::vector<float>(35), std::vector<float>(3)};
    for (size_t t = 0; t < init.size(); ++t) {
      for (size_t e = 0; e < init[t].size(); ++e) init[t][e] = 0.01f * (e + 7 * t);
    }
    ASSERT_TRUE(client->Init(Spec(), &init).ok());  // the restored clusters keep theirs
    // As a worker starts: from the weights the servers hold, at their step.
    TensorList w;
    ASSERT_TRUE(client->Pull(0, &w).ok());
    for (uint64_t i = 0; i < 50; ++i) ids.push_back(i * 7919);
  }
  std::vector<float> Step(int round) {
    std::mt19937_64 rng(round);
    const TensorList g = DenseGradients(&rng);
    std::vector<float> rows_g(ids.size() * kDim);
    for (float& x : rows_g) x = static_cast<float>(static_cast<int>(rng() % 201) - 100) / 90;
    EXPECT_TRUE(client->PushRows("users", ids, rows_g).ok());
    TensorList w;
    const absl::Status s = client->PushPull(g, &w);
    EXPECT_TRUE(s.ok()) << s;
    std::vector<float> out;
    for (const auto& t : w) out.insert(out.end(), t.begin(), t.end());
    const std::vector<float> rows = Pull(client.get(), ids);
    out.insert(out.end(), rows.begin(), rows.end());
    return out;
  }
};

TEST(Reshard, ASyncRunRestoredOnAnotherShardCountGoesOnBitForBit) {
  ServerOptions base = SyncAdam();
  base.shard.tables.optimizer.kind = SparseOptimizerKind::kAdam;
  base.shard.tables.optimizer.lr = 0.05f;
  absl::StatusOr<LocalServers> two = LocalServers::Start(base, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  DenseRun a;
  a.Connect(*two);
  for (int round = 0; round < 4; ++round) a.Step(round);
  const std::string dir = TempDir();
  WriteCheckpoint(*two, dir);

  for (int shards : {3, 1}) {
    ServerOptions o = base;
    o.checkpoints.restore_from = dir;
    o.checkpoints.restore_from_shards = 2;
    absl::StatusOr<LocalServers> other = LocalServers::Start(o, shards);
    ASSERT_TRUE(other.ok()) << other.status();
    for (const auto& server : other->servers) EXPECT_EQ(server->shard()->Stats().version, 4);
    DenseRun b;
    b.Connect(*other);
    // The run on 2 shards goes on from its checkpoint; so does this one.
    absl::StatusOr<LocalServers> again = LocalServers::Start(
        [&] {
          ServerOptions same = base;
          same.checkpoints.restore_from = dir;
          same.checkpoints.restore_from_shards = 2;
          return same;
        }(),
        2);
    ASSERT_TRUE(again.ok()) << again.status();
    DenseRun ref;
    ref.Connect(*again);
    for (int round = 4; round < 7; ++round) {
      EXPECT_EQ(b.Step(round), ref.Step(round)) << shards << " shards, round " << round;
    }
  }
  // And the run on 2 shards that never stopped agrees with them.
  ServerOptions o = base;
  o.checkpoints.restore_from = dir;
  o.checkpoints.restore_from_shards = 2;
  absl::StatusOr<LocalServers> restored = LocalServers::Start(o, 3);
  ASSERT_TRUE(restored.ok());
  DenseRun ref;  // after its servers: it goes first
  ref.Connect(*restored);
  for (int round = 4; round < 7; ++round) {
    EXPECT_EQ(a.Step(round), ref.Step(round)) << "round " << round;
  }
}

// A client that follows its job onto another shard count
// (ClientOptions::find_servers, as ps_worker and ps.Client do with a
// coordinator): its 2 servers stop after their checkpoint, 3 restored from
// it take their place, and the client, in the middle of its run, re-cuts
// its copy of the weights, registers with the 3 and goes on bit for bit as
// a client of 2 restored servers does.
TEST(Reshard, AClientFollowsItsJobOntoAnotherShardCount) {
  ServerOptions base = SyncAdam();
  // The client's streams stay open: servers that stop cut them at once.
  base.shutdown_grace = absl::Milliseconds(100);
  const ModelSpec spec = {{"w", {7, 5}}, {"b", {3}}};
  const auto step = [](PsClient* c, int round) {
    std::mt19937_64 rng(round);
    const TensorList g = DenseGradients(&rng);
    TensorList w;
    const absl::Status s = c->PushPull(g, &w);
    EXPECT_TRUE(s.ok()) << s;
    return w;
  };
  const auto connect = [&](ClientOptions o) {
    o.wait_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return std::unique_ptr<PsClient>();
    TensorList init = {std::vector<float>(35), std::vector<float>(3)};
    for (size_t t = 0; t < init.size(); ++t) {
      for (size_t e = 0; e < init[t].size(); ++e) init[t][e] = 0.01f * (e + 7 * t);
    }
    EXPECT_TRUE((*c)->Init(spec, &init).ok());  // restored servers keep theirs
    TensorList w;
    EXPECT_TRUE((*c)->Pull(0, &w).ok());
    return *std::move(c);
  };

  auto two = std::make_unique<LocalServers>();
  {
    absl::StatusOr<LocalServers> started = LocalServers::Start(base, 2);
    ASSERT_TRUE(started.ok()) << started.status();
    *two = *std::move(started);
  }
  // What the job's shard map says, as the client reads it when it recovers.
  struct Map {
    absl::Mutex mu;
    ServersAt now ABSL_GUARDED_BY(mu);
  };
  auto map = std::make_shared<Map>();
  {
    absl::MutexLock l(&map->mu);
    map->now = {two->addresses, 1};
  }
  ClientOptions o;
  o.servers = two->addresses;
  o.shard_map_version = 1;
  o.retry_timeout = absl::Seconds(30);
  o.find_servers = [map]() -> absl::StatusOr<ServersAt> {
    absl::MutexLock l(&map->mu);
    return map->now;
  };
  std::vector<std::string> lines;
  o.log = [&lines](absl::string_view line) { lines.emplace_back(line); };
  std::unique_ptr<PsClient> client = connect(o);
  ASSERT_NE(client, nullptr);
  for (int round = 0; round < 4; ++round) step(client.get(), round);

  const std::string dir = TempDir();
  WriteCheckpoint(*two, dir);
  two.reset();  // the old servers stop
  ServerOptions restored = base;
  restored.checkpoints.restore_from = dir;
  restored.checkpoints.restore_from_shards = 2;
  absl::StatusOr<LocalServers> three = LocalServers::Start(restored, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  {
    absl::MutexLock l(&map->mu);
    map->now = {three->addresses, 2};
  }
  absl::StatusOr<LocalServers> again = LocalServers::Start(restored, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  ClientOptions ref_options;
  ref_options.servers = again->addresses;
  std::unique_ptr<PsClient> ref = connect(ref_options);
  ASSERT_NE(ref, nullptr);
  for (int round = 4; round < 8; ++round) {
    EXPECT_EQ(step(client.get(), round), step(ref.get(), round)) << "round " << round;
  }
  EXPECT_THAT(lines, Contains(HasSubstr("the job's servers are now 3 shards (the shard map, "
                                        "version 2), were 2: following them at version 4")));
  EXPECT_EQ(client->num_shards(), 3);
}

// A client with tables does not follow (the rows of a call in flight are
// grouped by the old count): it says so and stays with its servers.
TEST(Reshard, AClientWithTablesDoesNotFollowAnotherShardCount) {
  ServerOptions base = Base();
  base.shutdown_grace = absl::Milliseconds(100);
  auto two = std::make_unique<LocalServers>();
  {
    absl::StatusOr<LocalServers> started = LocalServers::Start(base, 2);
    ASSERT_TRUE(started.ok()) << started.status();
    *two = *std::move(started);
  }
  absl::StatusOr<LocalServers> three = LocalServers::Start(base, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  ClientOptions o;
  o.servers = two->addresses;
  o.retry_timeout = absl::Seconds(1);
  o.find_servers = [&]() -> absl::StatusOr<ServersAt> { return ServersAt{three->addresses, 2}; };
  std::vector<std::string> lines;
  o.log = [&lines](absl::string_view line) { lines.emplace_back(line); };
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->DeclareTables({kTable}).ok());
  TensorList init = {std::vector<float>(4)};
  ASSERT_TRUE((*c)->Init({{"w", {4}}}, &init).ok());
  two.reset();
  EXPECT_FALSE((*c)->Push(TensorList{std::vector<float>(4)}).ok());
  EXPECT_EQ((*c)->num_shards(), 2);
  EXPECT_THAT(lines,
              Contains(HasSubstr("the job's servers are now 3 shards (" + three->addresses[0])));
  EXPECT_THAT(lines, Contains(HasSubstr("this client's 2: not followed, its embedding tables' "
                                        "rows are grouped by the old count")));
}

}  // namespace
}  // namespace ps
