#include "common/float_bytes.h"

#include <cstring>

#include "common/bf16.h"

namespace ps {

static_assert(sizeof(float) == 4, "float must be IEEE-754 binary32");

namespace {
// The wire is little-endian; these hosts are too (x86-64, aarch64).
constexpr bool kHostIsLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
static_assert(kHostIsLittleEndian, "big-endian hosts need byte swapping here");
}  // namespace

void EncodeFloats(absl::Span<const float> values, std::string* out) {
  out->resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(&(*out)[0], values.data(), out->size());
}

size_t PiecesSize(const Pieces& pieces) {
  size_t n = 0;
  for (absl::string_view p : pieces) n += p.size();
  return n;
}

void CopyPieces(const Pieces& pieces, void* dst) {
  char* out = static_cast<char*>(dst);
  for (absl::string_view p : pieces) {
    if (p.empty()) continue;
    std::memcpy(out, p.data(), p.size());
    out += p.size();
  }
}

void WidenBf16Pieces(const Pieces& pieces, float* dst) {
  unsigned char split[2];
  bool have_split = false;  // split[0] holds the first byte of an element
  for (absl::string_view p : pieces) {
    const unsigned char* b = reinterpret_cast<const unsigned char*>(p.data());
    size_t n = p.size();
    if (n == 0) continue;
    if (have_split) {
      split[1] = b[0];
      Bf16ToFloats(split, 1, dst++);
      ++b;
      --n;
      have_split = false;
    }
    Bf16ToFloats(b, n / 2, dst);
    dst += n / 2;
    if (n % 2 != 0) {
      split[0] = b[n - 1];
      have_split = true;
    }
  }
}

}  // namespace ps
