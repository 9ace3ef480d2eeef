// EmbeddingTable's eviction beyond LRU: by ttl (rows not updated within it)
// and by score (L2 norm under min_l2), a few slots per call.
#include <cstdint>
#include <memory>
#include <vector>

#include "common/embedding_shard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/embedding_table.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

EmbeddingTableOptions Options() {
  EmbeddingTableOptions o;
  o.name = "items";
  o.dim = 4;
  o.seed = 9;
  o.init_scale = 0.01f;
  o.optimizer.kind = SparseOptimizerKind::kSgd;
  o.optimizer.lr = 1.0f;
  return o;
}

std::unique_ptr<EmbeddingTable> Make(const EmbeddingTableOptions& o) {
  auto t = EmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<float> Pull(EmbeddingTable* t, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * 4);
  EXPECT_TRUE(t->Pull(ids, out.data()).ok());
  return out;
}

std::vector<float> Initial(uint64_t id) {
  std::vector<float> row(4);
  InitRow(9, id, 4, 0.01f, row.data());
  return row;
}

std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> ids;
  for (uint64_t i = from; i < to; ++i) ids.push_back(i);
  return ids;
}

TEST(EmbeddingTableEviction, OptionsAreChecked) {
  EmbeddingTableOptions o = Options();
  o.ttl = -1;
  EXPECT_THAT(EmbeddingTable::Create(o).status().message(), HasSubstr("ttl"));
  o.ttl = int64_t{1} << 31;
  EXPECT_FALSE(EmbeddingTable::Create(o).ok());
  o.ttl = 0;
  o.min_l2 = -1;
  EXPECT_THAT(EmbeddingTable::Create(o).status().message(), HasSubstr("min_l2"));
}

TEST(EmbeddingTableEviction, TtlEvictsRowsNotUpdatedWithinItAndKeepsTheOthers) {
  for (bool lru : {false, true}) {
    EmbeddingTableOptions o = Options();
    o.ttl = 5;
    o.evict_lru = lru;
    std::unique_ptr<EmbeddingTable> t = Make(o);
    t->SetClock(0);
    Pull(t.get(), Range(0, 100));  // made at 0 (the sweep ran first: nothing to look at)
    t->SetClock(3);
    const std::vector<float> grads(10 * 4, -1.0f);
    ASSERT_TRUE(t->Apply(Range(0, 10), grads.data()).ok());  // 0..9 updated at 3
    const std::vector<float> learned = Pull(t.get(), {5});
    t->SetClock(7);  // 10..99 are 7 old, 0..9 are 4
    // Each call looks at 1 + 16 slots: 101 slots in 6 calls.
    for (int call = 0; call < 6; ++call) Pull(t.get(), {1000});
    EXPECT_EQ(t->num_rows(), 11) << lru;
    EXPECT_EQ(t->counters().evicted_ttl, 90);
    EXPECT_EQ(Pull(t.get(), {5}), learned);       // kept with what it learned
    EXPECT_EQ(Pull(t.get(), {50}), Initial(50));  // made anew
    // A checkpoint holds the rows left, and only them, with their stamps:
    // a restored row keeps its age.
    absl::StatusOr<EmbeddingTableContents> c = t->Export();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->ids.size(), 12u);
    EXPECT_EQ(c->stamps.size(), 12u);
    std::unique_ptr<EmbeddingTable> restored = Make(o);
    ASSERT_TRUE(restored->Import(*c).ok());
    restored->SetClock(7);
    EXPECT_EQ(Pull(restored.get(), {5}), learned);
    restored->SetClock(9);  // row 5, updated at 3, is past the ttl now
    for (int call = 0; call < 2; ++call) Pull(restored.get(), {2000 + call});
    EXPECT_EQ(Pull(restored.get(), {5}), Initial(5)) << lru;
  }
}

TEST(EmbeddingTableEviction, EachCallLooksAtAFewRowsOnly) {
  EmbeddingTableOptions o = Options();
  o.ttl = 1;
  std::unique_ptr<EmbeddingTable> t = Make(o);
  Pull(t.get(), Range(0, 1000));
  t->SetClock(100);                  // every row expired
  Pull(t.get(), Range(5000, 5010));  // looks at 10 + 16 slots first
  EXPECT_EQ(t->counters().evicted_ttl, 26);
  EXPECT_EQ(t->num_rows(), 1000 - 26 + 10);
}

TEST(EmbeddingTableEviction, ScoreEvictsRowsWhoseNormIsBelowTheThreshold) {
  EmbeddingTableOptions o = Options();
  o.min_l2 = 0.5f;  // new rows (init_scale 0.01) are under it until they learn
  std::unique_ptr<EmbeddingTable> t = Make(o);
  Pull(t.get(), Range(0, 50));
  const std::vector<float> grads(5 * 4, -1.0f);  // sgd, lr 1: +1 each value
  ASSERT_TRUE(t->Apply(Range(0, 5), grads.data()).ok());
  for (int call = 0; call < 4; ++call) Pull(t.get(), {});  // 16 slots a call
  EXPECT_EQ(t->num_rows(), 5);
  // 0..4 too, once: the Apply's own look (5 + 16 slots) came first, and
  // they came back as they were (a row that never learned is its InitRow).
  EXPECT_EQ(t->counters().evicted_score, 50);
  const std::vector<float> row = Pull(t.get(), {3});
  for (int j = 0; j < 4; ++j) EXPECT_FLOAT_EQ(row[j], Initial(3)[j] + 1.0f);
  EXPECT_EQ(t->counters().evicted_ttl, 0);
}

}  // namespace
}  // namespace ps
