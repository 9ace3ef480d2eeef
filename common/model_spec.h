// ModelSpec: the names and shapes of a model's tensors, in a fixed order.
//
// A plain value type, independent of the wire format; common/proto_convert.h
// translates it to and from ps::ModelSpec. Thread-compatible.
#ifndef PS_COMMON_MODEL_SPEC_H_
#define PS_COMMON_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

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

// "name[d0,d1]".
std::string TensorSpecToString(const TensorSpec& t);

using ModelSpec = std::vector<TensorSpec>;

// Values for a whole model: one float vector per tensor of a ModelSpec, in
// spec order, each holding the tensor's elements in row-major order.
using TensorList = std::vector<std::vector<float>>;

// Checks that names are non-empty and unique, dimensions positive, and the
// model is not empty. The message names the offending tensor.
absl::Status ValidateModelSpec(const ModelSpec& spec);

// OK if equal; otherwise FAILED_PRECONDITION describing the first difference.
absl::Status CompareModelSpecs(const ModelSpec& expected, const ModelSpec& got);

// Total number of elements in the model.
int64_t TotalElements(const ModelSpec& spec);

}  // namespace ps

#endif  // PS_COMMON_MODEL_SPEC_H_
