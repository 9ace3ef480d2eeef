#include "server/core/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/embedding_shard.h"
#include "common/sparse_optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr SparseOptimizerKind kAllKinds[] = {SparseOptimizerKind::kSgd,
                                             SparseOptimizerKind::kAdagrad,
                                             SparseOptimizerKind::kAdam, SparseOptimizerKind::kFtrl};

EmbeddingTableOptions Options(int dim, SparseOptimizerKind kind = SparseOptimizerKind::kSgd) {
  EmbeddingTableOptions o;
  o.name = "users";
  o.dim = dim;
  o.seed = 17;
  o.init_scale = 0.5f;
  o.optimizer.kind = kind;
  o.optimizer.lr = 0.1f;
  o.optimizer.ftrl_l1 = 0.01f;
  o.optimizer.ftrl_l2 = 0.001f;
  return o;
}

std::unique_ptr<EmbeddingTable> Make(const EmbeddingTableOptions& o) {
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> t = EmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<float> PullAll(EmbeddingTable* t, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * t->options().dim);
  absl::Status s = t->Pull(ids, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// Each row's values, state bits and step, by id.
std::map<uint64_t, std::vector<uint32_t>> ById(const EmbeddingTableContents& c) {
  std::map<uint64_t, std::vector<uint32_t>> rows;
  const size_t v = c.values.size() / std::max<size_t>(1, c.ids.size());
  const size_t st = c.state.size() / std::max<size_t>(1, c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i) {
    std::vector<uint32_t>& r = rows[c.ids[i]];
    r.resize(v + st);
    std::memcpy(r.data(), &c.values[i * v], v * sizeof(float));
    if (st > 0) std::memcpy(r.data() + v, &c.state[i * st], st * sizeof(float));
    if (!c.adam_steps.empty()) r.push_back(c.adam_steps[i]);
  }
  return rows;
}

// A gradient that differs by step, row and element, of both signs.
float Grad(int step, uint64_t id, int j) {
  const uint64_t h = Mix64(static_cast<uint64_t>(step) * 1000003 + id * 31 + j);
  return static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 500.0f;
}

TEST(EmbeddingTable, CreateRejectsBadOptions) {
  EmbeddingTableOptions o = Options(0);
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> t = EmbeddingTable::Create(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("users"), HasSubstr("dim")));
  o = Options(4, SparseOptimizerKind::kFtrl);
  o.optimizer.ftrl_l2 = -1;
  t = EmbeddingTable::Create(o);
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("users"), HasSubstr("ftrl_l2")));
  o = Options(4);
  o.max_rows = -1;
  EXPECT_THAT(EmbeddingTable::Create(o).status().message(), HasSubstr("max_rows"));
}

TEST(EmbeddingTable, RowsStartFromSeedAndIdOnAnyShardInAnyOrder) {
  // Two shards (tables) touching the same ids in different orders, one of
  // them through Apply's creation, start every row from InitRow.
  auto a = Make(Options(5, SparseOptimizerKind::kAdam));
  auto b = Make(Options(5, SparseOptimizerKind::kAdam));
  const std::vector<uint64_t> ids = {0, 9, 1ULL << 40, ~0ULL, 12345};
  const std::vector<uint64_t> reversed(ids.rbegin(), ids.rend());
  std::vector<float> from_a = PullAll(a.get(), ids);
  PullAll(b.get(), reversed);
  std::vector<float> from_b = PullAll(b.get(), ids);
  EXPECT_EQ(Bits(from_a), Bits(from_b));
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> want(5);
    InitRow(17, ids[i], 5, 0.5f, want.data());
    EXPECT_EQ(Bits(std::vector<float>(from_a.begin() + 5 * i, from_a.begin() + 5 * i + 5)),
              Bits(want));
  }
  EXPECT_EQ(a->num_rows(), 5);
  // Repeated ids in a pull are fine and make one row.
  std::vector<float> twice = PullAll(a.get(), {77, 77});
  EXPECT_EQ(a->num_rows(), 6);
  EXPECT_TRUE(std::equal(twice.begin(), twice.begin() + 5, twice.begin() + 5));
}

