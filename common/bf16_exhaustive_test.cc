// All 2^32 float bit patterns through FloatsToBf16, against the reference
// (common/bf16_reference.h).
// About a minute: a manual test.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/bf16.h"
#include "common/bf16_reference.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(Bf16, EveryFloatMatchesReference) {
  constexpr uint64_t kBlock = 1 << 16;
  std::vector<float> in(kBlock);
  std::vector<uint16_t> out(kBlock);
  uint64_t mismatches = 0;
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kBlock) {
    for (uint64_t i = 0; i < kBlock; ++i) in[i] = FloatFromBits(static_cast<uint32_t>(base + i));
    FloatsToBf16(in.data(), kBlock, out.data());
    for (uint64_t i = 0; i < kBlock; ++i) {
      const uint32_t b = static_cast<uint32_t>(base + i);
      if (out[i] != Bf16Reference(b) && ++mismatches <= 10) {
        ADD_FAILURE() << std::hex << "bits 0x" << b << ": got 0x" << out[i] << ", expected 0x"
                      << Bf16Reference(b);
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace ps
