#include "server/core/consistency.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::unique_ptr<ConsistencyPolicy> Make(Mode mode, int workers) {
  absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p = CreateConsistencyPolicy(mode, workers);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

// Worker w's gradient: {w, 10 + w}, so a released list shows who sent what.
std::vector<float> Grad(int w) { return {static_cast<float>(w), 10.0f + w}; }

using Released = std::vector<std::vector<float>>;

// OnPush without an async seq; the verdict's `apply` as a bool, or the error.
absl::StatusOr<bool> Offer(ConsistencyPolicy* p, int worker, int64_t computed, int64_t current,
                           std::vector<float> grad, Released* out) {
  absl::StatusOr<PushVerdict> v = p->OnPush(worker, computed, 0, current, std::move(grad), out);
  if (!v.ok()) return v.status();
  EXPECT_EQ(v->outcome, PushOutcome::kApplied);
  return v->apply;
}

PushOutcome OutcomeOf(ConsistencyPolicy* p, int worker, int64_t computed, int64_t current,
                      int64_t seq = 0) {
  Released out;
  absl::StatusOr<PushVerdict> v = p->OnPush(worker, computed, seq, current, Grad(worker), &out);
  EXPECT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(out, IsEmpty());
  return v.ok() ? v->outcome : PushOutcome::kApplied;
}

std::unique_ptr<ConsistencyPolicy> MakeSync(int workers, int quorum, int min_workers) {
  SyncRule rule;
  rule.quorum = quorum;
  rule.min_workers = min_workers;
  absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p =
      CreateConsistencyPolicy(Mode::kSync, workers, rule);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

TEST(SyncPolicy, ReleasesOnlyWhenAllWorkersPushedInWorkerOrder) {
  auto p = Make(Mode::kSync, 3);
  EXPECT_EQ(p->mode(), Mode::kSync);
  Released out;
  for (int w : {2, 0}) {
    absl::StatusOr<bool> r = Offer(p.get(), w, 0, 0, Grad(w), &out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(*r);
    EXPECT_THAT(out, IsEmpty());
  }
  absl::StatusOr<bool> r = Offer(p.get(), 1, 0, 0, Grad(1), &out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(1), Grad(2)));
}

TEST(SyncPolicy, NextStepStartsEmpty) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  ASSERT_FALSE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));
  ASSERT_TRUE(*Offer(p.get(), 1, 0, 0, Grad(1), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1));
  // Step 1 (the shard applied step 0): worker 0 may push again.
  absl::StatusOr<bool> r = Offer(p.get(), 0, 1, 1, Grad(5), &out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  ASSERT_TRUE(*Offer(p.get(), 1, 1, 1, Grad(6), &out));
  EXPECT_THAT(out, ElementsAre(Grad(5), Grad(6)));
}

TEST(SyncPolicy, OneWorkerReleasesEveryPush) {
  auto p = Make(Mode::kSync, 1);
  Released out;
  for (int64_t step = 0; step < 3; ++step) {
    absl::StatusOr<bool> r = Offer(p.get(), 0, step, step, Grad(static_cast<int>(step)), &out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(*r);
    EXPECT_THAT(out, ElementsAre(Grad(static_cast<int>(step))));
  }
}

TEST(SyncPolicy, PushForALaterStepIsFailedPreconditionAndKeepsNothing) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  absl::StatusOr<bool> r = Offer(p.get(), 1, 5, 4, Grad(1), &out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr("worker 1"), HasSubstr("step 5"), HasSubstr("step 4")));
  EXPECT_THAT(out, IsEmpty());
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1));
}

TEST(SyncPolicy, PushForAClosedStepIsDroppedUnlessItWasInIt) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  ASSERT_FALSE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));
  ASSERT_TRUE(*Offer(p.get(), 1, 0, 0, Grad(1), &out));
  // Step 0 closed with both: a retry of either is a duplicate.
  EXPECT_EQ(OutcomeOf(p.get(), 0, 0, 1), PushOutcome::kDuplicate);
  // A step before any this worker was counted in: dropped.
  auto q = Make(Mode::kSync, 2);
  EXPECT_EQ(OutcomeOf(q.get(), 1, 3, 4), PushOutcome::kDropped);
  EXPECT_THAT(q->MissingWorkers(), ElementsAre(0, 1));
}