TEST(EmbeddingTable, MaxRowsRefusesNewRowsAndChangesNothing) {
  EmbeddingTableOptions o = Options(2, SparseOptimizerKind::kAdagrad);
  o.max_rows = 4;
  auto t = Make(o);
  PullAll(t.get(), {1, 2, 3});
  const EmbeddingTableContents before = *t->Export();
  std::vector<float> out(6);
  // Rows 1 and 2 exist; 10 and 11 are two new rows: one too many.
  absl::Status s = t->Pull({1, 10, 11}, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("users"), HasSubstr("max_rows 4")));
  std::vector<float> grads(4, 1.0f);
  s = t->Apply({10, 11}, grads.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("users"));
  const EmbeddingTableContents after = *t->Export();
  EXPECT_EQ(t->num_rows(), 3);
  EXPECT_EQ(after.ids, before.ids);  // nothing created, LRU order unchanged
  EXPECT_EQ(Bits(after.values), Bits(before.values));
  EXPECT_EQ(Bits(after.state), Bits(before.state));
  // One new id, even repeated, fits.
  EXPECT_TRUE(t->Pull({10, 10, 3}, out.data()).ok());
  EXPECT_EQ(t->num_rows(), 4);
  EXPECT_EQ(t->Pull({12}, out.data()).code(), absl::StatusCode::kResourceExhausted);
}

TEST(EmbeddingTable, EvictLruReplacesTheLeastRecentlyUsedRows) {
  EmbeddingTableOptions o = Options(3);
  o.max_rows = 3;
  o.evict_lru = true;
  auto t = Make(o);
  PullAll(t.get(), {1, 2, 3});
  std::vector<float> g(3, 1.0f);
  ASSERT_TRUE(t->Apply({1}, g.data()).ok());  // 1 is now the most recent
  const std::vector<float> row1 = PullAll(t.get(), {1});
  PullAll(t.get(), {3});                      // order, oldest first: 2 1 3
  PullAll(t.get(), {4});                      // evicts 2
  EXPECT_THAT(t->Export()->ids, ElementsAre(1, 3, 4));
  PullAll(t.get(), {5, 6});  // evicts 1, then 3
  EXPECT_THAT(t->Export()->ids, ElementsAre(4, 5, 6));
  EXPECT_EQ(t->num_rows(), 3);
  // A row that comes back starts over from its initial values.
  std::vector<float> init(3);
  InitRow(17, 1, 3, 0.5f, init.data());
  EXPECT_EQ(Bits(PullAll(t.get(), {1})), Bits(init));
  EXPECT_NE(Bits(row1), Bits(init));
  // More distinct ids in one call than max_rows cannot be kept together.
  std::vector<float> out(12);
  absl::Status s = t->Pull({7, 8, 9, 10}, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("users"));
  EXPECT_THAT(t->Export()->ids, ElementsAre(5, 6, 1));
}

// Many evictions against a reference LRU list: the index (with its
// backward-shift deletions) finds exactly the rows the list holds.
TEST(EmbeddingTable, EvictionChurnMatchesAReferenceLru) {
  EmbeddingTableOptions o = Options(1);
  o.max_rows = 300;
  o.evict_lru = true;
  auto t = Make(o);
  std::list<uint64_t> lru;  // most recent first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t id = Mix64(i) % 700;  // collisions in the index are common
    float v;
    ASSERT_TRUE(t->Pull({id}, &v).ok());
    float want;
    InitRow(17, id, 1, 0.5f, &want);
    ASSERT_EQ(v, want) << "id " << id << " at pull " << i;
    auto it = where.find(id);
    if (it != where.end()) lru.erase(it->second);
    lru.push_front(id);
    where[id] = lru.begin();
    if (lru.size() > 300) {
      where.erase(lru.back());
      lru.pop_back();
    }
  }
  EXPECT_EQ(t->num_rows(), 300);
  EXPECT_EQ(t->Export()->ids, std::vector<uint64_t>(lru.rbegin(), lru.rend()));
}

