// The CPU ComputeBackend, on OpenBLAS. Internal to the backend library: use
// CreateBackend (backend.h).
#ifndef PS_WORKER_CPU_BACKEND_H_
#define PS_WORKER_CPU_BACKEND_H_

#include <memory>

#include "worker/backend.h"

namespace ps {

// threads: OpenBLAS threads; 0 = its default. REQUIRES: threads >= 0.
std::unique_ptr<ComputeBackend> CreateCpuBackend(int threads);

}  // namespace ps

#endif  // PS_WORKER_CPU_BACKEND_H_
