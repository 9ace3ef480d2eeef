#include "worker/compute/flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, device, "auto",
          "Compute backend: cuda (a GPU; an error where there is none), cpu, or auto (cuda "
          "when this binary was built with --config=cuda and a GPU is found, else cpu; the "
          "choice is logged at startup).");
ABSL_FLAG(int, gpu, 0, "CUDA device index for --device=cuda|auto (one worker per GPU).");
ABSL_FLAG(bool, tf32, false,
          "Let cuBLAS use TF32 tensor cores: faster, but products keep only 10 mantissa bits, "
          "so results differ from the CPU's.");
ABSL_FLAG(int, threads, 0, "CPU math threads; 0 = all cores.");

namespace ps {

absl::StatusOr<BackendOptions> BackendOptionsFromFlags() {
  BackendOptions o;
  o.device = absl::GetFlag(FLAGS_device);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.gpu = absl::GetFlag(FLAGS_gpu);
  if (o.gpu < 0) return absl::InvalidArgumentError(absl::StrCat("--gpu must be >= 0, got ", o.gpu));
  o.tf32 = absl::GetFlag(FLAGS_tf32);
  return o;
}

}  // namespace ps
