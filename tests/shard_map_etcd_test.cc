// The shard map (coord/shard_map.h) and the waits on etcd's keys
// (coord/key_wait.h) against a real etcd (tools/process/etcd_process.h):
// WaitForKeys met by a change, ended by its deadline or by its interrupt
// check on the caller's thread; the map's compare-and-swap under racing
// writers, clients that take it only when its servers are live, and
// servers that refuse calls routed by an older map than theirs. With
// the real binaries: a ps_worker that found its servers in the map
// follows shard 1's server through kill -9 and a restart on another port,
// restores it from its copy, and finishes.
//
// Args: the paths of ps_server and ps_worker.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "common/status_macros.h"
#include "common/testing/wait_until.h"
#include "coord/key_wait.h"
#include "coord/registration.h"
#include "coord/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinated_server.h"
#include "tools/process/child_process.h"
#include "tools/process/etcd_process.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* g_server_binary = nullptr;
const char* g_worker_binary = nullptr;

std::string TempDir(const std::string& name) { return EtcdTestPath(name); }

std::unique_ptr<EtcdClient> Client(const EtcdProcess& etcd) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = ConnectPlain(etcd);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> CoordinatedServer(const EtcdProcess& etcd, int shard,
                                                                 const std::string& name) {
  return StartCoordinatedServer(g_server_binary, TempDir(""), etcd, shard, name);
}

// A ps_worker of job "e2e" (1 worker, retrying for 60 s) for `max_steps`,
// once it has trained a step; its log is NAME-worker.log.
absl::StatusOr<std::unique_ptr<ChildProcess>> TrainingWorker(const EtcdProcess& etcd,
                                                             const std::string& name,
                                                             int max_steps) {
  const std::string metrics = TempDir(name + "-metrics.jsonl");
  absl::StatusOr<std::unique_ptr<ChildProcess>> worker = ChildProcess::Spawn(
      {g_worker_binary, absl::StrCat("--coordinator=", etcd.url()), "--job=e2e", "--num_workers=1",
       absl::StrCat("--max_steps=", max_steps), "--batch_size=16", "--progress=off",
       "--log_every=10", "--retry_timeout=60", absl::StrCat("--metrics_file=", metrics)},
      TempDir(name + "-worker.log"), /*pipe_stdout=*/false);
  if (!worker.ok()) return worker.status();
  RETURN_IF_ERROR(WaitUntil(
      [&] {
        std::ifstream in(metrics);
        std::string line;
        return static_cast<bool>(std::getline(in, line));
      },
      absl::Seconds(60), "the worker to train"));
  return worker;
}

// Kills shard `shard`'s server (kill -9) and waits for its key to expire,
// so that a new server may take the shard.
absl::Status KillServer(ServerProcess* server, EtcdClient* c, int shard) {
  server->process().Signal(SIGKILL);
  server->process().Wait(absl::Now() + absl::Seconds(5));
  return WaitUntil(
      [&] {
        return c->List(MemberKey("e2e", "servers", shard))
            .value_or(std::vector<EtcdClient::KeyValue>{{}})
            .empty();
      },
      absl::Seconds(10), "the killed server's key to expire");
}

