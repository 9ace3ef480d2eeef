#include "tools/bench/compute_bench.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <random>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/mlp/model.h"

namespace ps {
namespace {

// Examples in the synthetic dataset that steps draw their batches from.
constexpr int kBatchesInDataset = 16;

// Milliseconds per round of `round`, after `warmup` untimed rounds; the
// backend finishes its work before the clock stops.
absl::StatusOr<double> TimeRounds(ComputeBackend* backend, int warmup, int steps,
                                  const std::function<absl::Status()>& round) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(round());
  RETURN_IF_ERROR(backend->Synchronize());
  const absl::Time start = absl::Now();
  for (int i = 0; i < steps; ++i) RETURN_IF_ERROR(round());
  RETURN_IF_ERROR(backend->Synchronize());
  return absl::ToDoubleMilliseconds(absl::Now() - start) / steps;
}

// The matrix products of one training step, on buffers of the model's shapes.
absl::StatusOr<double> TimeGemms(ComputeBackend* backend, const ComputeBenchOptions& o) {
  const std::vector<int>& d = o.dims;
  const size_t widest = *std::max_element(d.begin(), d.end());
  // Every operand fits in one of these (contents do not matter for timing).
  ASSIGN_OR_RETURN(auto a, backend->Allocate(widest * std::max<size_t>(widest, o.batch)));
  ASSIGN_OR_RETURN(auto b, backend->Allocate(widest * std::max<size_t>(widest, o.batch)));
  ASSIGN_OR_RETURN(auto c, backend->Allocate(widest * std::max<size_t>(widest, o.batch)));
  return TimeRounds(backend, o.warmup, o.steps, [&]() -> absl::Status {
    for (size_t l = 0; l + 1 < d.size(); ++l) {
      const int in = d[l], out = d[l + 1];
      RETURN_IF_ERROR(backend->Gemm(false, false, o.batch, out, in, 1, *a, *b, 0, c.get()));
      RETURN_IF_ERROR(backend->Gemm(true, false, in, out, o.batch, 1, *a, *b, 0, c.get()));
      if (l > 0) RETURN_IF_ERROR(backend->Gemm(false, true, o.batch, in, out, 1, *a, *b, 0, c.get()));
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<ComputeBenchResult> RunComputeBench(const ComputeBenchOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, CreateBackend(o.backend));
  ComputeBenchResult result;
  result.backend = backend->description();
  ASSIGN_OR_RETURN(std::unique_ptr<Mlp> model, Mlp::Create(backend.get(), o.dims, o.batch));
  TensorList weights = model->InitialValues(1);
  RETURN_IF_ERROR(model->UseWeights(&weights));

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(-1, 1);
  const int examples = kBatchesInDataset * o.batch;
  std::vector<float> images(size_t(examples) * model->inputs()), labels(examples);
  for (float& v : images) v = pixel(rng);
  for (float& l : labels) l = float(rng() % model->classes());
  std::vector<int64_t> batch(o.batch);

  ASSIGN_OR_RETURN(result.held, backend->ShouldHoldDataset((images.size() + labels.size()) *
                                                           sizeof(float)));
  if (result.held) RETURN_IF_ERROR(model->HoldDataset(images, labels));
  TensorList grads;
  int round = 0;
  ASSIGN_OR_RETURN(result.train_step_ms,
                   TimeRounds(backend.get(), o.warmup, o.steps, [&]() -> absl::Status {
                     const int first = (round++ % kBatchesInDataset) * o.batch;
                     for (int i = 0; i < o.batch; ++i) batch[i] = first + i;
                     RETURN_IF_ERROR(model->UseWeights(&weights));
                     return (result.held ? model->TrainStep(batch, &grads)
                                         : model->TrainStep(&images[size_t(first) * model->inputs()],
                                                            &labels[first], o.batch, &grads))
                         .status();
                   }));
  ASSIGN_OR_RETURN(result.gemm_floor_ms, TimeGemms(backend.get(), o));
  ASSIGN_OR_RETURN(const double forward_ms,
                   TimeRounds(backend.get(), o.warmup, o.steps, [&]() -> absl::Status {
                     return model->Evaluate(images.data(), labels.data(), o.batch).status();
                   }));
  result.forward_samples_per_s = o.batch / (forward_ms / 1e3);
  return result;
}

}  // namespace ps
