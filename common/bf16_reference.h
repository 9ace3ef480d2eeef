// The reference bf16 rounding for the tests of common/bf16.h: written from
// the definition rather than with bit tricks. Test-only; pure functions.
#ifndef PS_COMMON_BF16_REFERENCE_H_
#define PS_COMMON_BF16_REFERENCE_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ps {

inline float FloatFromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// The bf16 bits of the float with bits `b`: the bf16 values nearest below
// and above |x| in magnitude, compared by their exact distances in double
// (every float and every such difference is exact there), ties to the even
// one. Past the largest finite bf16 the next value up is 2^128, which rounds
// to Inf. A NaN stays a NaN of the same sign, made quiet.
inline uint16_t Bf16Reference(uint32_t b) {
  const float x = FloatFromBits(b);
  if (std::isnan(x)) return static_cast<uint16_t>((b >> 16) | 0x40);
  if (std::isinf(x)) return static_cast<uint16_t>(b >> 16);
  const uint32_t sign = b & 0x80000000u;
  const uint32_t lo = b & 0x7fff0000u;
  const uint32_t hi = lo + 0x10000u;
  const auto value = [](uint32_t m) {
    return m == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(FloatFromBits(m));
  };
  const double ax = value(b & 0x7fffffffu);
  const double below = ax - value(lo), above = value(hi) - ax;
  const uint32_t r = below < above ? lo : above < below ? hi : ((lo >> 16) & 1) ? hi : lo;
  return static_cast<uint16_t>((r | sign) >> 16);
}

}  // namespace ps

#endif  // PS_COMMON_BF16_REFERENCE_H_
