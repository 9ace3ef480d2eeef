// LrSchedule: the learning rate as a pure function of the step.
//
// The step is the version an update produces (1 for the first update), so
// every shard of a sync run uses the same rate at the same step, and a
// server restored from a checkpoint continues the schedule where it was.
// With base rate lr, warmup W = warmup_steps, D = decay_steps, r =
// decay_rate, m = min_lr and t the step:
//
//   t <= W:          lr * t / W                     (linear warmup from 0)
//   after warmup, with e = t - 1 - W (0 for the first step past warmup):
//     constant:      lr
//     step:          lr * r^floor(e / D)
//     cosine:        m + (lr - m) * (1 + cos(pi * min(1, e / D))) / 2
//
// (docs/optimizers.md has the same table.) Without warmup, step and cosine
// equal torch's StepLR(step_size=D, gamma=r) and CosineAnnealingLR(T_max=D,
// eta_min=m) at scheduler epoch e = t - 1; after D steps cosine stays at m.
// Computed in double. A plain struct; thread-compatible.
#ifndef PS_COMMON_LR_SCHEDULE_H_
#define PS_COMMON_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace ps {

struct LrSchedule {
  std::string name = "constant";  // constant | step | cosine
  int64_t warmup_steps = 0;       // W >= 0; 0 = no warmup
  int64_t decay_steps = 1000;     // D >= 1 (step, cosine)
  double decay_rate = 0.1;        // r in (0, 1] (step)
  double min_lr = 0;              // m in [0, lr] (cosine)

  // INVALID_ARGUMENT naming the flag (--lr_schedule, --warmup_steps,
  // --decay_steps, --decay_rate, --min_lr) of the first value out of range;
  // `lr` is the base rate, for the check of min_lr.
  absl::Status Validate(double lr) const;

  // The rate at step `t` (>= 1) for base rate `lr`. REQUIRES: Validate(lr)
  // is OK.
  double At(double lr, int64_t t) const;
};

}  // namespace ps

#endif  // PS_COMMON_LR_SCHEDULE_H_
