// Shard in SSP mode: pulls held for the slowest live worker's step, and
// released by its pushes, by a lease that expires, and at their deadline.
// (The rule itself is tested without a shard in ssp_clocks_test.cc.)
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const ModelSpec kSpec = {{"w", {3}}};

std::vector<RawTensorSlice> Values(const std::vector<float>& v, std::string* bytes) {
  bytes->assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return {RawTensorSlice{"w", {3}, 0, 3, {*bytes}}};
}

// An SSP shard on `clock` (which must outlive it), initialized to zeros.
std::unique_ptr<Shard> MakeSspShard(Clock* clock, int workers, int staleness,
                                    absl::Duration lease = absl::ZeroDuration()) {
  ShardOptions o;
  o.clock = clock;
  o.num_workers = workers;
  o.mode = Mode::kSsp;
  o.staleness = staleness;
  o.optimizer.learning_rate = 1.0f;
  o.worker_timeout = lease;
  o.log = nullptr;
  absl::StatusOr<std::unique_ptr<Shard>> s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  std::string bytes;
  bool done = false;
  (*s)->Init(0, kSpec, Values({0, 0, 0}, &bytes), absl::Seconds(5),
             [&done](absl::StatusOr<int64_t> v, bool) {
               EXPECT_TRUE(v.ok()) << v.status();
               done = true;
             });
  EXPECT_TRUE(done);  // worker 0's init creates the parameters at once
  return *std::move(s);
}

// Worker `w` pushes a gradient of ones computed on `version`, with `seq`.
absl::StatusOr<int64_t> Push(Shard* shard, int w, int64_t version, int64_t seq) {
  std::string bytes;
  ASSIGN_OR_RETURN(GradientAssembly a, shard->StartPush(w, version));
  RETURN_IF_ERROR(a.AddMessage(Values({1, 1, 1}, &bytes)));
  ASSIGN_OR_RETURN(AssembledGradient g, std::move(a).Finish());
  ASSIGN_OR_RETURN(PushResult r, shard->Push(std::move(g), seq));
  return r.version;
}

struct PullResult {
  absl::Notification done;
  absl::StatusOr<WeightsSnapshot> snap = absl::UnknownError("not called");
};

void StartPull(Shard* shard, int worker, absl::Duration wait, PullResult* out,
               bool renews_lease = true) {
  shard->Pull(
      worker, 0, wait,
      [out](absl::StatusOr<WeightsSnapshot> s) {
        out->snap = std::move(s);
        out->done.Notify();
      },
      renews_lease);
}

TEST(ShardSsp, HoldsThePullOfAWorkerMoreThanSStepsAheadUntilTheSlowestPushes) {
  FakeClock clock;
  auto shard = MakeSspShard(&clock, 2, /*staleness=*/1);
  ASSERT_TRUE(Push(shard.get(), 0, 0, 1).ok());
  PullResult one_ahead;
  StartPull(shard.get(), 0, absl::Seconds(30), &one_ahead);
  ASSERT_TRUE(one_ahead.done.HasBeenNotified());  // one step ahead: S allows it
  ASSERT_TRUE(Push(shard.get(), 0, 1, 2).ok());
  PullResult held, reader;
  StartPull(shard.get(), 0, absl::Seconds(30), &held);
  EXPECT_FALSE(held.done.HasBeenNotified());  // two ahead
  StartPull(shard.get(), 0, absl::Seconds(30), &reader, /*renews_lease=*/false);
  EXPECT_TRUE(reader.done.HasBeenNotified());  // a reader computes no gradient
  ShardStats st = shard->Stats();
  EXPECT_THAT(st.worker_steps, ElementsAre(2, 0));
  EXPECT_THAT(st.waiting_for, ElementsAre(1));
  EXPECT_EQ(st.pulls_held, 1);
  EXPECT_EQ(st.staleness_bound, 1);
  // Worker 1's first step releases it, with that step's weights.
  ASSERT_EQ(*Push(shard.get(), 1, 0, 1), 3);
  ASSERT_TRUE(held.done.HasBeenNotified());
  ASSERT_TRUE(held.snap.ok()) << held.snap.status();
  EXPECT_EQ(held.snap->version, 3);
  st = shard->Stats();
  EXPECT_THAT(st.worker_steps, ElementsAre(2, 1));
  EXPECT_THAT(st.waiting_for, IsEmpty());
  // Worker 0's second step was computed on weights holding none of worker
  // 1's steps: one step stale. Worker 1's first: none. In versions, worker
  // 1's push was two behind.
  EXPECT_EQ(st.max_step_staleness, 1);
  EXPECT_EQ(st.max_staleness, 2);
}

TEST(ShardSsp, AGradientFromAWorkerThatDidNotWaitCountsItsStaleness) {
  FakeClock clock;
  auto shard = MakeSspShard(&clock, 2, 1);
  // Worker 0 pushes three steps without pulling, all on version 0.
  for (int seq = 1; seq <= 3; ++seq) ASSERT_TRUE(Push(shard.get(), 0, 0, seq).ok());
  EXPECT_EQ(shard->Stats().max_step_staleness, 2);
}

TEST(ShardSsp, AnExpiredLeaseReleasesTheHeldPullAndTheWorkerReturnsAtTheSlowestStep) {
  FakeClock clock;
  auto shard = MakeSspShard(&clock, 2, 0, absl::Seconds(20));
  ASSERT_TRUE(shard->Register(1, 2).ok());  // heard from, then silent
  ASSERT_TRUE(Push(shard.get(), 0, 0, 1).ok());
  ASSERT_TRUE(Push(shard.get(), 0, 1, 2).ok());
  PullResult held;
  StartPull(shard.get(), 0, absl::Seconds(30), &held);
  EXPECT_FALSE(held.done.HasBeenNotified());
  // Worker 0 keeps its lease; worker 1's expires at 20 s and frees the pull.
  clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(shard->Heartbeat(0).ok());
  clock.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  EXPECT_FALSE(held.done.HasBeenNotified());
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(held.done.HasBeenNotified());
  ASSERT_TRUE(held.snap.ok()) << held.snap.status();
  EXPECT_THAT(shard->Stats().dropped_workers, ElementsAre(1));
  ASSERT_TRUE(shard->Heartbeat(1).ok());  // back
  const ShardStats st = shard->Stats();
  EXPECT_THAT(st.dropped_workers, IsEmpty());
  EXPECT_THAT(st.worker_steps, ElementsAre(2, 2));
}

TEST(ShardSsp, AHeldPullTimesOutNamingTheWorkersHoldingItBack) {
  FakeClock clock;
  auto shard = MakeSspShard(&clock, 3, 0);
  ASSERT_TRUE(Push(shard.get(), 0, 0, 1).ok());
  ASSERT_TRUE(Push(shard.get(), 1, 1, 1).ok());
  PullResult held;
  StartPull(shard.get(), 0, absl::Seconds(30), &held);
  clock.Advance(absl::Seconds(30) - absl::Nanoseconds(1));
  EXPECT_FALSE(held.done.HasBeenNotified());
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(held.done.HasBeenNotified());
  EXPECT_EQ(held.snap.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(held.snap.status().message(),
              AllOf(HasSubstr("--staleness=0"), HasSubstr("worker steps [1, 1, 0]"),
                    HasSubstr("held back by workers [2]")));
}

}  // namespace
}  // namespace ps
