// The compute backend's flags (--device, --gpu, --tf32, --threads), defined
// here once, and the BackendOptions (worker/compute/backend.h) they make.
#ifndef PS_WORKER_COMPUTE_FLAGS_H_
#define PS_WORKER_COMPUTE_FLAGS_H_

#include "absl/status/statusor.h"
#include "worker/compute/backend.h"

namespace ps {

// The flags' values (after absl::ParseCommandLine). INVALID_ARGUMENT for a
// negative --gpu; CreateBackend checks the rest when the backend is made.
absl::StatusOr<BackendOptions> BackendOptionsFromFlags();

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_FLAGS_H_
