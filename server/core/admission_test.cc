#include "server/core/admission.h"

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

AdmissionOptions Admission(AdmissionOptions::Kind kind, int min_count, int64_t bytes = 1 << 16) {
  AdmissionOptions o;
  o.kind = kind;
  o.min_count = min_count;
  o.bloom_bytes = bytes;
  return o;
}

TEST(AdmissionFilter, CountAdmitsAtTheNthSightingExactly) {
  auto f = AdmissionFilter::Create(Admission(AdmissionOptions::Kind::kCount, 3));
  EXPECT_FALSE(f->Sight(5));
  EXPECT_FALSE(f->Sight(5));
  EXPECT_FALSE(f->Admitted(5));
  EXPECT_FALSE(f->Sight(6));
  EXPECT_TRUE(f->Sight(5));
  EXPECT_TRUE(f->Admitted(5));
  EXPECT_FALSE(f->Admitted(6));
  EXPECT_EQ(f->pending_ids(), 2);
  f->Forget(5);  // its row exists now: a row evicted since must earn it again
  EXPECT_EQ(f->pending_ids(), 1);
  EXPECT_FALSE(f->Admitted(5));
}

TEST(AdmissionFilter, BloomAdmitsNeverLateAndRarelyEarlyInItsBytes) {
  // 64 KiB (131,072 counters) for 20,000 ids: 3.3 bytes an id.
  auto f = AdmissionFilter::Create(Admission(AdmissionOptions::Kind::kBloom, 2, 1 << 16));
  EXPECT_EQ(f->MemoryBytes(), size_t{1} << 16);
  for (uint64_t id = 0; id < 10000; ++id) {
    f->Sight(id);
    f->Sight(id);
  }
  int early = 0;
  for (uint64_t id = 10000; id < 20000; ++id) early += f->Sight(id) ? 1 : 0;
  for (uint64_t id = 0; id < 10000; ++id) ASSERT_TRUE(f->Admitted(id)) << id;  // never late
  // An id seen once passes only when all 3 of its counters were raised by
  // others: at most (fraction of counters raised)^3 <= (1 - e^(-3 * 20000 /
  // 131072))^3 = 4.9% by the end, less on the way (the hashing is fixed:
  // 275 of 10,000, every run).
  EXPECT_LT(early, 490);
  EXPECT_EQ(f->pending_ids(), -1);
}

TEST(AdmissionFilter, BloomCountersStopAtFifteen) {
  auto f = AdmissionFilter::Create(Admission(AdmissionOptions::Kind::kBloom, 15, 64));
  for (int i = 0; i < 14; ++i) EXPECT_FALSE(f->Sight(42)) << i;
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(f->Sight(42)) << i;  // saturated, still admitted
}

TEST(AdmissionFilter, ParsesItsFlagValueAndNamesBadOnes) {
  AdmissionOptions o;
  ASSERT_TRUE(ParseAdmissionKind("count:3", &o).ok());
  EXPECT_EQ(o.kind, AdmissionOptions::Kind::kCount);
  EXPECT_EQ(o.min_count, 3);
  EXPECT_EQ(AdmissionToString(o), "count:3");
  ASSERT_TRUE(ParseAdmissionKind("bloom:2", &o).ok());
  EXPECT_EQ(AdmissionToString(o), "bloom:2");
  ASSERT_TRUE(ParseAdmissionKind("none", &o).ok());
  EXPECT_EQ(o.kind, AdmissionOptions::Kind::kNone);
  EXPECT_THAT(ParseAdmissionKind("bloom:16", &o).message(), HasSubstr("count:16"));
  EXPECT_THAT(ParseAdmissionKind("count:0", &o).message(), HasSubstr(">= 1"));
  EXPECT_THAT(ParseAdmissionKind("counter:2", &o).message(), HasSubstr("\"counter:2\""));
  EXPECT_THAT(ParseAdmissionKind("count", &o).message(), HasSubstr("count:N"));
  o = Admission(AdmissionOptions::Kind::kBloom, 2, 0);
  EXPECT_THAT(o.Validate().message(), HasSubstr("bytes"));
}

// --- A table with admission -------------------------------------------------

