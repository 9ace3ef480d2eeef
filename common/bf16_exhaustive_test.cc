// All 2^32 float bit patterns through FloatsToBf16, against the reference
// of bf16_test.cc (written again here: the two tests are independent).
// About a minute: a manual test.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/bf16.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

uint16_t Reference(uint32_t b) {
  const float x = FromBits(b);
  if (std::isnan(x)) return static_cast<uint16_t>((b >> 16) | 0x40);
  if (std::isinf(x)) return static_cast<uint16_t>(b >> 16);
  const uint32_t lo = b & 0x7fff0000u, hi = lo + 0x10000u;
  const auto value = [](uint32_t m) {
    return m == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(FromBits(m));
  };
  const double ax = value(b & 0x7fffffffu);
  const double below = ax - value(lo), above = value(hi) - ax;
  const uint32_t r = below < above ? lo : above < below ? hi : ((lo >> 16) & 1) ? hi : lo;
  return static_cast<uint16_t>((r | (b & 0x80000000u)) >> 16);
}

TEST(Bf16, EveryFloatMatchesReference) {
  constexpr uint64_t kBlock = 1 << 16;
  std::vector<float> in(kBlock);
  std::vector<uint16_t> out(kBlock);
  uint64_t mismatches = 0;
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kBlock) {
    for (uint64_t i = 0; i < kBlock; ++i) in[i] = FromBits(static_cast<uint32_t>(base + i));
    FloatsToBf16(in.data(), kBlock, out.data());
    for (uint64_t i = 0; i < kBlock; ++i) {
      const uint32_t b = static_cast<uint32_t>(base + i);
      if (out[i] != Reference(b) && ++mismatches <= 10) {
        ADD_FAILURE() << std::hex << "bits 0x" << b << ": got 0x" << out[i] << ", expected 0x"
                      << Reference(b);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace ps
