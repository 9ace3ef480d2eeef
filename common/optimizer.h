// Optimizer: turns gradients into a weight update.
//
// One instance per flat weight buffer that it updates: a shard's buffer on a
// parameter server (server/shard.h), one tensor in the worker's
// LocalParamStore (worker/param_store.h). It lives in common/ so that both
// use the same code without either depending on the other, and it knows
// nothing of gRPC. CreateOptimizer picks the rule by name; plain SGD
// (w -= lr * g) is the only one so far.
//
// One apply path, ApplyMean: callers hand over the terms of the mean (one
// gradient, or one per worker in a sync step), not a mean they computed, so
// the server and the standalone worker run the same arithmetic and get
// bit-identical weights (tests/sync_equivalence_test.cc checks this). Every
// apply names its step, the version the weights will have once it is done,
// for rules that depend on it (schedules, Adam's bias correction).
//
// State: an optimizer may keep per-element state (momentum, Adam moments),
// sized at construction. SaveState and RestoreState move it out and in as
// opaque bytes, e.g. for checkpoints. SGD keeps none: its state is "".
//
// Thread safety: ApplyMean calls for the same step on disjoint element ranges
// may run concurrently (ApplyMeanInParallel does that); no other calls may
// overlap.
#ifndef PS_COMMON_OPTIMIZER_H_
#define PS_COMMON_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

class Optimizer {
 public:
  Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // The update that produces version `step` (>= 1), for i in [begin, end):
  //   g = (grads[0][i] + grads[1][i] + ...) / grads.size(), summed in that
  //       order (one gradient is taken exactly as it is),
  //   weights[i] -= update(g, step).
  // One pass, so a sync step reads each gradient once.
  // REQUIRES: grads non-empty; begin <= end; every gradient and `weights` at
  // least `end` elements, and end <= the size given to CreateOptimizer.
  virtual void ApplyMean(int64_t step, absl::Span<const float* const> grads, size_t begin,
                         size_t end, float* weights) = 0;

  // The state as bytes that RestoreState of an optimizer created with the
  // same options and size accepts. Errors are for state that cannot be
  // written (none for SGD).
  virtual absl::StatusOr<std::string> SaveState() const = 0;
  // Replaces the state with bytes from SaveState. INVALID_ARGUMENT, leaving
  // the state as it was, for bytes that this optimizer did not write (another
  // rule, another size, truncated). SGD accepts only "".
  virtual absl::Status RestoreState(absl::string_view state) = 0;

  // The name CreateOptimizer knows it by ("sgd").
  virtual std::string name() const = 0;

};

// One gradient applied to a whole buffer on the calling thread:
// ApplyMean(step, {grad}, 0, weights.size(), weights). What the standalone
// worker does for each tensor. INVALID_ARGUMENT (and nothing applied) if
// grad and weights differ in size.
absl::Status ApplyGradient(Optimizer* optimizer, int64_t step, absl::Span<const float> grad,
                           absl::Span<float> weights);

// ApplyMean(step, grads, ...) over [0, n), split across cores when n is large
// (what a shard does for each update). Same results as one call on one
// thread: the update is elementwise.
void ApplyMeanInParallel(Optimizer* optimizer, int64_t step, absl::Span<const float* const> grads,
                         size_t n, float* weights);

struct OptimizerOptions {
  std::string name = "sgd";     // only "sgd" so far
  float learning_rate = 0.1f;   // step size, > 0 and finite
};

// An optimizer for a buffer of `num_elements` floats. INVALID_ARGUMENT for an
// unknown name (the message lists the known ones) or a learning rate that is
// not a positive finite number.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           int64_t num_elements);

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_H_
