#include "worker/mlp/data_order.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(DataOrder, PermutationIsDeterministicAndChangesPerEpoch) {
  const auto a = EpochPermutation(1000, 3, 0, true);
  EXPECT_EQ(a, EpochPermutation(1000, 3, 0, true));
  EXPECT_NE(a, EpochPermutation(1000, 3, 1, true));
  EXPECT_NE(a, EpochPermutation(1000, 4, 0, true));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, EpochPermutation(1000, 3, 0, false));
}

TEST(DataOrder, UnionOfLocalBatchesIsTheGlobalBatch) {
  const int64_t n = 997;
  for (int W : {1, 2, 3, 4}) {
    for (int b : {1, 5, 16}) {
      const auto perm = EpochPermutation(n, 11, 2, true);
      const int64_t steps = StepsPerEpoch(n, W, b);
      EXPECT_EQ(steps, StepsPerEpoch(n, 1, W * b));
      std::set<int64_t> seen_all;
      for (int64_t t = 0; t < steps; ++t) {
        std::multiset<int64_t> local, global;
        for (int w = 0; w < W; ++w) {
          for (int i = 0; i < b; ++i) local.insert(BatchExample(perm, W, w, b, t, i));
        }
        for (int i = 0; i < W * b; ++i) global.insert(BatchExample(perm, 1, 0, W * b, t, i));
        ASSERT_EQ(local, global) << "W=" << W << " b=" << b << " step " << t;
        for (int64_t e : local) EXPECT_TRUE(seen_all.insert(e).second) << "example reused";
      }
    }
  }
}

}  // namespace
}  // namespace ps
