// The coordinator's parts (coord/) against a real etcd (tools/process/etcd_process.h):
// EtcdClient's keys, leases and transaction; Registration's leased member
// keys: taken ids refused naming the holder, free ids claimed, a member
// that leaves gone at once, one that keeps renewing listed past its ttl,
// one whose renewals stop dropped by etcd when its lease expires, and a
// member that registers again when etcd comes back without its data. Then
// the real binaries: ps_server --coordinator registers as servers/<shard>,
// refuses a shard id a live server holds, leaves at once on SIGTERM and
// drops out a ttl after kill -9, and takes its shard over in the shard map
// when restarted on another port (shard_map_etcd_test: a training
// ps_worker follows it there); a server whose shard the
// map gives to another address refuses a worker, naming it; ps_ctl members lists the job, and
// ps_ctl health finds the servers in etcd; two ps_workers without --worker_id and
// --servers take ids 0 and 1 and the servers from etcd, train, and leave.
//
// Args: the paths of ps_server, ps_ctl and ps_worker.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/wait_until.h"
#include "coord/registration.h"
#include "coord/shard_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinated_server.h"
#include "tools/process/etcd_process.h"
#include "tools/process/server_process.h"

namespace ps {

const char* g_server_binary = nullptr;
const char* g_ctl_binary = nullptr;
const char* g_worker_binary = nullptr;
const char* g_make_certs = nullptr;

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) { return EtcdTestPath(name); }

std::unique_ptr<EtcdClient> Client(const EtcdProcess& etcd) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = ConnectPlain(etcd);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// The ids of the live members of `role` in job "j".
std::vector<int> Ids(EtcdClient* etcd, const std::string& role) {
  std::vector<int> ids;
  absl::StatusOr<std::vector<Member>> m = ListMembers(etcd, "j");
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return ids;
  for (const Member& x : *m) {
    if (x.role == role) ids.push_back(x.id);
  }
  return ids;
}

RegistrationOptions Options(absl::Duration ttl = absl::Seconds(2)) {
  RegistrationOptions o;
  o.job = "j";
  o.ttl = ttl;
  return o;
}

TEST(EtcdClient, KeysLeasesAndPutIfAbsent) {
  auto etcd = EtcdProcess::Start(TempDir("kv"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  ASSERT_TRUE(c->Put("/a/1", "x").ok());
  ASSERT_TRUE(c->Put("/a/2", "y").ok());
  ASSERT_TRUE(c->Put("/b", "z").ok());
  absl::StatusOr<std::vector<EtcdClient::KeyValue>> a = c->List("/a/");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].key, "/a/1");
  EXPECT_EQ((*a)[1].value, "y");
  absl::StatusOr<int64_t> lease = c->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(*c->PutIfAbsent("/a/1", "other", *lease), false);  // exists
  EXPECT_EQ(*c->PutIfAbsent("/a/3", "new", *lease), true);
  EXPECT_EQ((*c->List("/a/3"))[0].lease, *lease);
  ASSERT_TRUE(c->KeepAlive(*lease).ok());
  ASSERT_TRUE(c->RevokeLease(*lease).ok());  // takes /a/3 with it
  EXPECT_EQ(c->List("/a/")->size(), 2u);
  EXPECT_EQ(c->KeepAlive(*lease).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(c->RevokeLease(*lease).ok());  // ended already: fine
  ASSERT_TRUE(c->Delete("/a/1").ok());
  EXPECT_EQ(c->List("/a/")->size(), 1u);
  // An etcd that is not there: UNAVAILABLE naming it.
  const int port = (*etcd)->port();
  etcd->reset();
  absl::Status s = c->Put("/a/1", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("etcd 127.0.0.1:", port)));
}

