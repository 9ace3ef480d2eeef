#include "common/partition.h"

#include <random>

#include "gtest/gtest.h"

namespace ps {
namespace {

ModelSpec RandomSpec(std::mt19937* rng) {
  ModelSpec spec;
  const int tensors = 1 + (*rng)() % 8;
  for (int t = 0; t < tensors; ++t) {
    TensorSpec ts{"t" + std::to_string(t), {}};
    const int rank = (*rng)() % 3 + 1;
    for (int d = 0; d < rank; ++d) ts.shape.push_back(1 + (*rng)() % (rank == 3 ? 40 : 300));
    spec.push_back(ts);
  }
  return spec;
}

TEST(Partition, EveryElementOwnedExactlyOnceAndRangesBalanced) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 500; ++iter) {
    const ModelSpec spec = RandomSpec(&rng);
    const int S = 1 + rng() % 9;
    const auto parts = PartitionModel(spec, S);
    ASSERT_EQ(parts.size(), static_cast<size_t>(S));
    for (size_t t = 0; t < spec.size(); ++t) {
      const int64_t n = spec[t].num_elements();
      std::vector<int> owners(n, 0);
      int64_t min_len = n, max_len = 0;
      for (int s = 0; s < S; ++s) {
        int64_t len = 0;
        for (const SliceRange& r : parts[s]) {
          if (r.tensor_index != static_cast<int>(t)) continue;
          EXPECT_EQ(r.shard, s);
          EXPECT_GT(r.length, 0);
          for (int64_t i = r.offset; i < r.offset + r.length; ++i) ++owners[i];
          len += r.length;
        }
        min_len = std::min(min_len, len);
        max_len = std::max(max_len, len);
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(owners[i], 1) << "tensor " << t << " elem " << i;
      EXPECT_LE(max_len - min_len, 1) << "tensor " << t << " over " << S << " shards";
    }
  }
}

TEST(Partition, FlatOffsetsAreContiguousPerShard) {
  ModelSpec spec = {{"a", {10, 3}}, {"b", {7}}, {"c", {1}}};
  for (int S = 1; S <= 4; ++S) {
    for (const auto& slices : PartitionModel(spec, S)) {
      int64_t flat = 0;
      for (const SliceRange& r : slices) {
        EXPECT_EQ(r.flat_offset, flat);
        flat += r.length;
      }
      EXPECT_EQ(SliceElements(slices), flat);
    }
  }
}

TEST(Partition, LargestTensorSpreadsOverEveryShard) {
  ModelSpec spec = {{"big", {784, 512}}, {"small", {10}}};
  const auto parts = PartitionModel(spec, 4);
  for (int s = 0; s < 4; ++s) {
    ASSERT_FALSE(parts[s].empty());
    EXPECT_EQ(parts[s][0].tensor_index, 0);
    EXPECT_NEAR(parts[s][0].length, 784 * 512 / 4, 1);
  }
}

TEST(Partition, IsAPureFunction) {
  std::mt19937 rng(7);
  const ModelSpec spec = RandomSpec(&rng);
  const auto a = PartitionModel(spec, 3);
  const auto b = PartitionModel(spec, 3);
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(a[s].size(), b[s].size());
    for (size_t i = 0; i < a[s].size(); ++i) {
      EXPECT_EQ(a[s][i].offset, b[s][i].offset);
      EXPECT_EQ(a[s][i].length, b[s][i].length);
    }
  }
}

TEST(Partition, TensorSmallerThanShardCountLeavesEmptyRangesOut) {
  ModelSpec spec = {{"tiny", {2}}};
  const auto parts = PartitionModel(spec, 5);
  int nonempty = 0;
  for (const auto& p : parts) nonempty += p.size();
  EXPECT_EQ(nonempty, 2);
}

}  // namespace
}  // namespace ps
