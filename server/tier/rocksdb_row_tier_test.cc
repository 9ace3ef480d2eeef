// RocksDbRowTier alone, and an EmbeddingTable on it: a table whose memory
// holds 5% of its rows answers bit for bit as one that holds them all.
#include "server/tier/rocksdb_row_tier.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

using ::testing::HasSubstr;

std::string TempDir() {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/tier_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

std::unique_ptr<RocksDbRowTier> OpenTier(const std::string& dir, int row_floats) {
  absl::StatusOr<std::unique_ptr<RocksDbRowTier>> t =
      RocksDbRowTier::Open({dir + "/db", row_floats, 0});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<uint32_t> Bits(const float* p, size_t n) {
  std::vector<uint32_t> b(n);
  std::memcpy(b.data(), p, n * sizeof(float));
  return b;
}

TEST(RocksDbRowTier, StoresRowsBitForBitAndScansThemInIdOrder) {
  auto tier = OpenTier(TempDir(), 3);
  ASSERT_NE(tier, nullptr);
  const float nan = std::nanf("0x123");
  ASSERT_TRUE(tier->Put(0xfffffffffffffffful, {1.0f, -0.0f, nan}, 7).ok());
  ASSERT_TRUE(tier->Put(5, {2.0f, 3.0f, 4.0f}, 0).ok());
  ASSERT_TRUE(tier->Put(5, {6.0f, 7.0f, 8.0f}, 2).ok());  // replaces
  float row[3] = {9, 9, 9};
  uint32_t step = 99;
  absl::StatusOr<bool> got = tier->Get(6, absl::MakeSpan(row), &step);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  EXPECT_EQ(row[0], 9.0f);
  got = tier->Get(0xfffffffffffffffful, absl::MakeSpan(row), &step);
  ASSERT_TRUE(got.ok() && *got);
  const float want[3] = {1.0f, -0.0f, nan};
  EXPECT_EQ(Bits(row, 3), Bits(want, 3));
  EXPECT_EQ(step, 7u);
  std::vector<std::pair<uint64_t, uint32_t>> seen;
  ASSERT_TRUE(tier->ForEach([&](uint64_t id, absl::Span<const float> r, uint32_t s) {
                    seen.emplace_back(id, s);
                    if (id == 5) EXPECT_EQ(r[2], 8.0f);
                  })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, uint32_t>>{{5, 2}, {0xfffffffffffffffful, 7}}));
  ASSERT_TRUE(tier->Clear().ok());
  seen.clear();
  ASSERT_TRUE(tier->ForEach([&](uint64_t id, absl::Span<const float>, uint32_t s) {
                    seen.emplace_back(id, s);
                  })
                  .ok());
  EXPECT_TRUE(seen.empty());
  EXPECT_FALSE(tier->Put(1, {1.0f}, 0).ok());  // a row of the wrong size
}

TEST(RocksDbRowTier, OpenEmptiesAnEarlierRunsRows) {
  const std::string dir = TempDir();
  {
    auto tier = OpenTier(dir, 1);
    ASSERT_TRUE(tier->Put(1, {1.0f}, 0).ok());
  }
  auto tier = OpenTier(dir, 1);
  float row[1];
  uint32_t step;
  absl::StatusOr<bool> got = tier->Get(1, absl::MakeSpan(row), &step);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
}

// The rows of `tier`: id -> (row, step).
std::map<uint64_t, std::pair<std::vector<float>, uint32_t>> RowsOf(const RocksDbRowTier& tier) {
  std::map<uint64_t, std::pair<std::vector<float>, uint32_t>> rows;
  EXPECT_TRUE(tier.ForEach([&](uint64_t id, absl::Span<const float> row, uint32_t step) {
                    rows[id] = {std::vector<float>(row.begin(), row.end()), step};
                  })
                  .ok());
  return rows;
}

TEST(RocksDbRowTier, ASnapshotKeepsTheRowsOfItsMomentAndRestoresThem) {
  const std::string dir = TempDir();
  std::unique_ptr<RocksDbRowTier> tier = OpenTier(dir, 2);
  ASSERT_NE(tier, nullptr);
  for (uint64_t id = 0; id < 1000; ++id) {
    ASSERT_TRUE(tier->Put(id, {static_cast<float>(id), -0.5f}, static_cast<uint32_t>(id)).ok());
  }
  const auto then = RowsOf(*tier);
  ASSERT_TRUE(tier->Snapshot(dir + "/snap").ok());  // the writes skipped the log: flushed
  EXPECT_FALSE(tier->Snapshot(dir + "/snap").ok()) << "made over an existing one";
  ASSERT_TRUE(tier->Put(5, {9, 9}, 9).ok());
  ASSERT_TRUE(tier->Delete(6).ok());
  ASSERT_TRUE(tier->Put(5000, {1, 1}, 1).ok());
  EXPECT_NE(RowsOf(*tier), then);
  // Read in place, without opening it for writing.
  std::map<uint64_t, std::pair<std::vector<float>, uint32_t>> read;
  ASSERT_TRUE(ReadRocksDbSnapshot(dir + "/snap", 2,
                                  [&](uint64_t id, absl::Span<const float> row, uint32_t step) {
                                    read[id] = {std::vector<float>(row.begin(), row.end()), step};
                                  })
                  .ok());
  EXPECT_EQ(read, then);
  ASSERT_TRUE(tier->RestoreFrom(dir + "/snap").ok());
  EXPECT_EQ(RowsOf(*tier), then);
  ASSERT_TRUE(tier->Put(7, {0, 0}, 0).ok());  // the restored tier writes; the snapshot stays
  read.clear();
  ASSERT_TRUE(ReadRocksDbSnapshot(dir + "/snap", 2,
                                  [&](uint64_t id, absl::Span<const float> row, uint32_t step) {
                                    read[id] = {std::vector<float>(row.begin(), row.end()), step};
                                  })
                  .ok());
  EXPECT_EQ(read, then);
  // A snapshot that is not there: an error naming it, and an empty tier
  // that still works.
  absl::Status s = tier->RestoreFrom(dir + "/none");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(dir + "/none"));
  EXPECT_TRUE(RowsOf(*tier).empty());
  EXPECT_TRUE(tier->Put(1, {1, 2}, 3).ok());
  EXPECT_FALSE(
      ReadRocksDbSnapshot(dir + "/none", 2, [](uint64_t, absl::Span<const float>, uint32_t) {
      }).ok());
}

