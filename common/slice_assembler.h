// SliceAssembler: the one place where tensor slices received from the
// network are checked and copied into place (pushes and inits on the server,
// pulled weights on the client, over both transports).
//
// A layout (common/partition.h) says which element ranges of which tensors
// one shard owns. The assembler accepts each owned range as one or more
// chunks: sub-ranges that come in order, start where the previous chunk of
// that tensor ended and, together, cover the range exactly once. A unary
// message carries each range as one chunk; the stream transport cuts them
// into ~1 MB chunks. Everything about a chunk is checked before a byte of it
// is copied: the tensor is in the layout, the full shape matches the spec,
// the range is the next one expected, the element type (dtype) is known and
// the data is exactly 4 * length bytes (f32) or 2 * length (bf16). bf16 data
// is widened to float32 as it is copied (common/bf16.h). All offset arithmetic is overflow-safe (lengths are compared with
// what remains, never added to offsets first), so hostile values such as
// length = 2^63 - 1 are plain errors.
//
// Every error is INVALID_ARGUMENT, names the tensor and the range, and starts
// with the `what` given at construction (e.g. "push", "init").
//
// Not thread-safe; one per message or stream call. Shares the layout.
#ifndef PS_COMMON_SLICE_ASSEMBLER_H_
#define PS_COMMON_SLICE_ASSEMBLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/float_bytes.h"
#include "common/partition.h"
#include "common/wire_dtype.h"

namespace ps {

// One TensorSlice (proto/types.proto) as decoded from the wire: `data` views the
// received bytes (possibly in several pieces) and is not yet checked.
struct RawTensorSlice {
  std::string name;
  std::vector<int64_t> shape;  // of the full tensor
  int64_t offset = 0;          // elements
  int64_t length = 0;          // elements
  Pieces data;                 // should be length elements of `dtype`
  WireDtype dtype = WireDtype::kF32;  // as received: may be unknown
};

// True if no value is NaN or +-Inf.
bool AllFinite(const float* values, size_t n);

class SliceAssembler {
 public:
  struct Options {
    std::string what = "push";      // prefix of every error message
    bool reject_nonfinite = false;  // a NaN or +-Inf value is INVALID_ARGUMENT
  };

  // Where the element `r.offset` of slice `r` goes; the following r.length
  // elements must be writable. Called only for a chunk that passed every
  // check, so a caller may allocate its buffer on the first call. An error
  // fails the chunk with that status.
  using Destination = std::function<absl::StatusOr<float*>(const SliceRange& r)>;

  SliceAssembler(std::shared_ptr<const SliceLayout> layout, Options options);

  // Checks `chunk` and copies its values to dst(r) + (chunk.offset - r.offset).
  // On error nothing is recorded and the call should be abandoned.
  absl::Status Add(const RawTensorSlice& chunk, const Destination& dst);

  // Checks a whole message's chunks (as Add would, in order, followed by
  // Finish) without copying anything; the assembler's state is unchanged.
  absl::Status Validate(const std::vector<RawTensorSlice>& chunks) const;

  // OK once every range of the layout was covered; else INVALID_ARGUMENT
  // naming the first range with missing elements.
  absl::Status Finish() const;

  const SliceLayout& layout() const { return *layout_; }

 private:
  // Checks `chunk` against the state; on success returns the index of its
  // slice in the layout. Does not advance.
  absl::StatusOr<int> Check(const RawTensorSlice& chunk) const;

  std::shared_ptr<const SliceLayout> layout_;
  Options options_;
  std::vector<int64_t> next_;  // per layout slice: next element expected
};

}  // namespace ps

#endif  // PS_COMMON_SLICE_ASSEMBLER_H_
