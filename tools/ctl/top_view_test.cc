#include "tools/ctl/top_view.h"

#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

const std::vector<int64_t> kBounds = {100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

void SetHistogram(const std::vector<int64_t>& counts, v1::LatencyHistogram* h) {
  h->Clear();
  int64_t total = 0;
  for (int64_t b : kBounds) h->add_bounds_micros(b);
  for (int64_t c : counts) {
    h->add_counts(c);
    total += c;
  }
  h->set_count(total);
}

// A sync shard of 3 workers at `version`, with `bytes` in and out.
v1::StatusResponse SyncShard(int shard_id, int64_t version, int64_t bytes) {
  v1::StatusResponse r;
  r.set_mode(v1::MODE_SYNC);
  r.set_shard_id(shard_id);
  r.set_num_shards(2);
  r.set_num_workers(3);
  r.set_initialized(true);
  r.set_version(version);
  r.mutable_incarnation()->set_run_id(7);
  r.mutable_incarnation()->set_start(1);
  r.set_worker_timeout_ms(10000);
  for (int w : {0, 1, 2}) r.add_workers_seen(w);
  for (int w : {0, 1}) r.add_live_workers(w);
  r.add_dropped_workers(2);
  r.set_bytes_received(bytes);
  r.set_bytes_sent(2 * bytes);
  r.set_waiting_calls(1);
  SetHistogram({0, 0, 0, 0, 0, 0, 0, 0}, r.mutable_push_latency());
  SetHistogram({0, 0, 0, 0, 0, 0, 0, 0}, r.mutable_pull_latency());
  return r;
}

TopPoll Poll(absl::Time t, std::vector<absl::StatusOr<v1::StatusResponse>> replies) {
  TopPoll p;
  p.time = t;
  for (size_t i = 0; i < replies.size(); ++i) p.servers.push_back("h:" + std::to_string(4000 + i));
  p.replies = std::move(replies);
  return p;
}

// The cells of the line whose first cell is `first` (split on spaces).
std::vector<std::string> Row(const std::vector<std::string>& lines, const std::string& first,
                             const std::string& second = "") {
  for (const std::string& line : lines) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() > 1 && cells[0] == first && (second.empty() || cells[1] == second)) {
      return cells;
    }
  }
  ADD_FAILURE() << "no row " << first << " " << second << " in:\n" << absl::StrJoin(lines, "\n");
  return {};
}

TEST(BucketQuantileMicros, IsTheUpperBoundOfTheBucketHoldingTheRank) {
  // 90 calls <= 100us, 9 <= 1ms, 1 <= 10ms.
  const std::vector<int64_t> counts = {90, 9, 1, 0, 0, 0, 0, 0};
  EXPECT_THAT(BucketQuantileMicros(kBounds, counts, 0.5), Optional(100));
  EXPECT_THAT(BucketQuantileMicros(kBounds, counts, 0.9), Optional(100));
  EXPECT_THAT(BucketQuantileMicros(kBounds, counts, 0.91), Optional(1000));
  EXPECT_THAT(BucketQuantileMicros(kBounds, counts, 0.99), Optional(1000));
  EXPECT_THAT(BucketQuantileMicros(kBounds, counts, 1.0), Optional(10000));
}

TEST(BucketQuantileMicros, OpenBucketIsMaxAndEmptyOrMisshapenIsNone) {
  EXPECT_THAT(BucketQuantileMicros(kBounds, {0, 0, 0, 0, 0, 0, 0, 3}, 0.5), Optional(INT64_MAX));
  EXPECT_EQ(BucketQuantileMicros(kBounds, {0, 0, 0, 0, 0, 0, 0, 0}, 0.5), std::nullopt);
  EXPECT_EQ(BucketQuantileMicros(kBounds, {1, 2}, 0.5), std::nullopt);
}

TEST(TopView, EmptyBeforeTheFirstPoll) {
  TopView view;
  EXPECT_TRUE(view.Render().empty());
}

