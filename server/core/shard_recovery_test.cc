// The Shard's faults and recovery, without gRPC: an expired lease and stall
// reports through the shard's timer on a FakeClock (exact times, no sleep),
// AdoptWorkerCopy, and export and LoadCheckpoint (checkpoint bytes:
// server/checkpoint/checkpoint_test.cc).
// The push, pull and init rules are in shard_test.cc; the helpers both use
// in shard_test_util.h.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard.h"
#include "server/core/shard_test_util.h"

namespace ps {
namespace {

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
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Collects a shard's log lines (ShardOptions::log). Must outlive the shard.
// On a FakeClock every line is written before the call (or the Advance)
// that caused it returns: nothing to wait for.
class LogCapture {
 public:
  std::function<void(absl::string_view)> Sink() {
    return [this](absl::string_view line) {
      absl::MutexLock l(&mu_);
      lines_.emplace_back(line);
    };
  }

  // The lines that contain `text`.
  std::vector<std::string> Lines(absl::string_view text = "") const {
    absl::MutexLock l(&mu_);
    std::vector<std::string> found;
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, text)) found.push_back(line);
    }
    return found;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<Shard> MakeReportingShard(Mode mode, int workers, absl::Duration report_after,
                                          LogCapture* log, Clock* clock) {
  ShardOptions o;
  o.clock = clock;
  o.num_workers = workers;
  o.mode = mode;
  o.stall_report_after = report_after;
  o.log = log->Sink();
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(Shard, ExpiredLeaseClosesTheStepOnTimeWithoutTheWorkerUntilItIsBack) {
  FakeClock clock;
  LogCapture log;
  ShardOptions o;
  o.clock = &clock;
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
  // Workers 0 and 1 keep their leases; worker 2 loses its own, at 300 ms.
  clock.Advance(absl::Milliseconds(150));
  ASSERT_TRUE(shard->Heartbeat(0).ok());
  ASSERT_TRUE(shard->Heartbeat(1).ok());
  clock.Advance(absl::Milliseconds(150) - absl::Nanoseconds(1));
  EXPECT_FALSE(pull.done.HasBeenNotified());
  EXPECT_THAT(shard->Stats().dropped_workers, IsEmpty());
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(pull.done.HasBeenNotified());
  ASSERT_TRUE(pull.snap.ok()) << pull.snap.status();
  EXPECT_EQ(pull.snap->version, 1);
  // The mean of the two gradients that came: -(2 + 4) / 2.
  EXPECT_EQ((*pull.snap->weights)[0], -3.0f);
  EXPECT_THAT(log.Lines("worker 2 dropped"),
              ElementsAre(HasSubstr("worker 2 dropped: no request for 0.3s")));
  EXPECT_THAT(log.Lines("has waited"), SizeIs(7));  // at 4.5 ms, 9 ms, ... 288 ms
  ShardStats st = shard->Stats();
  EXPECT_THAT(st.dropped_workers, ElementsAre(2));
  EXPECT_THAT(st.live_workers, ElementsAre(0, 1));
  // Its late gradient for step 0 is dropped; then it is back.
  absl::StatusOr<PushResult> late = PushWithOutcome(shard.get(), 2, 0, g0.data);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->outcome, PushOutcome::kDropped);
  EXPECT_EQ(shard->Stats().pushes_dropped, 1);
  EXPECT_THAT(log.Lines("worker 2 is back"), SizeIs(1));
  EXPECT_THAT(shard->Stats().dropped_workers, IsEmpty());
  EXPECT_THAT(shard->Stats().waiting_for, ElementsAre(0, 1, 2));
}

// A coordinator's worker registry (Membership's rule, membership_test):
// the steps wait for the registered workers only, a worker whose key
// appears is waited for from then on, and one whose key goes is left out at
// once, closing the step it was the last one missing from.
TEST(Shard, WorkerRegistryDecidesWhomASyncStepWaitsFor) {
  FakeClock clock;
  LogCapture log;
  ShardOptions o;
  o.clock = &clock;
  o.num_workers = 3;  // ids 0..2; no lease: only the registry decides
  o.mode = Mode::kSync;
  o.optimizer.learning_rate = 1.0f;
  o.worker_registry = true;
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  EXPECT_THAT(shard->Stats().live_workers, ElementsAre(0, 1, 2));  // until the first report
  shard->SetRegisteredWorkers({0, 1});
  EXPECT_THAT(shard->Stats().live_workers, ElementsAre(0, 1));
  InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {2, 2, 2}});
  // Step 0 closes with workers 0 and 1: worker 2 is not in the job.
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g.data).ok());
  EXPECT_EQ(shard->Stats().version, 1);
  // Worker 2 registers: step 1 waits for it.
  shard->SetRegisteredWorkers({0, 1, 2});
  EXPECT_THAT(log.Lines("worker 2 joined the job"), SizeIs(1));
  ASSERT_TRUE(PushSlices(shard.get(), 0, 1, g.data).ok());
  ASSERT_TRUE(PushSlices(shard.get(), 1, 1, g.data).ok());
  PullResult pull;
  StartPull(shard.get(), 0, 2, absl::Seconds(10), &pull);
  clock.Advance(absl::Seconds(5));
  EXPECT_FALSE(pull.done.HasBeenNotified());
  EXPECT_THAT(shard->Stats().waiting_for, ElementsAre(2));
  // Its key goes (it stopped, or its etcd lease ran out): the step closes.
  shard->SetRegisteredWorkers({0, 1});
  ASSERT_TRUE(pull.done.HasBeenNotified());
  ASSERT_TRUE(pull.snap.ok()) << pull.snap.status();
  EXPECT_EQ(pull.snap->version, 2);
  EXPECT_EQ((*pull.snap->weights)[0], -4.0f);  // two means of 2, lr 1
  EXPECT_THAT(log.Lines("worker 2 left the job"),
              ElementsAre(HasSubstr("shard 0: worker 2 left the job (its etcd key is gone) at "
                                    "step 1; sync steps close without it")));
  EXPECT_THAT(shard->Stats().live_workers, ElementsAre(0, 1));
}

