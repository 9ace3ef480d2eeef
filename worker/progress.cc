#include "worker/progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {

absl::StatusOr<ProgressMode> ParseProgressMode(absl::string_view text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "on") return ProgressMode::kOn;
  if (text == "off") return ProgressMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --progress '", text, "' (known: auto, on, off)"));
}

bool ShowProgress(ProgressMode mode, bool output_is_terminal) {
  switch (mode) {
    case ProgressMode::kOn:
      return true;
    case ProgressMode::kOff:
      return false;
    case ProgressMode::kAuto:
      break;
  }
  return output_is_terminal;
}

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const int64_t s = std::llround(seconds);
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

ProgressLine::ProgressLine(int64_t first_step, int64_t total_steps)
    : first_step_(first_step), total_steps_(total_steps), step_(first_step) {}

void ProgressLine::Step(int64_t step, int64_t samples, double loss) {
  step_ = step;
  window_samples_ += samples;
  window_loss_sum_ += loss;
  ++window_batches_;
}

void ProgressLine::ExcludeTime(absl::Duration spent) { window_start_ += spent; }

bool ProgressLine::Due(absl::Duration elapsed) const {
  return step_ >= total_steps_ || elapsed - window_start_ >= kRedrawInterval;
}

std::string ProgressLine::Draw(absl::Duration elapsed) {
  const double window_s = absl::ToDoubleSeconds(elapsed - window_start_);
  if (window_s > 0) last_rate_ = window_samples_ / window_s;
  if (window_batches_ > 0) last_loss_ = window_loss_sum_ / window_batches_;
  const int64_t done = step_ - first_step_;
  const double eta =
      done > 0 ? (total_steps_ - step_) * absl::ToDoubleSeconds(elapsed) / done : -1;
  const int percent =
      total_steps_ > 0 ? static_cast<int>(100 * step_ / total_steps_) : 100;
  const std::string line =
      absl::StrFormat("step %d/%d (%d%%)  %.0f samples/s  loss %.4f  ETA %s", step_,
                      total_steps_, percent, last_rate_, last_loss_, FormatEta(eta));
  std::string out = absl::StrCat("\r", line);
  if (line.size() < width_) out.append(width_ - line.size(), ' ');
  width_ = line.size();
  window_start_ = elapsed;
  window_samples_ = 0;
  window_loss_sum_ = 0;
  window_batches_ = 0;
  return out;
}

std::string ProgressLine::Clear() {
  if (width_ == 0) return "";
  std::string out = absl::StrCat("\r", std::string(width_, ' '), "\r");
  width_ = 0;
  return out;
}

std::string ProgressLine::End() {
  // After Clear (or before any Draw) the cursor is already at a line's start.
  if (width_ == 0) return "";
  width_ = 0;
  return "\n";
}

}  // namespace ps
