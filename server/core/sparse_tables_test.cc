// SparseTables' rules without threads or RPCs: declaration, sync steps
// (held rows applied with the step's accepted dense gradients, dropped and
// duplicate pushes) and async seqs. A checkpoint round trip of a shard with
// a table is in server/checkpoint/embedding_checkpoint_test.cc.
#include "server/core/sparse_tables.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/embedding_shard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/row_tier.h"
#include "server/core/shard.h"
#include "server/core/table_testing.h"

namespace ps {
namespace {

constexpr int kDim = 2;
const TableSpec kSpec{"t", kDim, 3, 0.25f};

SparseTablesOptions Sgd() {
  SparseTablesOptions o;
  o.optimizer.kind = SparseOptimizerKind::kSgd;
  o.optimizer.lr = 1.0f;
  return o;
}

std::vector<float> Row(SparseTables& t, uint64_t id) {
  std::vector<float> out;
  EXPECT_TRUE(t.Pull("t", {&id, 1}, &out).ok());
  return out;
}

std::vector<float> Init(uint64_t id) {
  std::vector<float> r(kDim);
  InitRow(kSpec.seed, id, kDim, kSpec.init_scale, r.data());
  return r;
}

TEST(SparseTables, DeclaresOnceThenChecks) {
  SparseTables t(Sgd(), Mode::kSync, 0, 1, 2, true);
  EXPECT_TRUE(t.Declare({}).ok());
  EXPECT_TRUE(t.specs().empty());
  ASSERT_TRUE(t.Declare({kSpec}).ok());
  EXPECT_TRUE(t.Declare({kSpec}).ok());
  EXPECT_TRUE(t.Declare({}).ok());  // declares nothing, checks nothing
  TableSpec other = kSpec;
  other.seed = 4;
  EXPECT_EQ(t.Declare({other}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.Declare({kSpec, TableSpec{"u", 1, 0, 0}}).code(),
            absl::StatusCode::kFailedPrecondition);
  SparseTables bad(Sgd(), Mode::kSync, 0, 1, 2, true);
  EXPECT_EQ(bad.Declare({kSpec, kSpec}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.Declare({TableSpec{"z", 0, 0, 0}}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SparseTables, SyncAppliesOnlyTheRowsOfWorkersInTheStep) {
  SparseTables t(Sgd(), Mode::kSync, 0, 1, 3, true);
  ASSERT_TRUE(t.Declare({kSpec}).ok());
  const std::vector<uint64_t> ids = {7};
  const std::vector<float> g0 = {1, 2}, g1 = {3, 5}, g2 = {100, 100};
  for (int w = 0; w < 3; ++w) {
    const std::vector<float>& g = w == 0 ? g0 : w == 1 ? g1 : g2;
    auto r = t.Push(w, "t", 0, 0, 0, ids, g);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, PushOutcome::kApplied);
  }
  EXPECT_EQ(*t.Push(0, "t", 0, 0, 0, ids, g0), PushOutcome::kDuplicate);
  EXPECT_EQ(Row(t, 7), Init(7));  // held until the step closes
  // The step closes with workers 0 and 1 (a quorum of 2); worker 2's rows
  // are dropped with its dense gradient.
  t.NoteDenseAccepted(0);
  t.NoteDenseAccepted(1);
  EXPECT_TRUE(t.CloseStep(0, 2).empty());
  const std::vector<float> init = Init(7);
  EXPECT_EQ(Row(t, 7), (std::vector<float>{init[0] - (1.0f + 3.0f) / 2.0f,
                                            init[1] - (2.0f + 5.0f) / 2.0f}));
  // Late pushes for step 0: applied ones are duplicates, the rest dropped.
  EXPECT_EQ(*t.Push(1, "t", 0, 0, 1, ids, g1), PushOutcome::kDuplicate);
  EXPECT_EQ(*t.Push(2, "t", 0, 0, 1, ids, g2), PushOutcome::kDropped);
  EXPECT_EQ(t.Push(0, "t", 2, 0, 1, ids, g0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SparseTables, AsyncAndSspApplyAtOnceAndDeduplicateBySeq) {
  for (Mode mode : {Mode::kAsync, Mode::kSsp}) {
    SparseTables t(Sgd(), mode, 0, 1, 2, true);
    ASSERT_TRUE(t.Declare({kSpec}).ok());
    const std::vector<uint64_t> ids = {11};
    const std::vector<float> g = {1, 1};
    EXPECT_EQ(*t.Push(1, "t", 0, 1, 0, ids, g), PushOutcome::kApplied);
    EXPECT_EQ(*t.Push(1, "t", 0, 1, 0, ids, g), PushOutcome::kDuplicate);
    EXPECT_EQ(*t.Push(1, "t", 0, 0, 0, ids, g), PushOutcome::kApplied);  // seq 0: not deduplicated
    const std::vector<float> init = Init(11);
    EXPECT_EQ(Row(t, 11), (std::vector<float>{init[0] - 2, init[1] - 2}));
    EXPECT_EQ(t.LastRowSeqs(), (std::vector<int64_t>{0, 1}));
  }
}

TEST(SparseTables, RefusesWhatIsNotThisShards) {
  SparseTablesOptions o = Sgd();
  o.max_ids_per_request = 3;
  SparseTables t(o, Mode::kAsync, 1, 2, 1, true);
  ASSERT_TRUE(t.Declare({kSpec}).ok());
  uint64_t other = 0;
  while (ShardOfId(other, 2) != 0) ++other;
  std::vector<float> out;
  EXPECT_EQ(t.Pull("t", {&other, 1}, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Pull("x", {}, &out).code(), absl::StatusCode::kNotFound);
  const std::vector<uint64_t> four = {1, 2, 3, 4};
  EXPECT_EQ(t.Pull("t", four, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SparseTables, ABudgetOpensATierPerTableAndLogsItsRefusalsOnce) {
  SparseTablesOptions o = Sgd();
  o.memory_budget_bytes = 1;  // one row
  EXPECT_THAT(std::string(o.Validate().message()), testing::HasSubstr("--table_dir"));
  std::vector<std::string> opened;
  o.make_tier = [&opened](int shard, const std::string& table,
                          int row_floats) -> absl::StatusOr<std::unique_ptr<RowTier>> {
    opened.push_back(table + "@" + std::to_string(shard) + "/" + std::to_string(row_floats));
    auto tier = std::make_unique<MemoryRowTier>();  // takes nothing: a full disk
    tier->fail_put = true;
    return std::unique_ptr<RowTier>(std::move(tier));
  };
  ASSERT_TRUE(o.Validate().ok());
  SparseTables t(o, Mode::kAsync, 0, 1, 1, true);
  ASSERT_TRUE(t.Declare({kSpec}).ok());
  EXPECT_EQ(opened, std::vector<std::string>{"t@0/2"});
  Row(t, 1);
  EXPECT_TRUE(t.TierNews().empty());
  Row(t, 2);  // row 1 cannot leave: kept, past the budget (tried twice)
  Row(t, 3);
  const std::vector<std::string> news = t.TierNews();
  ASSERT_EQ(news.size(), 1u);
  EXPECT_THAT(news[0], testing::HasSubstr("\"t\": the tier refused 4 row writes since start; 3 "
                                          "rows in memory, past --table_memory_budget"));
  EXPECT_THAT(news[0], testing::HasSubstr("No space left on device"));
  Row(t, 4);
  EXPECT_TRUE(t.TierNews().empty());  // the next line after 10,000 more
  const std::vector<TableUsage> usage = t.Usage();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_TRUE(usage[0].tiered);
  EXPECT_EQ(usage[0].rows, 4);
  EXPECT_EQ(usage[0].counters.write_errors, 6);
  EXPECT_EQ(usage[0].counters.created, 4);
}

TEST(SparseTables, ATiersReadErrorsFailTheirCallsAndAreLoggedOnce) {
  SparseTablesOptions o = Sgd();
  o.memory_budget_bytes = 1;
  o.make_tier = [](int, const std::string&, int) -> absl::StatusOr<std::unique_ptr<RowTier>> {
    auto tier = std::make_unique<MemoryRowTier>();  // an I/O error on every read
    tier->fail_get = true;
    return std::unique_ptr<RowTier>(std::move(tier));
  };
  SparseTables t(o, Mode::kAsync, 0, 1, 1, true);
  ASSERT_TRUE(t.Declare({kSpec}).ok());
  std::vector<float> out;
  const std::vector<uint64_t> one = {1};
  EXPECT_EQ(t.Pull("t", one, &out).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(t.Pull("t", one, &out).code(), absl::StatusCode::kUnavailable);
  const std::vector<std::string> news = t.TierNews();
  ASSERT_EQ(news.size(), 1u);
  EXPECT_THAT(news[0], testing::HasSubstr("\"t\": the tier failed 2 calls' reads since start"));
  EXPECT_THAT(news[0], testing::HasSubstr("IO error"));
  EXPECT_TRUE(t.TierNews().empty());
  EXPECT_EQ(t.Usage()[0].counters.read_errors, 2);
}

}  // namespace
}  // namespace ps
