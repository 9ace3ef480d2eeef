// Incremental checkpoints' rows: a table's full export and then its
// ExportChanges, applied one after another by ApplyDelta, give the table's
// rows bit for bit (the property the checkpoint chain rests on), over random
// traffic with every way a row is made, updated and removed; and
// ApplyDelta's own rules.
#include "server/checkpoint/checkpoint_delta.h"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/embedding_table.h"
#include "server/core/table_testing.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kDim = 3;

ShardState StateOf(const EmbeddingTableOptions& o, int64_t version, EmbeddingTableContents rows,
                   std::vector<uint64_t> removed = {}, int64_t delta_base = -1) {
  ShardState s;
  s.version = version;
  s.delta_base = delta_base;
  EmbeddingTableOptions saved = o;
  saved.tier = nullptr;
  s.tables.push_back(EmbeddingTableState{saved, std::move(rows), std::move(removed)});
  return s;
}

struct Variant {
  std::string name;
  bool evict_lru = false;
  int64_t max_rows = 0;
  bool tier = false;
  int64_t ttl = 0;
  float min_l2 = 0;
  SparseOptimizerKind optimizer = SparseOptimizerKind::kAdam;
};

class ChangesChain : public testing::TestWithParam<Variant> {};

TEST_P(ChangesChain, FullThenDeltasAreTheTableBitForBit) {
  const Variant& v = GetParam();
  MemoryRowTier tier;
  EmbeddingTableOptions o;
  o.name = "t";
  o.dim = kDim;
  o.seed = 4;
  o.init_scale = 0.5f;
  o.optimizer.kind = v.optimizer;
  o.optimizer.lr = 0.1f;
  o.evict_lru = v.evict_lru;
  o.max_rows = v.max_rows;
  o.ttl = v.ttl;
  o.min_l2 = v.min_l2;
  o.track_changes = true;
  if (v.tier) o.tier = &tier;
  auto made = EmbeddingTable::Create(o);
  ASSERT_TRUE(made.ok()) << made.status();
  EmbeddingTable& t = **made;

  std::mt19937_64 rng(11);
  const auto traffic = [&](int calls) {
    for (int c = 0; c < calls; ++c) {
      std::vector<uint64_t> ids;
      for (uint64_t id = 0; id < 400; ++id) {
        if (rng() % 20 == 0) ids.push_back(id);  // ascending, distinct
      }
      if (rng() % 2 == 0) {
        std::vector<float> out(ids.size() * kDim);
        ASSERT_TRUE(t.Pull(ids, out.data()).ok());
      } else {
        std::vector<float> g(ids.size() * kDim);
        for (float& x : g) x = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 8;
        ASSERT_TRUE(t.Apply(ids, g.data()).ok());
      }
    }
  };
  int64_t clock = 0;
  t.SetClock(clock);
  traffic(30);
  ShardState restored = StateOf(o, 1, *t.Export());
  t.ResetChanges();
  int64_t changed_rows = 0, removed_rows = 0;
  for (int64_t version = 2; version < 12; ++version) {
    t.SetClock(++clock);
    traffic(5);
    absl::StatusOr<EmbeddingTable::Changes> changes = t.ExportChanges();
    ASSERT_TRUE(changes.ok()) << changes.status();
    t.ResetChanges();
    changed_rows += static_cast<int64_t>(changes->changed.ids.size());
    removed_rows += static_cast<int64_t>(changes->removed.size());
    ASSERT_TRUE(ApplyDelta(StateOf(o, version, std::move(changes->changed),
                                   std::move(changes->removed), version - 1),
                           &restored)
                    .ok());
    ASSERT_EQ(restored.version, version);
    ASSERT_EQ(restored.delta_base, -1);  // stays full
    ASSERT_EQ(RowBits(restored.tables[0].contents), RowBits(*t.Export())) << "version " << version;
  }
  EXPECT_GT(changed_rows, 0);
  if (v.max_rows > 0 && !v.tier) EXPECT_GT(removed_rows, 0) << "the variant removes rows";
  if (v.ttl > 0 || v.min_l2 > 0) EXPECT_GT(removed_rows, 0) << "the variant removes rows";
  // And the restored rows import into a table that answers the same.
  EmbeddingTableOptions fresh = o;
  MemoryRowTier tier2;
  if (v.tier) fresh.tier = &tier2;
  auto other = EmbeddingTable::Create(fresh);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Import(restored.tables[0].contents).ok());
  EXPECT_EQ(RowBits(*(*other)->Export()), RowBits(*t.Export()));
}

