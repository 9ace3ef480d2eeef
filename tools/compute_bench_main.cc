// compute_bench: how fast one worker's model computes, without the servers.
//
// For an MLP of --dims and a batch of --batch random examples it times, after
// --warmup rounds, over --steps rounds:
//   train_step_ms:  a training step as the trainer's compute time counts it:
//                   SetWeights, then TrainStep with the gradients downloaded
//                   (on_ready does nothing). The batch comes from a dataset
//                   the backend holds where it says so (as in training), else
//                   it is uploaded with the step.
//   gemm_floor_ms:  the same step's matrix products alone, through the same
//                   backend: the floor that the other ops and copies add to.
//   forward_samples_per_s: forward passes (Evaluate).
// On CUDA the clock stops only once the device has finished.
//
//   compute_bench --device=cuda --batch=256
#include <algorithm>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "worker/backend.h"
#include "worker/model.h"

ABSL_FLAG(std::string, device, "auto", "Compute backend: auto, cpu or cuda.");
ABSL_FLAG(int, gpu, 0, "CUDA device index (--device=cuda or auto).");
ABSL_FLAG(bool, tf32, false, "Let cuBLAS use TF32 tensor cores (CUDA only).");
ABSL_FLAG(int, threads, 0, "CPU math threads; 0 = all cores.");
ABSL_FLAG(int, batch, 64, "Examples per step.");
ABSL_FLAG(std::string, dims, "784,512,256,10", "Layer widths: inputs, hidden..., classes.");
ABSL_FLAG(int, steps, 200, "Timed rounds of each measurement.");
ABSL_FLAG(int, warmup, 10, "Untimed rounds before each measurement.");
ABSL_FLAG(bool, json, false, "Print one JSON object instead of text.");

namespace ps {
namespace {

struct BenchOptions {
  BackendOptions backend;
  int batch = 64;                               // examples per step
  std::vector<int> dims = {784, 512, 256, 10};  // inputs, hidden..., classes
  int steps = 200;                              // timed rounds per measurement
  int warmup = 10;                              // untimed rounds before each
};

struct BenchResult {
  std::string backend;  // its description()
  bool held = false;    // steps gathered their batch from a held dataset
  double train_step_ms = 0;
  double gemm_floor_ms = 0;
  double forward_samples_per_s = 0;
};

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
absl::StatusOr<double> TimeGemms(ComputeBackend* backend, const BenchOptions& o) {
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

absl::StatusOr<BenchResult> RunBench(const BenchOptions& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeBackend> backend, CreateBackend(o.backend));
  BenchResult result;
  result.backend = backend->description();
  ASSIGN_OR_RETURN(std::unique_ptr<Mlp> model, Mlp::Create(backend.get(), o.dims, o.batch));
  const TensorList weights = model->InitialValues(1);
  RETURN_IF_ERROR(model->SetWeights(weights));

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
                     RETURN_IF_ERROR(model->SetWeights(weights));
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

absl::StatusOr<std::vector<int>> ParseDims(const std::string& text) {
  absl::StatusOr<std::vector<int>> parsed = ParsePositiveIntList("dims", text);
  if (!parsed.ok()) return parsed.status();
  std::vector<int> dims = *std::move(parsed);
  if (dims.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dims=", text, ": need at least inputs and classes"));
  }
  return dims;
}

int Fail(const absl::Status& s) {
  std::cerr << "compute_bench: " << s << std::endl;
  return 1;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times one worker's model compute: training step, its GEMMs alone, forward passes.\n"
      "  compute_bench --device=cuda --batch=256 [--json]");
  absl::ParseCommandLine(argc, argv);
  ps::BenchOptions o;
  o.backend.device = absl::GetFlag(FLAGS_device);
  o.backend.gpu = absl::GetFlag(FLAGS_gpu);
  o.backend.tf32 = absl::GetFlag(FLAGS_tf32);
  o.backend.threads = absl::GetFlag(FLAGS_threads);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  absl::StatusOr<std::vector<int>> dims = ps::ParseDims(absl::GetFlag(FLAGS_dims));
  if (!dims.ok()) return ps::Fail(dims.status());
  o.dims = *dims;
  if (o.batch < 1) return ps::Fail(absl::InvalidArgumentError("--batch must be >= 1"));
  if (o.steps < 1) return ps::Fail(absl::InvalidArgumentError("--steps must be >= 1"));
  if (o.warmup < 0) return ps::Fail(absl::InvalidArgumentError("--warmup must be >= 0"));

  absl::StatusOr<ps::BenchResult> r = ps::RunBench(o);
  if (!r.ok()) return ps::Fail(r.status());
  const double ratio = r->train_step_ms / r->gemm_floor_ms;
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << absl::StrFormat(
                     "{\"backend\": \"%s\", \"dims\": [%s], \"batch\": %d, \"steps\": %d, "
                     "\"batch_source\": \"%s\", \"train_step_ms\": %.6f, \"gemm_floor_ms\": "
                     "%.6f, \"step_over_gemm\": %.3f, \"forward_samples_per_s\": %.1f}",
                     r->backend, absl::StrJoin(o.dims, ", "), o.batch, o.steps,
                     r->held ? "held" : "uploaded", r->train_step_ms, r->gemm_floor_ms, ratio,
                     r->forward_samples_per_s)
              << std::endl;
  } else {
    // The figures share the last line, which scripts keep.
    std::cout << absl::StrFormat(
        "backend %s\nmlp %s, batch %d (%s), %d steps after %d warm-up\n"
        "train_step_ms: SetWeights + TrainStep with the gradient download; gemm_floor_ms: the "
        "step's matrix products alone\n"
        "train_step_ms %.4f gemm_floor_ms %.4f step_over_gemm %.2f forward_samples_per_s %.0f\n",
        r->backend, absl::StrJoin(o.dims, "-"), o.batch,
        r->held ? "gathered from a held dataset" : "uploaded each step", o.steps, o.warmup,
        r->train_step_ms, r->gemm_floor_ms, ratio, r->forward_samples_per_s);
  }
  return 0;
}
