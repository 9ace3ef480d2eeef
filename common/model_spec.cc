#include "common/model_spec.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {

int64_t TensorSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorSpecToString(const TensorSpec& t) {
  return absl::StrCat(t.name, "[", absl::StrJoin(t.shape, ","), "]");
}

absl::Status ValidateModelSpec(const ModelSpec& spec) {
  if (spec.empty()) return absl::InvalidArgumentError("model spec has no tensors");
  std::set<std::string> names;
  for (const TensorSpec& t : spec) {
    if (t.name.empty()) {
      return absl::InvalidArgumentError("model spec has a tensor with an empty name");
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec names tensor '", t.name, "' twice"));
    }
    for (int64_t d : t.shape) {
      if (d <= 0 || d > (int64_t{1} << 40)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor ", TensorSpecToString(t), " has a dimension outside [1, 2^40]"));
      }
    }
    if (t.num_elements() > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", TensorSpecToString(t), " has more than 2^40 elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status CompareModelSpecs(const ModelSpec& expected, const ModelSpec& got) {
  const size_t n = std::min(expected.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (expected[i] != got[i]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model spec mismatch at tensor ", i, ": the parameters were created as ",
          TensorSpecToString(expected[i]), " but this request has ",
          TensorSpecToString(got[i])));
    }
  }
  if (expected.size() != got.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model spec mismatch: the parameters were created with ",
                     expected.size(), " tensors but this request has ", got.size()));
  }
  return absl::OkStatus();
}

int64_t TotalElements(const ModelSpec& spec) {
  int64_t n = 0;
  for (const TensorSpec& t : spec) n += t.num_elements();
  return n;
}

}  // namespace ps
