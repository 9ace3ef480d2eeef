#include "common/float_bytes.h"

#include <cstring>

#include "absl/strings/str_cat.h"

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

absl::Status DecodeFloats(absl::string_view bytes, absl::Span<float> out,
                          absl::string_view what) {
  return DecodeFloatPieces({bytes}, out, what);
}

size_t PiecesSize(const Pieces& pieces) {
  size_t n = 0;
  for (absl::string_view p : pieces) n += p.size();
  return n;
}

absl::Status DecodeFloatPieces(const Pieces& pieces, absl::Span<float> out,
                               absl::string_view what) {
  const size_t bytes = PiecesSize(pieces);
  if (bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": data has ", bytes, " bytes, which is not a multiple of 4 (float32 elements)"));
  }
  if (bytes != out.size() * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": data has ", bytes / sizeof(float),
                                                   " float32 elements, expected ", out.size()));
  }
  char* dst = reinterpret_cast<char*>(out.data());
  for (absl::string_view p : pieces) {
    std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
  return absl::OkStatus();
}

}  // namespace ps
