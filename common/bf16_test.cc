#include "common/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/bf16_reference.h"
#include "common/float_bytes.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST(Bf16, EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBf16(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16(-inf), 0xff80);
  // Ties go to the even neighbour.
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x3f808000u)), 0x3f80);  // 1 + 2^-8: tie, 0x3f80 even
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x3f818000u)), 0x3f82);  // tie, 0x3f81 odd: up
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x3f808001u)), 0x3f81);  // just past the tie
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x3f807fffu)), 0x3f80);  // just below it
  // The largest float rounds past the largest bf16 (0x7f7f): Inf, as IEEE says.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x7f7f7fffu)), 0x7f7f);  // below the tie: stays finite
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x7f7f8000u)), 0x7f80);  // tie, odd: up to Inf
  // Subnormals round like anything else; the smallest ones go to zero.
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x00000001u)), 0x0000);
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x00008000u)), 0x0000);  // tie, even: down
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x00018000u)), 0x0002);  // tie, odd: up
  EXPECT_EQ(FloatToBf16(FloatFromBits(0x007fffffu)), 0x0080);  // into the normals
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::min()), 0x0080);
  // NaN stays NaN, quiet, sign kept, even when its payload is all below bit 16.
  for (uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu, 0x7f80ffffu}) {
    const uint16_t h = FloatToBf16(FloatFromBits(nan));
    EXPECT_TRUE(std::isnan(Bf16ToFloat(h))) << std::hex << nan;
    EXPECT_EQ(h & 0x0040, 0x0040) << std::hex << nan;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
}

TEST(Bf16, WideningIsExact) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    ASSERT_EQ(Bits(Bf16ToFloat(static_cast<uint16_t>(h))), h << 16);
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    // A bf16 value narrows to itself (NaNs come back quiet).
    if (!std::isnan(f)) {
      ASSERT_EQ(FloatToBf16(f), h);
    }
  }
}

// Every high half, with low halves at and around the tie and random ones:
// every case the rounding distinguishes, for every exponent and sign.
TEST(Bf16, DenseSampleMatchesReference) {
  std::mt19937 rng(23);
  std::vector<float> in;
  std::vector<uint32_t> bits;
  for (uint32_t high = 0; high < 0x10000; ++high) {
    std::vector<uint32_t> lows = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (int i = 0; i < 26; ++i) lows.push_back(rng() & 0xffff);
    for (uint32_t low : lows) {
      bits.push_back(high << 16 | low);
      in.push_back(FloatFromBits(bits.back()));
    }
  }
  std::vector<uint16_t> out(in.size());
  FloatsToBf16(in.data(), in.size(), out.data());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i], Bf16Reference(bits[i])) << std::hex << "bits 0x" << bits[i];
    ASSERT_EQ(FloatToBf16(in[i]), out[i]) << std::hex << "bits 0x" << bits[i];
  }
}

TEST(Bf16, ArrayFormsHandleEveryLength) {
  for (size_t n : {0, 1, 255, 256, 257, 1000}) {
    std::vector<float> in(n), back(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i) * 0.37f - 11.0f;
    std::vector<uint16_t> h(n);
    FloatsToBf16(in.data(), n, h.data());
    Bf16ToFloats(h.data(), n, back.data());
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(back[i], RoundToBf16(in[i])) << n << " " << i;
  }
}

TEST(Bf16, WidenPiecesAcrossOddSplits) {
  std::vector<float> in(9);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 1.0f / static_cast<float>(i + 1);
  std::vector<uint16_t> h(in.size());
  FloatsToBf16(in.data(), in.size(), h.data());
  const std::string bytes(reinterpret_cast<const char*>(h.data()), 2 * h.size());
  // Pieces cut at odd offsets: elements straddle piece boundaries.
  const absl::string_view all(bytes);
  const Pieces pieces = {all.substr(0, 3), all.substr(3, 0), all.substr(3, 1),
                         all.substr(4, 7), all.substr(11)};
  std::vector<float> out(in.size());
  WidenBf16Pieces(pieces, out.data());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], RoundToBf16(in[i])) << i;
}

}  // namespace
}  // namespace ps