TEST(RocksDbRowTier, ADirectoryThatCannotBeMadeIsAnErrorNamingIt) {
  const std::string file = TempDir() + "/a_file";
  std::ofstream(file) << "not a directory";
  absl::StatusOr<std::unique_ptr<RocksDbRowTier>> t = RocksDbRowTier::Open({file + "/db", 4, 0});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(file + "/db"));
  EXPECT_FALSE(RocksDbRowTier::Open({"", 4, 0}).ok());
  EXPECT_FALSE(RocksDbRowTier::Open({file + "/x", 0, 0}).ok());
}

EmbeddingTableOptions TableOptions(SparseOptimizerKind kind) {
  EmbeddingTableOptions o;
  o.name = "ads";
  o.dim = 4;
  o.seed = 3;
  o.init_scale = 0.5f;
  o.optimizer.kind = kind;
  o.optimizer.lr = 0.1f;
  return o;
}

// Floats per row with state, for the tier.
int RowFloats(const EmbeddingTableOptions& o) {
  return o.dim * (1 + o.optimizer.StateFloatsPerElement());
}

// Export sorted by id, as bits: two tables hold the same rows iff equal.
std::map<uint64_t, std::vector<uint32_t>> Rows(const EmbeddingTable& t) {
  absl::StatusOr<EmbeddingTableContents> c = t.Export();
  EXPECT_TRUE(c.ok()) << c.status();
  std::map<uint64_t, std::vector<uint32_t>> rows;
  if (!c.ok()) return rows;
  const size_t dim = c->dim, state = c->ids.empty() ? 0 : c->state.size() / c->ids.size();
  for (size_t i = 0; i < c->ids.size(); ++i) {
    std::vector<uint32_t> r = Bits(c->values.data() + i * dim, dim);
    const std::vector<uint32_t> s = Bits(c->state.data() + i * state, state);
    r.insert(r.end(), s.begin(), s.end());
    if (!c->adam_steps.empty()) r.push_back(c->adam_steps[i]);
    rows[c->ids[i]] = r;
  }
  return rows;
}

