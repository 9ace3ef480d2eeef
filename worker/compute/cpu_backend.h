// The CPU ComputeBackend, on OpenBLAS. Internal to the backend library: use
// CreateBackend (backend.h).
#ifndef PS_WORKER_COMPUTE_CPU_BACKEND_H_
#define PS_WORKER_COMPUTE_CPU_BACKEND_H_

#include <memory>
#include <string>

#include "worker/compute/backend.h"

namespace ps {

// threads: OpenBLAS threads; 0 = its default. REQUIRES: threads >= 0.
// `why`, if not empty, ends description(): why the CPU was chosen (e.g. by
// --device=auto on a machine without a GPU).
std::unique_ptr<ComputeBackend> CreateCpuBackend(int threads, std::string why = "");

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CPU_BACKEND_H_
