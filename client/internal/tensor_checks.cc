#include "client/internal/tensor_checks.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status CheckTensor(const TensorSpec& spec, size_t size) {
  if (static_cast<int64_t>(size) == spec.num_elements()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tensor ", TensorSpecToString(spec), " got ", size, " values"));
}

absl::Status CheckTensorSizes(const ModelSpec& spec, const std::vector<size_t>& sizes,
                              absl::string_view what) {
  if (spec.empty()) return absl::FailedPreconditionError("Init must be called first");
  if (sizes.size() != spec.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", sizes.size(), " ", what, ", the model has ", spec.size()));
  }
  for (size_t i = 0; i < spec.size(); ++i) {
    if (absl::Status s = CheckTensor(spec[i], sizes[i]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

template <typename Tensors>
std::vector<size_t> Sizes(const Tensors& tensors) {
  std::vector<size_t> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.size());
  return out;
}

}  // namespace

absl::Status CheckTensors(const ModelSpec& spec, const ConstTensorViews& tensors) {
  return CheckTensorSizes(spec, Sizes(tensors));
}

absl::Status CheckTensors(const ModelSpec& spec, const TensorViews& weights) {
  return CheckTensorSizes(spec, Sizes(weights), "weight tensors");
}

absl::Status CheckTensors(const ModelSpec& spec, const TensorList& tensors) {
  return CheckTensorSizes(spec, Sizes(tensors));
}

void ResizeToSpec(const ModelSpec& spec, TensorList* tensors) {
  tensors->resize(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) (*tensors)[i].resize(spec[i].num_elements());
}

}  // namespace ps
