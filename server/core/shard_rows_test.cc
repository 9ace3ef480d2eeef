// Shard's embedding-row calls: PushPullRows against PushRows then PullRows.
#include <cstdint>
#include <memory>
#include <vector>

#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Shard> RowsShard(Mode mode, Clock* clock) {
  ShardOptions o;
  o.num_workers = 2;
  o.mode = mode;
  o.clock = clock;
  o.tables.optimizer = {SparseOptimizerKind::kSgd, 0.5f};
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->DeclareTables({TableSpec{"emb", 2, 7, 0.01f}}).ok());
  return *std::move(s);
}

// Async and SSP: the answer is the rows after the push, exactly what a
// PushRows then a PullRows of the same ids give on a twin shard.
TEST(ShardRows, PushPullRowsAnswersTheRowsAfterItsPush) {
  for (Mode mode : {Mode::kAsync, Mode::kSsp}) {
    FakeClock clock;
    auto a = RowsShard(mode, &clock), b = RowsShard(mode, &clock);
    const std::vector<uint64_t> ids = {3, 9, 40};
    const std::vector<float> g = {1, 2, 3, 4, 5, 6};
    absl::StatusOr<RowsPushPullResult> pp = a->PushPullRows(0, "emb", 0, 1, ids, g);
    ASSERT_TRUE(pp.ok()) << pp.status();
    EXPECT_EQ(pp->outcome, PushOutcome::kApplied);
    ASSERT_TRUE(b->PushRows(0, "emb", 0, 1, ids, g).ok());
    absl::StatusOr<RowsResult> pulled = b->PullRows(0, "emb", ids);
    ASSERT_TRUE(pulled.ok());
    EXPECT_EQ(pp->rows.values, pulled->values) << ModeName(mode);
    // A retry of the same seq is a duplicate, not applied again, and still
    // answers the rows.
    absl::StatusOr<RowsPushPullResult> again = a->PushPullRows(0, "emb", 0, 1, ids, g);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->outcome, PushOutcome::kDuplicate);
    EXPECT_EQ(again->rows.values, pulled->values);
  }
}

TEST(ShardRows, PushPullRowsIsRefusedInSyncAndForBadInput) {
  FakeClock clock;
  auto sync = RowsShard(Mode::kSync, &clock);
  absl::StatusOr<RowsPushPullResult> r = sync->PushPullRows(0, "emb", 0, 0, {1}, {1, 1});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("sync"));
  auto async = RowsShard(Mode::kAsync, &clock);
  EXPECT_EQ(async->PushPullRows(0, "nope", 0, 1, {1}, {1, 1}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(async->PushPullRows(0, "emb", 0, 1, {1}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // one float for a row of two
  EXPECT_EQ(async->PushPullRows(0, "emb", 0, 1, {1, 1}, {1, 1, 1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // a repeated id
  EXPECT_EQ(async->PushPullRows(5, "emb", 0, 1, {1}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no such worker
}

}  // namespace
}  // namespace ps