TEST(EtcdClient, FallsOverToTheNextEndpoint) {
  auto etcd = EtcdProcess::Start(TempDir("failover"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = EtcdClient::Connect(*ParseCoordinatorAddress(
      absl::StrCat("etcd://127.0.0.1:", FreeLocalPort(), ",", (*etcd)->endpoint())));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Put("/k", "v").ok());
  EXPECT_EQ((*c)->endpoint(), (*etcd)->endpoint());
}

TEST(Registration, IdsAreLeasedOnceAndFreedOnLeave) {
  auto etcd = EtcdProcess::Start(TempDir("ids"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  auto s0 = Registration::Join(c.get(), "servers", 0, "127.0.0.1:1000", Options());
  ASSERT_TRUE(s0.ok()) << s0.status();
  auto again = Registration::Join(c.get(), "servers", 0, "127.0.0.1:2000", Options());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("127.0.0.1:1000"));
  auto w0 = Registration::JoinFreeId(c.get(), "workers", 3, "host:1", Options());
  auto w1 = Registration::JoinFreeId(c.get(), "workers", 3, "host:2", Options());
  auto w2 = Registration::JoinFreeId(c.get(), "workers", 3, "host:3", Options());
  ASSERT_TRUE(w0.ok() && w1.ok() && w2.ok());
  EXPECT_EQ((*w0)->id(), 0);
  EXPECT_EQ((*w1)->id(), 1);
  EXPECT_EQ((*w2)->id(), 2);
  EXPECT_EQ(Registration::JoinFreeId(c.get(), "workers", 3, "host:4", Options()).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Ids(c.get(), "workers"), ElementsAre(0, 1, 2));
  (*w1)->Leave();  // gone at once, not after the ttl
  EXPECT_THAT(Ids(c.get(), "workers"), ElementsAre(0, 2));
  auto w = Registration::JoinFreeId(c.get(), "workers", 3, "host:5", Options());
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->id(), 1);
  absl::StatusOr<std::vector<Member>> m = ListMembers(c.get(), "j");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[0].role, "servers");
  EXPECT_EQ((*m)[0].value, "127.0.0.1:1000");
  EXPECT_EQ((*m)[2].value, "host:5");
  EXPECT_EQ(
      Registration::Join(c.get(), "servers", 1, "x", Options(absl::Seconds(1))).status().code(),
      absl::StatusCode::kInvalidArgument);  // ttl under 2 s
}

