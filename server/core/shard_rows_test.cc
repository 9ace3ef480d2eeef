// Shard's embedding-row calls: PushPullRows against PushRows then PullRows,
// at once in async and SSP, and at the step's close in sync.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard.h"
#include "server/core/shard_test_util.h"

namespace ps {
namespace {

using shard_testing::Encode;
using shard_testing::InitShard;
using shard_testing::kSpec;
using shard_testing::PushSlices;
using shard_testing::Slices;
using ::testing::HasSubstr;

std::unique_ptr<Shard> RowsShard(Mode mode, Clock* clock,
                                 absl::Duration worker_timeout = absl::ZeroDuration()) {
  ShardOptions o;
  o.num_workers = 2;
  o.mode = mode;
  o.clock = clock;
  o.worker_timeout = worker_timeout;
  o.tables.optimizer = {SparseOptimizerKind::kSgd, 0.5f};
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->DeclareTables({TableSpec{"emb", 2, 7, 0.01f}}).ok());
  return *std::move(s);
}

// A PushPullRows' answer, and whether it came.
struct Answer {
  bool done = false;
  absl::StatusOr<RowsPushPullResult> r = absl::UnknownError("not answered");
};

uint64_t Start(Shard* shard, int worker, int64_t version, int64_t seq,
               const std::vector<uint64_t>& ids, const std::vector<float>& g, Answer* out,
               absl::Duration wait = absl::Seconds(10)) {
  return shard->PushPullRows(worker, "emb", version, seq, ids, g, wait,
                             [out](absl::StatusOr<RowsPushPullResult> r) {
                               EXPECT_FALSE(out->done) << "answered twice";
                               out->done = true;
                               out->r = std::move(r);
                             });
}

// A call answered before PushPullRows returns.
absl::StatusOr<RowsPushPullResult> Now(Shard* shard, int worker, int64_t version, int64_t seq,
                                       const std::vector<uint64_t>& ids,
                                       const std::vector<float>& g) {
  Answer a;
  EXPECT_EQ(Start(shard, worker, version, seq, ids, g, &a), 0u);
  EXPECT_TRUE(a.done);
  return a.r;
}

// Async and SSP: the answer is the rows after the push, exactly what a
// PushRows then a PullRows of the same ids give on a twin shard.
TEST(ShardRows, PushPullRowsAnswersTheRowsAfterItsPush) {
  for (Mode mode : {Mode::kAsync, Mode::kSsp}) {
    FakeClock clock;
    auto a = RowsShard(mode, &clock), b = RowsShard(mode, &clock);
    const std::vector<uint64_t> ids = {3, 9, 40};
    const std::vector<float> g = {1, 2, 3, 4, 5, 6};
    absl::StatusOr<RowsPushPullResult> pp = Now(a.get(), 0, 0, 1, ids, g);
    ASSERT_TRUE(pp.ok()) << pp.status();
    EXPECT_EQ(pp->outcome, PushOutcome::kApplied);
    ASSERT_TRUE(b->PushRows(0, "emb", 0, 1, ids, g).ok());
    absl::StatusOr<RowsResult> pulled = b->PullRows(0, "emb", ids);
    ASSERT_TRUE(pulled.ok());
    EXPECT_EQ(pp->rows.values, pulled->values) << ModeName(mode);
    // A retry of the same seq is a duplicate, not applied again, and still
    // answers the rows.
    absl::StatusOr<RowsPushPullResult> again = Now(a.get(), 0, 0, 1, ids, g);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->outcome, PushOutcome::kDuplicate);
    EXPECT_EQ(again->rows.values, pulled->values);
  }
}

