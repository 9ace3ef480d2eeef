#include "server/core/ssp_clocks.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Worker `w` pushes its next step, computed on `computed`, and the shard
// moves to `*version` + 1. Returns the push's staleness in steps.
int64_t Step(SspClocks* c, int w, int64_t computed, int64_t* version) {
  return c->OnPush(w, /*seq=*/0, computed, ++*version);
}

TEST(SspClocks, HoldsAWorkerMoreThanSStepsAheadOfTheSlowest) {
  SspClocks c(/*num_workers=*/2, /*staleness=*/1);
  int64_t v = 0;
  EXPECT_TRUE(c.MayPull(0));
  Step(&c, 0, v, &v);  // worker 0 at step 1, one ahead: may go on
  EXPECT_EQ(c.PullNeeds(0), 0);
  EXPECT_TRUE(c.MayPull(0));
  EXPECT_THAT(c.HoldingBack(), IsEmpty());
  Step(&c, 0, v, &v);  // step 2: two ahead of worker 1, held
  EXPECT_FALSE(c.MayPull(0));
  EXPECT_TRUE(c.MayPull(1));
  EXPECT_THAT(c.HoldingBack(), ElementsAre(1));
  EXPECT_THAT(c.clocks(), ElementsAre(2, 0));
  Step(&c, 1, 0, &v);  // worker 1 reaches step 1: worker 0 may go on
  EXPECT_EQ(c.Slowest(), 1);
  EXPECT_TRUE(c.MayPull(0));
  EXPECT_THAT(c.HoldingBack(), IsEmpty());
}

TEST(SspClocks, StalenessZeroIsLockstep) {
  SspClocks c(3, 0);
  int64_t v = 0;
  for (int w : {0, 1}) {
    Step(&c, w, 0, &v);
    EXPECT_FALSE(c.MayPull(w)) << w;  // worker 2 has not pushed step 0
  }
  EXPECT_TRUE(c.MayPull(2));
  Step(&c, 2, 0, &v);
  for (int w : {0, 1, 2}) EXPECT_TRUE(c.MayPull(w)) << w;
}

TEST(SspClocks, ADroppedWorkerNoLongerHoldsTheOthersBack) {
  SspClocks c(3, 1);
  int64_t v = 0;
  Step(&c, 0, v, &v);
  Step(&c, 1, v, &v);
  Step(&c, 0, v, &v);
  EXPECT_FALSE(c.MayPull(0));  // step 2, worker 2 at 0
  c.SetLive(2, false, v);
  EXPECT_EQ(c.Slowest(), 1);
  EXPECT_TRUE(c.MayPull(0));
  // With no worker live nothing holds a pull.
  c.SetLive(0, false, v);
  c.SetLive(1, false, v);
  EXPECT_EQ(c.Slowest(), SspClocks::kNoneLive);
  EXPECT_TRUE(c.MayPull(2));
}

TEST(SspClocks, AReturningWorkerContinuesAtTheSlowestLiveStep) {
  SspClocks c(3, 1);
  int64_t v = 0;
  c.SetLive(2, false, v);
  for (int i = 0; i < 5; ++i) {
    Step(&c, 0, v, &v);
    Step(&c, 1, v, &v);
  }
  Step(&c, 0, v, &v);
  EXPECT_THAT(c.clocks(), ElementsAre(6, 5, 0));
  c.SetLive(2, true, v);
  EXPECT_THAT(c.clocks(), ElementsAre(6, 5, 5));
  EXPECT_EQ(c.Slowest(), 5);
  EXPECT_TRUE(c.MayPull(0));
  // Its next push is its step 5; a worker ahead of the slowest keeps its own.
  Step(&c, 2, v, &v);
  EXPECT_THAT(c.clocks(), ElementsAre(6, 5, 6));
  c.SetLive(0, false, v);
  c.SetLive(0, true, v);
  EXPECT_THAT(c.clocks(), ElementsAre(6, 5, 6));
}

TEST(SspClocks, APushSeqSetsTheStepEveryShardAgreesOn) {
  SspClocks c(2, 1);
  c.OnPush(0, /*seq=*/1, 0, 1);
  EXPECT_THAT(c.clocks(), ElementsAre(1, 0));
  c.OnPush(0, /*seq=*/4, 1, 2);  // seqs 2 and 3 never reached this shard
  EXPECT_THAT(c.clocks(), ElementsAre(4, 0));
  c.OnPush(1, /*seq=*/0, 0, 3);  // no seq: one step
  EXPECT_THAT(c.clocks(), ElementsAre(4, 1));
}

TEST(SspClocks, StalenessCountsTheSlowestStepsMissingFromTheWeightsUsed) {
  SspClocks c(2, 10);
  int64_t v = 0;
  // Worker 0 runs ahead on fresh weights: each of its steps misses more of
  // worker 1's, which has pushed none.
  EXPECT_EQ(Step(&c, 0, 0, &v), 0);  // step 0 on version 0
  EXPECT_EQ(Step(&c, 0, 1, &v), 1);
  EXPECT_EQ(Step(&c, 0, 2, &v), 2);
  // Worker 1's step 0 on version 0: nothing was missing.
  EXPECT_EQ(Step(&c, 1, 0, &v), 0);  // the slowest step is 1 from version 4
  EXPECT_EQ(Step(&c, 0, 4, &v), 2);  // step 3 on weights holding step 0 of all
  EXPECT_EQ(Step(&c, 0, 3, &v), 4);  // step 4 on weights holding none of worker 1's
}

TEST(SspClocks, ResetInstallsStepsAndKeepsWhoIsLive) {
  SspClocks c(3, 0);
  c.SetLive(1, false, 0);
  c.Reset({7, 2}, /*version=*/20);
  EXPECT_THAT(c.clocks(), ElementsAre(7, 2, 0));
  EXPECT_EQ(c.Slowest(), 0);  // worker 2, live; worker 1 stays dropped
  c.SetLive(2, false, 20);
  EXPECT_EQ(c.Slowest(), 7);
  // Weights of version 20 hold the first 7 steps of every live worker.
  EXPECT_EQ(c.OnPush(0, 8, 20, 21), 0);
}

TEST(SspClocks, ALeapOfTheSlowestStepKeepsTheHistoryBounded) {
  SspClocks c(1, 0);
  c.OnPush(0, /*seq=*/int64_t{1} << 40, 0, 1);
  EXPECT_EQ(c.Slowest(), int64_t{1} << 40);
  EXPECT_EQ(c.OnPush(0, 0, 1, 2), 0);
}

}  // namespace
}  // namespace ps
