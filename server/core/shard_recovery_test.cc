// The Shard's faults and recovery, without gRPC: an expired lease and stall
// reports through the real timer, AdoptWorkerCopy, and export and
// LoadCheckpoint (checkpoint bytes: server/checkpoint/checkpoint_test.cc).
// The push, pull and init rules are in shard_test.cc; the helpers both use
// in shard_test_util.h.
#include "server/core/shard.h"

#include <utility>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard_test_util.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::MatchesRegex;
using shard_testing::Encode;
using shard_testing::InitShard;
using shard_testing::InitSync;
using shard_testing::kSpec;
using shard_testing::MakeShard;
using shard_testing::PullResult;
using shard_testing::PushSlices;
using shard_testing::PushWithOutcome;
using shard_testing::Slices;
using shard_testing::StartPull;

// Collects a shard's log lines (ShardOptions::log). Must outlive the shard.
class LogCapture {
 public:
  std::function<void(absl::string_view)> Sink() {
    return [this](absl::string_view line) {
      absl::MutexLock l(&mu_);
      lines_.emplace_back(line);
    };
  }

  // Waits up to `timeout` until `n` lines contain `text`; returns those
  // lines (fewer if the time ran out).
  std::vector<std::string> WaitForLines(absl::string_view text, size_t n,
                                        absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    auto enough = [&] { return Matching(text).size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return Matching(text);
  }

  std::vector<std::string> Lines() {
    absl::MutexLock l(&mu_);
    return lines_;
  }

 private:
  std::vector<std::string> Matching(absl::string_view text) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> found;
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, text)) found.push_back(line);
    }
    return found;
  }

  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<Shard> MakeReportingShard(Mode mode, int workers, absl::Duration report_after,
                                          LogCapture* log) {
  ShardOptions o;
  o.num_workers = workers;
  o.mode = mode;
  o.stall_report_after = report_after;
  o.log = log->Sink();
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// Crosses a real timer (the waiters' thread rings the lease check), so it
// takes about 0.3 s; the lease rules themselves are in membership_test.
TEST(Shard, ExpiredLeaseClosesTheStepOnTimeWithoutTheWorkerUntilItIsBack) {
  LogCapture log;
  ShardOptions o;
  o.num_workers = 3;
  o.mode = Mode::kSync;
  o.optimizer.learning_rate = 1.0f;
  o.worker_timeout = absl::Milliseconds(300);
  // Stall reports ring the same timer, which keeps one alarm: at 4.5 ms,
  // 9 ms, ... 288 ms, then 576 ms. A lease check lost under them would drop
  // worker 2 at 576 ms instead of 300 ms.
  o.stall_report_after = absl::Microseconds(4500);
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});  // worker 0 heard from
  ASSERT_TRUE(shard->Register(2, 3).ok());          // worker 2 heard from, then silent
  Slices g0 = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {2, 2, 2}});
  Slices g1 = Encode(kSpec, 1, 0, {{4, 4, 4, 4}, {4, 4, 4}});
  PullResult pull;
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g0.data).ok());
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g1.data).ok());
  StartPull(shard.get(), 0, 1, absl::Seconds(10), &pull);
  // Workers 0 and 1 keep their leases; worker 2 loses its own.
  for (int i = 0; i < 400 && !pull.done.HasBeenNotified(); ++i) {
    absl::SleepFor(absl::Milliseconds(25));
    ASSERT_TRUE(shard->Heartbeat(0).ok());
    ASSERT_TRUE(shard->Heartbeat(1).ok());
  }
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pull.snap.ok()) << pull.snap.status();
  EXPECT_EQ(pull.snap->version, 1);
  // The mean of the two gradients that came: -(2 + 4) / 2.
  EXPECT_EQ((*pull.snap->weights)[0], -3.0f);
  std::vector<std::string> dropped = log.WaitForLines("worker 2 dropped", 1, absl::Seconds(1));
  ASSERT_THAT(dropped, SizeIs(1));
  const size_t at = dropped[0].find("no request for ");
  ASSERT_NE(at, std::string::npos) << dropped[0];
  const double silent = std::strtod(dropped[0].c_str() + at + 15, nullptr);
  EXPECT_GE(silent, 0.3) << dropped[0];
  EXPECT_LT(silent, 0.55) << dropped[0];
  ShardStats st = shard->Stats();
  EXPECT_THAT(st.dropped_workers, ElementsAre(2));
  EXPECT_THAT(st.live_workers, ElementsAre(0, 1));
  // Its late gradient for step 0 is dropped; then it is back.
  absl::StatusOr<PushResult> late = PushWithOutcome(shard.get(), 2, 0, g0.data);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->outcome, PushOutcome::kDropped);
  EXPECT_EQ(shard->Stats().pushes_dropped, 1);
  EXPECT_THAT(log.WaitForLines("worker 2 is back", 1, absl::ZeroDuration()), SizeIs(1));
  EXPECT_THAT(shard->Stats().dropped_workers, IsEmpty());
  EXPECT_THAT(shard->Stats().waiting_for, ElementsAre(0, 1, 2));
}