// Async and SSP, in pieces: each piece is its rows after the push (read as
// they are updated), in order, the last marked, and a duplicate answers in
// pieces too, with its outcome.
TEST(ShardRows, PushPullRowsInPiecesAnswersTheRowsAfterItsPush) {
  for (Mode mode : {Mode::kAsync, Mode::kSsp}) {
    FakeClock clock;
    auto a = RowsShard(mode, &clock), b = RowsShard(mode, &clock);
    const std::vector<uint64_t> ids = {2, 5, 8, 11, 14};
    const std::vector<float> g = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ASSERT_TRUE(b->PushRows(0, "emb", 0, 1, ids, g).ok());
    absl::StatusOr<RowsResult> want = b->PullRows(0, "emb", ids);
    ASSERT_TRUE(want.ok());
    for (PushOutcome expected : {PushOutcome::kApplied, PushOutcome::kDuplicate}) {
      std::vector<float> got;
      std::vector<size_t> sizes;
      bool last_seen = false;
      Answer answer;
      EXPECT_EQ(a->PushPullRows(
                    0, "emb", 0, 1, ids, g, absl::Seconds(10),
                    [&answer](absl::StatusOr<RowsPushPullResult> r) {
                      answer.done = true;
                      answer.r = std::move(r);
                    },
                    /*piece_ids=*/2,
                    [&](RowsResult rows, PushOutcome outcome, bool last) {
                      EXPECT_FALSE(last_seen) << "a piece after the last";
                      EXPECT_EQ(outcome, expected);
                      sizes.push_back(rows.values.size());
                      got.insert(got.end(), rows.values.begin(), rows.values.end());
                      last_seen = last;
                    }),
                0u);
      ASSERT_TRUE(answer.done);
      ASSERT_TRUE(answer.r.ok()) << answer.r.status();
      EXPECT_EQ(answer.r->outcome, expected);
      EXPECT_TRUE(last_seen);
      EXPECT_THAT(sizes, ::testing::ElementsAre(4, 4, 2)) << ModeName(mode);
      EXPECT_EQ(got, want->values) << ModeName(mode);
    }
  }
}

