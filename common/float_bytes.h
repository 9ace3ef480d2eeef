// float32 tensors <-> the wire's byte strings: raw little-endian IEEE-754
// binary32, 4 bytes per element, or bfloat16 (common/bf16.h), 2 bytes per
// element; no header. Stateless; thread-safe.
#ifndef PS_COMMON_FLOAT_BYTES_H_
#define PS_COMMON_FLOAT_BYTES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

// Writes `values` into `out`, replacing its content.
void EncodeFloats(absl::Span<const float> values, std::string* out);

// A field's bytes, possibly split across received buffers, in order.
using Pieces = std::vector<absl::string_view>;

// Total bytes of `pieces`.
size_t PiecesSize(const Pieces& pieces);

// Copies the bytes of `pieces`, in order, to `dst` (PiecesSize(pieces)
// bytes must be writable there).
void CopyPieces(const Pieces& pieces, void* dst);

// Widens the bf16 values of `pieces`, in order, to PiecesSize(pieces) / 2
// floats at `dst`. An element may be split across two pieces. REQUIRES:
// PiecesSize(pieces) is even.
void WidenBf16Pieces(const Pieces& pieces, float* dst);

}  // namespace ps

#endif  // PS_COMMON_FLOAT_BYTES_H_
