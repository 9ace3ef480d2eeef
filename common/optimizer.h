// Optimizer: turns gradients into a weight update.
//
// One instance per flat weight buffer that it updates: a shard's buffer on a
// parameter server (server/core/shard.h), one tensor in the worker's
// LocalParamStore (worker/train/param_store.h). It lives in common/ so that both
// use the same code without either depending on the other, and it knows
// nothing of gRPC. CreateOptimizer picks the rule by name: sgd, momentum,
// nesterov, adagrad, adam, adamw, each computing what torch.optim's
// optimizer of that name computes (docs/optimizers.md has the equations;
// common/optimizer_rules.cc the code), at a learning rate that follows a
// schedule of the step (common/lr_schedule.h).
//
// One apply path, ApplyMean: callers hand over the terms of the mean (one
// gradient, or one per worker in a sync step), not a mean they computed, so
// the server and the standalone worker run the same arithmetic and get
// bit-identical weights (tests/sync_equivalence_test.cc checks this). Every
// apply names its step, the version the weights will have once it is done,
// for rules that depend on it (schedules, Adam's bias correction), and a
// factor on the learning rate (1, or the staleness discount of an async
// gradient: the caller decides, the optimizer keeps no hidden scale).
//
// State: an optimizer may keep per-element state (momentum buffers, Adagrad
// sums, Adam moments), sized at construction, and the version it started
// from (Adam's bias correction counts the updates since). SaveState and
// RestoreState move it out and in as bytes with a header naming the rule,
// e.g. for checkpoints. SGD keeps none: its state is "".
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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/lr_schedule.h"

namespace ps {

class Optimizer {
 public:
  Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;

  // The update that produces version `step` (> the optimizer's start
  // version), for i in [begin, end):
  //   g = (grads[0][i] + grads[1][i] + ...) / grads.size(), summed in that
  //       order (one gradient is taken exactly as it is),
  //   weights[i] = rule(weights[i], g, state[i], lr, step),
  // with lr = schedule(step) * lr_scale. One pass, so a sync step reads
  // each gradient once.
  // REQUIRES: grads non-empty; begin <= end; every gradient and `weights` at
  // least `end` elements, and end <= the size given to CreateOptimizer;
  // lr_scale > 0.
  virtual void ApplyMean(int64_t step, double lr_scale, absl::Span<const float* const> grads,
                         size_t begin, size_t end, float* weights) = 0;

  // The state as bytes that RestoreState of an optimizer created with the
  // same options and size accepts. Errors are for state that cannot be
  // written (none for SGD).
  virtual absl::StatusOr<std::string> SaveState() const = 0;
  // Replaces the state with bytes from SaveState. INVALID_ARGUMENT, leaving
  // the state as it was, for bytes that this optimizer did not write
  // (another rule: the message names both; another size, truncated). SGD
  // accepts only "".
  virtual absl::Status RestoreState(absl::string_view state) = 0;

  // The name CreateOptimizer knows it by ("sgd", "adam", ...).
  virtual std::string name() const = 0;

};

// One gradient applied to a whole buffer on the calling thread:
// ApplyMean(step, 1, {grad}, 0, weights.size(), weights). What the
// standalone worker does for each tensor. INVALID_ARGUMENT (and nothing applied) if
// grad and weights differ in size.
absl::Status ApplyGradient(Optimizer* optimizer, int64_t step, absl::Span<const float> grad,
                           absl::Span<float> weights);

// ApplyMean(step, lr_scale, grads, ...) over [0, n), split across cores
// when n is large (what a shard does for each update). Same results as one
// call on one thread: the update is elementwise.
void ApplyMeanInParallel(Optimizer* optimizer, int64_t step, double lr_scale,
                         absl::Span<const float* const> grads, size_t n, float* weights);

// The rule and its hyperparameters, named as torch.optim names them. Each
// comment gives the flag (ps_server and ps_worker --standalone) and the
// range; the rules that ignore a value say so in docs/optimizers.md.
struct OptimizerOptions {
  std::string name = "sgd";    // --optimizer: sgd|momentum|nesterov|adagrad|adam|adamw
  double learning_rate = 0.1;  // --lr: base step size, > 0 and finite
  double momentum = 0.9;       // --momentum (momentum, nesterov): >= 0; nesterov: > 0
  double beta1 = 0.9;          // --beta1 (adam, adamw): in [0, 1)
  double beta2 = 0.999;        // --beta2 (adam, adamw): in [0, 1)
  double eps = 1e-8;           // --eps (adagrad, adam, adamw): > 0
  // --weight_decay, >= 0: added to the gradient as weight_decay * w (L2),
  // except for adamw, which decays the weights: w *= 1 - lr * weight_decay.
  double weight_decay = 0;
  LrSchedule schedule;         // --lr_schedule and its flags
};

// The optimizer names CreateOptimizer knows, in the order the docs list them.
const std::vector<std::string>& OptimizerNames();

// INVALID_ARGUMENT naming the flag of the first value out of range (see
// OptimizerOptions; the schedule's: LrSchedule::Validate), an unknown name
// listing the known ones.
absl::Status ValidateOptimizerOptions(const OptimizerOptions& options);

// An optimizer for a buffer of `num_elements` floats whose state (zero
// moments, sums and buffers) starts at version `start_version`: the update
// producing version `step` is the (step - start_version)-th it sees, which
// is what Adam's bias correction counts (a fresh run starts at 0; a shard
// that resets the state at version v starts at v). Errors of
// ValidateOptimizerOptions.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           int64_t num_elements,
                                                           int64_t start_version = 0);

// An optimizer's state (SaveState's bytes) taken apart, so that ranges of
// elements can move between shards (server/checkpoint/reshard.h): the
// rule that wrote it ("" for SGD, which keeps none), the version its state
// started from, and its per-element buffers (momentum 1, adagrad 1, adam
// 2), each of `elements` floats.
struct OptimizerStateParts {
  std::string name;
  int64_t start = 0;
  int64_t elements = 0;
  std::vector<std::vector<float>> buffers;
};
// INVALID_ARGUMENT for bytes SaveState did not write (truncated, another
// format).
absl::StatusOr<OptimizerStateParts> SplitOptimizerState(absl::string_view state);
// The bytes SaveState writes for `parts`: JoinOptimizerState of a split
// state is that state, byte for byte. "" for SGD's (no name).
// REQUIRES: every buffer of `elements` floats.
std::string JoinOptimizerState(const OptimizerStateParts& parts);

}  // namespace ps

#endif  // PS_COMMON_OPTIMIZER_H_