TEST(Registration, RenewedPastItsTtlAndDroppedWhenRenewalsStop) {
  auto etcd = EtcdProcess::Start(TempDir("ttl"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  auto r = Registration::Join(c.get(), "servers", 0, "a", Options());
  ASSERT_TRUE(r.ok()) << r.status();
  absl::SleepFor(absl::Seconds(5));  // 2.5 ttls: renewed every 0.67 s
  EXPECT_THAT(Ids(c.get(), "servers"), ElementsAre(0));
  // A member whose renewals stop (its process died): a lease etcd let
  // expire takes the key. The same lease, granted and never renewed:
  absl::StatusOr<int64_t> lease = c->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(*c->PutIfAbsent(MemberKey("j", "servers", 1), "dead", *lease));
  EXPECT_THAT(Ids(c.get(), "servers"), ElementsAre(0, 1));
  EXPECT_EQ(WaitUntil([&] { return Ids(c.get(), "servers").size() == 1; }, absl::Seconds(10),
                      "the dead member's key to expire"),
            absl::OkStatus());
  EXPECT_THAT(Ids(c.get(), "servers"), ElementsAre(0));
}

TEST(Registration, RegistersAgainWhenEtcdComesBackWithoutItsData) {
  auto etcd = EtcdProcess::Start(TempDir("restart-a"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const int port = (*etcd)->port();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  absl::Mutex mu;
  std::vector<std::string> lines;
  RegistrationOptions o = Options();
  o.log = [&](const std::string& line) {
    absl::MutexLock l(&mu);
    lines.push_back(line);
  };
  auto r = Registration::Join(c.get(), "workers", 4, "w", o);
  ASSERT_TRUE(r.ok()) << r.status();
  etcd->reset();  // etcd gone: renewals fail, and say so once
  absl::SleepFor(absl::Seconds(2));
  etcd = EtcdProcess::Start(TempDir("restart-b"), port);  // empty, same address
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  EXPECT_EQ(WaitUntil([&] { return Ids(c.get(), "workers").size() == 1; }, absl::Seconds(20),
                      "the member registered again"),
            absl::OkStatus());
  EXPECT_THAT(Ids(c.get(), "workers"), ElementsAre(4));
  absl::MutexLock l(&mu);
  EXPECT_THAT(lines, testing::Contains(HasSubstr("cannot renew the registration")));
  EXPECT_THAT(lines, testing::Contains(HasSubstr("the lease had ended; registered again")));
}

// A ps_server of 2 shards registered in job "e2e" of `etcd`.
absl::StatusOr<std::unique_ptr<ServerProcess>> CoordinatedServer(const EtcdProcess& etcd, int shard,
                                                                 const std::string& name) {
  return StartCoordinatedServer(g_server_binary, TempDir(""), etcd, shard, name);
}

// ps_ctl's stdout for `args`, and its exit status.
std::pair<std::string, int> Ctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {g_ctl_binary};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Spawn(argv, TempDir("ctl.log"), /*pipe_stdout=*/true);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return {"", -1};
  std::string out;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (std::optional<std::string> line = (*child)->ReadLine(deadline)) out += *line + "\n";
  std::optional<int> status = (*child)->Wait(deadline);
  return {out, status.has_value() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1};
}

TEST(CoordinatedServers, RegisterRefuseATakenShardLeaveAndDropOut) {
  auto etcd = EtcdProcess::Start(TempDir("e2e"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  auto s0 = CoordinatedServer(**etcd, 0, "s0");
  auto s1 = CoordinatedServer(**etcd, 1, "s1");
  ASSERT_TRUE(s0.ok()) << s0.status();
  ASSERT_TRUE(s1.ok()) << s1.status();
  absl::StatusOr<std::vector<Member>> m = ListMembers(c.get(), "e2e");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].value, (*s0)->address());
  EXPECT_EQ((*m)[1].value, (*s1)->address());
  // A second server for shard 0 is refused, naming the live one.
  auto again = CoordinatedServer(**etcd, 0, "s0-again");
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("servers 0 of job e2e is taken"));
  EXPECT_THAT(again.status().message(), HasSubstr((*s0)->address()));

  const auto [members, rc] =
      Ctl({"members", absl::StrCat("--coordinator=", (*etcd)->url()), "--job=e2e"});
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(members, HasSubstr(absl::StrCat("\"role\":\"servers\",\"id\":1,\"value\":\"",
                                              (*s1)->address(), "\"")));
  EXPECT_THAT(members,
              HasSubstr(absl::StrCat("\"shard_map\":{\"version\":2,\"servers\":[\"",
                                     (*s0)->address(), "\",\"", (*s1)->address(), "\"]}")));
  const auto [health, health_rc] =
      Ctl({"health", absl::StrCat("--coordinator=", (*etcd)->url()), "--job=e2e"});
  EXPECT_EQ(health_rc, 0) << health;
  EXPECT_THAT(health, HasSubstr(absl::StrCat((*s0)->address(), " SERVING")));
  EXPECT_THAT(health, HasSubstr(absl::StrCat((*s1)->address(), " SERVING")));

  // kill -9: etcd drops it when its lease (2 s) runs out.
  (*s1)->process().Signal(SIGKILL);
  (*s1)->process().Wait(absl::Now() + absl::Seconds(5));
  EXPECT_EQ(WaitUntil([&] { return ListMembers(c.get(), "e2e")->size() == 1; }, absl::Seconds(10),
                      "the killed server's key to expire"),
            absl::OkStatus());
  // Restarted on another port, it takes its shard over in the map.
  auto s1b = CoordinatedServer(**etcd, 1, "s1b");
  ASSERT_TRUE(s1b.ok()) << s1b.status();
  absl::StatusOr<ShardMap> map = ServersOfJob(c.get(), "e2e");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->version, 3);
  EXPECT_THAT(map->servers, ElementsAre((*s0)->address(), (*s1b)->address()));
  // Its shard given to another address (as when a server cut off past its
  // ttl is replaced), s0 takes no more requests: a worker sent to it is
  // refused, naming the new server.
  ASSERT_TRUE(PublishShardServer(c.get(), "e2e", 0, 2, "127.0.0.1:1").ok());
  EXPECT_EQ(WaitUntil([&] { return absl::StrContains((*s0)->process().LogTail(20), "taken over"); },
                      absl::Seconds(10), "s0 to see the map"),
            absl::OkStatus());
  auto worker = ChildProcess::Spawn(
      {g_worker_binary, absl::StrCat("--servers=", (*s0)->address(), ",", (*s1b)->address()),
       "--worker_id=0", "--num_workers=1", "--max_steps=1", "--batch_size=16", "--progress=off",
       "--connect_timeout=10", "--retry_timeout=0"},
      TempDir("fenced-worker.log"), /*pipe_stdout=*/false);
  ASSERT_TRUE(worker.ok()) << worker.status();
  std::optional<int> status = (*worker)->Wait(absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_THAT((*worker)->LogTail(20), HasSubstr("moved from"));
  EXPECT_THAT((*worker)->LogTail(20), HasSubstr("to 127.0.0.1:1 (shard map version 4)"));
  (*s1b)->Stop();
  // SIGTERM: it leaves before it exits.
  (*s0)->Stop();
  EXPECT_TRUE(ListMembers(c.get(), "e2e")->empty());
  const auto [none, none_rc] =
      Ctl({"status", absl::StrCat("--coordinator=", (*etcd)->url()), "--job=e2e"});
  EXPECT_EQ(none_rc, 1);
}

TEST(CoordinatedWorkers, TakeFreeIdsAndTheServersFromEtcd) {
  auto etcd = EtcdProcess::Start(TempDir("workers"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  ServerProcessOptions so;
  so.binary = g_server_binary;
  so.dir = TempDir("");
  so.name = "sync-server";
  so.flags = {"--num_workers=2", "--mode=sync", absl::StrCat("--coordinator=", (*etcd)->url()),
              "--job=w"};
  auto server = ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int k = 0; k < 2; ++k) {
    auto w = ChildProcess::Spawn(
        {g_worker_binary, absl::StrCat("--coordinator=", (*etcd)->url()), "--job=w",
         "--num_workers=2", "--max_steps=3", "--batch_size=16", "--progress=off",
         absl::StrCat("--metrics_file=", TempDir("w-{worker_id}.jsonl"))},
        TempDir(absl::StrCat("worker", k, ".log")), /*pipe_stdout=*/false);
    ASSERT_TRUE(w.ok()) << w.status();
    workers.push_back(*std::move(w));
  }
  for (auto& w : workers) {
    std::optional<int> status = w->Wait(absl::Now() + absl::Seconds(120));
    ASSERT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << DescribeExit(status) << "\n"
        << w->LogTail(20);
  }
  // Ids 0 and 1, one each: each wrote its own metrics file.
  for (int id : {0, 1}) {
    EXPECT_EQ(access(TempDir(absl::StrCat("w-", id, ".jsonl")).c_str(), F_OK), 0) << id;
  }
  // They left; the server stays.
  absl::StatusOr<std::vector<Member>> m = ListMembers(c.get(), "w");
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 1u);
  EXPECT_EQ((*m)[0].role, "servers");
}

TEST(EtcdTls, MembersRegisterOverMutualTls) {
  const std::string certs = TempDir("certs");
  ASSERT_EQ(
      std::system(
          absl::StrCat(g_make_certs, " ", certs, " --servers=1 --workers=1 >/dev/null").c_str()),
      0);
  auto etcd = EtcdProcess::Start(TempDir("tls"), 0, certs);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const CoordinatorAddress where = *ParseCoordinatorAddress((*etcd)->url());
  SecurityOptions admin;
  admin.tls_ca = certs + "/ca.pem";
  admin.tls_cert = certs + "/admin.pem";
  admin.tls_key = certs + "/admin.key";
  // Plaintext, and TLS without a client certificate: refused.
  SecurityOptions ca_only;
  ca_only.tls_ca = admin.tls_ca;
  for (const SecurityOptions& refused : {SecurityOptions(), ca_only}) {
    auto c = EtcdClient::Connect(where, refused, absl::Seconds(2));
    ASSERT_TRUE(c.ok()) << c.status();
    absl::Status s = (*c)->List("/").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("etcd 127.0.0.1:"));
  }
  ServerProcessOptions so;
  so.binary = g_server_binary;
  so.dir = TempDir("");
  so.name = "tls-server";
  so.flags = {"--mode=async",
              absl::StrCat("--coordinator=", (*etcd)->url()),
              "--job=tls",
              absl::StrCat("--tls_ca=", certs, "/ca.pem"),
              absl::StrCat("--tls_cert=", certs, "/server-0.pem"),
              absl::StrCat("--tls_key=", certs, "/server-0.key")};
  auto server = ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = EtcdClient::Connect(where, admin);
  ASSERT_TRUE(c.ok());
  absl::StatusOr<std::vector<Member>> m = ListMembers(c->get(), "tls");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 1u);
  EXPECT_EQ((*m)[0].value, (*server)->address());
  const auto [members, rc] =
      Ctl({"members", absl::StrCat("--coordinator=", (*etcd)->url()), "--job=tls",
           absl::StrCat("--tls_ca=", admin.tls_ca), absl::StrCat("--tls_cert=", admin.tls_cert),
           absl::StrCat("--tls_key=", admin.tls_key)});
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(members, HasSubstr((*server)->address()));
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 5) {
    std::fprintf(stderr, "usage: coordinator_test PS_SERVER PS_CTL PS_WORKER MAKE_CERTS\n");
    return 2;
  }
  ps::g_server_binary = argv[1];
  ps::g_ctl_binary = argv[2];
  ps::g_worker_binary = argv[3];
  ps::g_make_certs = argv[4];
  return RUN_ALL_TESTS();
}