TEST(TopView, FirstPollHasNoRatesButLifetimeLatencies) {
  TopView view;
  v1::StatusResponse r = SyncShard(0, 10, 1000);
  SetHistogram({0, 4, 0, 0, 0, 0, 0, 0}, r.mutable_push_latency());
  view.Add(Poll(absl::UnixEpoch(), {r}));
  const std::vector<std::string> lines = view.Render();
  EXPECT_THAT(Row(lines, "SHARD"),
              ElementsAre("SHARD", "SERVER", "MODE", "VERSION", "STEPS/S", "LIVE", "DROPPED",
                          "WAITING", "PUSH_P50", "PUSH_P99", "PULL_P50", "PULL_P99", "IN_B/S",
                          "OUT_B/S"));
  EXPECT_THAT(Row(lines, "0"), ElementsAre("0", "h:4000", "sync", "10", "-", "2", "1", "1", "1ms",
                                           "1ms", "-", "-", "-", "-"));
}

TEST(TopView, QuantilesUseTheBoundsTheReplyLists) {
  v1::StatusResponse r = SyncShard(0, 1, 0);
  v1::LatencyHistogram* h = r.mutable_push_latency();
  h->Clear();
  for (int64_t b : {50, 250, 2500, 250000, 2500000}) h->add_bounds_micros(b);
  for (int64_t c : {0, 0, 60, 0, 0, 2}) h->add_counts(c);  // the last: +Inf
  v1::LatencyHistogram* pull = r.mutable_pull_latency();
  pull->Clear();
  for (int64_t b : {50, 250, 2500, 250000, 2500000}) pull->add_bounds_micros(b);
  for (int64_t c : {0, 1, 0, 0, 1, 0}) pull->add_counts(c);
  TopView view;
  view.Add(Poll(absl::UnixEpoch(), {r}));
  const std::vector<std::string> row = Row(view.Render(), "0");
  ASSERT_EQ(row.size(), 14u);
  EXPECT_EQ(row[8], "2.5ms");
  EXPECT_EQ(row[9], "+Inf");
  EXPECT_EQ(row[10], "250us");
  EXPECT_EQ(row[11], "2.5s");
}

TEST(TopView, RatesAndQuantilesAreOverTheTimeBetweenPolls) {
  TopView view;
  const absl::Time t0 = absl::UnixEpoch();
  v1::StatusResponse a = SyncShard(0, 10, 1000);
  SetHistogram({0, 0, 0, 0, 0, 5, 0, 0}, a.mutable_push_latency());  // old, slow pushes
  SetHistogram({100, 0, 0, 0, 0, 0, 0, 0}, a.mutable_pull_latency());
  view.Add(Poll(t0, {a}));
  v1::StatusResponse b = SyncShard(0, 30, 1000 + 4 * 1000 * 1000);
  // Since the last poll: 100 pushes, 98 of them <= 1ms, 2 <= 100ms; pulls:
  // 50 <= 100us, 50 <= 10ms.
  SetHistogram({0, 98, 0, 2, 0, 5, 0, 0}, b.mutable_push_latency());
  SetHistogram({150, 0, 50, 0, 0, 0, 0, 0}, b.mutable_pull_latency());
  view.Add(Poll(t0 + absl::Seconds(2), {b}));
  EXPECT_THAT(Row(view.Render(), "0"),
              ElementsAre("0", "h:4000", "sync", "30", "10.0", "2", "1", "1", "1ms", "100ms",
                          "100us", "10ms", "2.0M", "4.0M"));
}

TEST(TopView, ShardThatDoesNotAnswerIsDownNotACrash) {
  TopView view;
  view.Add(Poll(absl::UnixEpoch(), {SyncShard(0, 5, 0), SyncShard(1, 5, 0)}));
  view.Add(Poll(absl::UnixEpoch() + absl::Seconds(1),
                {SyncShard(0, 6, 0), absl::UnavailableError("h:4001: connection refused")}));
  const std::vector<std::string> lines = view.Render();
  EXPECT_THAT(Row(lines, "-", "h:4001"), ElementsAre("-", "h:4001", "DOWN", "-", "-", "-", "-",
                                                     "-", "-", "-", "-", "-", "-", "-"));
  EXPECT_THAT(absl::StrJoin(lines, "\n"),
              HasSubstr("h:4001 DOWN: UNAVAILABLE: h:4001: connection refused"));
  EXPECT_THAT(Row(lines, "0"), testing::Contains("1.0"));  // steps/s of the shard that answered
}

