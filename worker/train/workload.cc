#include "worker/train/workload.h"

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status ValidateWorkerId(int worker_id, int num_workers) {
  if (num_workers < 1 || worker_id < 0 || worker_id >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker_id must be in [0, --num_workers=", num_workers, "), got ", worker_id));
  }
  return absl::OkStatus();
}

absl::Status ValidateSharedOptions(int worker_id, int num_workers, int batch_size, int epochs,
                                   int64_t max_steps) {
  if (absl::Status s = ValidateWorkerId(worker_id, num_workers); !s.ok()) return s;
  if (batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  if (epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  if (max_steps < 0) return absl::InvalidArgumentError("--max_steps must be >= 0");
  return absl::OkStatus();
}

std::optional<double> Evaluation::Get(absl::string_view key) const {
  for (const EvalField& f : fields) {
    if (f.key == key) return f.value;
  }
  return std::nullopt;
}

}  // namespace ps
