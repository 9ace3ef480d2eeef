// The update rules behind CreateOptimizer (common/optimizer.h), one class
// each, private to it: the factory checks the options, these trust them.
//
// Each follows torch.optim 1.13's single-tensor code for the optimizer of the
// same name, operation by operation in float32, with the scalars (bias
// corrections, step sizes) computed in double and rounded to float where
// torch hands them to a float tensor op; docs/optimizers.md has the
// equations. The state bytes (SaveState) are:
//
//   "psopt1" | u32 name length | name | i64 start version | i64 elements |
//   u32 buffers | buffers x elements float32
//
// little-endian; SGD, which keeps no state, writes "" instead, as it always
// did, so old checkpoints still restore.
#ifndef PS_COMMON_OPTIMIZER_RULES_H_
#define PS_COMMON_OPTIMIZER_RULES_H_

#include <cstdint>
#include <memory>

#include "common/optimizer.h"

namespace ps {
namespace internal {

// REQUIRES: ValidateOptimizerOptions(options) is OK; num_elements >= 0.
// nullptr for a name that is none of OptimizerNames().
std::unique_ptr<Optimizer> NewOptimizerRule(const OptimizerOptions& options,
                                            int64_t num_elements, int64_t start_version);

}  // namespace internal
}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_RULES_H_