// Sync: the call waits for its step to close and answers the rows of the
// closed step, bit-equal to a twin shard's PushRows, step, PullRows.
TEST(ShardRows, SyncPushPullRowsAnswersTheRowsOfTheStepThatCloses) {
  FakeClock clock;
  auto a = RowsShard(Mode::kSync, &clock), b = RowsShard(Mode::kSync, &clock);
  const TensorList init = {{0, 0, 0, 0}, {0, 0, 0}};
  InitShard(a.get(), init);
  InitShard(b.get(), init);
  Slices dense = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  const std::vector<uint64_t> ids0 = {3, 9}, ids1 = {9, 12};
  const std::vector<float> g0 = {1, 2, 3, 4}, g1 = {5, 6, 7, 8};

  Answer answer;
  EXPECT_NE(Start(a.get(), 0, 0, 1, ids0, g0, &answer), 0u);  // waits
  ASSERT_TRUE(a->PushRows(1, "emb", 0, 1, ids1, g1).ok());
  ASSERT_TRUE(PushSlices(a.get(), 0, 0, dense.data).ok());
  EXPECT_FALSE(answer.done);  // worker 1's dense gradient is not in
  ASSERT_TRUE(PushSlices(a.get(), 1, 0, dense.data).ok());
  ASSERT_TRUE(answer.done);
  ASSERT_TRUE(answer.r.ok()) << answer.r.status();
  EXPECT_EQ(answer.r->outcome, PushOutcome::kApplied);
  EXPECT_EQ(answer.r->rows.version, 1);

  ASSERT_TRUE(b->PushRows(0, "emb", 0, 1, ids0, g0).ok());
  ASSERT_TRUE(b->PushRows(1, "emb", 0, 1, ids1, g1).ok());
  ASSERT_TRUE(PushSlices(b.get(), 0, 0, dense.data).ok());
  ASSERT_TRUE(PushSlices(b.get(), 1, 0, dense.data).ok());
  absl::StatusOr<RowsResult> twin = b->PullRows(0, "emb", ids0);
  ASSERT_TRUE(twin.ok());
  EXPECT_EQ(answer.r->rows.values, twin->values);

  // A retry after the close: a duplicate, answered at once with the rows.
  absl::StatusOr<RowsPushPullResult> again = Now(a.get(), 0, 0, 1, ids0, g0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, PushOutcome::kDuplicate);
  EXPECT_EQ(again->rows.values, twin->values);
  // A retry while the step is open waits as the first call did.
  Answer open;
  ASSERT_TRUE(PushSlices(a.get(), 1, 1, dense.data).ok());
  EXPECT_NE(Start(a.get(), 0, 1, 2, ids0, g0, &open), 0u);
  Answer retry;
  EXPECT_NE(Start(a.get(), 0, 1, 2, ids0, g0, &retry), 0u);
  ASSERT_TRUE(PushSlices(a.get(), 0, 1, dense.data).ok());
  ASSERT_TRUE(open.done && retry.done);
  ASSERT_TRUE(open.r.ok() && retry.r.ok());
  EXPECT_EQ(open.r->rows.values, retry.r->rows.values);
  EXPECT_EQ(retry.r->rows.version, 2);
  // A push for a step not open yet is refused at once.
  absl::StatusOr<RowsPushPullResult> ahead = Now(a.get(), 0, 5, 3, ids0, g0);
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Sync: a step that closes without the worker's dense gradient (its lease
// ran out) drops its rows, and the answer says so, with the rows unchanged.
TEST(ShardRows, SyncPushPullRowsSaysWhenTheStepDroppedItsRows) {
  FakeClock clock;
  auto a = RowsShard(Mode::kSync, &clock, absl::Milliseconds(300));
  InitShard(a.get(), {{0, 0, 0, 0}, {0, 0, 0}});
  ASSERT_TRUE(a->Register(1, 2).ok());
  const std::vector<uint64_t> ids = {4};
  absl::StatusOr<RowsResult> before = a->PullRows(1, "emb", ids);
  ASSERT_TRUE(before.ok());
  Answer answer;
  EXPECT_NE(Start(a.get(), 0, 0, 1, ids, {1, 1}, &answer), 0u);
  Slices dense = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  clock.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(PushSlices(a.get(), 1, 0, dense.data).ok());
  EXPECT_FALSE(answer.done);
  clock.Advance(absl::Milliseconds(100));  // worker 0's lease ends: the step closes
  ASSERT_TRUE(answer.done);
  ASSERT_TRUE(answer.r.ok()) << answer.r.status();
  EXPECT_EQ(answer.r->outcome, PushOutcome::kDropped);
  EXPECT_EQ(answer.r->rows.version, 1);
  EXPECT_EQ(answer.r->rows.values, before->values);
}

// Sync: a wait ends at its deadline, on cancel or at close, with the
// matching error, and a step closing after it is not disturbed.
TEST(ShardRows, SyncPushPullRowsWaitEndsByDeadlineCancelAndClose) {
  FakeClock clock;
  auto a = RowsShard(Mode::kSync, &clock);
  InitShard(a.get(), {{0, 0, 0, 0}, {0, 0, 0}});
  Answer late, cancelled, closed;
  EXPECT_NE(Start(a.get(), 0, 0, 1, {1}, {1, 1}, &late, absl::Seconds(1)), 0u);
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(late.done);
  EXPECT_EQ(late.r.status().code(), absl::StatusCode::kDeadlineExceeded);
  const uint64_t ticket = Start(a.get(), 0, 0, 1, {1}, {1, 1}, &cancelled);  // a retry: held
  ASSERT_NE(ticket, 0u);
  a->CancelWait(ticket);
  ASSERT_TRUE(cancelled.done);
  EXPECT_EQ(cancelled.r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_NE(Start(a.get(), 0, 0, 1, {1}, {1, 1}, &closed), 0u);
  Slices dense = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(a.get(), 0, 0, dense.data).ok());
  a->Close();
  ASSERT_TRUE(closed.done);
  EXPECT_EQ(closed.r.status().code(), absl::StatusCode::kUnavailable);
  Answer after;
  EXPECT_EQ(Start(a.get(), 0, 0, 1, {1}, {1, 1}, &after), 0u);
  EXPECT_EQ(after.r.status().code(), absl::StatusCode::kUnavailable);
}

// PullRowsAt: the rows once the version is there, read at the close that
// brings it; at once when it is there already; errors at once.
TEST(ShardRows, PullRowsAtWaitsForTheVersionAndReadsAtTheClose) {
  FakeClock clock;
  auto a = RowsShard(Mode::kSync, &clock);
  InitShard(a.get(), {{0, 0, 0, 0}, {0, 0, 0}});
  Slices dense = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  const std::vector<uint64_t> ids = {2, 8};
  struct Rows {
    bool done = false;
    absl::StatusOr<RowsResult> r = absl::UnknownError("not answered");
  };
  const auto pull_at = [&](int64_t min_version, Rows* out, const char* table = "emb") {
    return a->PullRowsAt(1, table, ids, min_version, absl::Seconds(5),
                         [out](absl::StatusOr<RowsResult> r) {
                           out->done = true;
                           out->r = std::move(r);
                         });
  };
  Rows at1, at2, now, bad;
  EXPECT_NE(pull_at(1, &at1), 0u);
  EXPECT_NE(pull_at(2, &at2), 0u);
  ASSERT_TRUE(a->PushRows(0, "emb", 0, 1, ids, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushSlices(a.get(), 0, 0, dense.data).ok());
  ASSERT_TRUE(PushSlices(a.get(), 1, 0, dense.data).ok());
  ASSERT_TRUE(at1.done);
  EXPECT_FALSE(at2.done);
  ASSERT_TRUE(at1.r.ok()) << at1.r.status();
  EXPECT_EQ(at1.r->version, 1);
  absl::StatusOr<RowsResult> after = a->PullRows(1, "emb", ids);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(at1.r->values, after->values);
  // The rows of step 1's close, not of a later one.
  ASSERT_TRUE(a->PushRows(0, "emb", 1, 2, ids, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushSlices(a.get(), 0, 1, dense.data).ok());
  ASSERT_TRUE(PushSlices(a.get(), 1, 1, dense.data).ok());
  ASSERT_TRUE(at2.done && at2.r.ok());
  EXPECT_EQ(at2.r->version, 2);
  EXPECT_NE(at2.r->values, at1.r->values);
  EXPECT_EQ(pull_at(1, &now), 0u);
  ASSERT_TRUE(now.done && now.r.ok());
  EXPECT_EQ(now.r->values, at2.r->values);
  EXPECT_EQ(pull_at(9, &bad, "nope"), 0u);
  EXPECT_EQ(bad.r.status().code(), absl::StatusCode::kNotFound);
  Rows late;
  EXPECT_NE(pull_at(9, &late), 0u);
  clock.Advance(absl::Seconds(5));
  ASSERT_TRUE(late.done);
  EXPECT_EQ(late.r.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ShardRows, PushPullRowsRefusesBadInput) {
  FakeClock clock;
  auto async = RowsShard(Mode::kAsync, &clock);
  EXPECT_EQ(Now(async.get(), 0, 0, 1, {1}, {1, 1}).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(async->PushPullRows(0, "nope", 0, 2, {1}, {1, 1}, absl::ZeroDuration(),
                                [](absl::StatusOr<RowsPushPullResult> r) {
                                  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
                                }),
            0u);
  EXPECT_EQ(Now(async.get(), 0, 0, 3, {1}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // one float for a row of two
  EXPECT_EQ(Now(async.get(), 0, 0, 4, {1, 1}, {1, 1, 1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // a repeated id
  EXPECT_EQ(Now(async.get(), 5, 0, 5, {1}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no such worker
  EXPECT_EQ(Now(async.get(), 0, -1, 6, {1}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);  // a negative version
}

}  // namespace
}  // namespace ps
