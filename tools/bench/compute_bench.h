// compute_bench's measurement: how fast one worker's model computes on a
// backend, without the servers.
//
// For an MLP of `dims` and a batch of `batch` random examples it times,
// after `warmup` rounds, over `steps` rounds:
//   train_step_ms:  a training step as the trainer's compute time counts it:
//                   UseWeights (a copy to the device on CUDA, none on the
//                   CPU), then TrainStep with the gradients downloaded
//                   (on_ready does nothing). The batch comes from a dataset
//                   the backend holds where it says so (as in training), else
//                   it is uploaded with the step.
//   gemm_floor_ms:  the same step's matrix products alone, through the same
//                   backend: the floor that the other ops and copies add to.
//   forward_samples_per_s: forward passes (Evaluate).
// On CUDA the clock stops only once the device has finished. Not
// thread-safe (it owns the backend it creates).
#ifndef PS_TOOLS_BENCH_COMPUTE_BENCH_H_
#define PS_TOOLS_BENCH_COMPUTE_BENCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/compute/backend.h"

namespace ps {

struct ComputeBenchOptions {
  BackendOptions backend;
  int batch = 64;                               // examples per step
  std::vector<int> dims = {784, 512, 256, 10};  // inputs, hidden..., classes
  int steps = 200;                              // timed rounds per measurement
  int warmup = 10;                              // untimed rounds before each
};

struct ComputeBenchResult {
  std::string backend;  // its description()
  bool held = false;    // steps gathered their batch from a held dataset
  double train_step_ms = 0;
  double gemm_floor_ms = 0;
  double forward_samples_per_s = 0;
};

// The measurement; the backend's or the model's error if either cannot be
// created or fails.
absl::StatusOr<ComputeBenchResult> RunComputeBench(const ComputeBenchOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_BENCH_COMPUTE_BENCH_H_