// ApplyAndPull is Apply then Pull: the same answer, rows, state and (with
// evict_lru at its bound) the same LRU order, for every rule; in memory
// (one lookup a row) and with ttl (the two calls).
TEST(EmbeddingTable, ApplyAndPullIsApplyThenPull) {
  for (SparseOptimizerKind kind : kAllKinds) {
    for (int variant = 0; variant < 3; ++variant) {
      EmbeddingTableOptions o = Options(5, kind);
      if (variant == 1) {
        o.max_rows = 40;
        o.evict_lru = true;
      }
      if (variant == 2) o.ttl = 1000;
      auto fused = Make(o), twin = Make(o);
      EXPECT_EQ(fused->InMemoryOnly(), variant != 2);
      for (int step = 0; step < 30; ++step) {
        std::vector<uint64_t> ids;
        for (uint64_t k = 0; k < 12; ++k) ids.push_back(Mix64(step * 100 + k) % 90);
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        if (step % 2 == 1) std::reverse(ids.begin(), ids.end());  // any order
        std::vector<float> g(ids.size() * 5);
        for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(step, ids[i / 5], i % 5);
        std::vector<float> got(g.size());
        ASSERT_TRUE(fused->ApplyAndPull(ids, g.data(), got.data()).ok());
        ASSERT_TRUE(twin->Apply(ids, g.data()).ok());
        ASSERT_EQ(Bits(got), Bits(PullAll(twin.get(), ids)))
            << SparseOptimizerName(kind) << " variant " << variant << " step " << step;
      }
      absl::StatusOr<EmbeddingTableContents> a = fused->Export(), b = twin->Export();
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->ids, b->ids);
      EXPECT_EQ(Bits(a->values), Bits(b->values));
      EXPECT_EQ(Bits(a->state), Bits(b->state));
      EXPECT_EQ(a->adam_steps, b->adam_steps);
    }
  }
  // Its errors are Apply's, and change nothing.
  auto t = Make(Options(2));
  std::vector<float> g(4, 1.0f), out(4, -1.0f);
  EXPECT_EQ(t->ApplyAndPull({3, 3}, g.data(), out.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->num_rows(), 0);
  EXPECT_THAT(out, ElementsAre(-1.0f, -1.0f, -1.0f, -1.0f));
}

