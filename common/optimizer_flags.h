// The optimizer's flags, shared by ps_server and ps_worker (--standalone):
// --optimizer, --momentum, --beta1, --beta2, --eps, --weight_decay and the
// schedule's --lr_schedule, --warmup_steps, --decay_steps, --decay_rate,
// --min_lr. Linking this library adds them to a binary. --lr stays with
// each binary, whose help says whose rate it is.
//
// The values are checked where the optimizer is made (CreateOptimizer),
// with messages that name the flag.
#ifndef PS_COMMON_OPTIMIZER_FLAGS_H_
#define PS_COMMON_OPTIMIZER_FLAGS_H_

#include "common/optimizer.h"

namespace ps {

// The flags' values (after absl::ParseCommandLine) with base rate `lr`.
// Cannot fail; ValidateOptimizerOptions checks the result.
OptimizerOptions OptimizerOptionsFromFlags(double lr);

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_FLAGS_H_
