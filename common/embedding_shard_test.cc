#include "common/embedding_shard.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

TEST(InitRow, MatchesPinnedValues) {
  // Pinned bit patterns: a change to the hash or the conversion changes the
  // rows every checkpoint and every shard already holds.
  float row[4];
  InitRow(/*seed=*/42, /*id=*/7, 4, /*scale=*/0.5f, row);
  std::vector<uint32_t> got;
  for (float f : row) got.push_back(Bits(f));
  EXPECT_THAT(got, ::testing::ElementsAre(0x3e8db960u, 0x3e4ac930u, 0xbee2ce88u, 0x3e53cafcu));
}

TEST(InitRow, IsDeterministicAndOnTheGrid) {
  std::vector<float> a(64), b(64);
  for (uint64_t id : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 63, ~uint64_t{0}}) {
    InitRow(3, id, 64, 1.0f, a.data());
    InitRow(3, id, 64, 1.0f, b.data());
    EXPECT_EQ(a, b);
    for (float f : a) {
      ASSERT_GE(f, -1.0f);
      ASSERT_LT(f, 1.0f);
      const float k = (f + 1.0f) * 8388608.0f;  // exact: back to the 24-bit integer
      ASSERT_EQ(k, std::floor(k));
    }
  }
}

TEST(InitRow, DiffersBySeedIdAndElement) {
  std::set<std::vector<float>> rows;
  std::vector<float> r(8);
  for (uint64_t seed : {0, 1, 2}) {
    for (uint64_t id : {0, 1, 2, 1000}) {
      InitRow(seed, id, 8, 1.0f, r.data());
      rows.insert(r);
      EXPECT_EQ(std::set<float>(r.begin(), r.end()).size(), 8u);
    }
  }
  EXPECT_EQ(rows.size(), 12u);
}

TEST(InitRow, ScalesTheUnitRow) {
  std::vector<float> unit(16), scaled(16);
  InitRow(9, 99, 16, 1.0f, unit.data());
  InitRow(9, 99, 16, 0.25f, scaled.data());
  for (int j = 0; j < 16; ++j) EXPECT_EQ(scaled[j], unit[j] * 0.25f);
  InitRow(9, 99, 16, 0.0f, scaled.data());
  for (float f : scaled) EXPECT_EQ(std::fabs(f), 0.0f);
}

TEST(ShardOfId, StaysInRange) {
  EXPECT_EQ(ShardOfId(12345, 1), 0);
  for (int s : {1, 2, 3, 7, 64, 1000}) {
    for (uint64_t id = 0; id < 2000; ++id) {
      const int shard = ShardOfId(id * 0x10001, s);
      ASSERT_GE(shard, 0);
      ASSERT_LT(shard, s);
    }
  }
}

// A deterministic Zipf(s) sampler over ranks 1..n: inverse CDF by binary
// search, uniforms from SplitMix64.
class Zipf {
 public:
  Zipf(int n, double s) : cdf_(n) {
    double sum = 0;
    for (int k = 1; k <= n; ++k) cdf_[k - 1] = (sum += std::pow(k, -s));
    for (double& c : cdf_) c /= sum;
  }
  int Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<int>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin()) + 1;
  }

 private:
  std::vector<double> cdf_;
  uint64_t state_ = 0;
};

double MaxOverMean(const std::vector<int64_t>& load) {
  int64_t total = 0, most = 0;
  for (int64_t l : load) {
    total += l;
    most = std::max(most, l);
  }
  return static_cast<double>(most) * load.size() / total;
}

// Zipf(1.1) accesses over a key space of 1M ids, laid out four ways (dense,
// strided, only the high half set, byte-reversed so the low bits are all
// zero), over 2, 4 and 8 shards: the distinct ids split within 5% of even.
// The accesses are printed, not checked: the hottest id alone draws about
// 1 / (sum of k^-1.1) of them (printed), which no hash can split.
TEST(ShardOfId, BalancesZipfSkewedIds) {
  constexpr int kIds = 1000000;
  constexpr int kAccesses = 2000000;
  Zipf zipf(kIds, 1.1);
  std::vector<int> ranks(kAccesses);
  for (int& r : ranks) r = zipf.Next();
  std::vector<char> seen(kIds + 1, 0);
  for (int r : ranks) seen[r] = 1;
  const int64_t distinct = std::count(seen.begin(), seen.end(), 1);
  const double hottest = static_cast<double>(std::count(ranks.begin(), ranks.end(), 1)) / kAccesses;
  std::printf("Zipf(1.1) over %d ids: %d accesses, %lld distinct ids, hottest id %.1f%%\n",
              kIds, kAccesses, static_cast<long long>(distinct), 100 * hottest);

  struct Layout {
    const char* name;
    uint64_t (*id)(int rank);
  };
  const Layout layouts[] = {
      {"dense rank", [](int r) { return static_cast<uint64_t>(r); }},
      {"rank * 4096", [](int r) { return static_cast<uint64_t>(r) << 12; }},
      {"rank << 32", [](int r) { return static_cast<uint64_t>(r) << 32; }},
      {"byte-reversed rank", [](int r) { return __builtin_bswap64(static_cast<uint64_t>(r)); }},
  };
  for (const Layout& layout : layouts) {
    for (int shards : {2, 4, 8}) {
      std::vector<int64_t> ids_load(shards, 0), access_load(shards, 0);
      for (int r = 1; r <= kIds; ++r) {
        if (seen[r]) ++ids_load[ShardOfId(layout.id(r), shards)];
      }
      for (int r : ranks) ++access_load[ShardOfId(layout.id(r), shards)];
      const double ids_ratio = MaxOverMean(ids_load);
      std::printf("  %-20s S=%d  max/mean distinct ids %.4f  accesses %.4f\n", layout.name,
                  shards, ids_ratio, MaxOverMean(access_load));
      EXPECT_LE(ids_ratio, 1.05) << layout.name << " over " << shards << " shards";
    }
  }
}

}  // namespace
}  // namespace ps
