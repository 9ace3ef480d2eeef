// The Shard composed, without gRPC: init, pushes (sync steps, async
// staleness, duplicates, wrong steps, pending limits, recycled buffers) and
// pulls (waits, timeouts, snapshots, cancel, close). Faults and recovery
// (leases, stall reports, worker copies, checkpoints) are in
// shard_recovery_test.cc; the helpers both use in shard_test_util.h.
#include "server/core/shard.h"

#include <utility>

#include "absl/synchronization/notification.h"
#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard_test_util.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
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

TEST(Shard, SyncAveragesAllWorkersThenAppliesOnce) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult pull;
  StartPull(shard.get(), 0, 1, absl::Seconds(10), &pull);
  Slices g1 = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {1, 1, 1}});
  auto v = PushSlices(shard.get(), 1, 0, g1.data);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 0);
  EXPECT_FALSE(pull.done.HasBeenNotified());
  EXPECT_EQ(shard->Stats().waiting_for, std::vector<int>{0});
  Slices g0 = Encode(kSpec, 1, 0, {{0, 4, 0, 4}, {3, 3, 3}});
  v = PushSlices(shard.get(), 0, 0, g0.data);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 1);
  ASSERT_TRUE(pull.done.HasBeenNotified());
  ASSERT_TRUE(pull.snap.ok()) << pull.snap.status();
  EXPECT_EQ(pull.snap->version, 1);
  // w - 0.5 * mean(g): mean w grad = {1,3,1,3}, mean b grad = {2,2,2}.
  EXPECT_EQ(*pull.snap->weights, (std::vector<float>{0.5f, 0.5f, 2.5f, 2.5f, -1, -1, -1}));
}

TEST(Shard, SyncPushForWrongStepNamesBothSteps) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  auto v = PushSlices(shard.get(), 0, 3, g.data);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("step 3"));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("step 0"));
}

TEST(Shard, SyncSecondPushBySameWorkerIsADuplicateAndCounted) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  absl::StatusOr<PushResult> again = PushWithOutcome(shard.get(), 0, 0, g.data);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, PushOutcome::kDuplicate);
  EXPECT_EQ(again->version, 0);
  EXPECT_EQ(shard->Stats().pushes_duplicate, 1);
  EXPECT_EQ(shard->Stats().pushes_accepted, 1);
}

TEST(Shard, PullTimesOutNamingMissingWorkers) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 3, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g.data).ok());
  PullResult pull;
  StartPull(shard.get(), 1, 1, absl::Milliseconds(200), &pull);
  clock.Advance(absl::Milliseconds(200) - absl::Nanoseconds(1));
  EXPECT_FALSE(pull.done.HasBeenNotified());
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_EQ(pull.snap.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(pull.snap.status().message()), HasSubstr("workers [0, 2]"));
}

TEST(Shard, PullBeforeInitWaitsForWorkerZero) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  PullResult pull;
  StartPull(shard.get(), 1, 0, absl::Seconds(10), &pull);
  EXPECT_FALSE(pull.done.HasBeenNotified());
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  ASSERT_TRUE(pull.done.HasBeenNotified());
  ASSERT_TRUE(pull.snap.ok());
  EXPECT_EQ(*pull.snap->weights, (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(Shard, AsyncAppliesEachPushAndRecordsStaleness) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kAsync, 2, &clock, 1.0f);
  InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(*PushSlices(shard.get(), 0, 0, g.data), 1);  // staleness 0
  EXPECT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 2);  // computed on v0, applied at v1
  EXPECT_EQ(*PushSlices(shard.get(), 1, 2, g.data), 3);  // staleness 0
  const ShardStats st = shard->Stats();
  EXPECT_EQ(st.version, 3);
  EXPECT_EQ(st.pushes_accepted, 3);
  EXPECT_EQ(st.max_staleness, 1);
  EXPECT_DOUBLE_EQ(st.mean_staleness, 1.0 / 3);
  EXPECT_EQ(PushSlices(shard.get(), 0, 7, g.data).status().code(), absl::StatusCode::kFailedPrecondition);
}

// --staleness_lr=inverse: a gradient computed on v0 and applied at v1
// moves the weights by lr / 2; with none, by lr; sync keeps lr.
TEST(Shard, InverseStalenessLrDividesAnAsyncGradientsRate) {
  FakeClock clock;
  for (StalenessLr rule : {StalenessLr::kNone, StalenessLr::kInverse}) {
    ShardOptions o;
    o.clock = &clock;
    o.num_workers = 2;
    o.mode = Mode::kAsync;
    o.optimizer.learning_rate = 1.0;
    o.staleness_lr = rule;
    auto shard = *Shard::Create(o);
    InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});
    Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
    EXPECT_EQ(*PushSlices(shard.get(), 0, 0, g.data), 1);  // fresh: w = -1
    EXPECT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 2);  // staleness 1
    PullResult pull;
    StartPull(shard.get(), 0, 2, absl::Seconds(5), &pull);
    ASSERT_TRUE(pull.done.HasBeenNotified());
    ASSERT_TRUE(pull.snap.ok());
    const float want = rule == StalenessLr::kInverse ? -1.5f : -2.0f;
    EXPECT_EQ(*pull.snap->weights, std::vector<float>(7, want)) << StalenessLrName(rule);
  }
}

