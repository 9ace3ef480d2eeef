// Checkpoints through real servers: a sync run of 2 shards writes
// checkpoints at the same versions on both shards and a final one at
// shutdown; servers restarted on the same directory resume at the final
// version with the exact weights; a damaged newest checkpoint makes its shard
// fall back to the previous one; the Checkpoint RPC (ps_ctl checkpoint)
// writes one on demand.
#include <cstdlib>
#include <functional>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "client/admin_client.h"
#include "client/ps_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/ps_server.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const ModelSpec kSpec = {{"w", {3, 2}}, {"b", {3}}};
constexpr int kShards = 2;
constexpr int kWorkers = 2;
constexpr int kCheckpointEvery = 5;  // versions

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") + "/ckpt-XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

// Shard servers on one checkpoint directory, with their log lines.
using Cluster = LoggedServers;

Cluster Start(const std::string& dir) {
  ServerOptions o;
  o.shard.num_workers = kWorkers;
  o.shard.mode = Mode::kSync;
  o.shard.optimizer.learning_rate = 0.5f;
  o.checkpoints.dir = dir;
  o.checkpoints.every_versions = kCheckpointEvery;
  o.checkpoints.keep = 10;
  return StartLoggedServers(o, kShards);
}

std::unique_ptr<PsClient> Connect(const Cluster& c, int worker) {
  return ConnectWorker(c, worker, kWorkers);
}

// Versions of the checkpoints of `shard` in `dir`, newest first.
std::vector<int64_t> Versions(const std::string& dir, int shard) {
  CheckpointStoreOptions o;
  o.dir = dir;
  o.shard_id = shard;
  o.num_shards = kShards;
  auto store = CheckpointStore::Open(o);
  EXPECT_TRUE(store.ok());
  std::vector<int64_t> versions;
  for (const std::string& path : (*store)->List()) {
    versions.push_back(std::stoll(path.substr(path.rfind("-v") + 2, 20)));
  }
  return versions;
}

