#include "client/internal/recovery.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;

constexpr Incarnation kRun{0xabc, 1};
constexpr Incarnation kRestarted{0xabc, 2};  // the same run, from its checkpoint
constexpr Incarnation kNewRun{0xdef, 1};     // a new run (no checkpoint)

TEST(MayRetry, ShardsThatWentAwayOrRestarted) {
  for (absl::StatusCode code :
       {absl::StatusCode::kUnavailable, absl::StatusCode::kCancelled, absl::StatusCode::kAborted,
        absl::StatusCode::kFailedPrecondition}) {
    EXPECT_TRUE(MayRetry(code)) << code;
  }
}

TEST(MayRetry, NotTheCallersErrorsNorDeadlines) {
  for (absl::StatusCode code :
       {absl::StatusCode::kOk, absl::StatusCode::kInvalidArgument,
        absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kInternal,
        absl::StatusCode::kNotFound, absl::StatusCode::kPermissionDenied,
        absl::StatusCode::kUnauthenticated, absl::StatusCode::kResourceExhausted}) {
    EXPECT_FALSE(MayRetry(code)) << code;
  }
}

TEST(RetryAfterRecovery, RefusalOfAShardThatDidNotRestartIsTheCallersError) {
  EXPECT_FALSE(RetryAfterRecovery(absl::StatusCode::kFailedPrecondition, false));
  EXPECT_TRUE(RetryAfterRecovery(absl::StatusCode::kFailedPrecondition, true));
}

TEST(RetryAfterRecovery, LostCallsAreRetriedWhetherOrNotAShardRestarted) {
  for (absl::StatusCode code :
       {absl::StatusCode::kUnavailable, absl::StatusCode::kCancelled, absl::StatusCode::kAborted}) {
    EXPECT_TRUE(RetryAfterRecovery(code, false)) << code;
    EXPECT_TRUE(RetryAfterRecovery(code, true)) << code;
  }
}

// One shard's plan.
ShardRecovery PlanOne(ShardRegistration registered, KnownShard known) {
  std::vector<ShardRecovery> plan = PlanRecovery({registered}, {known});
  EXPECT_EQ(plan.size(), 1u);
  return plan.empty() ? ShardRecovery() : plan[0];
}

TEST(PlanRecovery, NothingToDoForAShardAsTheClientLeftIt) {
  const ShardRecovery p = PlanOne({kRun, true, 7}, {kRun, true, 7});
  EXPECT_FALSE(p.restarted);
  EXPECT_FALSE(p.restore);
}

TEST(PlanRecovery, AShardAheadOfTheCopyIsLeftAlone) {
  const ShardRecovery p = PlanOne({kRun, true, 8}, {kRun, true, 7});
  EXPECT_FALSE(p.restarted);
  EXPECT_FALSE(p.restore);
}

TEST(PlanRecovery, ARestartAtTheHeldVersionIsAdoptedNotRestored) {
  // From a checkpoint of the version the client holds, or restored by
  // another worker first.
  for (Incarnation now : {kRestarted, kNewRun}) {
    const ShardRecovery p = PlanOne({now, true, 7}, {kRun, true, 7});
    EXPECT_TRUE(p.restarted);
    EXPECT_FALSE(p.restore);
  }
}

TEST(PlanRecovery, ARestartWithoutParametersIsRestored) {
  const ShardRecovery p = PlanOne({kNewRun, false, 0}, {kRun, true, 7});
  EXPECT_TRUE(p.restarted);
  EXPECT_TRUE(p.restore);
}

TEST(PlanRecovery, ARestartFromAnOlderCheckpointIsRestored) {
  const ShardRecovery p = PlanOne({kRestarted, true, 5}, {kRun, true, 7});
  EXPECT_TRUE(p.restarted);
  EXPECT_TRUE(p.restore);
}

TEST(PlanRecovery, AShardBehindIsRestoredEvenWithoutARestart) {
  const ShardRecovery p = PlanOne({kRun, true, 6}, {kRun, true, 7});
  EXPECT_FALSE(p.restarted);
  EXPECT_TRUE(p.restore);
}

TEST(PlanRecovery, AShardWithoutParametersIsBehindEvenACopyOfVersionZero) {
  const ShardRecovery p = PlanOne({kNewRun, false, 0}, {kRun, true, 0});
  EXPECT_TRUE(p.restore);
}

