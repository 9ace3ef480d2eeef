// bfloat16 (bf16): the top 16 bits of an IEEE-754 binary32 float (sign, the
// same 8 exponent bits, 7 mantissa bits), the wire format of WireDtype BF16
// (proto/types.proto). Stateless functions; thread-safe.
//
// float32 -> bf16 rounds to nearest, ties to even, as IEEE-754 does:
//   - a value whose rounded magnitude passes the largest finite bf16
//     (0x7f7f = 3.3895e38) becomes +-Inf, which is correct IEEE behaviour;
//   - +-Inf stay +-Inf; subnormals round like any other value (no flush);
//   - a NaN stays a NaN of the same sign, quiet (bit 6 set), keeping its
//     top 7 payload bits; a rounding carry can never turn it into Inf.
// bf16 -> float32 is exact (a 16-bit shift). Both are exact by construction
// (integer operations only), so results are the same on every host.
//
// The array forms run over blocks of a constant size, which GCC vectorizes
// at -O2; `in` and `out` must not overlap.
#ifndef PS_COMMON_BF16_H_
#define PS_COMMON_BF16_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ps {

// The bf16 bits nearest to `f` (ties to even; see above).
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  // Adding 0x7fff plus the lowest kept bit carries into bit 16 exactly when
  // the dropped half is above 0x8000, or equal to it with an odd kept part.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

// The float32 value of bf16 bits `h` (exact).
inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// out[i] = FloatToBf16(in[i]) for i < n.
void FloatsToBf16(const float* in, size_t n, uint16_t* out);

// out[i] = Bf16ToFloat(in[i]) for i < n. `in` may be unaligned bytes of the
// wire: it is read as little-endian 16-bit values, 2 * n bytes.
void Bf16ToFloats(const void* in, size_t n, float* out);

// f rounded to bf16 and back: the value a bf16 wire delivers for `f`.
inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

}  // namespace ps

#endif  // PS_COMMON_BF16_H_