TEST(Shard, AppliedGradientBuffersAreRecycled) {
  FakeClock clock;
  for (Mode mode : {Mode::kAsync, Mode::kSync}) {
    auto shard = MakeShard(mode, 1, &clock, 1.0f);
    InitShard(shard.get(), {{1, 1, 1, 1}, {1, 1, 1}});
    Slices g = Encode(kSpec, 1, 0, {{0.5f, 0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}});
    absl::StatusOr<GradientAssembly> a = shard->StartPush(0, 0);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->data(), nullptr);  // no buffer before the first chunk
    for (const RawTensorSlice& c : g.data) ASSERT_TRUE(a->Add(c).ok());
    const float* data = a->data();
    ASSERT_NE(data, nullptr);
    absl::StatusOr<AssembledGradient> grad = std::move(*a).Finish();
    ASSERT_TRUE(grad.ok()) << grad.status();
    ASSERT_EQ(grad->values.size(), 7u);
    ASSERT_EQ(shard->Push(*std::move(grad))->version, 1);
    // The same memory, still holding the applied gradient (a fresh one is
    // zeroed): the first chunk rewrites only "w", so "b" shows what was left.
    absl::StatusOr<GradientAssembly> b = shard->StartPush(0, 1);
    ASSERT_TRUE(b.ok());
    Slices w = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {0, 0, 0}});
    ASSERT_TRUE(b->Add(w.data[0]).ok());
    EXPECT_EQ(b->data(), data) << ModeName(mode);
    EXPECT_EQ(std::vector<float>(b->data(), b->data() + 7),
              (std::vector<float>{2, 2, 2, 2, 0.5f, 0.5f, 0.5f}))
        << ModeName(mode);
    PullResult pull;
    StartPull(shard.get(), 0, 1, absl::Seconds(1), &pull);
    EXPECT_EQ(*pull.snap->weights, std::vector<float>(7, 0.5f));
  }
}

TEST(Shard, PendingPushesAreLimitedAndCountedInStats) {
  FakeClock clock;
  ShardOptions o;
  o.clock = &clock;
  o.max_pending_pushes = 1;
  auto shard = Shard::Create(o);
  ASSERT_TRUE(shard.ok());
  InitShard(shard->get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  absl::StatusOr<GradientAssembly> first = (*shard)->StartPush(0, 0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->Add(g.data[0]).ok());
  EXPECT_EQ((*shard)->Stats().pending_pushes, 1);
  absl::StatusOr<GradientAssembly> second = (*shard)->StartPush(0, 0);
  ASSERT_TRUE(second.ok());
  const absl::Status refused = second->Add(g.data[0]);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--max_pending_pushes"));
  first = absl::CancelledError("dropped");  // frees its buffer
  EXPECT_EQ((*shard)->Stats().pending_pushes, 0);
  EXPECT_EQ(*PushSlices(shard->get(), 0, 0, g.data), 1);
  const ShardStats st = (*shard)->Stats();
  EXPECT_EQ(st.pending_pushes, 0);
  EXPECT_EQ(st.pushes_accepted, 1);
  EXPECT_EQ(st.push_latency.count, 1);
}

TEST(Shard, SnapshotIsImmutableWhileUpdatesApply) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kAsync, 1, &clock, 1.0f);
  InitShard(shard.get(), {{1, 1, 1, 1}, {1, 1, 1}});
  PullResult pull;
  StartPull(shard.get(), 0, 0, absl::Seconds(1), &pull);
  ASSERT_TRUE(pull.done.HasBeenNotified());
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  EXPECT_EQ(*pull.snap->weights, std::vector<float>(7, 1.0f));
  PullResult after;
  StartPull(shard.get(), 0, 0, absl::Seconds(1), &after);
  EXPECT_EQ(*after.snap->weights, std::vector<float>(7, 0.0f));
}