// Calls of many ids use the rows there on a thread per core, then make the
// missing ones in order: the same answers, rows, state, order of making and
// changes as one thread (a table with evict_lru, never full, stays on one).
TEST(EmbeddingTable, LargeCallsOnManyThreadsMatchOneThread) {
  for (SparseOptimizerKind kind : kAllKinds) {
    EmbeddingTableOptions o = Options(3, kind);
    o.track_changes = true;
    o.parallel_ids = 1000;
    EmbeddingTableOptions one_thread = o;
    one_thread.evict_lru = true;
    one_thread.max_rows = 1 << 20;
    auto t = Make(o), ref = Make(one_thread);
    const size_t n = 8 * EmbeddingTableOptions::kMinParallelChunk;
    for (int step = 0; step < 6; ++step) {
      // Half the ids seen before, half new; the pull repeats some.
      std::vector<uint64_t> ids;
      for (size_t k = 0; ids.size() < n; ++k) ids.push_back(Mix64(step * 7919 + k) % (n * 3));
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      std::vector<uint64_t> pulled = ids;
      pulled.insert(pulled.end(), ids.begin(), ids.begin() + ids.size() / 4);
      std::reverse(pulled.begin(), pulled.end());
      ASSERT_EQ(Bits(PullAll(t.get(), pulled)), Bits(PullAll(ref.get(), pulled))) << step;
      std::vector<float> g(ids.size() * 3);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(step, ids[i / 3], i % 3);
      std::vector<float> got(g.size()), want(g.size());
      ASSERT_TRUE(t->ApplyAndPull(ids, g.data(), got.data()).ok());
      ASSERT_TRUE(ref->ApplyAndPull(ids, g.data(), want.data()).ok());
      ASSERT_EQ(Bits(got), Bits(want)) << SparseOptimizerName(kind) << " step " << step;
      // New ids only, pushed first: made by Apply.
      std::vector<uint64_t> fresh;
      for (size_t k = 0; k < n; ++k) fresh.push_back(n * 3 + step * n + k);
      std::vector<float> fg(fresh.size() * 3, 0.25f);
      ASSERT_TRUE(t->Apply(fresh, fg.data()).ok());
      ASSERT_TRUE(ref->Apply(fresh, fg.data()).ok());
    }
    // The same rows and state (the twin exports in LRU order, which is the
    // order of last use, not of making).
    absl::StatusOr<EmbeddingTableContents> a = t->Export(), b = ref->Export();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(ById(*a), ById(*b)) << SparseOptimizerName(kind);
    absl::StatusOr<EmbeddingTable::Changes> ca = t->ExportChanges(), cb = ref->ExportChanges();
    ASSERT_TRUE(ca.ok() && cb.ok());
    EXPECT_EQ(ById(ca->changed), ById(cb->changed));
  }
}

TEST(EmbeddingTable, ApplyRejectsRepeatedIds) {
  auto t = Make(Options(2));
  std::vector<float> g(6, 1.0f);
  absl::Status s = t->Apply({5, 6, 5}, g.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("users"), HasSubstr("id 5")));
  EXPECT_EQ(t->num_rows(), 0);
}

// The dense rules written out over a whole matrix, rows updated only where
// a step touches them; Adam's bias correction from each row's own count.
struct DenseReference {
  SparseOptimizerOptions o;
  int dim;
  std::vector<float> w, s1, s2;
  std::vector<uint32_t> t;

  void Step(const std::vector<bool>& touched, const std::vector<float>& g) {
    for (size_t r = 0; r < touched.size(); ++r) {
      if (!touched[r]) continue;
      if (o.kind == SparseOptimizerKind::kAdam) ++t[r];
      for (int j = 0; j < dim; ++j) {
        const size_t i = r * dim + j;
        const float gi = g[i];
        switch (o.kind) {
          case SparseOptimizerKind::kSgd:
            w[i] = w[i] - o.lr * gi;
            break;
          case SparseOptimizerKind::kAdagrad:
            s1[i] = s1[i] + gi * gi;
            w[i] = w[i] - o.lr * gi / (std::sqrt(s1[i]) + 1e-10f);
            break;
          case SparseOptimizerKind::kAdam: {
            s1[i] = o.adam_beta1 * s1[i] + (1 - o.adam_beta1) * gi;
            s2[i] = o.adam_beta2 * s2[i] + (1 - o.adam_beta2) * gi * gi;
            const float m_hat = s1[i] / static_cast<float>(1 - std::pow(double{o.adam_beta1}, t[r]));
            const float v_hat = s2[i] / static_cast<float>(1 - std::pow(double{o.adam_beta2}, t[r]));
            w[i] = w[i] - o.lr * m_hat / (std::sqrt(v_hat) + o.adam_eps);
            break;
          }
          case SparseOptimizerKind::kFtrl: {
            float& z = s1[i];
            float& n = s2[i];
            const float sigma = (std::sqrt(n + gi * gi) - std::sqrt(n)) / o.lr;
            z = z + gi - sigma * w[i];
            n = n + gi * gi;
            if (std::fabs(z) <= o.ftrl_l1) {
              w[i] = 0;
            } else {
              w[i] = -(z - (z > 0 ? 1 : -1) * o.ftrl_l1) /
                     ((o.ftrl_beta + std::sqrt(n)) / o.lr + o.ftrl_l2);
            }
            break;
          }
        }
      }
    }
  }
};