TEST(PlanRecovery, NothingIsRestoredWithoutACopy) {
  // Retries off, Init not called, or nothing pulled yet.
  const ShardRecovery p = PlanOne({kNewRun, false, 0}, {kRun, false, 0});
  EXPECT_TRUE(p.restarted);
  EXPECT_FALSE(p.restore);
  EXPECT_FALSE(PlanOne({kRun, true, 3}, {kRun, false, 7}).restore);
}

TEST(PlanRecovery, DecidesEachShardOnItsOwn) {
  const std::vector<ShardRecovery> plan =
      PlanRecovery({{kRun, true, 4}, {kNewRun, false, 0}, {kRestarted, true, 4}, {kRun, true, 2}},
                   {{kRun, true, 4}, {kRun, true, 4}, {kRun, true, 4}, {kRun, true, 4}});
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_FALSE(plan[0].restarted || plan[0].restore);
  EXPECT_TRUE(plan[1].restarted && plan[1].restore);
  EXPECT_TRUE(plan[2].restarted && !plan[2].restore);
  EXPECT_TRUE(!plan[3].restarted && plan[3].restore);
}

TEST(CommonVersionRollback, ShardsThatAgreeNeedNoRound) {
  EXPECT_FALSE(CommonVersionRollback({5, 5, 5}).Next().has_value());
  EXPECT_FALSE(CommonVersionRollback({9}).Next().has_value());
  EXPECT_FALSE(CommonVersionRollback({}).Next().has_value());
}

TEST(CommonVersionRollback, AsksTheShardsAheadToRollBackToTheLowest) {
  CommonVersionRollback r({4, 6, 3, 3});
  std::optional<CommonVersionRollback::Round> round = r.Next();
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->target, 3);
  EXPECT_THAT(round->shards, ElementsAre(0, 1));
  r.Answered(0, true, 3);
  EXPECT_THAT(r.versions(), ElementsAre(3, 6, 3, 3));
  r.Answered(1, true, 3);
  EXPECT_FALSE(r.Next().has_value());  // they agree
  EXPECT_THAT(r.versions(), ElementsAre(3, 3, 3, 3));
}

TEST(CommonVersionRollback, ARoundOfRefusalsEndsIt) {
  // A live cluster whose shards are a step apart, or no older checkpoint.
  CommonVersionRollback r({3, 4});
  ASSERT_TRUE(r.Next().has_value());
  EXPECT_FALSE(r.Next().has_value());
}

TEST(CommonVersionRollback, AnAnswerWithoutARollBackEndsIt) {
  CommonVersionRollback r({3, 5, 5});
  ASSERT_TRUE(r.Next().has_value());
  r.Answered(1, false, 5);
  r.Answered(2, false, 5);
  EXPECT_FALSE(r.Next().has_value());
}

TEST(CommonVersionRollback, OneShardRollingBackIsEnoughForAnotherRound) {
  CommonVersionRollback r({3, 5, 5});
  ASSERT_TRUE(r.Next().has_value());
  r.Answered(1, true, 4);   // rolled back, not as far as asked
  r.Answered(2, false, 5);  // refused
  std::optional<CommonVersionRollback::Round> round = r.Next();
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->target, 3);
  EXPECT_THAT(round->shards, ElementsAre(1, 2));
}

TEST(CommonVersionRollback, AShardThatLandsBelowTheTargetLeadsTheNextRound) {
  CommonVersionRollback r({4, 6, 6});
  std::optional<CommonVersionRollback::Round> round = r.Next();
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->target, 4);
  EXPECT_THAT(round->shards, ElementsAre(1, 2));
  r.Answered(1, true, 2);  // it has no checkpoint of version 4
  r.Answered(2, true, 4);
  round = r.Next();
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(round->target, 2);
  EXPECT_THAT(round->shards, ElementsAre(0, 2));
  r.Answered(0, true, 2);
  r.Answered(2, true, 2);
  EXPECT_FALSE(r.Next().has_value());
  EXPECT_THAT(r.versions(), ElementsAre(2, 2, 2));
}