TEST(TieredEmbeddingTable, WithFivePercentInMemoryAnswersBitForBitAsAllInMemory) {
  for (SparseOptimizerKind kind : {SparseOptimizerKind::kAdagrad, SparseOptimizerKind::kAdam}) {
    SCOPED_TRACE(SparseOptimizerName(kind));
    const EmbeddingTableOptions all = TableOptions(kind);
    auto tier = OpenTier(TempDir(), RowFloats(all));
    ASSERT_NE(tier, nullptr);
    EmbeddingTableOptions budget = all;
    budget.max_rows = 100;  // of the 2,000 ids below
    budget.evict_lru = true;
    budget.tier = tier.get();
    auto a = *EmbeddingTable::Create(all);
    auto b = *EmbeddingTable::Create(budget);
    std::mt19937_64 rng(42);
    for (int call = 0; call < 400; ++call) {
      std::vector<uint64_t> ids;
      const int n = 1 + static_cast<int>(rng() % 60);
      for (int i = 0; i < n; ++i) ids.push_back(rng() % 2000);
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      std::shuffle(ids.begin(), ids.end(), rng);
      const size_t floats = ids.size() * all.dim;
      if (call % 2 == 0) {
        std::vector<float> ga(floats), gb(floats);
        ASSERT_TRUE(a->Pull(ids, ga.data()).ok());
        ASSERT_TRUE(b->Pull(ids, gb.data()).ok());
        ASSERT_EQ(Bits(ga.data(), floats), Bits(gb.data(), floats)) << "call " << call;
      } else {
        std::vector<float> grads(floats);
        for (float& g : grads) g = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500;
        ASSERT_TRUE(a->Apply(ids, grads.data()).ok());
        const absl::Status applied = b->Apply(ids, grads.data());
        ASSERT_TRUE(applied.ok()) << applied;
      }
      ASSERT_LE(b->num_rows(), 100);
    }
    EXPECT_GT(tier->num_rows(), 1000);
    EXPECT_TRUE(b->tier_error().ok());
    EXPECT_EQ(Rows(*a), Rows(*b));

    // One call of 2,000 ids, 20 times the budget: its rows in memory for
    // the call, the budget's after it.
    std::vector<uint64_t> every(2000);
    for (uint64_t i = 0; i < every.size(); ++i) every[i] = 1999 - i;
    std::vector<float> ga(every.size() * all.dim), gb(ga.size());
    ASSERT_TRUE(a->Pull(every, ga.data()).ok());
    ASSERT_TRUE(b->Pull(every, gb.data()).ok());
    EXPECT_EQ(Bits(ga.data(), ga.size()), Bits(gb.data(), gb.size()));
    EXPECT_EQ(b->num_rows(), 100);
    ASSERT_TRUE(a->Apply(every, ga.data()).ok());  // the rows as gradients
    ASSERT_TRUE(b->Apply(every, gb.data()).ok());
    EXPECT_EQ(b->num_rows(), 100);
    EXPECT_EQ(Rows(*a), Rows(*b));

    // Export then Import into a fresh tiered table: the same rows again.
    auto tier2 = OpenTier(TempDir(), RowFloats(all));
    EmbeddingTableOptions budget2 = budget;
    budget2.tier = tier2.get();
    auto c = *EmbeddingTable::Create(budget2);
    ASSERT_TRUE(c->Import(*b->Export()).ok());
    EXPECT_LE(c->num_rows(), 100);
    EXPECT_EQ(Rows(*a), Rows(*c));
  }
}

