// The MLP's own flags (--hidden, --dataset_dir, --shuffle), defined here
// once, and the MlpWorkload (worker/mlp/workload.h) they make with the flags
// every model shares (SharedWorkloadFlags, worker/train/workload.h) and the
// compute backend's options.
#ifndef PS_WORKER_MLP_FLAGS_H_
#define PS_WORKER_MLP_FLAGS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/compute/backend.h"
#include "worker/mlp/workload.h"
#include "worker/train/workload.h"

namespace ps {

// --model=mlp (the --hidden layers) or softmax (none). INVALID_ARGUMENT
// naming the flag for a bad --hidden.
absl::StatusOr<MlpOptions> MlpOptionsFromFlags(const SharedWorkloadFlags& shared,
                                               const BackendOptions& backend);

// Loads Fashion-MNIST from --dataset_dir and makes the workload. Errors:
// MlpOptionsFromFlags', LoadFashionMnist's (NOT_FOUND naming the package
// that installs the files), MlpOptions::Validate's.
absl::StatusOr<std::unique_ptr<Workload>> MlpWorkloadFromFlags(const SharedWorkloadFlags& shared,
                                                               const BackendOptions& backend);

}  // namespace ps

#endif  // PS_WORKER_MLP_FLAGS_H_