TEST(EmbeddingTable, EachOptimizerMatchesItsDenseRuleOnTouchedRowsOnly) {
  constexpr int kRows = 7, kDim = 3;
  std::vector<uint64_t> all;
  for (int r = 0; r < kRows; ++r) all.push_back(1000 + 37 * r);
  for (SparseOptimizerKind kind : kAllKinds) {
    SCOPED_TRACE(std::string(SparseOptimizerName(kind)));
    EmbeddingTableOptions o = Options(kDim, kind);
    o.optimizer.adagrad_initial_accumulator = 0.2f;
    auto t = Make(o);
    DenseReference ref{o.optimizer, kDim, PullAll(t.get(), all),
                       std::vector<float>(kRows * kDim,
                                          kind == SparseOptimizerKind::kAdagrad ? 0.2f : 0.0f),
                       std::vector<float>(kRows * kDim, 0.0f), std::vector<uint32_t>(kRows, 0)};
    for (int step = 0; step < 12; ++step) {
      // Row r is touched on steps where (step + 1) % (r + 1) == 0 (row 0
      // every step, row 6 once): per-row Adam counts drift apart.
      std::vector<bool> touched(kRows);
      std::vector<uint64_t> ids;
      std::vector<float> dense_g(kRows * kDim, 0.0f), sparse_g;
      for (int r = kRows - 1; r >= 0; --r) {  // push order differs from row order
        if ((step + 1) % (r + 1) != 0) continue;
        touched[r] = true;
        ids.push_back(all[r]);
        for (int j = 0; j < kDim; ++j) {
          dense_g[r * kDim + j] = Grad(step, all[r], j);
          sparse_g.push_back(Grad(step, all[r], j));
        }
      }
      ref.Step(touched, dense_g);
      ASSERT_TRUE(t->Apply(ids, sparse_g.data()).ok());
      ASSERT_EQ(Bits(PullAll(t.get(), all)), Bits(ref.w)) << "after step " << step;
    }
    if (kind == SparseOptimizerKind::kAdam) {
      EmbeddingTableContents c = *t->Export();
      std::unordered_map<uint64_t, uint32_t> steps;
      for (size_t i = 0; i < c.ids.size(); ++i) steps[c.ids[i]] = c.adam_steps[i];
      for (int r = 0; r < kRows; ++r) EXPECT_EQ(steps[all[r]], ref.t[r]) << "row " << r;
    }
  }
}

// Train, export, import into a fresh table, then train both on: every pull
// and every export agree bit for bit, LRU evictions included.
TEST(EmbeddingTable, ExportImportContinuesBitForBit) {
  for (SparseOptimizerKind kind : kAllKinds) {
    SCOPED_TRACE(std::string(SparseOptimizerName(kind)));
    EmbeddingTableOptions o = Options(4, kind);
    o.max_rows = 20;
    o.evict_lru = true;
    auto a = Make(o);
    auto train = [](EmbeddingTable* t, int step) {
      std::vector<uint64_t> ids;
      std::vector<float> g;
      for (int k = 0; k < 5; ++k) {
        const uint64_t id = Mix64(step * 5 + k) % 30;
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
        ids.push_back(id);
        for (int j = 0; j < 4; ++j) g.push_back(Grad(step, id, j));
      }
      ASSERT_TRUE(t->Apply(ids, g.data()).ok());
    };
    for (int step = 0; step < 30; ++step) train(a.get(), step);
    const EmbeddingTableContents saved = *a->Export();
    ASSERT_EQ(saved.ids.size(), 20u);
    EXPECT_EQ(saved.adam_steps.size(), kind == SparseOptimizerKind::kAdam ? 20u : 0u);
    auto b = Make(o);
    PullAll(b.get(), {999});  // Import replaces whatever was there
    ASSERT_TRUE(b->Import(saved).ok());
    EXPECT_EQ(b->num_rows(), 20);
    EXPECT_EQ(Bits(PullAll(b.get(), saved.ids)), Bits(PullAll(a.get(), saved.ids)));
    for (int step = 30; step < 60; ++step) {
      train(a.get(), step);
      train(b.get(), step);
    }
    const EmbeddingTableContents ea = *a->Export(), eb = *b->Export();
    EXPECT_EQ(ea.ids, eb.ids);
    EXPECT_EQ(Bits(ea.values), Bits(eb.values));
    EXPECT_EQ(Bits(ea.state), Bits(eb.state));
    EXPECT_EQ(ea.adam_steps, eb.adam_steps);
  }
}