// The lease rule is Membership's (membership_test); this is the shard
// ringing it on its timer: a worker silent for exactly worker_timeout is
// dropped then, not a nanosecond before, and a heartbeat renews a lease.
TEST(Shard, ALeaseExpiresExactlyAtItsDeadline) {
  FakeClock clock;
  ShardOptions o;
  o.clock = &clock;
  o.num_workers = 2;
  o.mode = Mode::kSync;
  o.worker_timeout = absl::Seconds(30);
  o.log = nullptr;
  auto shard = *Shard::Create(o);
  ASSERT_TRUE(shard->Register(0, 2).ok());
  ASSERT_TRUE(shard->Register(1, 2).ok());
  clock.Advance(absl::Seconds(20));
  ASSERT_TRUE(shard->Heartbeat(0).ok());  // worker 0's lease now ends at 50 s
  clock.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  EXPECT_THAT(shard->Stats().live_workers, ElementsAre(0, 1));
  clock.Advance(absl::Nanoseconds(1));
  ShardStats st = shard->Stats();
  EXPECT_THAT(st.live_workers, ElementsAre(0));
  EXPECT_THAT(st.dropped_workers, ElementsAre(1));
  EXPECT_EQ(shard->metrics().workers_dropped.Get(), 1);
  clock.Advance(absl::Seconds(20) - absl::Nanoseconds(1));
  EXPECT_THAT(shard->Stats().live_workers, ElementsAre(0));
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_THAT(shard->Stats().dropped_workers, ElementsAre(0, 1));
}

TEST(Shard, AdoptWorkerCopyInstallsItOnlyWhereTheShardIsBehind) {
  FakeClock clock;
  LogCapture log;
  ShardOptions o;
  o.clock = &clock;
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
  EXPECT_THAT(log.Lines("restored to version 7 from worker 1"), SizeIs(1));
  // At or behind the shard: nothing changes.
  Slices other = Encode(kSpec, 1, 0, {{0, 0, 0, 0}, {0, 0, 0}});
  EXPECT_FALSE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 7));
  EXPECT_FALSE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 3));
  // Ahead: installed, and a pull waiting for it is released.
  PullResult pull;
  StartPull(shard.get(), 0, 9, absl::Seconds(10), &pull);
  EXPECT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 9));
  ASSERT_TRUE(pull.done.HasBeenNotified());
  ASSERT_TRUE(pull.snap.ok());
  EXPECT_EQ((*pull.snap->weights)[0], 0.0f);
  // Another spec is refused.
  const ModelSpec wrong = {{"w", {2, 2}}, {"c", {3}}};
  Slices w = Encode(wrong, 1, 0, {{0, 0, 0, 0}, {0, 0, 0}});
  EXPECT_EQ(shard->AdoptWorkerCopy(0, wrong, w.data, 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Shard, AdoptWorkerCopyGivesEveryWorkerALease) {
  FakeClock clock;
  // A worker that died while this shard was down is then dropped after one
  // lease (Membership::ExpectAll, in membership_test) instead of waited for.
  for (absl::Duration timeout : {absl::Seconds(30), absl::ZeroDuration()}) {
    ShardOptions o;
    o.clock = &clock;
    o.num_workers = 2;
    o.mode = Mode::kSync;
    o.worker_timeout = timeout;
    o.log = nullptr;
    auto shard = *Shard::Create(o);
    Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
    ASSERT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, copy.data, 5));
    const ShardStats st = shard->Stats();
    EXPECT_THAT(st.workers_seen, ElementsAre(0));
    clock.Advance(absl::Seconds(30) - absl::Nanoseconds(1));
    if (timeout > absl::ZeroDuration()) {
      EXPECT_THAT(st.live_workers, ElementsAre(0, 1));  // worker 1 never sent anything
      EXPECT_THAT(shard->Stats().dropped_workers, IsEmpty());
      clock.Advance(absl::Nanoseconds(1));  // neither sent anything since
      EXPECT_THAT(shard->Stats().dropped_workers, ElementsAre(0, 1));
    } else {
      EXPECT_THAT(st.live_workers, IsEmpty());  // no leases
      clock.Advance(absl::Hours(1));
      EXPECT_THAT(shard->Stats().dropped_workers, IsEmpty());
    }
  }
}

