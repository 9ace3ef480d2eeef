// Tensor checks: what PsClient (client/ps_client.h) and PushPullInProgress
// check of the tensors a caller hands in against the model spec, and how
// they size the weights they fill. Pure functions.
#ifndef PS_CLIENT_INTERNAL_TENSOR_CHECKS_H_
#define PS_CLIENT_INTERNAL_TENSOR_CHECKS_H_

#include <vector>

#include "absl/status/status.h"
#include "common/model_spec.h"

namespace ps {

// INVALID_ARGUMENT naming the tensor unless `values` has its elements.
absl::Status CheckTensor(const TensorSpec& spec, const std::vector<float>& values);

// FAILED_PRECONDITION if `spec` is empty (Init was not called);
// INVALID_ARGUMENT unless `tensors` has one tensor per spec entry, each of
// its size.
absl::Status CheckTensors(const ModelSpec& spec, const TensorList& tensors);

// Resizes `tensors` to one tensor per spec entry, each of its size.
void ResizeToSpec(const ModelSpec& spec, TensorList* tensors);

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_TENSOR_CHECKS_H_