TEST(TieredEmbeddingTable, NeedsLruEvictionAndABudget) {
  auto tier = OpenTier(TempDir(), 4);
  EmbeddingTableOptions o = TableOptions(SparseOptimizerKind::kSgd);
  o.tier = tier.get();
  o.max_rows = 10;
  EXPECT_THAT(EmbeddingTable::Create(o).status().message(), HasSubstr("LRU eviction"));
  o.evict_lru = true;
  o.max_rows = 0;
  EXPECT_FALSE(EmbeddingTable::Create(o).ok());
}

TEST(TieredTable, RowsPastTheirTtlOnDiskAreGoneAsTheyAreReadAndCheckpointsKeepTheirStamps) {
  EmbeddingTableOptions o = TableOptions(SparseOptimizerKind::kSgd);
  o.ttl = 5;
  o.max_rows = 10;
  o.evict_lru = true;
  std::unique_ptr<RocksDbRowTier> tier =
      OpenTier(TempDir(), EmbeddingTable::TierRowFloats(o));  // the stamp too
  ASSERT_NE(tier, nullptr);
  o.tier = tier.get();
  auto table = EmbeddingTable::Create(o);
  ASSERT_TRUE(table.ok());
  EmbeddingTable& t = **table;
  const int dim = o.dim;
  std::vector<uint64_t> all(100), learned(10);
  for (uint64_t i = 0; i < 100; ++i) all[i] = i;
  for (uint64_t i = 0; i < 10; ++i) learned[i] = 50 + i;
  std::vector<float> fresh(all.size() * dim), out(all.size() * dim);
  t.SetClock(0);
  ASSERT_TRUE(t.Pull(all, fresh.data()).ok());  // 90 rows to disk, stamped 0
  t.SetClock(3);
  const std::vector<float> grads(learned.size() * dim, -1.0f);
  ASSERT_TRUE(t.Apply(learned, grads.data()).ok());  // read back, learned, stamped 3
  t.SetClock(7);
  // A checkpoint holds every row with its stamp (from disk: the stamp's
  // float), for the restored table's sweep to evict.
  absl::StatusOr<EmbeddingTableContents> c = t.Export();
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->ids.size(), all.size());
  ASSERT_EQ(c->stamps.size(), all.size());
  for (size_t i = 0; i < c->ids.size(); ++i) {
    const bool was_learned = c->ids[i] >= 50 && c->ids[i] < 60;
    EXPECT_EQ(c->stamps[i], was_learned ? 3u : 0u) << "id " << c->ids[i];
  }
  ASSERT_TRUE(t.Pull(all, out.data()).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    const bool was_learned = all[i] >= 50 && all[i] < 60;
    for (int j = 0; j < dim; ++j) {
      const float want = fresh[i * dim + j] + (was_learned ? o.optimizer.lr : 0.0f);
      ASSERT_EQ(out[i * dim + j], want) << "id " << all[i];
    }
  }
  EXPECT_EQ(t.counters().evicted_ttl, 90);
}

