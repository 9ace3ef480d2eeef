// Optimizer: turns an (already averaged) gradient into a weight update.
//
// One instance per shard, applied to the shard's flat weight buffer. An
// optimizer may keep per-element state (momentum, Adam moments) sized at
// construction. Optimizers are elementwise: calls on disjoint element ranges
// may run concurrently (the shard splits large applies across threads);
// otherwise calls must not overlap.
#ifndef PS_SERVER_OPTIMIZER_H_
#define PS_SERVER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // weights -= update(grad). REQUIRES: grad.size() == weights.size() == the
  // size given to the factory.
  virtual void Apply(absl::Span<const float> grad, absl::Span<float> weights) = 0;

  // For i in [begin, end): g = (grads[0][i] + grads[1][i] + ...) / grads.size(),
  // summed in that order, then weights[i] -= update(g). One pass, so a sync
  // step reads each gradient once. REQUIRES: grads non-empty, every buffer
  // (and weights) at least `end` elements.
  virtual void ApplyMean(const std::vector<const float*>& grads, size_t begin, size_t end,
                         float* weights) = 0;

  virtual std::string name() const = 0;
};

// ApplyMean over [0, n), split across cores when n is large (what a shard
// does for each update).
void ApplyMeanInParallel(Optimizer* optimizer, const std::vector<const float*>& grads, size_t n,
                         float* weights);

struct OptimizerOptions {
  std::string name = "sgd";     // only "sgd" so far
  float learning_rate = 0.1f;   // step size, > 0
};

// INVALID_ARGUMENT for an unknown name or a non-positive learning rate.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           int64_t num_elements);

}  // namespace ps

#endif  // PS_SERVER_OPTIMIZER_H_
