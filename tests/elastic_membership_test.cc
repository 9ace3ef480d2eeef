// Elastic membership against a real etcd (tools/process/etcd_process.h): the
// watch and compare-and-put of EtcdClient, MemberWatch reporting a role's
// members through joins, leaves, etcd's loss and its return without its
// data, the job's settings in etcd, and then the real binaries: a sync
// ps_server for up to 3 workers, without leases, whose steps wait for the
// registered workers only: two ps_workers given neither an id nor a worker
// count train, the one that trains longer goes on alone once the other
// leaves, and a third killed while it loads its data (registered as
// joining) holds no step; /metrics and the log say when etcd is gone.
//
// Args: the paths of ps_server and ps_worker.
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/wait_until.h"
#include "coord/epoch_record.h"
#include "coord/job_settings.h"
#include "coord/member_watch.h"
#include "coord/registration.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tools/process/etcd_process.h"
#include "tools/process/server_process.h"

namespace ps {

const char* g_server_binary = nullptr;
const char* g_worker_binary = nullptr;

namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Scrape(const std::string& address) {
  const size_t colon = address.rfind(':');
  httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  httplib::Result res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

std::unique_ptr<EtcdClient> Client(const EtcdProcess& etcd) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> c = ConnectPlain(etcd);
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// A ps_server of `job` (one shard) registered in `etcd`, with `flags`.
ServerProcessOptions JobServer(const EtcdProcess& etcd, const std::string& job,
                               const std::string& name, std::vector<std::string> flags) {
  ServerProcessOptions so;
  so.binary = g_server_binary;
  so.dir = EtcdTestPath("");
  so.name = name;
  so.flags = std::move(flags);
  so.flags.push_back(absl::StrCat("--coordinator=", etcd.url()));
  so.flags.push_back(absl::StrCat("--job=", job));
  so.start_timeout = absl::Seconds(20);
  return so;
}

// Starts a ps_worker of `job` with `flags`, logging to `log`, and waits
// until the job has `members` members (it among them): workers started in
// turn take ids in order, and id 0 creates the parameters.
absl::StatusOr<std::unique_ptr<ChildProcess>> SpawnWorker(const EtcdProcess& etcd, EtcdClient* c,
                                                          const std::string& job,
                                                          std::vector<std::string> flags,
                                                          const std::string& log, size_t members) {
  flags.insert(flags.begin(), {g_worker_binary, absl::StrCat("--coordinator=", etcd.url()),
                               absl::StrCat("--job=", job), "--progress=off"});
  ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> w,
                   ChildProcess::Spawn(flags, EtcdTestPath(log), /*pipe_stdout=*/false));
  RETURN_IF_ERROR(WaitUntil(
      [&] {
        absl::StatusOr<std::vector<Member>> m = ListMembers(c, job);
        return m.ok() && m->size() == members;
      },
      absl::Seconds(20), "the worker to register"));
  return w;
}

RegistrationOptions Options() {
  RegistrationOptions o;
  o.job = "j";
  o.ttl = absl::Seconds(2);
  return o;
}

TEST(EtcdClient, WatchSeesEveryChangeFromItsRevisionUntilCancelled) {
  auto etcd = EtcdProcess::Start(EtcdTestPath("watch"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  ASSERT_TRUE(c->Put("/p/a", "1").ok());
  int64_t revision = 0;
  absl::StatusOr<std::vector<EtcdClient::KeyValue>> listed = c->List("/p/", &revision);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].mod_revision, revision);
  // A change after the listing and before the watch starts is not missed.
  ASSERT_TRUE(c->Put("/p/b", "2").ok());
  absl::Mutex mu;
  std::vector<std::string> seen;  // "+key=value" or "-key"
  EtcdClient::WatchCanceller cancel;
  absl::Status result = absl::UnknownError("running");
  std::thread watcher([&] {
    absl::Status s = c->Watch(
        "/p/", revision + 1, &cancel, [&](const std::vector<EtcdClient::WatchEvent>& events) {
          absl::MutexLock l(&mu);
          for (const auto& e : events) {
            seen.push_back(e.put ? absl::StrCat("+", e.kv.key, "=", e.kv.value)
                                 : absl::StrCat("-", e.kv.key));
          }
        });
    absl::MutexLock l(&mu);
    result = s;
  });
  ASSERT_TRUE(c->Delete("/p/a").ok());
  ASSERT_TRUE(c->Put("/other", "x").ok());  // not under the prefix
  ASSERT_TRUE(c->Put("/p/c", "3").ok());
  EXPECT_EQ(WaitUntil(
                [&] {
                  absl::MutexLock l(&mu);
                  return seen.size() == 3;
                },
                absl::Seconds(10), "three changes"),
            absl::OkStatus());
  cancel.Cancel();
  watcher.join();
  absl::MutexLock l(&mu);
  EXPECT_THAT(seen, ElementsAre("+/p/b=2", "-/p/a", "+/p/c=3"));
  EXPECT_TRUE(result.ok()) << result;
}

TEST(EtcdClient, WatchEndsUnavailableWhenEtcdGoesAndCompareAndPutSwapsOnce) {
  auto etcd = EtcdProcess::Start(EtcdTestPath("cas"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  // Created only if absent; swapped only from the revision read.
  absl::StatusOr<bool> put = c->CompareAndPut("/k", 0, "v1");
  ASSERT_TRUE(put.ok() && *put);
  EXPECT_FALSE(*c->CompareAndPut("/k", 0, "again"));
  const int64_t rev = (*c->List("/k"))[0].mod_revision;
  EXPECT_TRUE(*c->CompareAndPut("/k", rev, "v2"));
  EXPECT_FALSE(*c->CompareAndPut("/k", rev, "v3"));  // lost: v2 changed it
  EXPECT_EQ((*c->List("/k"))[0].value, "v2");

  EtcdClient::WatchCanceller cancel;
  absl::Status result = absl::UnknownError("running");
  std::thread watcher([&] { result = c->Watch("/k", 1, &cancel, [](const auto&) {}); });
  absl::SleepFor(absl::Milliseconds(300));
  etcd->reset();
  watcher.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable) << result;
  EXPECT_THAT(result.message(), HasSubstr("watch \"/k\""));
}

// What a MemberWatch reported, in order.
struct Reports {
  absl::Mutex mu;
  std::vector<std::vector<int>> sets ABSL_GUARDED_BY(mu);
  std::vector<int> held ABSL_GUARDED_BY(mu);  // of the last report
  std::vector<std::string> lines ABSL_GUARDED_BY(mu);

  std::vector<int> last() {
    absl::MutexLock l(&mu);
    return sets.empty() ? std::vector<int>{-1} : sets.back();
  }
  absl::Status WaitFor(const std::vector<int>& want, absl::Duration within) {
    return WaitUntil([&] { return last() == want; }, within, "the reported set");
  }
  std::unique_ptr<MemberWatch> Start(EtcdClient* etcd, absl::Duration ttl) {
    MemberWatchOptions o;
    o.job = "j";
    o.ttl = ttl;
    o.retry = absl::Milliseconds(300);
    o.counts = WorkerReady;
    o.log = [this](const std::string& line) {
      absl::MutexLock l(&mu);
      lines.push_back(line);
    };
    return MemberWatch::Start(etcd, o, [this](const WatchedMembers& m) {
      absl::MutexLock l(&mu);
      sets.push_back(m.counted);
      held = m.held;
    });
  }
};

TEST(MemberWatch, ReportsTheMembersAndEachJoinAndLeave) {
  auto etcd = EtcdProcess::Start(EtcdTestPath("members"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  auto w0 = Registration::Join(c.get(), "workers", 0, "w0", Options());
  ASSERT_TRUE(w0.ok()) << w0.status();
  auto server = Registration::Join(c.get(), "servers", 0, "s0", Options());  // another role
  ASSERT_TRUE(server.ok()) << server.status();
  Reports r;
  std::unique_ptr<MemberWatch> watch = r.Start(c.get(), absl::Seconds(2));
  EXPECT_EQ(r.WaitFor({0}, absl::Seconds(10)), absl::OkStatus());
  auto w3 = Registration::Join(c.get(), "workers", 3, "w3", Options());
  ASSERT_TRUE(w3.ok()) << w3.status();
  EXPECT_EQ(r.WaitFor({0, 3}, absl::Seconds(10)), absl::OkStatus());
  (*w0)->Leave();  // revoked: gone at once
  EXPECT_EQ(r.WaitFor({3}, absl::Seconds(10)), absl::OkStatus());
  // A worker still loading its data, or waiting for an epoch, holds its id
  // but does not count until it is ready.
  auto w5 = JoinAsWorker(c.get(), 5, 8, Options(), /*joining=*/true);
  ASSERT_TRUE(w5.ok()) << w5.status();
  EXPECT_EQ(WaitUntil(
                [&] {
                  absl::MutexLock l(&r.mu);
                  return r.held == std::vector<int>{5};
                },
                absl::Seconds(10), "worker 5 held"),
            absl::OkStatus());
  ASSERT_TRUE(MarkWorkerWaiting(w5->get()).ok());
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_THAT(r.last(), ElementsAre(3));
  ASSERT_TRUE(MarkWorkerReady(w5->get()).ok());
  EXPECT_EQ(r.WaitFor({3, 5}, absl::Seconds(10)), absl::OkStatus());
  {
    absl::MutexLock l(&r.mu);
    EXPECT_TRUE(r.held.empty());
  }
  watch->Stop();
  watch->Stop();  // idempotent
}

TEST(MemberWatch, KeepsTheSetWhileEtcdIsGoneAndWaitsForMembersWhenItLostItsData) {
  auto etcd = EtcdProcess::Start(EtcdTestPath("loss-a"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const int port = (*etcd)->port();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  // A revision well above what the members' return reaches, as a job that
  // ran a while has.
  for (int k = 0; k < 20; ++k) ASSERT_TRUE(c->Put("/noise", absl::StrCat(k)).ok());
  auto w0 = Registration::Join(c.get(), "workers", 0, "w0", Options());
  auto w1 = Registration::Join(c.get(), "workers", 1, "w1", Options());
  ASSERT_TRUE(w0.ok() && w1.ok());
  Reports r;
  std::unique_ptr<MemberWatch> watch = r.Start(c.get(), absl::Seconds(2));
  ASSERT_EQ(r.WaitFor({0, 1}, absl::Seconds(10)), absl::OkStatus());
  EXPECT_TRUE(watch->watching());
  etcd->reset();  // gone: the set stays as it was
  absl::SleepFor(absl::Seconds(1.5));
  EXPECT_THAT(r.last(), ElementsAre(0, 1));
  EXPECT_FALSE(watch->watching());
  EXPECT_FALSE((*w0)->renewing());                          // a renewal (every 2/3 s) has failed
  etcd = EtcdProcess::Start(EtcdTestPath("loss-b"), port);  // empty, same address
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  // The members register again (each within a third of its ttl), and only
  // then does the watch list them: no report ever lost them.
  ASSERT_EQ(WaitUntil(
                [&] {
                  absl::MutexLock l(&r.mu);
                  return std::find_if(r.lines.begin(), r.lines.end(), [](const std::string& s) {
                           return s.find("etcd answers again") != std::string::npos;
                         }) != r.lines.end();
                },
                absl::Seconds(20), "the watch to run again"),
            absl::OkStatus());
  EXPECT_EQ(r.WaitFor({0, 1}, absl::Seconds(10)), absl::OkStatus());
  EXPECT_TRUE(watch->watching());
  EXPECT_TRUE((*w0)->renewing());
  absl::MutexLock l(&r.mu);
  for (const std::vector<int>& set : r.sets) EXPECT_THAT(set, ElementsAre(0, 1));
  EXPECT_THAT(r.lines, Contains(HasSubstr("cannot watch the workers of job j in etcd")));
  EXPECT_THAT(r.lines, Contains(HasSubstr("etcd came back without its data")));
}

TEST(JobSettings, PublishedOnceDefendedWhileServersRunAndReplacedAfter) {
  EXPECT_EQ(ParseJobSettings("num_shards=2 num_workers=0 mode=sync").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJobSettings("num_workers=2 mode=sync").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto etcd = EtcdProcess::Start(EtcdTestPath("settings"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  absl::StatusOr<JobSettings> none = ReadJobSettings(c.get(), "j");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("start its ps_server"));
  JobSettings a;
  a.num_shards = 2;
  a.num_workers = 3;
  a.mode = "sync";
  ASSERT_TRUE(PublishJobSettings(c.get(), "j", a).ok());
  ASSERT_TRUE(PublishJobSettings(c.get(), "j", a).ok());  // equal: fine
  absl::StatusOr<JobSettings> read = ReadJobSettings(c.get(), "j");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == a);
  EXPECT_EQ((*c->List(JobSettingsKey("j")))[0].value, "num_shards=2 num_workers=3 mode=sync");
  // A server of the job runs: other settings are refused, naming both.
  auto s0 = Registration::Join(c.get(), "servers", 0, "s0", Options());
  ASSERT_TRUE(s0.ok());
  JobSettings b = a;
  b.num_workers = 4;
  absl::Status refused = PublishJobSettings(c.get(), "j", b);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("job j runs with num_shards=2 num_workers=3 mode=sync"));
  EXPECT_THAT(refused.message(), HasSubstr("this server has num_shards=2 num_workers=4"));
  // Once no server runs, the record is an earlier run's: replaced.
  (*s0)->Leave();
  ASSERT_TRUE(PublishJobSettings(c.get(), "j", b).ok());
  EXPECT_EQ(ReadJobSettings(c.get(), "j")->num_workers, 4);
}

// A sync ps_server for up to 3 workers, with no worker leases
// (--worker_timeout=0): only the registry lets a step close without a
// worker. Worker ids and the count come from etcd.
TEST(CoordinatedSync, StepsWaitForTheRegisteredWorkersOnly) {
  auto etcd = EtcdProcess::Start(EtcdTestPath("sync"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  const std::string metrics = absl::StrCat("127.0.0.1:", FreeLocalPort());
  ServerProcessOptions so =
      JobServer(**etcd, "s", "sync-server",
                {"--num_workers=3", "--mode=sync", "--worker_timeout=0", "--coordinator_ttl=2",
                 absl::StrCat("--metrics_listen=", metrics)});
  auto server = ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<JobSettings> settings = ReadJobSettings(c.get(), "s");
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->num_workers, 3);

  // Worker 0 trains 4 steps, worker 1 trains 12: after worker 0 leaves,
  // worker 1's steps close alone. Worker 2 is killed (-9) as soon as it has
  // registered, while it loads its data: the steps never wait for it.
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int steps : {4, 12, 1000}) {
    auto w =
        SpawnWorker(**etcd, c.get(), "s",
                    {absl::StrCat("--max_steps=", steps), "--batch_size=16", "--wait_timeout=60"},
                    absl::StrCat("sync-worker", steps, ".log"), workers.size() + 2);
    ASSERT_TRUE(w.ok()) << w.status();
    workers.push_back(*std::move(w));
  }
  workers.back()->Signal(SIGKILL);
  workers.pop_back();
  for (auto& w : workers) {
    std::optional<int> status = w->Wait(absl::Now() + absl::Seconds(120));
    ASSERT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << DescribeExit(status) << "\n"
        << w->LogTail(20) << "\nserver:\n"
        << (*server)->process().LogTail(30);
  }
  const std::string log = (*server)->process().LogTail(200);
  EXPECT_THAT(log, HasSubstr("sync steps wait for the workers registered in etcd under /ps/s/"
                             "workers/"));
  EXPECT_THAT(log, HasSubstr("worker 0 joined the job"));
  EXPECT_THAT(log, HasSubstr("worker 1 joined the job"));
  EXPECT_THAT(log, HasSubstr("worker 0 left the job (its etcd key is gone)"));
  // Worker 2 died while it loaded its data, its key still marked joining:
  // the servers never waited for it.
  EXPECT_THAT(log, ::testing::Not(HasSubstr("worker 2 ")));
  EXPECT_THAT(Scrape(metrics), HasSubstr("\nps_server_coordinator_reachable 1"));
  EXPECT_THAT(Scrape(metrics), HasSubstr("\nps_server_workers{state=\"live\"} 0"));
  // Both left, and worker 2's lease ran out: nobody is registered but the
  // server.
  ASSERT_EQ(WaitUntil(
                [&] {
                  absl::StatusOr<std::vector<Member>> m = ListMembers(c.get(), "s");
                  return m.ok() && m->size() == 1 && (*m)[0].role == "servers";
                },
                absl::Seconds(10), "the workers' keys to go"),
            absl::OkStatus());
  // etcd gone: the server says so on /metrics (and in its log).
  etcd->reset();
  EXPECT_EQ(
      WaitUntil(
          [&] { return absl::StrContains(Scrape(metrics), "\nps_server_coordinator_reachable 0"); },
          absl::Seconds(10), "the metric to say etcd is out of reach"),
      absl::OkStatus());
  EXPECT_EQ(WaitUntil(
                [&] {
                  return absl::StrContains((*server)->process().LogTail(20),
                                           "cannot watch the workers of job s");
                },
                absl::Seconds(10), "the log line"),
            absl::OkStatus());
}

// "worker W: epoch E: share R of N from step S (workers ...)" lines.
struct EpochShares {
  int workers = 0;
  int64_t first_step = -1;
  std::vector<int> ranks;  // as the workers logged them
};

// Two ps_workers train an MLP of 5 epochs in `mode`; a third starts once
// the first epoch's record is in etcd. Every epoch is split among the
// workers its record lists, each taking one share (the join shows from an
// epoch on as a third share), the epochs follow each other step for step,
// no worker skips a step, and all three end at the same step.
void JoinDuringEpochZero(const std::string& mode) {
  auto etcd = EtcdProcess::Start(EtcdTestPath(absl::StrCat("shares-", mode)));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  ServerProcessOptions so = JobServer(**etcd, "e", absl::StrCat("shares-server-", mode),
                                      {"--num_workers=3", absl::StrCat("--mode=", mode),
                                       "--worker_timeout=0", "--coordinator_ttl=2"});
  auto server = ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  // 60,000 examples in batches of 1000: 30 steps an epoch for 2 workers,
  // 20 for 3.
  const auto steps_per_epoch = [](int n) { return 60000 / n / 1000; };
  std::vector<std::unique_ptr<ChildProcess>> workers;
  const auto spawn = [&](int k) {
    auto w = SpawnWorker(**etcd, c.get(), "e",
                         {"--coordinator_ttl=2", "--epochs=5", "--batch_size=1000", "--hidden=64",
                          "--wait_timeout=60"},
                         absl::StrCat("shares-", mode, "-worker", k, ".log"), workers.size() + 2);
    ASSERT_TRUE(w.ok()) << w.status();
    workers.push_back(*std::move(w));
  };
  spawn(0);
  spawn(1);
  ASSERT_EQ(WaitUntil(
                [&] {
                  absl::StatusOr<std::vector<EpochRecord>> r = ListEpochs(c.get(), "e");
                  return r.ok() && !r->empty();
                },
                absl::Seconds(30), "epoch 0's record"),
            absl::OkStatus());
  spawn(2);
  std::map<int64_t, EpochShares> epochs;
  std::set<std::string> ends;
  for (auto& w : workers) {
    std::optional<int> status = w->Wait(absl::Now() + absl::Seconds(180));
    const std::string log = w->LogTail(400);
    ASSERT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << DescribeExit(status) << "\n"
        << log << "\nserver:\n"
        << (*server)->process().LogTail(30);
    EXPECT_THAT(log, ::testing::Not(HasSubstr("without this worker"))) << log;
    EXPECT_THAT(log, ::testing::Not(HasSubstr("dropped this gradient"))) << log;
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      line = absl::StripPrefix(line, "    | ");  // LogTail's
      int id, rank, n;
      int64_t epoch, first;
      if (std::sscanf(std::string(line).c_str(),
                      "worker %d: epoch %ld: share %d of %d from step %ld", &id, &epoch, &rank, &n,
                      &first) == 5) {
        EpochShares& e = epochs[epoch];
        EXPECT_TRUE(e.first_step < 0 || (e.first_step == first && e.workers == n)) << line;
        e.first_step = first;
        e.workers = n;
        e.ranks.push_back(rank);
      }
      const size_t done = line.find(absl::StrCat(" done: mode ", mode, ", steps "));
      if (done != absl::string_view::npos) {
        ends.insert(std::string(line.substr(done, line.find(',', done + 20 + mode.size()) - done)));
      }
    }
  }
  ASSERT_EQ(epochs.size(), 5u);
  int64_t next = 0;
  for (auto& [epoch, e] : epochs) {
    std::sort(e.ranks.begin(), e.ranks.end());
    std::vector<int> all(e.workers);
    for (int k = 0; k < e.workers; ++k) all[k] = k;
    EXPECT_EQ(e.ranks, all) << "epoch " << epoch;  // every share once
    EXPECT_EQ(e.first_step, next) << "epoch " << epoch;
    next = e.first_step + steps_per_epoch(e.workers);
  }
  EXPECT_EQ(epochs[0].workers, 2);
  EXPECT_EQ(epochs[4].workers, 3);  // the third joined
  EXPECT_THAT(ends, ElementsAre(absl::StrCat(" done: mode ", mode, ", steps ", next)));
  // The third trains from a later epoch on (it may have been listed by the
  // first epoch to start after it registered, or waited for the next).
  const std::string third = workers[2]->LogTail(400);
  EXPECT_THAT(third, HasSubstr("worker 2: epoch "));
  EXPECT_THAT(third, ::testing::Not(HasSubstr("worker 2: epoch 0:")));
}

TEST(CoordinatedSync, AWorkerThatJoinsTakesAShareFromTheNextEpoch) { JoinDuringEpochZero("sync"); }
TEST(CoordinatedSsp, AWorkerThatJoinsTakesAShareFromTheNextEpoch) { JoinDuringEpochZero("ssp"); }
TEST(CoordinatedAsync, AWorkerThatJoinsTakesAShareFromTheNextEpoch) {
  JoinDuringEpochZero("async");
}

// SIGTERM (or Ctrl-C) makes a ps_worker leave its job before it exits: its
// key goes at once, not a (here 30 s) ttl later.
TEST(CoordinatedWorkers, SigtermLeavesTheJobAtOnce) {
  auto etcd = EtcdProcess::Start(EtcdTestPath("sigterm"));
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::unique_ptr<EtcdClient> c = Client(**etcd);
  ServerProcessOptions so =
      JobServer(**etcd, "t", "sigterm-server", {"--num_workers=1", "--mode=sync"});
  auto server = ServerProcess::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  auto w = ChildProcess::Spawn(
      {g_worker_binary, absl::StrCat("--coordinator=", (*etcd)->url()), "--job=t",
       "--coordinator_ttl=30", "--max_steps=1000000", "--batch_size=16", "--progress=off"},
      EtcdTestPath("sigterm-worker.log"), /*pipe_stdout=*/false);
  ASSERT_TRUE(w.ok()) << w.status();
  const auto workers = [&] {
    absl::StatusOr<std::vector<Member>> m = ListMembers(c.get(), "t");
    int n = 0;
    for (const Member& x : m.ok() ? *m : std::vector<Member>{}) n += x.role == "workers";
    return n;
  };
  ASSERT_EQ(WaitUntil([&] { return workers() == 1; }, absl::Seconds(20), "the worker to register"),
            absl::OkStatus());
  absl::SleepFor(absl::Seconds(1));  // training
  (*w)->Signal(SIGTERM);
  std::optional<int> status = (*w)->Wait(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM) << DescribeExit(status);
  EXPECT_EQ(workers(), 0);  // gone at once
  EXPECT_THAT((*w)->LogTail(5),
              HasSubstr("ps_worker: received SIGTERM; left the job (/ps/t/workers/0)"));
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: elastic_membership_test PS_SERVER PS_WORKER\n");
    return 2;
  }
  ps::g_server_binary = argv[1];
  ps::g_worker_binary = argv[2];
  return RUN_ALL_TESTS();
}
