// The CUDA ComputeBackend: cuBLAS for Gemm, the kernels of cuda_kernels.h
// for the rest. Internal to the backend library and compiled only with
// --config=cuda: use CreateBackend (backend.h).
//
// Each backend owns one CUDA stream on its device and runs every op there in
// call order. Buffers are plain cudaMalloc memory. Copies cross through pinned
// staging buffers that grow as needed and are reused: the caller's data is
// staged, so CopyToDevice returns before its copy runs, and StartCopyToHost
// lands in staging, from where FinishCopiesToHost moves it to the caller. Use
// a backend from the thread that created it (which it left on its device).
#ifndef PS_WORKER_COMPUTE_CUDA_BACKEND_H_
#define PS_WORKER_COMPUTE_CUDA_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/compute/backend.h"

namespace ps {

struct CudaDevices {
  int count = 0;         // devices the CUDA runtime sees
  std::string why_none;  // when count == 0, the runtime's reason
};

// Asks the CUDA runtime for devices. No GPU, no driver, or a driver older
// than the runtime count as no device (count 0), so that a CUDA build still
// runs on the CPU there; other failures are errors.
absl::StatusOr<CudaDevices> FindCudaDevices();

// REQUIRES: 0 <= options.gpu < FindCudaDevices()->count.
absl::StatusOr<std::unique_ptr<ComputeBackend>> CreateCudaBackend(const BackendOptions& options);

}  // namespace ps

#endif  // PS_WORKER_COMPUTE_CUDA_BACKEND_H_
