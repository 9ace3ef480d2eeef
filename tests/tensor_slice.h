// TensorSlice protos for tests that write requests by hand, valid or not:
// every field is set exactly as given, nothing is checked. Header-only.
#ifndef PS_TESTS_TENSOR_SLICE_H_
#define PS_TESTS_TENSOR_SLICE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/ps.pb.h"

namespace ps {

inline v1::TensorSlice MakeTensorSlice(const std::string& name, const std::vector<int64_t>& shape,
                                       int64_t offset, int64_t length, std::string data) {
  v1::TensorSlice s;
  s.set_name(name);
  for (int64_t d : shape) s.add_shape(d);
  s.set_offset(offset);
  s.set_length(length);
  s.set_data(std::move(data));
  return s;
}

}  // namespace ps

#endif  // PS_TESTS_TENSOR_SLICE_H_
