// Writes and reads NumPy .npy files (format 1.0, little-endian float32, C order).
// Stateless; thread-safe.
#ifndef PS_COMMON_NPY_H_
#define PS_COMMON_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

// Writes `data` (product(shape) floats) to `path`, replacing it.
absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      absl::Span<const float> data);

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Reads a file written by WriteNpy (or numpy.save of a C-order '<f4' array).
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

}  // namespace ps

#endif  // PS_COMMON_NPY_H_
