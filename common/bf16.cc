#include "common/bf16.h"

namespace ps {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the bf16 wire is little-endian; big-endian hosts need byte swapping here");

namespace {

// Blocks of a constant size: GCC's -O2 cost model vectorizes a loop whose
// trip count needs no remainder loop.
constexpr size_t kBlock = 256;

template <size_t N>
inline void NarrowBlock(const float* in, uint16_t* out) {
  for (size_t i = 0; i < N; ++i) out[i] = FloatToBf16(in[i]);
}

template <size_t N>
inline void WidenBlock(const unsigned char* in, float* out) {
  uint16_t h[N];
  uint32_t bits[N];
  std::memcpy(h, in, sizeof h);  // the wire's bytes need no alignment
  for (size_t i = 0; i < N; ++i) bits[i] = static_cast<uint32_t>(h[i]) << 16;
  std::memcpy(out, bits, sizeof bits);
}

}  // namespace

void FloatsToBf16(const float* in, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) NarrowBlock<kBlock>(in + i, out + i);
  for (; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

void Bf16ToFloats(const void* in, size_t n, float* out) {
  const unsigned char* bytes = static_cast<const unsigned char*>(in);
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) WidenBlock<kBlock>(bytes + 2 * i, out + i);
  for (; i < n; ++i) WidenBlock<1>(bytes + 2 * i, out + i);
}

}  // namespace ps