std::unique_ptr<EmbeddingTable> Table(AdmissionOptions::Kind kind, int min_count,
                                      int64_t max_rows = 0) {
  EmbeddingTableOptions o;
  o.name = "ads";
  o.dim = 4;
  o.seed = 3;
  o.init_scale = 0.5f;
  o.optimizer.kind = SparseOptimizerKind::kAdagrad;
  o.optimizer.lr = 0.1f;
  o.max_rows = max_rows;
  o.evict_lru = max_rows > 0;
  o.admission = Admission(kind, min_count);
  auto t = EmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

std::vector<float> Initial(uint64_t id) {
  std::vector<float> row(4);
  InitRow(3, id, 4, 0.5f, row.data());
  return row;
}

std::vector<float> Pull(EmbeddingTable* t, std::vector<uint64_t> ids) {
  std::vector<float> out(ids.size() * 4);
  EXPECT_TRUE(t->Pull(ids, out.data()).ok());
  return out;
}

TEST(EmbeddingTableAdmission, PullsAnswerTheInitialValueAndPushesDropUntilAdmitted) {
  for (auto kind : {AdmissionOptions::Kind::kCount, AdmissionOptions::Kind::kBloom}) {
    std::unique_ptr<EmbeddingTable> t = Table(kind, 2);
    const std::vector<float> grad = {1, 2, 3, 4};
    EXPECT_EQ(Pull(t.get(), {7}), Initial(7));  // sighting 1
    EXPECT_EQ(t->num_rows(), 0);
    ASSERT_TRUE(t->Apply({7}, grad.data()).ok());  // not admitted: dropped
    EXPECT_EQ(t->counters().not_admitted, 1);
    EXPECT_EQ(t->counters().dropped_grads, 1);
    EXPECT_EQ(Pull(t.get(), {7}), Initial(7));  // sighting 2: admitted, made as new
    EXPECT_EQ(t->num_rows(), 1);
    EXPECT_EQ(t->counters().created, 1);
    ASSERT_TRUE(t->Apply({7}, grad.data()).ok());
    EXPECT_NE(Pull(t.get(), {7}), Initial(7));  // now it learns
    EXPECT_EQ(t->counters().dropped_grads, 1);
    EXPECT_EQ(t->counters().in_memory, 2);  // the push and the last pull found it
  }
}

TEST(EmbeddingTableAdmission, PrepareAndApplyCountNoSighting) {
  std::unique_ptr<EmbeddingTable> t = Table(AdmissionOptions::Kind::kCount, 2);
  const std::vector<float> grad = {1, 1, 1, 1};
  ASSERT_TRUE(t->Prepare({9}).ok());
  ASSERT_TRUE(t->Apply({9}, grad.data()).ok());
  EXPECT_EQ(t->num_rows(), 0);
  Pull(t.get(), {9});
  EXPECT_EQ(t->num_rows(), 0);  // the first sighting
  Pull(t.get(), {9});
  EXPECT_EQ(t->num_rows(), 1);
  EXPECT_EQ(t->admission()->pending_ids(), 0);  // forgotten once made
}

TEST(EmbeddingTableAdmission, AnEvictedRowEarnsItsPlaceAgainWithCount) {
  std::unique_ptr<EmbeddingTable> t = Table(AdmissionOptions::Kind::kCount, 2, /*max_rows=*/1);
  Pull(t.get(), {1});
  Pull(t.get(), {1});
  EXPECT_EQ(t->num_rows(), 1);
  Pull(t.get(), {2});
  Pull(t.get(), {2});  // evicts 1
  Pull(t.get(), {1});
  EXPECT_EQ(t->counters().not_admitted, 3);  // 1, 2, then 1 again
}

TEST(EmbeddingTableAdmission, FewerRowsThanIdsOnALongTail) {
  // Ids drawn so that most appear once: admission keeps the repeated ones.
  std::unique_ptr<EmbeddingTable> plain = Table(AdmissionOptions::Kind::kNone, 1);
  std::unique_ptr<EmbeddingTable> admitted = Table(AdmissionOptions::Kind::kCount, 2);
  for (uint64_t i = 0; i < 1000; ++i) {
    const std::vector<uint64_t> ids = {i % 50, 1000 + i};  // 50 hot ids, 1000 seen once
    EXPECT_EQ(Pull(plain.get(), ids), Pull(admitted.get(), ids));
  }
  EXPECT_EQ(plain->num_rows(), 1050);
  EXPECT_EQ(admitted->num_rows(), 50);
  EXPECT_EQ(admitted->admission()->pending_ids(), 1000);
}

}  // namespace
}  // namespace ps
