#include "common/slice_assembler.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ps {

namespace {

// Bit 31 of the result is set if any of the n floats at `v` is NaN or Inf,
// i.e. has all exponent bits set: then (bits & exp) + 2^23 carries into
// bit 31, which it cannot otherwise. Only and/add/or: this vectorizes, and
// with a constant n (no remainder loop) GCC does so even at -O2.
inline uint32_t NonFiniteBits(const float* v, size_t n) {
  constexpr uint32_t kExp = 0x7f800000u;
  uint32_t acc = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    acc |= (bits & kExp) + 0x00800000u;
  }
  return acc & 0x80000000u;
}

}  // namespace

bool AllFinite(const float* values, size_t n) {
  // Blocks of a fixed size vectorize, and let a bad value end the scan early.
  constexpr size_t kBlock = 4096;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if (NonFiniteBits(values + i, kBlock) != 0) return false;
  }
  for (; i < n; ++i) {
    if (NonFiniteBits(values + i, 1) != 0) return false;
  }
  return true;
}

namespace {

// CopyPieces of n floats to `out`, checking each 16 KB of `out` right after
// writing it, while it is still in cache (a second pass over a 1 MB chunk
// would read it back from further away). False at the first NaN or Inf.
bool CopyPiecesAllFinite(const Pieces& pieces, float* out, size_t n) {
  constexpr size_t kBlockFloats = 4096;
  constexpr size_t kBlockBytes = kBlockFloats * sizeof(float);
  char* dst = reinterpret_cast<char*>(out);
  size_t written = 0;  // bytes
  size_t checked = 0;  // floats
  for (absl::string_view p : pieces) {
    while (!p.empty()) {
      const size_t take = std::min(p.size(), kBlockBytes - written % kBlockBytes);
      std::memcpy(dst + written, p.data(), take);
      written += take;
      p.remove_prefix(take);
      if (written % kBlockBytes == 0) {
        if (!AllFinite(out + checked, kBlockFloats)) return false;
        checked += kBlockFloats;
      }
    }
  }
  return AllFinite(out + checked, n - checked);
}

}  // namespace

SliceAssembler::SliceAssembler(std::shared_ptr<const SliceLayout> layout, Options options)
    : layout_(std::move(layout)), options_(std::move(options)) {
  next_.reserve(layout_->slices.size());
  for (const SliceRange& r : layout_->slices) next_.push_back(r.offset);
}

absl::StatusOr<int> SliceAssembler::Check(const RawTensorSlice& c) const {
  const SliceLayout& p = *layout_;
  const absl::string_view what = options_.what;
  auto it = p.by_name.find(c.name);
  if (it == p.by_name.end()) {
    const bool in_model = std::any_of(p.spec.begin(), p.spec.end(),
                                      [&](const TensorSpec& t) { return t.name == c.name; });
    const std::string name = EscapeName(c.name);
    return absl::InvalidArgumentError(
        in_model ? absl::StrCat(what, ": tensor '", name, "' has no elements on this shard")
                 : absl::StrCat(what, ": unknown tensor '", name, "' (not in the model spec)"));
  }
  const int idx = it->second;
  const SliceRange& r = p.slices[idx];
  const TensorSpec& t = p.spec[r.tensor_index];
  if (c.shape != t.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": tensor '", t.name, "' has shape [",
        absl::StrJoin(c.shape.begin(), c.shape.begin() + std::min<size_t>(c.shape.size(), 8), ","),
        c.shape.size() > 8 ? ",..." : "", "] but the model has ", TensorSpecToString(t)));
  }
  const int64_t next = next_[idx];
  const int64_t end = r.offset + r.length;  // the layout's own values: no overflow
  // Compare against what remains: offset + length could overflow.
  if (c.offset != next || c.length < 0 || c.length > end - next) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": chunk at offset ", c.offset, " with length ", c.length, " of tensor '", t.name,
        "' is out of order or outside [", r.offset, ", ", end,
        "), the range this shard owns; expected the next chunk to start at ", next));
  }
  if (!IsKnownWireDtype(c.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": chunk [", c.offset, ", ", c.offset + c.length, ") of tensor '", t.name,
        "' has ", WireDtypeName(c.dtype), " (expected 0 = f32 or 1 = bf16)"));
  }
  const size_t bytes = PiecesSize(c.data);
  const size_t width = WireDtypeBytes(c.dtype);
  const char* type = c.dtype == WireDtype::kBf16 ? "bf16" : "float32";
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": chunk [", c.offset, ", ", c.offset + c.length, ") of tensor '", t.name,
        "': data has ", bytes, " bytes, which is not a multiple of ", width, " (", type,
        " elements)"));
  }
  if (bytes / width != static_cast<uint64_t>(c.length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": chunk [", c.offset, ", ", c.offset + c.length, ") of tensor '", t.name,
        "': data has ", bytes / width, " ", type, " elements, expected ", c.length));
  }
  return idx;
}

absl::Status SliceAssembler::Add(const RawTensorSlice& c, const Destination& dst) {
  ASSIGN_OR_RETURN(const int idx, Check(c));
  const SliceRange& r = layout_->slices[idx];
  ASSIGN_OR_RETURN(float* base, dst(r));
  float* out = base + (c.offset - r.offset);
  const size_t n = static_cast<size_t>(c.length);
  bool finite = true;
  if (c.dtype == WireDtype::kBf16) {
    WidenBf16Pieces(c.data, out);
    finite = !options_.reject_nonfinite || AllFinite(out, n);
  } else if (options_.reject_nonfinite) {
    finite = CopyPiecesAllFinite(c.data, out, n);
  } else {
    CopyPieces(c.data, out);
  }
  if (!finite) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.what, ": chunk [", c.offset, ", ", c.offset + c.length,
                     ") of tensor '", layout_->spec[r.tensor_index].name,
                     "' holds NaN or Inf values (--reject_nonfinite)"));
  }
  next_[idx] += c.length;
  return absl::OkStatus();
}

absl::Status SliceAssembler::Validate(const std::vector<RawTensorSlice>& chunks) const {
  SliceAssembler dry(layout_, options_);
  dry.next_ = next_;
  for (const RawTensorSlice& c : chunks) {
    ASSIGN_OR_RETURN(const int idx, dry.Check(c));
    dry.next_[idx] += c.length;
  }
  return dry.Finish();
}

absl::Status SliceAssembler::Finish() const {
  for (size_t i = 0; i < next_.size(); ++i) {
    const SliceRange& r = layout_->slices[i];
    if (next_[i] != r.offset + r.length) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.what, ": missing elements [", next_[i], ", ", r.offset + r.length,
          ") of tensor '", layout_->spec[r.tensor_index].name, "' (this shard owns [", r.offset,
          ", ", r.offset + r.length, "))"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