TEST(WaitForKeys, MetByAChangeEndedByItsDeadlineOrItsInterrupt) {
  auto etcd = EtcdProcess::Start(TempDir("wait"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  ASSERT_TRUE(c->Put("/w/a", "1").ok());
  auto has_b = [](const KeyMap& keys) { return keys.count("/w/b") > 0; };
  // Met by a key put while it watches.
  std::thread put([&] {
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_TRUE(c->Put("/w/b", "2").ok());
  });
  absl::StatusOr<bool> met = WaitForKeys(c.get(), "/w/", has_b, absl::Now() + absl::Seconds(30));
  put.join();
  ASSERT_TRUE(met.ok()) << met.status();
  EXPECT_TRUE(*met);
  // Not met by the deadline: false, after it.
  auto never = [](const KeyMap&) { return false; };
  absl::Time start = absl::Now();
  met = WaitForKeys(c.get(), "/w/", never, start + absl::Milliseconds(500));
  ASSERT_TRUE(met.ok()) << met.status();
  EXPECT_FALSE(*met);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
  // Interrupted: its error at the first poll that fails, on this thread,
  // long before the deadline.
  const std::thread::id caller = std::this_thread::get_id();
  int asked = 0;
  KeyWaitInterrupt interrupt;
  interrupt.poll = absl::Milliseconds(50);
  interrupt.interrupted = [&] {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    return ++asked < 4 ? absl::OkStatus() : absl::CancelledError("interrupted");
  };
  start = absl::Now();
  met = WaitForKeys(c.get(), "/w/", never, start + absl::Seconds(60), interrupt);
  EXPECT_EQ(met.status(), absl::CancelledError("interrupted"));
  EXPECT_EQ(asked, 4);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ShardMapInEtcd, WritersRacingForShardsAllLandAndClientsWaitForAll) {
  auto etcd = EtcdProcess::Start(TempDir("map"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  absl::StatusOr<ShardMap> none = ServersOfJob(c.get(), "j");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no server of job j has published"));
  // Four servers publish at once: each compare-and-swap that loses reads
  // the map again, so all four land, one version each.
  std::vector<std::thread> writers;
  for (int shard = 0; shard < 4; ++shard) {
    writers.emplace_back([&, shard] {
      absl::StatusOr<ShardMap> m =
          PublishShardServer(c.get(), "j", shard, 4, absl::StrCat("s", shard, ":1"));
      EXPECT_TRUE(m.ok()) << m.status();
    });
  }
  for (std::thread& w : writers) w.join();
  absl::StatusOr<ShardMap> m = ReadShardMap(c.get(), "j");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 4);
  EXPECT_THAT(m->servers, ElementsAre("s0:1", "s1:1", "s2:1", "s3:1"));
  // A client takes the map only when every server of it is live: its
  // shard's key there, with the map's address.
  absl::StatusOr<ShardMap> dead = ServersOfJob(c.get(), "j");
  EXPECT_EQ(dead.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dead.status().message(), HasSubstr("no server of job j is registered"));
  for (int shard = 0; shard < 4; ++shard) {
    ASSERT_TRUE(c->Put(MemberKey("j", "servers", shard), absl::StrCat("s", shard, ":1")).ok());
  }
  m = ServersOfJob(c.get(), "j");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 4);
  // The same server again changes nothing; one restarted elsewhere does,
  // and clients wait for it to be live at its new address.
  EXPECT_EQ(PublishShardServer(c.get(), "j", 2, 4, "s2:1")->version, 4);
  EXPECT_EQ(PublishShardServer(c.get(), "j", 2, 4, "s2:2")->version, 5);
  absl::StatusOr<ShardMap> moving = ServersOfJob(c.get(), "j");
  EXPECT_EQ(moving.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(moving.status().message(),
              HasSubstr("shard(s) 2 (s2:2) in the shard map (version 5)"));
  ASSERT_TRUE(c->Put(MemberKey("j", "servers", 2), "s2:2").ok());
  EXPECT_TRUE(ServersOfJob(c.get(), "j").ok());
  // A run with another shard count starts the map over: clients wait (an
  // error naming the shards missing) until every shard has a server.
  EXPECT_EQ(PublishShardServer(c.get(), "j", 1, 2, "t1:1")->version, 6);
  absl::StatusOr<ShardMap> half = ServersOfJob(c.get(), "j");
  EXPECT_EQ(half.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(half.status().message(), HasSubstr("(version 6) has no server for shard(s) 0 of 2"));
  ASSERT_TRUE(c->Put(ShardMapKey("j"), "version 7\nshards\n").ok());  // not the servers' text
  EXPECT_EQ(ServersOfJob(c.get(), "j").status().code(), absl::StatusCode::kInvalidArgument);
}

// Every call carries the map version its client routes by (rpc/route.h):
// a server restarted elsewhere took its shard at a newer version, and
// refuses calls routed by an older map before acting on them.
TEST(ShardMapInEtcd, ServersRefuseCallsRoutedByAnOlderMap) {
  auto etcd = EtcdProcess::Start(TempDir("route"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  auto s0 = CoordinatedServer(**etcd, 0, "r0");
  auto s1 = CoordinatedServer(**etcd, 1, "r1");
  ASSERT_TRUE(s0.ok() && s1.ok());
  absl::StatusOr<ShardMap> old = ServersOfJob(c.get(), "e2e");
  ASSERT_TRUE(old.ok()) << old.status();
  ClientOptions o;
  o.servers = old->servers;
  o.shard_map_version = old->version;
  o.connect_timeout = absl::Seconds(10);
  ASSERT_TRUE(PsClient::Connect(o).ok());

  ASSERT_EQ(KillServer(s1->get(), c.get(), 1), absl::OkStatus());
  absl::StatusOr<ShardMap> now;
  auto s1b = CoordinatedServer(**etcd, 1, "r1b");
  ASSERT_TRUE(s1b.ok()) << s1b.status();
  ASSERT_EQ(WaitUntil(
                [&] {
                  now = ServersOfJob(c.get(), "e2e");
                  return now.ok();
                },
                absl::Seconds(10), "the new server in the map"),
            absl::OkStatus());
  ASSERT_GT(now->version, old->version);
  ASSERT_EQ(now->servers[1], (*s1b)->address());

  o.servers = now->servers;  // at the new address, but by the old map's version
  absl::StatusOr<std::unique_ptr<PsClient>> stale = PsClient::Connect(o);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  EXPECT_THAT(
      std::string(stale.status().message()),
      HasSubstr(absl::StrCat("routed by shard map version ", old->version, ", older than version ",
                             now->version, ", at which this server took shard 1 of 2")));
  o.shard_map_version = now->version;
  absl::StatusOr<std::unique_ptr<PsClient>> fresh = PsClient::Connect(o);
  EXPECT_TRUE(fresh.ok()) << fresh.status();
}

TEST(CoordinatedWorkers, FollowAServerRestartedOnAnotherAddress) {
  auto etcd = EtcdProcess::Start(TempDir("follow"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  auto s0 = CoordinatedServer(**etcd, 0, "f0");
  auto s1 = CoordinatedServer(**etcd, 1, "f1");
  ASSERT_TRUE(s0.ok() && s1.ok());
  auto worker = TrainingWorker(**etcd, "follow", 3000);
  ASSERT_TRUE(worker.ok()) << worker.status();
  // Shard 1's server dies (kill -9) and comes back on another port, once
  // its key has expired: the worker, which found the servers in the shard
  // map, follows it there, restores it from its copy, and finishes.
  const std::string was = (*s1)->address();
  ASSERT_EQ(KillServer(s1->get(), c.get(), 1), absl::OkStatus());
  auto s1b = CoordinatedServer(**etcd, 1, "f1b");
  ASSERT_TRUE(s1b.ok()) << s1b.status();
  ASSERT_NE((*s1b)->address(), was);
  std::optional<int> status = (*worker)->Wait(absl::Now() + absl::Seconds(120));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << (*worker)->LogTail(20);
  EXPECT_THAT((*worker)->LogTail(200),
              HasSubstr(absl::StrCat("shard 1 moved from ", was, " to ", (*s1b)->address())));
  EXPECT_THAT((*worker)->LogTail(200), HasSubstr("went through after"));
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: shard_map_etcd_test PS_SERVER PS_WORKER\n");
    return 2;
  }
  ps::g_server_binary = argv[1];
  ps::g_worker_binary = argv[2];
  return RUN_ALL_TESTS();
}
