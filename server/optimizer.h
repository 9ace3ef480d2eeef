// Optimizer: turns an (already averaged) gradient into a weight update.
//
// One instance per shard, applied to the shard's flat weight buffer. An
// optimizer may keep per-element state (momentum, Adam moments) sized at
// construction. Not thread-safe: the shard calls it under its lock.
#ifndef PS_SERVER_OPTIMIZER_H_
#define PS_SERVER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // weights -= update(grad). REQUIRES: grad.size() == weights.size() == the
  // size given to the factory.
  virtual void Apply(absl::Span<const float> grad, absl::Span<float> weights) = 0;

  virtual std::string name() const = 0;
};

struct OptimizerOptions {
  std::string name = "sgd";     // only "sgd" so far
  float learning_rate = 0.1f;   // step size, > 0
};

// INVALID_ARGUMENT for an unknown name or a non-positive learning rate.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           int64_t num_elements);

}  // namespace ps

#endif  // PS_SERVER_OPTIMIZER_H_
