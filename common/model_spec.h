// ModelSpec: the names and shapes of a model's tensors, in a fixed order.
//
// A plain value type, independent of the wire format; rpc/wire.h
// translates it to and from ps::v1::ModelSpec. Thread-compatible.
#ifndef PS_COMMON_MODEL_SPEC_H_
#define PS_COMMON_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // row-major; empty = scalar

  // Product of `shape` (1 for a scalar).
  int64_t num_elements() const;
  bool operator==(const TensorSpec& o) const {
    return name == o.name && shape == o.shape;
  }
  bool operator!=(const TensorSpec& o) const { return !(*this == o); }
};

// A tensor name from the network as error messages quote it: C-escaped
// (so the message stays valid UTF-8 whatever the bytes) and cut to about
// 64 bytes (so it stays far below gRPC's metadata limits).
std::string EscapeName(absl::string_view name);

// "name[d0,d1]".
std::string TensorSpecToString(const TensorSpec& t);

using ModelSpec = std::vector<TensorSpec>;

// Values for a whole model: one float vector per tensor of a ModelSpec, in
// spec order, each holding the tensor's elements in row-major order.
using TensorList = std::vector<std::vector<float>>;

// Borrowed views of a model's values, one per tensor in spec order, each over
// the tensor's elements in row-major order: how a caller hands the client
// memory it does not own (a numpy array, a torch tensor) without a copy. The
// viewed memory must outlive the call or operation given it.
using ConstTensorViews = std::vector<absl::Span<const float>>;
using TensorViews = std::vector<absl::Span<float>>;

// Views of every tensor of `values` (invalidated by resizing them).
ConstTensorViews ConstViewsOf(const TensorList& values);
TensorViews ViewsOf(TensorList* values);

// What a model spec from the network may ask for. Checked before anything is
// sized from the spec; every product is computed overflow-safe.
struct SpecLimits {
  int max_tensors = 4096;                         // tensors in the model
  int max_name_bytes = 256;                       // bytes of a tensor name
  int max_rank = 8;                               // dimensions of a shape
  int64_t max_tensor_elements = int64_t{1} << 30;  // elements of one tensor
  int64_t max_model_elements = int64_t{1} << 30;   // elements of all tensors
};

// Checks that the model is not empty, names are non-empty and unique,
// dimensions positive, and every count within `limits`. INVALID_ARGUMENT
// naming the offending tensor and the limit otherwise (RESOURCE_EXHAUSTED for
// a model over max_model_elements).
absl::Status ValidateModelSpec(const ModelSpec& spec, const SpecLimits& limits = SpecLimits());

// The product of `shape` (1 for a scalar), or INVALID_ARGUMENT if a
// dimension is not positive or the product exceeds `max`. Overflow-safe.
absl::StatusOr<int64_t> CheckedElements(absl::Span<const int64_t> shape, int64_t max);

// OK if equal; otherwise FAILED_PRECONDITION describing the first difference.
absl::Status CompareModelSpecs(const ModelSpec& expected, const ModelSpec& got);

// Total number of elements in the model.
int64_t TotalElements(const ModelSpec& spec);

}  // namespace ps

#endif  // PS_COMMON_MODEL_SPEC_H_
