#include "client/internal/tensor_checks.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status CheckTensor(const TensorSpec& spec, const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) == spec.num_elements()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tensor ", TensorSpecToString(spec), " got ", values.size(), " values"));
}

absl::Status CheckTensors(const ModelSpec& spec, const TensorList& tensors) {
  if (spec.empty()) return absl::FailedPreconditionError("Init must be called first");
  if (tensors.size() != spec.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", tensors.size(), " tensors, the model has ", spec.size()));
  }
  for (size_t i = 0; i < spec.size(); ++i) {
    if (absl::Status s = CheckTensor(spec[i], tensors[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void ResizeToSpec(const ModelSpec& spec, TensorList* tensors) {
  tensors->resize(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) (*tensors)[i].resize(spec[i].num_elements());
}

}  // namespace ps
