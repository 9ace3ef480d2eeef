#include "common/embedding_shard.h"

namespace ps {

namespace {
// Odd constants (the golden ratio's and two of SplitMix64's) that keep the
// seed, the id and the element index apart before they are mixed.
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kSeedSalt = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kIdSalt = 0x94d049bb133111ebULL;
}  // namespace

int ShardOfId(uint64_t id, int num_shards) {
  const unsigned __int128 wide =
      static_cast<unsigned __int128>(Mix64(id)) * static_cast<uint64_t>(num_shards);
  return static_cast<int>(static_cast<uint64_t>(wide >> 64));
}

void InitRow(uint64_t seed, uint64_t id, int dim, float scale, float* out) {
  const uint64_t row = Mix64(Mix64(seed ^ kSeedSalt) ^ (id * kIdSalt + kGolden));
  for (int j = 0; j < dim; ++j) {
    const uint64_t h = Mix64(row + static_cast<uint64_t>(j + 1) * kGolden);
    // 24 bits convert to float exactly; times 2^-23 and minus 1 are exact
    // too (the result lies on float's grid in [-1, 1)), so the only rounding
    // is the one multiply by `scale`.
    const float unit = static_cast<float>(static_cast<uint32_t>(h >> 40)) * (1.0f / 8388608.0f) - 1.0f;
    out[j] = unit * scale;
  }
}

}  // namespace ps