TEST(CommonVersionRollback, RunsAtMostOneRoundPerShard) {
  CommonVersionRollback r({5, 6});
  std::optional<CommonVersionRollback::Round> round = r.Next();
  ASSERT_TRUE(round.has_value());
  EXPECT_THAT(round->shards, ElementsAre(1));
  r.Answered(1, true, 3);  // below again
  round = r.Next();
  ASSERT_TRUE(round.has_value());
  EXPECT_THAT(round->shards, ElementsAre(0));
  r.Answered(0, true, 1);  // and again
  EXPECT_FALSE(r.Next().has_value());
  EXPECT_THAT(r.versions(), ElementsAre(1, 3));
}

TEST(NextBackoff, DoublesUpToTwoSeconds) {
  std::vector<absl::Duration> seen;
  for (absl::Duration b = kFirstBackoff; seen.size() < 7; b = NextBackoff(b)) seen.push_back(b);
  EXPECT_THAT(seen, ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200),
                                absl::Milliseconds(400), absl::Milliseconds(800),
                                absl::Milliseconds(1600), absl::Seconds(2), absl::Seconds(2)));
}

TEST(RegisterTimeout, WhatIsLeftBetweenOneMillisecondAndFiveSeconds) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(RegisterTimeout(now + absl::Minutes(1), now), absl::Seconds(5));
  EXPECT_EQ(RegisterTimeout(now + absl::Milliseconds(1500), now), absl::Milliseconds(1500));
  EXPECT_EQ(RegisterTimeout(now, now), absl::Milliseconds(1));
  EXPECT_EQ(RegisterTimeout(now - absl::Seconds(3), now), absl::Milliseconds(1));
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

std::vector<std::shared_ptr<const SliceLayout>> Layouts(const ModelSpec& spec, int shards) {
  std::vector<std::shared_ptr<const SliceLayout>> out;
  for (int s = 0; s < shards; ++s) out.push_back(MakeSliceLayout(spec, shards, s));
  return out;
}

// The copy of each shard's slices of a model whose every element holds
// its own number (tensor t, element e: 1000 t + e).
std::vector<std::vector<float>> NumberedCopy(
    const std::vector<std::shared_ptr<const SliceLayout>>& layouts) {
  std::vector<std::vector<float>> copy;
  for (const auto& layout : layouts) {
    std::vector<float> flat(layout->num_elements);
    for (const SliceRange& r : layout->slices) {
      for (int64_t e = 0; e < r.length; ++e) {
        flat[r.flat_offset + e] = static_cast<float>(1000 * r.tensor_index + r.offset + e);
      }
    }
    copy.push_back(std::move(flat));
  }
  return copy;
}

TEST(RecutCopy, EveryElementLandsWhereTheNewPartitionPutsIt) {
  const ModelSpec spec = {{"w", {7, 5}}, {"b", {3}}, {"s", {}}};
  for (const auto& [from, to] : {std::pair{2, 3}, {3, 2}, {2, 1}, {1, 4}, {2, 2}}) {
    const auto old_layouts = Layouts(spec, from);
    const auto new_layouts = Layouts(spec, to);
    absl::StatusOr<std::vector<std::vector<float>>> recut =
        RecutCopy(spec, old_layouts, NumberedCopy(old_layouts), new_layouts);
    ASSERT_TRUE(recut.ok()) << recut.status();
    EXPECT_EQ(*recut, NumberedCopy(new_layouts)) << from << " -> " << to;
  }
}

TEST(RecutCopy, NoCopyStaysNoneAndAShortOneIsRefused) {
  const ModelSpec spec = {{"w", {7, 5}}};
  absl::StatusOr<std::vector<std::vector<float>>> none =
      RecutCopy(spec, Layouts(spec, 2), {{}, {}}, Layouts(spec, 3));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, (std::vector<std::vector<float>>(3)));
  std::vector<std::vector<float>> copy = NumberedCopy(Layouts(spec, 2));
  copy[1].pop_back();
  absl::StatusOr<std::vector<std::vector<float>>> short_one =
      RecutCopy(spec, Layouts(spec, 2), copy, Layouts(spec, 3));
  EXPECT_EQ(short_one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_one.status().message()),
              ::testing::HasSubstr("copy of shard 1 holds"));
}

}  // namespace
}  // namespace ps