// Runs `steps` sync steps with 2 workers, gradients chosen so that every
// weight stays exact in float32; returns the weights after them. Calls
// after_step(n), if given, once n steps are done.
TensorList Train(const Cluster& c, bool init, int steps,
                 const std::function<void(int)>& after_step = nullptr) {
  auto w0 = Connect(c, 0), w1 = Connect(c, 1);
  if (w0 == nullptr || w1 == nullptr) return {};
  const TensorList initial = {{1, 2, 3, 4, 5, 6}, {-1, -2, -3}};
  EXPECT_TRUE(w0->Init(kSpec, init ? &initial : nullptr).ok());
  EXPECT_TRUE(w1->Init(kSpec, nullptr).ok());
  TensorList weights0, weights1;
  EXPECT_TRUE(w0->Pull(0, &weights0).ok());
  EXPECT_TRUE(w1->Pull(0, &weights1).ok());
  const TensorList g = {{0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};
  for (int i = 0; i < steps; ++i) {
    auto op = w1->PushPullAsync(g, &weights1);
    EXPECT_TRUE(w0->PushPull(g, &weights0).ok());
    EXPECT_TRUE(op->Wait().ok());
    if (after_step) after_step(i + 1);
  }
  EXPECT_EQ(weights0, weights1);
  return weights0;
}

// For Train: after each checkpoint step, waits for both shards'
// writes. The writer thread takes the newest state offered, dropping one
// still waiting (and a shutdown drops it too): on a busy machine a later
// step could overtake a checkpoint step's write, as it would not in a
// slower real job.
std::function<void(int)> AwaitCheckpoints(const Cluster& c) {
  return [&c](int done) {
    if (done % kCheckpointEvery != 0) return;
    for (int s = 0; s < kShards; ++s) {
      EXPECT_TRUE(c.AwaitLine(absl::StrCat("shard ", s, ": checkpoint v", done, " written"),
                              absl::Seconds(30)))
          << "shard " << s << ", step " << done;
    }
  };
}

TEST(CheckpointRestart, SyncShardsCheckpointTheSameStepsAndResumeExactly) {
  const std::string dir = TempDir();
  TensorList trained;
  {
    Cluster c = Start(dir);
    ASSERT_EQ(c.servers.size(), kShards);
    trained = Train(c, /*init=*/true, 12, AwaitCheckpoints(c));
    for (auto& s : c.servers) ASSERT_TRUE(s->Shutdown().ok());
    // Versions 5 and 10 by --checkpoint_every, 12 at shutdown, on both shards.
    EXPECT_THAT(Versions(dir, 0), ElementsAre(12, 10, 5));
    EXPECT_THAT(Versions(dir, 1), ElementsAre(12, 10, 5));
  }
  // 12 steps of w -= 0.5 * 0.5 and b -= 0.5 * 0.25 from the initial values.
  EXPECT_EQ(trained, (TensorList{{-2, -1, 0, 1, 2, 3}, {-2.5f, -3.5f, -4.5f}}));

  Cluster c = Start(dir);
  ASSERT_EQ(c.servers.size(), kShards);
  for (int s = 0; s < kShards; ++s) {
    EXPECT_THAT(c.Lines(), testing::Contains(HasSubstr(absl::StrCat(
                               "shard ", s, ": restored checkpoint ", dir, "/shard-", s,
                               "-of-2-v00000000000000000012.ckpt (version 12)"))));
  }
  auto w0 = Connect(c, 0);
  ASSERT_NE(w0, nullptr);
  // Worker 0's init finds the parameters and leaves them as they are.
  const TensorList other = {{9, 9, 9, 9, 9, 9}, {9, 9, 9}};
  ASSERT_TRUE(w0->Init(kSpec, &other).ok());
  TensorList weights;
  ASSERT_TRUE(w0->Pull(0, &weights).ok());
  EXPECT_EQ(weights, trained);
  EXPECT_EQ(w0->version(), 12);
  const ShardStats stats = c.servers[0]->shard()->Stats();
  EXPECT_THAT(stats.workers_seen, ElementsAre(0, 1));
}

TEST(CheckpointRestart, DamagedNewestCheckpointFallsBackToThePreviousOne) {
  const std::string dir = TempDir();
  {
    Cluster c = Start(dir);
    ASSERT_EQ(c.servers.size(), kShards);
    Train(c, /*init=*/true, 7, AwaitCheckpoints(c));
    for (auto& s : c.servers) ASSERT_TRUE(s->Shutdown().ok());
  }
  ASSERT_THAT(Versions(dir, 0), ElementsAre(7, 5));
  {  // Cut shard 0's newest checkpoint short, as a crash mid-copy would.
    const std::string newest = dir + "/shard-0-of-2-v00000000000000000007.ckpt";
    std::ofstream(newest, std::ios::trunc) << "PSCKPT01";
  }
  Cluster c = Start(dir);
  ASSERT_EQ(c.servers.size(), kShards);
  EXPECT_THAT(c.Lines(), testing::Contains(HasSubstr("-v00000000000000000007.ckpt skipped")));
  EXPECT_EQ(c.servers[0]->shard()->Stats().version, 5);
  EXPECT_EQ(c.servers[1]->shard()->Stats().version, 7);
}

TEST(CheckpointRestart, CheckpointRpcWritesOnDemand) {
  const std::string dir = TempDir();
  Cluster c = Start(dir);
  ASSERT_EQ(c.servers.size(), kShards);
  // No parameters yet: nothing to write.
  EXPECT_EQ(RequestCheckpoints(c.addresses, absl::Seconds(30)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Train(c, /*init=*/true, 3);
  auto first = RequestCheckpoints(c.addresses, absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ((*first)[s].version(), 3);
    EXPECT_TRUE((*first)[s].written());
    EXPECT_EQ((*first)[s].path(),
              absl::StrCat(dir, "/shard-", s, "-of-2-v00000000000000000003.ckpt"));
  }
  EXPECT_THAT(Versions(dir, 0), ElementsAre(3));
  auto again = RequestCheckpoints(c.addresses, absl::Seconds(30));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)[0].written());
  EXPECT_EQ((*again)[0].path(), (*first)[0].path());

  // A server without a checkpoint directory says so.
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  auto plain = PsServer::Start(o);
  ASSERT_TRUE(plain.ok());
  auto refused = RequestCheckpoints({(*plain)->address()}, absl::Seconds(30));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("without --checkpoint_dir"));
}

}  // namespace
}  // namespace ps
