// float32 tensors <-> the wire's byte strings: raw little-endian IEEE-754
// binary32, 4 bytes per element, no header. Stateless; thread-safe.
#ifndef PS_COMMON_FLOAT_BYTES_H_
#define PS_COMMON_FLOAT_BYTES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

// Writes `values` into `out`, replacing its content.
void EncodeFloats(absl::Span<const float> values, std::string* out);

// A field's bytes, possibly split across received buffers, in order.
using Pieces = std::vector<absl::string_view>;

// Total bytes of `pieces`.
size_t PiecesSize(const Pieces& pieces);

// Copies `pieces` (4 * out.size() bytes of little-endian float32) into `out`.
// INVALID_ARGUMENT (the message starts with `what`) if the byte count is not
// a multiple of 4 or not 4 * out.size().
absl::Status DecodeFloatPieces(const Pieces& pieces, absl::Span<float> out,
                               absl::string_view what);

// Decodes `bytes` into `out`. INVALID_ARGUMENT (the message starts with `what`)
// when the byte count is not a multiple of 4 or not 4 * out.size().
absl::Status DecodeFloats(absl::string_view bytes, absl::Span<float> out,
                          absl::string_view what);

}  // namespace ps

#endif  // PS_COMMON_FLOAT_BYTES_H_
