// WireDtype: the element type of tensor data on the wire (WireDtype in
// proto/types.proto): float32 (4 bytes) or bfloat16 (2 bytes, common/bf16.h).
// Whatever travels, tensors in memory are float32 on both sides. Stateless;
// thread-safe.
#ifndef PS_COMMON_WIRE_DTYPE_H_
#define PS_COMMON_WIRE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// Values as in proto/types.proto. A decoded value may be any int32; only the
// two named ones are known (IsKnownWireDtype).
enum class WireDtype : int32_t { kF32 = 0, kBf16 = 1 };

inline bool IsKnownWireDtype(WireDtype d) {
  return d == WireDtype::kF32 || d == WireDtype::kBf16;
}

// Bytes per element: 4 or 2. REQUIRES: IsKnownWireDtype(d).
inline size_t WireDtypeBytes(WireDtype d) { return d == WireDtype::kBf16 ? 2 : 4; }

// "f32" / "bf16" (the flag spelling); "unknown dtype N" otherwise.
std::string WireDtypeName(WireDtype d);

// "f32" / "bf16"; INVALID_ARGUMENT naming the expected values otherwise.
absl::StatusOr<WireDtype> ParseWireDtype(absl::string_view text);

// A decoded varint as a WireDtype: values past int32 become an unknown one.
inline WireDtype WireDtypeFromWire(uint64_t v) {
  return static_cast<WireDtype>(v > 0x7fffffffu ? 0x7fffffff : static_cast<int32_t>(v));
}

}  // namespace ps

#endif  // PS_COMMON_WIRE_DTYPE_H_
