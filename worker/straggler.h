// Straggler: how long a worker slowed down for tests of stragglers
// (ps_worker --slowdown, --slowdown_of, --slowdown_every) sleeps after each
// step. A pure rule: durations are passed in, nothing sleeps here.
//
//   compute  sleep `slowdown` times the step's forward and backward.
//   step     sleep `slowdown` times the worker's usual whole step (compute
//            and push-pull), so that its steps take 1 + slowdown times as
//            long whatever share of a step communication is. The usual step
//            is the median of its first kCalibrationSteps steps, which run
//            at full speed: a multiple of each step's own duration would feed
//            back, since a step's push-pull includes waiting for the other
//            stragglers (sync, SSP).
//
// Only steps t with (t + worker_id) % every == 0 sleep. Thread-compatible.
#ifndef PS_WORKER_STRAGGLER_H_
#define PS_WORKER_STRAGGLER_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace ps {

class Straggler {
 public:
  static constexpr int kCalibrationSteps = 10;

  // slowdown >= 0 (0: never sleeps); every >= 1.
  Straggler(double slowdown, bool whole_step, int64_t every, int worker_id);

  // Step `step` took `compute` for forward and backward and `whole` in all;
  // returns how long to sleep after it.
  absl::Duration SleepAfter(int64_t step, absl::Duration compute, absl::Duration whole);

 private:
  const double slowdown_;
  const bool whole_step_;
  const int64_t every_;
  const int worker_id_;
  std::vector<absl::Duration> calibration_;  // whole steps, until full
  absl::Duration usual_step_;                // their median, once full
};

}  // namespace ps

#endif  // PS_WORKER_STRAGGLER_H_
