#include "server/consistency.h"

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

TEST(SyncPolicy, ReleasesOnlyWhenAllWorkersPushedInWorkerOrder) {
  auto p = Make(Mode::kSync, 3);
  EXPECT_EQ(p->mode(), Mode::kSync);
  Released out;
  for (int w : {2, 0}) {
    absl::StatusOr<bool> r = p->OnPush(w, 0, 0, Grad(w), &out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(*r);
    EXPECT_THAT(out, IsEmpty());
  }
  absl::StatusOr<bool> r = p->OnPush(1, 0, 0, Grad(1), &out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(1), Grad(2)));
}

TEST(SyncPolicy, NextStepStartsEmpty) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  ASSERT_FALSE(*p->OnPush(0, 0, 0, Grad(0), &out));
  ASSERT_TRUE(*p->OnPush(1, 0, 0, Grad(1), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1));
  // Step 1 (the shard applied step 0): worker 0 may push again.
  absl::StatusOr<bool> r = p->OnPush(0, 1, 1, Grad(5), &out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  ASSERT_TRUE(*p->OnPush(1, 1, 1, Grad(6), &out));
  EXPECT_THAT(out, ElementsAre(Grad(5), Grad(6)));
}

TEST(SyncPolicy, OneWorkerReleasesEveryPush) {
  auto p = Make(Mode::kSync, 1);
  Released out;
  for (int64_t step = 0; step < 3; ++step) {
    absl::StatusOr<bool> r = p->OnPush(0, step, step, Grad(static_cast<int>(step)), &out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(*r);
    EXPECT_THAT(out, ElementsAre(Grad(static_cast<int>(step))));
  }
}

TEST(SyncPolicy, PushForAnotherStepIsFailedPreconditionAndKeepsNothing) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  for (int64_t computed : {int64_t{3}, int64_t{5}}) {  // behind, ahead
    absl::StatusOr<bool> r = p->OnPush(1, computed, 4, Grad(1), &out);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(r.status().message(),
                AllOf(HasSubstr("worker 1"), HasSubstr(absl::StrCat("step ", computed)),
                      HasSubstr("step 4")));
    EXPECT_THAT(out, IsEmpty());
  }
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1));
}

TEST(SyncPolicy, SecondPushForTheStepIsAlreadyExistsAndTheFirstIsKept) {
  auto p = Make(Mode::kSync, 2);
  Released out;
  ASSERT_FALSE(*p->OnPush(0, 0, 0, Grad(0), &out));
  absl::StatusOr<bool> r = p->OnPush(0, 0, 0, Grad(7), &out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(), HasSubstr("worker 0"));
  ASSERT_TRUE(*p->OnPush(1, 0, 0, Grad(1), &out));
  EXPECT_THAT(out, ElementsAre(Grad(0), Grad(1)));
}

TEST(SyncPolicy, MissingWorkersListsThoseNotYetPushedInOrder) {
  auto p = Make(Mode::kSync, 4);
  Released out;
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1, 2, 3));
  ASSERT_FALSE(*p->OnPush(2, 0, 0, Grad(2), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(0, 1, 3));
  ASSERT_FALSE(*p->OnPush(0, 0, 0, Grad(0), &out));
  EXPECT_THAT(p->MissingWorkers(), ElementsAre(1, 3));
}

TEST(AsyncPolicy, ReleasesEachPushAtOnce) {
  auto p = Make(Mode::kAsync, 3);
  EXPECT_EQ(p->mode(), Mode::kAsync);
  Released out;
  // Current and stale versions are both fine.
  for (auto [worker, computed] : {std::pair{1, 5}, std::pair{0, 2}, std::pair{1, 0}}) {
    absl::StatusOr<bool> r = p->OnPush(worker, computed, 5, Grad(worker), &out);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(*r);
    EXPECT_THAT(out, ElementsAre(Grad(worker)));
    EXPECT_THAT(p->MissingWorkers(), IsEmpty());
  }
}

TEST(AsyncPolicy, PushFromTheFutureIsFailedPrecondition) {
  auto p = Make(Mode::kAsync, 1);
  Released out;
  absl::StatusOr<bool> r = p->OnPush(0, 6, 5, Grad(0), &out);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("version 6"), HasSubstr("version 5")));
}

TEST(ConsistencyPolicy, SyncAndAsyncAnswerAPullAtTheVersionItAsksFor) {
  for (Mode mode : {Mode::kSync, Mode::kAsync}) {
    auto p = Make(mode, 2);
    Released out;
    ASSERT_TRUE(p->OnPush(0, 0, 0, Grad(0), &out).ok());
    for (int worker : {0, 1}) {
      EXPECT_EQ(p->PullReadyVersion(worker, 0), 0) << ModeName(mode);
      EXPECT_EQ(p->PullReadyVersion(worker, 7), 7) << ModeName(mode);
    }
  }
}

TEST(CreateConsistencyPolicy, GivesEachModeItsPolicy) {
  for (Mode mode : AllModes()) EXPECT_EQ(Make(mode, 2)->mode(), mode);
}

TEST(CreateConsistencyPolicy, RejectsAnUnknownModeNamingTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> p =
      CreateConsistencyPolicy(static_cast<Mode>(7), 2);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("mode(7)"), HasSubstr("sync, async")));
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