TEST(Shard, LateWorkerWaitsForInitAndMismatchedSpecIsRejected) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  absl::Notification joined;
  absl::StatusOr<int64_t> joined_version;
  shard->Init(1, kSpec, {}, absl::Seconds(10), [&](absl::StatusOr<int64_t> v, bool created) {
    EXPECT_FALSE(created);
    joined_version = v;
    joined.Notify();
  });
  EXPECT_FALSE(joined.HasBeenNotified());
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  ASSERT_TRUE(joined.HasBeenNotified());
  EXPECT_TRUE(joined_version.ok()) << joined_version.status();

  const ModelSpec other = {{"w", {2, 3}}, {"b", {3}}};
  auto bad = InitSync(shard.get(), 1, other, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("w[2,3]"));
}

TEST(Shard, PushBeforeInitIsRejected) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(PushSlices(shard.get(), 0, 0, g.data).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->StartPush(0, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->Stats().pushes_accepted, 0);
}

TEST(Shard, OnlyWorkerZeroCreates) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  Slices s = Encode(kSpec, 1, 0, {{1, 2, 3, 4}, {0, 0, 0}});
  EXPECT_EQ(InitSync(shard.get(), 1, kSpec, s.data).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Shard, ShardThatOwnsNoElementsStillInitsAndAdvances) {
  FakeClock clock;
  // A 2-element tensor over 3 shards leaves shard 0 with nothing.
  const ModelSpec tiny = {{"t", {2}}};
  ShardOptions o;
  o.clock = &clock;
  o.shard_id = 0;
  o.num_shards = 3;
  o.num_workers = 2;
  auto shard = Shard::Create(o);
  ASSERT_TRUE(shard.ok());
  ASSERT_TRUE(ShardSlices(tiny, 3, 0).empty());
  ASSERT_TRUE(InitSync(shard->get(), 0, tiny, {}).ok());
  EXPECT_TRUE(InitSync(shard->get(), 1, tiny, {}).ok());
  EXPECT_EQ(*PushSlices(shard->get(), 0, 0, {}), 0);
  EXPECT_EQ(*PushSlices(shard->get(), 1, 0, {}), 1);
}

TEST(Shard, CancelWaitEndsOnlyThatPull) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult a, b;
  const uint64_t ta = shard->Pull(0, 1, absl::Seconds(60), [&a](absl::StatusOr<WeightsSnapshot> s) {
    a.snap = std::move(s);
    a.done.Notify();
  });
  StartPull(shard.get(), 1, 1, absl::Seconds(60), &b);
  ASSERT_NE(ta, 0u);
  EXPECT_EQ(shard->Stats().waiting_calls, 2);
  shard->CancelWait(ta);
  ASSERT_TRUE(a.done.HasBeenNotified());
  EXPECT_EQ(a.snap.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(b.done.HasBeenNotified());
  EXPECT_EQ(shard->Stats().waiting_calls, 1);
  shard->CancelWait(ta);  // already gone: no-op
  shard->Close();         // ends `b` while it is still in scope
  ASSERT_TRUE(b.done.HasBeenNotified());
}

TEST(Shard, PullsPastMaxWaitingCallsFailAtOnceAndServedPullsAreCounted) {
  FakeClock clock;
  ShardOptions o;
  o.clock = &clock;
  o.num_workers = 2;
  o.max_waiting_calls = 1;
  auto shard = Shard::Create(o);
  ASSERT_TRUE(shard.ok());
  InitShard(shard->get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult now, waiting, refused;
  StartPull(shard->get(), 0, 0, absl::Seconds(60), &now);
  ASSERT_TRUE(now.done.HasBeenNotified());
  StartPull(shard->get(), 0, 1, absl::Seconds(60), &waiting);
  StartPull(shard->get(), 1, 1, absl::Seconds(60), &refused);
  ASSERT_TRUE(refused.done.HasBeenNotified());
  EXPECT_EQ(refused.snap.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.snap.status().message()),
              HasSubstr("shard 0 already has 1 calls waiting for a version (--max_waiting_calls)"));
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard->get(), 0, 0, g.data).ok());
  ASSERT_EQ(*PushSlices(shard->get(), 1, 0, g.data), 1);
  ASSERT_TRUE(waiting.done.HasBeenNotified());
  ASSERT_TRUE(waiting.snap.ok());
  const ShardStats st = (*shard)->Stats();
  EXPECT_EQ(st.pulls_served, 2);
  EXPECT_EQ(st.pull_latency.count, 2);
  EXPECT_EQ(st.waiting_calls, 0);
  EXPECT_EQ((*shard)->metrics().version.Get(), 1);
}

TEST(Shard, CloseFailsWaitingPulls) {
  FakeClock clock;
  auto shard = MakeShard(Mode::kSync, 2, &clock);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult pull;
  StartPull(shard.get(), 0, 1, absl::Seconds(60), &pull);
  shard->Close();
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_EQ(pull.snap.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ps
