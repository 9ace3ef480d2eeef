#include "tools/bench/rows_pool.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(RowsPool, RequestsAreSortedDistinctAndPopulateCoversThemOnce) {
  RowsPoolOptions o;
  o.ids_per_request = 100;
  o.pool_rows = 5000;
  o.id_space = 20000;
  o.populate_chunk = 64;
  for (bool zipf : {false, true}) {
    o.zipf = zipf;
    absl::StatusOr<RowsPool> pool = MakeRowsPool(o);
    ASSERT_TRUE(pool.ok()) << pool.status();
    ASSERT_EQ(pool->requests.size(), 50u);
    std::set<uint64_t> used;
    for (const auto& r : pool->requests) {
      ASSERT_EQ(r.size(), 100u);
      EXPECT_TRUE(std::is_sorted(r.begin(), r.end()));
      EXPECT_EQ(std::adjacent_find(r.begin(), r.end()), r.end()) << "a repeated id";
      for (uint64_t id : r) EXPECT_LT(id, 20000u);
      used.insert(r.begin(), r.end());
    }
    std::multiset<uint64_t> populated;
    for (const auto& c : pool->populate) {
      EXPECT_LE(c.size(), 64u);
      EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
      populated.insert(c.begin(), c.end());
    }
    EXPECT_EQ(populated.size(), used.size()) << "each distinct id populated exactly once";
    EXPECT_EQ(std::set<uint64_t>(populated.begin(), populated.end()), used);
    EXPECT_EQ(pool->distinct_ids, static_cast<int64_t>(used.size()));
    EXPECT_GE(pool->draws_per_request, 100.0);
  }
}

TEST(RowsPool, ZipfConcentratesOnLowRanksAndUniformDoesNot) {
  RowsPoolOptions o;
  o.ids_per_request = 1000;
  o.pool_rows = 100000;
  o.id_space = 10000000;
  absl::StatusOr<RowsPool> uniform = MakeRowsPool(o);
  o.zipf = true;
  absl::StatusOr<RowsPool> zipf = MakeRowsPool(o);
  ASSERT_TRUE(uniform.ok() && zipf.ok());
  // Uniform: about 100,000 distinct of 10^7 (birthday collisions ~0.5%).
  EXPECT_GT(uniform->distinct_ids, 99000);
  EXPECT_LT(uniform->draws_per_request, 1001.0);
  // Zipf(1.05): a request needs far more draws to find 1,000 distinct ids,
  // and the requests share their hot ids.
  EXPECT_GT(zipf->draws_per_request, 1100.0);
  EXPECT_LT(zipf->distinct_ids, uniform->distinct_ids);
  EXPECT_EQ(zipf->requests[0][0], 0u) << "rank 1 (id 0) is in every Zipf request";
}

TEST(RowsPool, SameOptionsSamePoolAndBadOptionsNamed) {
  RowsPoolOptions o;
  o.ids_per_request = 10;
  o.pool_rows = 100;
  o.id_space = 1000;
  EXPECT_EQ(MakeRowsPool(o)->requests, MakeRowsPool(o)->requests);
  o.seed = 2;
  RowsPoolOptions o1 = o;
  o1.seed = 1;
  EXPECT_NE(MakeRowsPool(o)->requests, MakeRowsPool(o1)->requests);
  o.id_space = 5;
  EXPECT_NE(MakeRowsPool(o).status().message().find("--id_space"), absl::string_view::npos);
  o.id_space = 1000;
  o.zipf_s = 0;
  EXPECT_NE(MakeRowsPool(o).status().message().find("--zipf_s"), absl::string_view::npos);
}

}  // namespace
}  // namespace ps
