#include "common/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status LrSchedule::Validate(double lr) const {
  if (name != "constant" && name != "step" && name != "cosine") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --lr_schedule '", name, "' (known: constant, step, cosine)"));
  }
  if (warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup_steps must be >= 0, got ", warmup_steps));
  }
  if (decay_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--decay_steps must be >= 1, got ", decay_steps));
  }
  if (!(decay_rate > 0 && decay_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--decay_rate must be in (0, 1], got ", decay_rate));
  }
  if (!(min_lr >= 0 && min_lr <= lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_lr must be in [0, --lr] = [0, ", lr, "], got ", min_lr));
  }
  return absl::OkStatus();
}

double LrSchedule::At(double lr, int64_t t) const {
  if (warmup_steps > 0 && t <= warmup_steps) {
    return lr * static_cast<double>(t) / static_cast<double>(warmup_steps);
  }
  const int64_t e = std::max<int64_t>(0, t - 1 - warmup_steps);
  if (name == "step") {
    return lr * std::pow(decay_rate, static_cast<double>(e / decay_steps));
  }
  if (name == "cosine") {
    const double progress =
        std::min(1.0, static_cast<double>(e) / static_cast<double>(decay_steps));
    return min_lr + (lr - min_lr) * (1 + std::cos(M_PI * progress)) / 2;
  }
  return lr;
}

}  // namespace ps