TEST(EmbeddingTable, ImportRejectsContentsThatDoNotFit) {
  auto t = Make(Options(2, SparseOptimizerKind::kAdam));
  PullAll(t.get(), {1, 2});
  EmbeddingTableContents c = *t->Export();
  EmbeddingTableContents bad = c;
  bad.dim = 3;
  EXPECT_THAT(t->Import(bad).message(), HasSubstr("dim"));
  bad = c;
  bad.optimizer = SparseOptimizerKind::kFtrl;
  EXPECT_THAT(t->Import(bad).message(), HasSubstr("ftrl"));
  bad = c;
  bad.adam_steps.pop_back();
  EXPECT_EQ(t->Import(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = c;
  bad.ids[1] = bad.ids[0];
  EXPECT_THAT(t->Import(bad).message(), HasSubstr("repeats"));
  EmbeddingTableOptions small = Options(2, SparseOptimizerKind::kAdam);
  small.max_rows = 1;
  EXPECT_EQ(Make(small)->Import(c).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t->Export()->ids, c.ids);
  EXPECT_EQ(t->num_rows(), 2);
}

// MemoryBytes per row against the bound: the row's floats plus 32 bytes.
// N = 786433 is just past an index doubling (load 0.375, the worst).
TEST(EmbeddingTable, MemoryPerRowIsItsFloatsPlusAtMost32Bytes) {
  struct Case {
    SparseOptimizerKind kind;
    int64_t rows;
  };
  const Case cases[] = {{SparseOptimizerKind::kSgd, 1000000},
                        {SparseOptimizerKind::kAdagrad, 1000000},
                        {SparseOptimizerKind::kAdam, 1000000},
                        {SparseOptimizerKind::kFtrl, 1000000},
                        {SparseOptimizerKind::kAdam, 786433}};
  constexpr int kDim = 16;
  for (const Case& c : cases) {
    auto t = Make(Options(kDim, c.kind));
    std::vector<uint64_t> ids(4096);
    std::vector<float> out(ids.size() * kDim);
    for (int64_t next = 0; next < c.rows;) {
      ids.resize(std::min<int64_t>(4096, c.rows - next));
      for (uint64_t& id : ids) id = static_cast<uint64_t>(next++) * 7919;
      ASSERT_TRUE(t->Pull(ids, out.data()).ok());
    }
    ASSERT_EQ(t->num_rows(), c.rows);
    const double per_row = static_cast<double>(t->MemoryBytes()) / c.rows;
    const int floats = kDim * (1 + t->options().optimizer.StateFloatsPerElement());
    std::printf("%-8s dim %d, %lld rows: %.2f bytes/row = %d floats (%d B) + %.2f B overhead\n",
                std::string(SparseOptimizerName(c.kind)).c_str(), kDim,
                static_cast<long long>(c.rows), per_row, floats, floats * 4,
                per_row - floats * 4);
    EXPECT_LE(per_row, floats * 4 + 32) << SparseOptimizerName(c.kind);
  }
}

}  // namespace
}  // namespace ps
