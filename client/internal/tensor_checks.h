// Tensor checks: what PsClient (client/ps_client.h) and PushPullInProgress
// check of the tensors a caller hands in against the model spec, and how
// they size the weights they fill. Pure functions.
#ifndef PS_CLIENT_INTERNAL_TENSOR_CHECKS_H_
#define PS_CLIENT_INTERNAL_TENSOR_CHECKS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/model_spec.h"

namespace ps {

// INVALID_ARGUMENT naming the tensor unless `size` is its element count.
absl::Status CheckTensor(const TensorSpec& spec, size_t size);

// FAILED_PRECONDITION if `spec` is empty (Init was not called);
// INVALID_ARGUMENT unless `sizes` has one entry per spec entry, each its
// tensor's element count. `what` names the tensors in messages ("tensors",
// "weight tensors").
absl::Status CheckTensorSizes(const ModelSpec& spec, const std::vector<size_t>& sizes,
                              absl::string_view what = "tensors");

// CheckTensorSizes of the views' or vectors' sizes.
absl::Status CheckTensors(const ModelSpec& spec, const ConstTensorViews& tensors);
absl::Status CheckTensors(const ModelSpec& spec, const TensorViews& weights);
absl::Status CheckTensors(const ModelSpec& spec, const TensorList& tensors);

// Resizes `tensors` to one tensor per spec entry, each of its size.
void ResizeToSpec(const ModelSpec& spec, TensorList* tensors);

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_TENSOR_CHECKS_H_
