#include "common/wire_dtype.h"

#include "absl/strings/str_cat.h"

namespace ps {

std::string WireDtypeName(WireDtype d) {
  switch (d) {
    case WireDtype::kF32: return "f32";
    case WireDtype::kBf16: return "bf16";
  }
  return absl::StrCat("unknown dtype ", static_cast<int32_t>(d));
}

absl::StatusOr<WireDtype> ParseWireDtype(absl::string_view text) {
  if (text == "f32") return WireDtype::kF32;
  if (text == "bf16") return WireDtype::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire dtype '", text, "': expected 'f32' or 'bf16'"));
}

}  // namespace ps