TEST(SyncPolicy, SecondPushForTheStepIsADuplicateAndTheFirstIsKept) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  ASSERT_FALSE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));
  EXPECT_EQ(OutcomeOf(p.get(), 0, 0, 0), PushOutcome::kDuplicate);
  ASSERT_TRUE(*Offer(p.get(), 1, 0, 0, Grad(1), &out));
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(1)));
}

TEST(SyncPolicy, MissingWorkersListsThoseNotYetPushedInOrder) {
  auto p = Make(Mode::kSync, 4);
  Released out;
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1, 2, 3));
  ASSERT_FALSE(*Offer(p.get(), 2, 0, 0, Grad(2), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1, 3));
  ASSERT_FALSE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(1, 3));
}

TEST(SyncPolicy, QuorumClosesWithTheFirstNDistinctWorkersAndDropsTheLate) {
  auto p = MakeSync(3, /*quorum=*/2, /*min_workers=*/1);
  Released out;
  ASSERT_FALSE(*Offer(p.get(), 2, 0, 0, Grad(2), &out));
  // The same worker again does not fill the quorum.
  EXPECT_EQ(OutcomeOf(p.get(), 2, 0, 0), PushOutcome::kDuplicate);
  ASSERT_TRUE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(2)));
  // Worker 1's gradient for step 0 arrives after the step closed.
  EXPECT_EQ(OutcomeOf(p.get(), 1, 0, 1), PushOutcome::kDropped);
  EXPECT_EQ(OutcomeOf(p.get(), 0, 0, 1), PushOutcome::kDuplicate);
}

TEST(SyncPolicy, ADroppedWorkerNoLongerHoldsTheStepBackUntilItIsLiveAgain) {
  auto p = MakeSync(3, 0, 1);
  Released out;
  ASSERT_FALSE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));
  ASSERT_FALSE(p->SetLive(2, false, &out));  // worker 1 is still missing
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(1));
  ASSERT_TRUE(*Offer(p.get(), 1, 0, 0, Grad(1), &out));
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(1)));  // averaged over those two
  // The lease of worker 1 expires while it is the only one missing: the
  // step closes at once.
  ASSERT_FALSE(*Offer(p.get(), 0, 1, 1, Grad(5), &out));
  ASSERT_TRUE(p->SetLive(1, false, &out));
  EXPECT_THAT(out, ElementsAre(Grad(5)));
  // Back: steps wait for them again.
  ASSERT_FALSE(p->SetLive(1, true, &out));
  ASSERT_FALSE(p->SetLive(2, true, &out));
  ASSERT_FALSE(*Offer(p.get(), 0, 2, 2, Grad(0), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(1, 2));
}

TEST(SyncPolicy, MinWorkersKeepsAStepOpenWithTooFewGradients) {
  auto p = MakeSync(3, 0, /*min_workers=*/2);
  Released out;
  ASSERT_FALSE(p->SetLive(1, false, &out));
  ASSERT_FALSE(p->SetLive(2, false, &out));
  ASSERT_FALSE(*Offer(p.get(), 0, 0, 0, Grad(0), &out));  // 1 < 2: waits
  ASSERT_FALSE(p->SetLive(1, true, &out));
  ASSERT_TRUE(*Offer(p.get(), 1, 0, 0, Grad(1), &out));
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(1)));
}

TEST(SyncPolicy, RejectsARuleOutOfRange) {
  for (auto [quorum, min_workers] : {std::pair{4, 1}, std::pair{-1, 1}, std::pair{0, 0},
                                     std::pair{0, 4}}) {
    SyncRule rule;
    rule.quorum = quorum;
    rule.min_workers = min_workers;
    EXPECT_EQ(CreateConsistencyPolicy(Mode::kSync, 3, rule).status().code(),
              absl::StatusCode::kInvalidArgument)
        << quorum << " " << min_workers;
  }
}