TEST(Shard, LoadedCheckpointContinuesItsRunAsTheNextStart) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  absl::StatusOr<ShardState> state = shard->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->incarnation, shard->incarnation());
  EXPECT_NE(shard->incarnation().run_id, 0u);
  EXPECT_EQ(shard->incarnation().start, 1);
  auto again = MakeShard(Mode::kSync, 2, &clock);
  EXPECT_NE(again->incarnation().run_id, shard->incarnation().run_id);
  ASSERT_TRUE(again->LoadCheckpoint(*state).ok());
  EXPECT_EQ(again->incarnation(), (Incarnation{shard->incarnation().run_id, 2}));
}

// The report rule (2x, 4x, ..., the next step's own clock, no report
// before a push, none in async mode or when off) is in stall_reporter_test;
// this is the shard ringing it on its timer, at the exact times.
TEST(Shard, SyncStepWaitingForAWorkerIsReportedUntilItCompletes) {
  FakeClock clock;
  LogCapture log;
  auto shard = MakeReportingShard(Mode::kSync, 3, absl::Seconds(10), &log, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g.data).ok());
  // 10 s after the step's first push, not after the last.
  clock.Advance(absl::Seconds(9) - absl::Nanoseconds(1));
  EXPECT_THAT(log.Lines("has waited"), IsEmpty());
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_THAT(log.Lines("has waited"),
              ElementsAre("shard 0: step 0 has waited 10.0s for gradients from workers [2] "
                          "(received from [0, 1])"));
  clock.Advance(absl::Seconds(10));
  EXPECT_THAT(log.Lines("has waited"), SizeIs(2));
  EXPECT_THAT(log.Lines("has waited")[1], HasSubstr("has waited 20.0s"));
  EXPECT_THAT(log.Lines("completed"), IsEmpty());
  // The completion line is logged before the completing push returns.
  clock.Advance(absl::Milliseconds(500));
  ASSERT_EQ(*PushSlices(shard.get(), 2, 0, g.data), 1);
  EXPECT_THAT(log.Lines("completed"), ElementsAre("shard 0: step 0 completed after 20.5s"));
  clock.Advance(absl::Hours(1));  // nothing more: the step is closed
  EXPECT_THAT(log.Lines("has waited"), SizeIs(2));
}

TEST(Shard, StepThatWaitedLessThanTheReportTimeCompletesSilently) {
  FakeClock clock;
  LogCapture log;
  auto shard = MakeReportingShard(Mode::kSync, 2, absl::Minutes(10), &log, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  clock.Advance(absl::Minutes(10) - absl::Nanoseconds(1));
  ASSERT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 1);
  clock.Advance(absl::Hours(1));
  EXPECT_THAT(log.Lines(), ::testing::IsEmpty());
}

// A worker's copy holds no optimizer state: Adam's starts afresh at the
// copy's version, and the restore line says so.
TEST(Shard, AdoptWorkerCopyResetsTheOptimizerStateAndSaysSo) {
  FakeClock clock;
  LogCapture log;
  ShardOptions o;
  o.clock = &clock;
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
  EXPECT_THAT(log.Lines("the adam optimizer state (moments, step count) was reset"), SizeIs(1));
}

TEST(Shard, ExportedStateLoadsIntoAFreshShard) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 1, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  auto state = shard->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->version, 1);

  auto fresh = MakeShard(Mode::kSync, 1, &clock);
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
