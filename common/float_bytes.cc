#include "common/float_bytes.h"

#include <cstring>

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

}  // namespace ps
