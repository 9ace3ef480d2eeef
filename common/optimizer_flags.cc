#include "common/optimizer_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, optimizer, "sgd",
          "Update rule, as torch.optim computes it (docs/optimizers.md): sgd, momentum, "
          "nesterov, adagrad, adam or adamw. Adam and AdamW want a smaller --lr (0.001).");
ABSL_FLAG(double, momentum, 0.9, "--optimizer=momentum|nesterov: the momentum factor (>= 0).");
ABSL_FLAG(double, beta1, 0.9, "--optimizer=adam|adamw: decay of the first moment, in [0, 1).");
ABSL_FLAG(double, beta2, 0.999,
          "--optimizer=adam|adamw: decay of the second moment, in [0, 1).");
ABSL_FLAG(double, eps, 1e-8,
          "--optimizer=adagrad|adam|adamw: added to the denominator (> 0). torch's Adagrad "
          "default is 1e-10.");
ABSL_FLAG(double, weight_decay, 0,
          "Weight decay (>= 0): added to the gradient as weight_decay * w, except for adamw, "
          "which shrinks the weights by 1 - lr * weight_decay each step.");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "Learning rate by step t (the version being produced): constant, step (times "
          "--decay_rate every --decay_steps) or cosine (down to --min_lr over --decay_steps), "
          "after a linear warmup over --warmup_steps.");
ABSL_FLAG(int64_t, warmup_steps, 0,
          "Steps of linear warmup: the rate is lr * t / warmup_steps up to t = warmup_steps.");
ABSL_FLAG(int64_t, decay_steps, 1000,
          "--lr_schedule=step: steps between decays; cosine: steps from lr down to --min_lr "
          "(>= 1).");
ABSL_FLAG(double, decay_rate, 0.1, "--lr_schedule=step: factor at each decay, in (0, 1].");
ABSL_FLAG(double, min_lr, 0, "--lr_schedule=cosine: the final rate, in [0, lr].");

namespace ps {

OptimizerOptions OptimizerOptionsFromFlags(double lr) {
  OptimizerOptions o;
  o.name = absl::GetFlag(FLAGS_optimizer);
  o.learning_rate = lr;
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.beta1 = absl::GetFlag(FLAGS_beta1);
  o.beta2 = absl::GetFlag(FLAGS_beta2);
  o.eps = absl::GetFlag(FLAGS_eps);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.schedule.name = absl::GetFlag(FLAGS_lr_schedule);
  o.schedule.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.schedule.decay_steps = absl::GetFlag(FLAGS_decay_steps);
  o.schedule.decay_rate = absl::GetFlag(FLAGS_decay_rate);
  o.schedule.min_lr = absl::GetFlag(FLAGS_min_lr);
  return o;
}

}  // namespace ps