TEST(AsyncPolicy, ReleasesEachPushAtOnce) {
  auto p = Make(Mode::kAsync, 3);
  EXPECT_EQ(p->mode(), Mode::kAsync);
  Released out;
  // Current and stale versions are both fine.
  for (auto [worker, computed] : {std::pair{1, 5}, std::pair{0, 2}, std::pair{1, 0}}) {
    absl::StatusOr<bool> r = Offer(p.get(), worker, computed, 5, Grad(worker), &out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(*r);
    EXPECT_THAT(out, ElementsAre(Grad(worker)));
    EXPECT_THAT(p->MissingWorkers(), IsEmpty());
  }
}

TEST(AsyncPolicy, ARepeatedSeqIsADuplicateAndSeqsSurviveAnExport) {
  auto p = Make(Mode::kAsync, 2);
  Released out;
  absl::StatusOr<PushVerdict> v = p->OnPush(1, 0, /*seq=*/1, 0, Grad(1), &out);
  ASSERT_TRUE(v.ok() && v->apply && v->outcome == PushOutcome::kApplied);
  EXPECT_EQ(OutcomeOf(p.get(), 1, 0, 1, /*seq=*/1), PushOutcome::kDuplicate);
  v = p->OnPush(1, 1, 2, 1, Grad(1), &out);
  ASSERT_TRUE(v.ok() && v->apply);
  EXPECT_THAT(p->LastSeqs(), ElementsAre(0, 2));
  auto q = Make(Mode::kAsync, 2);
  q->SetLastSeqs(p->LastSeqs());
  EXPECT_EQ(OutcomeOf(q.get(), 1, 0, 2, /*seq=*/2), PushOutcome::kDuplicate);
  // Seq 0: not deduplicated.
  v = q->OnPush(1, 0, 0, 2, Grad(1), &out);
  ASSERT_TRUE(v.ok() && v->apply);
}

TEST(AsyncPolicy, PushFromTheFutureIsFailedPrecondition) {
  auto p = Make(Mode::kAsync, 1);
  Released out;
  absl::StatusOr<bool> r = Offer(p.get(), 0, 6, 5, Grad(0), &out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("version 6"), HasSubstr("version 5")));
}

TEST(ConsistencyPolicy, SyncAndAsyncAnswerAPullAtTheVersionItAsksFor) {
  for (Mode mode : {Mode::kSync, Mode::kAsync}) {
    auto p = Make(mode, 2);
    Released out;
    ASSERT_TRUE(Offer(p.get(), 0, 0, 0, Grad(0), &out).ok());
    for (int worker : {0, 1}) {
      EXPECT_EQ(p->PullReadyVersion(worker, 0), 0) << ModeName(mode);
      EXPECT_EQ(p->PullReadyVersion(worker, 7), 7) << ModeName(mode);
      // No step ever holds their pulls.
      EXPECT_EQ(p->PullNeedsStep(worker), INT64_MIN) << ModeName(mode);
    }
    EXPECT_EQ(p->SlowestStep(), INT64_MAX) << ModeName(mode);
    EXPECT_THAT(p->Steps(), IsEmpty()) << ModeName(mode);
  }
}

std::unique_ptr<ConsistencyPolicy> MakeSsp(int workers, int staleness) {
  absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p =
      CreateConsistencyPolicy(Mode::kSsp, workers, SyncRule(), staleness);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

// Whether the policy answers `worker`'s pull now.
bool MayPull(const ConsistencyPolicy& p, int worker) {
  return p.SlowestStep() >= p.PullNeedsStep(worker);
}

TEST(SspPolicy, ReleasesEachPushAtOnceAndHoldsAPullMoreThanSStepsAhead) {
  auto p = MakeSsp(2, /*staleness=*/1);
  EXPECT_EQ(p->mode(), Mode::kSsp);
  Released out;
  int64_t version = 0;
  for (int step = 0; step < 2; ++step) {
    EXPECT_TRUE(MayPull(*p, 0)) << step;
    absl::StatusOr<PushVerdict> v = p->OnPush(0, version, step + 1, version, Grad(0), &out);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->apply);
    EXPECT_EQ(v->step_staleness, step);  // worker 1 has pushed nothing yet
    EXPECT_THAT(out, ElementsAre(Grad(0)));
    ++version;
  }
  // Worker 0 is at step 2, worker 1 at 0: two ahead of it with S = 1.
  EXPECT_THAT(p->Steps(), ElementsAre(2, 0));
  EXPECT_FALSE(MayPull(*p, 0));
  EXPECT_TRUE(MayPull(*p, 1));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(1));
  EXPECT_EQ(p->PullReadyVersion(0, 3), 3);  // the version it asks for, as async
  absl::StatusOr<PushVerdict> v = p->OnPush(1, 0, 1, version, Grad(1), &out);
  ASSERT_TRUE(v.ok() && v->apply);
  EXPECT_EQ(v->step_staleness, 0);
  EXPECT_TRUE(MayPull(*p, 0));
  EXPECT_THAT(p->MissingWorkers(), IsEmpty());
}

