#include "worker/straggler.h"

#include <algorithm>

namespace ps {

Straggler::Straggler(double slowdown, bool whole_step, int64_t every, int worker_id)
    : slowdown_(slowdown), whole_step_(whole_step), every_(every), worker_id_(worker_id) {}

absl::Duration Straggler::SleepAfter(int64_t step, absl::Duration compute,
                                     absl::Duration whole) {
  if (!(slowdown_ > 0)) return absl::ZeroDuration();
  if (whole_step_ && calibration_.size() < kCalibrationSteps) {
    calibration_.push_back(whole);
    if (calibration_.size() < kCalibrationSteps) return absl::ZeroDuration();
    std::vector<absl::Duration> sorted = calibration_;
    std::nth_element(sorted.begin(), sorted.begin() + kCalibrationSteps / 2, sorted.end());
    usual_step_ = sorted[kCalibrationSteps / 2];
    return absl::ZeroDuration();
  }
  if ((step + worker_id_) % every_ != 0) return absl::ZeroDuration();
  return slowdown_ * (whole_step_ ? usual_step_ : compute);
}

}  // namespace ps
