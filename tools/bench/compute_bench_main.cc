// compute_bench: how fast one worker's model computes, without the servers.
//
// Times, for an MLP of --dims and a batch of --batch random examples, a
// training step, its matrix products alone and forward passes
// (tools/bench/compute_bench.h).
//
//   compute_bench --device=cuda --batch=256
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/command_line.h"
#include "common/flag_lists.h"
#include "tools/bench/compute_bench.h"

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
  ps::ParseCommandLine(
      argc, argv,
      "Times one worker's model compute: training step, its GEMMs alone, forward passes.\n"
      "  compute_bench --device=cuda --batch=256 [--json]");
  ps::ComputeBenchOptions o;
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

  absl::StatusOr<ps::ComputeBenchResult> r = ps::RunComputeBench(o);
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
        "train_step_ms: UseWeights + TrainStep with the gradient download; gemm_floor_ms: the "
        "step's matrix products alone\n"
        "train_step_ms %.4f gemm_floor_ms %.4f step_over_gemm %.2f forward_samples_per_s %.0f\n",
        r->backend, absl::StrJoin(o.dims, "-"), o.batch,
        r->held ? "gathered from a held dataset" : "uploaded each step", o.steps, o.warmup,
        r->train_step_ms, r->gemm_floor_ms, ratio, r->forward_samples_per_s);
  }
  return 0;
}