TEST(SspPolicy, ARepeatedSeqIsADuplicateThatTakesNoStep) {
  auto p = MakeSsp(2, 0);
  Released out;
  ASSERT_TRUE(p->OnPush(1, 0, /*seq=*/1, 0, Grad(1), &out).ok());
  EXPECT_EQ(OutcomeOf(p.get(), 1, 0, 1, /*seq=*/1), PushOutcome::kDuplicate);
  EXPECT_THAT(p->Steps(), ElementsAre(0, 1));
  EXPECT_THAT(p->LastSeqs(), ElementsAre(0, 1));
  Released none;
  absl::StatusOr<PushVerdict> v = p->OnPush(0, 2, 1, 1, Grad(0), &none);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SspPolicy, ADroppedWorkerStopsHoldingTheOthersAndReturnsAtTheSlowestStep) {
  auto p = MakeSsp(3, 0);
  Released out;
  int64_t version = 0;
  for (int w : {0, 1}) ASSERT_TRUE(p->OnPush(w, 0, 1, version++, Grad(w), &out).ok());
  EXPECT_FALSE(MayPull(*p, 0));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(2));
  EXPECT_FALSE(p->SetLive(2, false, &out));  // releases no gradient
  EXPECT_THAT(out, IsEmpty());
  EXPECT_TRUE(MayPull(*p, 0));
  EXPECT_TRUE(MayPull(*p, 1));
  p->SetLive(2, true, &out);
  EXPECT_THAT(p->Steps(), ElementsAre(1, 1, 1));
  EXPECT_TRUE(MayPull(*p, 2));
}

TEST(SspPolicy, InstalledSeqsAreTheWorkersSteps) {
  auto p = MakeSsp(2, 2);
  p->SetLastSeqs({9, 4});
  EXPECT_THAT(p->Steps(), ElementsAre(9, 4));
  EXPECT_THAT(p->LastSeqs(), ElementsAre(9, 4));
  EXPECT_FALSE(MayPull(*p, 0));  // 5 ahead
  EXPECT_EQ(OutcomeOf(p.get(), 0, 0, 0, /*seq=*/9), PushOutcome::kDuplicate);
}

TEST(CreateConsistencyPolicy, RejectsANegativeStalenessNamingTheFlag) {
  absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p =
      CreateConsistencyPolicy(Mode::kSsp, 2, SyncRule(), -1);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("--staleness"), HasSubstr("-1")));
}

TEST(CreateConsistencyPolicy, GivesEachModeItsPolicy) {
  for (Mode mode : AllModes()) EXPECT_EQ(Make(mode, 2)->mode(), mode);
}

TEST(CreateConsistencyPolicy, RejectsAnUnknownModeNamingTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p =
      CreateConsistencyPolicy(static_cast<Mode>(7), 2);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("mode(7)"), HasSubstr("sync, async, ssp")));
}

TEST(CreateConsistencyPolicy, RejectsNoWorkersInEveryMode) {
  for (Mode mode : AllModes()) {
    for (int workers : {0, -1}) {
      absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p = CreateConsistencyPolicy(mode, workers);
      EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << workers;
      EXPECT_THAT(p.status().message(), HasSubstr(absl::StrCat("got ", workers)));
    }
  }
}

}  // namespace
}  // namespace ps