TEST(TieredTable, PrefetchReadsRowsBackAndMakesNoneNorCountsASighting) {
  EmbeddingTableOptions o = TableOptions(SparseOptimizerKind::kAdagrad);
  o.max_rows = 10;
  o.evict_lru = true;
  o.admission.kind = AdmissionOptions::Kind::kCount;
  o.admission.min_count = 2;
  std::unique_ptr<RocksDbRowTier> tier = OpenTier(TempDir(), EmbeddingTable::TierRowFloats(o));
  ASSERT_NE(tier, nullptr);
  o.tier = tier.get();
  auto table = EmbeddingTable::Create(o);
  ASSERT_TRUE(table.ok());
  EmbeddingTable& t = **table;
  std::vector<uint64_t> all(50);
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<float> rows(all.size() * o.dim);
  for (int twice = 0; twice < 2; ++twice) ASSERT_TRUE(t.Pull(all, rows.data()).ok());
  const std::vector<uint64_t> next = {1, 2, 3, 100};  // 1..3 on disk; 100 seen never
  ASSERT_TRUE(t.Prefetch(next).ok());
  EXPECT_EQ(t.counters().prefetched, 3);
  EXPECT_EQ(t.num_rows(), 10);
  const TableCounters before = t.counters();
  std::vector<float> out(next.size() * o.dim);
  ASSERT_TRUE(t.Pull(next, out.data()).ok());
  EXPECT_EQ(t.counters().in_memory, before.in_memory + 3);
  EXPECT_EQ(t.counters().from_tier, before.from_tier);
  EXPECT_EQ(t.counters().not_admitted, before.not_admitted + 1);  // 100: its first sighting
  EXPECT_EQ(t.counters().created, before.created);
}

// An SGD table of dim 4 that keeps 2 rows in memory, the rest on `tier`.
std::unique_ptr<EmbeddingTable> TwoRowsOn(RowTier* tier) {
  EmbeddingTableOptions o = TableOptions(SparseOptimizerKind::kSgd);
  o.max_rows = 2;
  o.evict_lru = true;
  o.tier = tier;
  return *EmbeddingTable::Create(o);
}

TEST(TieredEmbeddingTable, ATierThatCannotWriteKeepsTheRowsInMemory) {
  MemoryRowTier tier;
  auto t = TwoRowsOn(&tier);
  std::vector<float> out(4 * 4);
  ASSERT_TRUE(t->Pull({1, 2}, out.data()).ok());
  tier.fail_put = true;
  ASSERT_TRUE(t->Pull({3, 4}, out.data()).ok());  // past the budget, nothing lost
  EXPECT_EQ(t->num_rows(), 4);
  EXPECT_EQ(tier.num_rows(), 0);
  EXPECT_THAT(t->tier_error().message(), HasSubstr("No space left"));
  tier.fail_put = false;
  ASSERT_TRUE(t->Pull({5}, out.data()).ok());  // the tier takes rows again: back to the budget
  EXPECT_EQ(tier.num_rows(), 3);
  EXPECT_EQ(t->num_rows(), 2);
  EXPECT_EQ(Rows(*t).size(), 5u);
}

TEST(TieredEmbeddingTable, ATierThatCannotReadFailsTheCallBeforeAnyRowIsUsed) {
  MemoryRowTier tier;
  auto t = TwoRowsOn(&tier);
  std::vector<float> before(2 * 4), out(2 * 4, 7.0f);
  ASSERT_TRUE(t->Pull({1, 2}, before.data()).ok());
  const auto rows = Rows(*t);
  tier.fail_get = true;
  const std::vector<float> grads(8, 1.0f);
  absl::Status s = t->Apply({1, 3}, grads.data());
  EXPECT_THAT(s.message(), HasSubstr("IO error"));
  s = t->Pull({2, 3}, out.data());
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(out, std::vector<float>(8, 7.0f));
  tier.fail_get = false;
  // Row 1 and 2 unchanged by the failed push; 3 created on first touch.
  std::vector<float> again(2 * 4);
  ASSERT_TRUE(t->Pull({1, 2}, again.data()).ok());
  EXPECT_EQ(again, before);
  EXPECT_EQ(Rows(*t).count(1), 1u);
  EXPECT_EQ(Rows(*t).at(1), rows.at(1));
}

}  // namespace
}  // namespace ps