INSTANTIATE_TEST_SUITE_P(
    Tables, ChangesChain,
    testing::Values(Variant{"plain"},
                    Variant{"sgd", false, 0, false, 0, 0, SparseOptimizerKind::kSgd},
                    Variant{"lru", true, 60}, Variant{"tier", true, 40, true},
                    Variant{"ttl", false, 0, false, 2}, Variant{"score", false, 0, false, 0, 0.45f},
                    Variant{"tier_ttl", true, 40, true, 2}),
    [](const testing::TestParamInfo<Variant>& p) { return p.param.name; });

TEST(ApplyDelta, TwoDeltasFoldIntoOneOnTheFirstsBase) {
  EmbeddingTableOptions o;
  o.name = "t";
  o.dim = kDim;
  o.optimizer.kind = SparseOptimizerKind::kSgd;
  const auto rows = [](std::vector<uint64_t> ids) {
    EmbeddingTableContents c;
    c.dim = kDim;
    for (uint64_t id : ids) {
      c.ids.push_back(id);
      for (int j = 0; j < kDim; ++j) c.values.push_back(static_cast<float>(id));
    }
    return c;
  };
  ShardState first = StateOf(o, 20, rows({1, 2}), {5, 6}, 10);
  ShardState second = StateOf(o, 30, rows({5, 3}), {2, 7}, 20);
  ASSERT_TRUE(ApplyDelta(second, &first).ok());
  EXPECT_EQ(first.version, 30);
  EXPECT_EQ(first.delta_base, 10);
  EXPECT_THAT(first.tables[0].contents.ids, ElementsAre(1, 5, 3));
  EXPECT_THAT(first.tables[0].removed, ElementsAre(2, 6, 7));  // 5 came back
  // Applied to a full state of version 10, the fold is both in turn.
  ShardState full = StateOf(o, 10, rows({1, 2, 5, 6, 7, 8}));
  ShardState stepwise = full;
  ASSERT_TRUE(ApplyDelta(StateOf(o, 20, rows({1, 2}), {5, 6}, 10), &stepwise).ok());
  ASSERT_TRUE(ApplyDelta(second, &stepwise).ok());
  ASSERT_TRUE(ApplyDelta(first, &full).ok());
  EXPECT_EQ(RowBits(full.tables[0].contents), RowBits(stepwise.tables[0].contents));
  EXPECT_THAT(full.tables[0].contents.ids, ElementsAre(1, 5, 8, 3));
}

TEST(ApplyDelta, RefusesABrokenChainAndOtherTables) {
  EmbeddingTableOptions o;
  o.name = "t";
  o.dim = kDim;
  ShardState base = StateOf(o, 10, EmbeddingTableContents{kDim});
  ShardState delta = StateOf(o, 30, EmbeddingTableContents{kDim}, {}, 20);
  absl::Status s = ApplyDelta(delta, &base);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("on version 20, not 10"));
  EXPECT_EQ(base.version, 10);
  EXPECT_EQ(ApplyDelta(base, &delta).code(), absl::StatusCode::kInvalidArgument);  // not a delta
  delta.delta_base = 10;
  delta.tables[0].options.name = "u";
  EXPECT_THAT(ApplyDelta(delta, &base).message(), HasSubstr("\"u\""));
  delta.tables[0].options.name = "t";
  delta.tables[0].contents.dim = kDim + 1;
  EXPECT_EQ(ApplyDelta(delta, &base).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(base.version, 10);
}

}  // namespace
}  // namespace ps