TEST(Shard, AdoptWorkerCopyInstallsItOnlyWhereTheShardIsBehind) {
  LogCapture log;
  ShardOptions o;
  o.num_workers = 2;
  o.mode = Mode::kSync;
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
  // Empty: installed at the copy's version, by any worker.
  absl::StatusOr<bool> r = shard->AdoptWorkerCopy(1, kSpec, copy.data, 7);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(shard->Stats().version, 7);
  EXPECT_THAT(log.WaitForLines("restored to version 7 from worker 1", 1, absl::Seconds(1)),
              SizeIs(1));
  // At or behind the shard: nothing changes.
  Slices other = Encode(kSpec, 1, 0, {{0, 0, 0, 0}, {0, 0, 0}});
  EXPECT_FALSE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 7));
  EXPECT_FALSE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 3));
  // Ahead: installed, and a pull waiting for it is released.
  PullResult pull;
  StartPull(shard.get(), 0, 9, absl::Seconds(10), &pull);
  EXPECT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 9));
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pull.snap.ok());
  EXPECT_EQ((*pull.snap->weights)[0], 0.0f);
  // Another spec is refused.
  const ModelSpec wrong = {{"w", {2, 2}}, {"c", {3}}};
  Slices w = Encode(wrong, 1, 0, {{0, 0, 0, 0}, {0, 0, 0}});
  EXPECT_EQ(shard->AdoptWorkerCopy(0, wrong, w.data, 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Shard, AdoptWorkerCopyGivesEveryWorkerALease) {
  // A worker that died while this shard was down is then dropped after one
  // lease (Membership::ExpectAll, in membership_test) instead of waited for.
  for (absl::Duration timeout : {absl::Seconds(30), absl::ZeroDuration()}) {
    ShardOptions o;
    o.num_workers = 2;
    o.mode = Mode::kSync;
    o.worker_timeout = timeout;
    o.log = nullptr;
    auto shard = *Shard::Create(o);
    Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
    ASSERT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, copy.data, 5));
    const ShardStats st = shard->Stats();
    EXPECT_THAT(st.workers_seen, ElementsAre(0));
    if (timeout > absl::ZeroDuration()) {
      EXPECT_THAT(st.live_workers, ElementsAre(0, 1));  // worker 1 never sent anything
    } else {
      EXPECT_THAT(st.live_workers, IsEmpty());  // no leases
    }
  }
}

TEST(Shard, LoadedCheckpointContinuesItsRunAsTheNextStart) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  absl::StatusOr<ShardState> state = shard->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->incarnation, shard->incarnation());
  EXPECT_NE(shard->incarnation().run_id, 0u);
  EXPECT_EQ(shard->incarnation().start, 1);
  auto again = MakeShard(Mode::kSync, 2);
  EXPECT_NE(again->incarnation().run_id, shard->incarnation().run_id);
  ASSERT_TRUE(again->LoadCheckpoint(*state).ok());
  EXPECT_EQ(again->incarnation(), (Incarnation{shard->incarnation().run_id, 2}));
}

// Crosses a real timer (the waiters' thread rings the report), for about
// 20 ms; the report rule (2x, 4x, ..., the next step's own clock, no report
// before a push, none in async mode or when off) is in stall_reporter_test.
TEST(Shard, SyncStepWaitingForAWorkerIsReportedUntilItCompletes) {
  LogCapture log;
  auto shard = MakeReportingShard(Mode::kSync, 3, absl::Milliseconds(20), &log);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g.data).ok());
  const std::vector<std::string> reports = log.WaitForLines("has waited", 1, absl::Seconds(30));
  ASSERT_EQ(reports.size(), 1u) << "no stall report within 30 s";
  EXPECT_THAT(reports[0], MatchesRegex("shard 0: step 0 has waited [0-9]+\\.[0-9]s for gradients "
                                       "from workers \\[2\\] \\(received from \\[0, 1\\]\\)"));
  EXPECT_TRUE(log.WaitForLines("completed", 1, absl::ZeroDuration()).empty());
  // The completion line is logged before the completing push returns.
  ASSERT_EQ(*PushSlices(shard.get(), 2, 0, g.data), 1);
  const std::vector<std::string> done = log.WaitForLines("completed", 1, absl::ZeroDuration());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_THAT(done[0], MatchesRegex("shard 0: step 0 completed after [0-9]+\\.[0-9]s"));
}

TEST(Shard, StepThatWaitedLessThanTheReportTimeCompletesSilently) {
  LogCapture log;
  auto shard = MakeReportingShard(Mode::kSync, 2, absl::Minutes(10), &log);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  ASSERT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 1);
  EXPECT_THAT(log.Lines(), ::testing::IsEmpty());
}

// A worker's copy holds no optimizer state: Adam's starts afresh at the
// copy's version, and the restore line says so.
TEST(Shard, AdoptWorkerCopyResetsTheOptimizerStateAndSaysSo) {
  LogCapture log;
  ShardOptions o;
  o.num_workers = 1;
  o.mode = Mode::kSync;
  o.optimizer.name = "adam";
  o.optimizer.learning_rate = 0.01;
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(*PushSlices(shard.get(), 0, 0, g.data), 1);
  auto fresh_at = [&](int64_t version) {
    return *(*CreateOptimizer(o.optimizer, 7, version))->SaveState();
  };
  EXPECT_NE(shard->ExportState()->optimizer_state, fresh_at(0));  // the push moved it
  Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
  ASSERT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, copy.data, 5));
  EXPECT_EQ(shard->ExportState()->optimizer_state, fresh_at(5));
  EXPECT_THAT(log.WaitForLines("the adam optimizer state (moments, step count) was reset", 1,
                               absl::Seconds(1)),
              SizeIs(1));
}

TEST(Shard, ExportedStateLoadsIntoAFreshShard) {
  auto shard = MakeShard(Mode::kSync, 1);
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  auto state = shard->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->version, 1);

  auto fresh = MakeShard(Mode::kSync, 1);
  ASSERT_TRUE(fresh->LoadCheckpoint(*state).ok());
  PullResult pull;
  StartPull(fresh.get(), 0, 1, absl::Seconds(1), &pull);
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_EQ(pull.snap->version, 1);
  EXPECT_EQ(*pull.snap->weights, state->weights);
  // Training continues at step 1.
  EXPECT_EQ(*PushSlices(fresh.get(), 0, 1, g.data), 2);
}

}  // namespace
}  // namespace ps