TEST(TopView, RefusedAndFailedCallsAreNamedApart) {
  TopView view;
  view.Add(Poll(absl::UnixEpoch(),
                {absl::PermissionDeniedError("h:4000: worker-0 may not call GetStatus"),
                 absl::InternalError("h:4001: boom")}));
  const std::vector<std::string> lines = view.Render();
  EXPECT_EQ(Row(lines, "-", "h:4000")[2], "DENIED");
  EXPECT_EQ(Row(lines, "-", "h:4001")[2], "ERROR");
  EXPECT_THAT(absl::StrJoin(lines, "\n"), HasSubstr("h:4000 DENIED: PERMISSION_DENIED: h:4000"));
}

TEST(TopView, EveryShardDownStillRenders) {
  TopView view;
  view.Add(Poll(absl::UnixEpoch(), {absl::DeadlineExceededError("h:4000: no answer")}));
  const std::vector<std::string> lines = view.Render();
  ASSERT_EQ(lines.size(), 3u);  // header, the row, its error; no workers
  EXPECT_THAT(lines[2], HasSubstr("DEADLINE_EXCEEDED"));
}

TEST(TopView, RestartedServerHasNoRates) {
  TopView view;
  view.Add(Poll(absl::UnixEpoch(), {SyncShard(0, 50, 5000)}));
  v1::StatusResponse restarted = SyncShard(0, 40, 0);
  restarted.mutable_incarnation()->set_start(2);
  view.Add(Poll(absl::UnixEpoch() + absl::Seconds(1), {restarted}));
  const std::vector<std::string> row = Row(view.Render(), "0");
  ASSERT_EQ(row.size(), 14u);
  EXPECT_EQ(row[4], "-");   // steps/s
  EXPECT_EQ(row[12], "-");  // bytes in
}

TEST(TopView, SyncWorkerStepsAndLagBehindTheNewest) {
  TopView view;
  v1::StatusResponse r = SyncShard(0, 8, 0);
  r.add_waiting_for(1);  // worker 0 pushed for step 8, worker 1 has not
  view.Add(Poll(absl::UnixEpoch(), {r}));
  const std::vector<std::string> lines = view.Render();
  EXPECT_THAT(Row(lines, "WORKER"), ElementsAre("WORKER", "STATE", "STEP", "LAG"));
  EXPECT_THAT(Row(lines, "0", "live"), ElementsAre("0", "live", "9", "0"));
  EXPECT_THAT(Row(lines, "1", "live"), ElementsAre("1", "live", "8", "1"));
  EXPECT_THAT(Row(lines, "2", "dropped"), ElementsAre("2", "dropped", "-", "-"));
}

TEST(TopView, WithoutLeasesEverySeenWorkerIsLive) {
  v1::StatusResponse r = SyncShard(0, 3, 0);
  r.set_worker_timeout_ms(0);
  r.clear_live_workers();  // what a shard without leases reports
  r.clear_dropped_workers();
  r.clear_workers_seen();
  r.add_workers_seen(1);
  TopView view;
  view.Add(Poll(absl::UnixEpoch(), {r}));
  const std::vector<std::string> lines = view.Render();
  EXPECT_EQ(Row(lines, "0", "h:4000")[5], "1");  // LIVE
  EXPECT_THAT(Row(lines, "1", "live"), ElementsAre("1", "live", "4", "0"));
  EXPECT_THAT(Row(lines, "0", "-"), ElementsAre("0", "-", "-", "-"));  // never seen
}

TEST(TopView, WorkerStepIsItsLowestOverShards) {
  // SSP clocks on two shards; async push counts work the same way.
  v1::StatusResponse a = SyncShard(0, 20, 0);
  a.set_mode(v1::MODE_SSP);
  for (int64_t s : {7, 5, 9}) a.add_worker_steps(s);
  v1::StatusResponse b = a;
  b.set_shard_id(1);
  b.set_worker_steps(0, 6);
  v1::StatusResponse c = SyncShard(2, 20, 0);
  c.set_mode(v1::MODE_ASYNC);
  for (int64_t s : {8, 5, 9}) c.add_worker_last_seq(s);
  TopView view;
  view.Add(Poll(absl::UnixEpoch(), {a, b, c}));
  const std::vector<std::string> lines = view.Render();
  EXPECT_THAT(Row(lines, "0", "live"), ElementsAre("0", "live", "6", "3"));
  EXPECT_THAT(Row(lines, "1", "live"), ElementsAre("1", "live", "5", "4"));
  EXPECT_THAT(Row(lines, "2", "dropped"), ElementsAre("2", "dropped", "9", "0"));
}

}  // namespace
}  // namespace ps
