#include "common/model_spec.h"

#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {

int64_t TensorSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string EscapeName(absl::string_view name) {
  constexpr size_t kMax = 64;
  std::string out = absl::CHexEscape(name.substr(0, kMax));
  if (name.size() > kMax) out += "...";
  return out;
}

std::string TensorSpecToString(const TensorSpec& t) {
  return absl::StrCat(t.name, "[", absl::StrJoin(t.shape, ","), "]");
}

absl::StatusOr<int64_t> CheckedElements(absl::Span<const int64_t> shape, int64_t max) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(shape, ","), "] has a dimension < 1"));
    }
    if (__builtin_mul_overflow(n, d, &n) || n > max) {
      return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape, ","),
                                                     "] has more than ", max, " elements"));
    }
  }
  return n;
}

absl::Status ValidateModelSpec(const ModelSpec& spec, const SpecLimits& limits) {
  if (spec.empty()) return absl::InvalidArgumentError("model spec has no tensors");
  if (spec.size() > static_cast<size_t>(limits.max_tensors)) {
    return absl::InvalidArgumentError(absl::StrCat("model spec has ", spec.size(),
                                                   " tensors; the limit is ",
                                                   limits.max_tensors, " (--max_tensors)"));
  }
  std::set<absl::string_view> names;
  int64_t total = 0;
  for (const TensorSpec& t : spec) {
    if (t.name.empty()) {
      return absl::InvalidArgumentError("model spec has a tensor with an empty name");
    }
    if (t.name.size() > static_cast<size_t>(limits.max_name_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor name '", EscapeName(t.name), "' has ", t.name.size(),
          " bytes; the limit is ", limits.max_name_bytes));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec names tensor '", EscapeName(t.name), "' twice"));
    }
    if (t.shape.size() > static_cast<size_t>(limits.max_rank)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", EscapeName(t.name), "' has rank ",
                                                     t.shape.size(), "; the limit is ",
                                                     limits.max_rank));
    }
    absl::StatusOr<int64_t> n = CheckedElements(t.shape, limits.max_tensor_elements);
    if (!n.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", EscapeName(t.name), "': ",
                                                     n.status().message(),
                                                     " (--max_tensor_elements)"));
    }
    total += *n;  // both terms <= 2^62: no overflow
    if (total > limits.max_model_elements) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "model spec has more than ", limits.max_model_elements,
          " elements (--max_model_elements); reached at tensor '", EscapeName(t.name), "'"));
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

ConstTensorViews ConstViewsOf(const TensorList& values) {
  return ConstTensorViews(values.begin(), values.end());
}

TensorViews ViewsOf(TensorList* values) {
  TensorViews out;
  out.reserve(values->size());
  for (std::vector<float>& v : *values) out.push_back(absl::MakeSpan(v));
  return out;
}

}  // namespace ps
