#include "common/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/optimizer_rules.h"
#include "common/parallel.h"

namespace ps {
namespace {

// Applies smaller than this many elements stay on one thread.
constexpr size_t kMinApplyChunk = 1 << 20;

absl::Status OutOfRange(absl::string_view flag, absl::string_view range, double value) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be ", range, ", got ", value));
}

}  // namespace

const std::vector<std::string>& OptimizerNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "sgd", "momentum", "nesterov", "adagrad", "adam", "adamw"};
  return *names;
}

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  bool known = false;
  for (const std::string& n : OptimizerNames()) known = known || n == o.name;
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat("unknown --optimizer '", o.name, "' (known: ",
                                                   absl::StrJoin(OptimizerNames(), ", "), ")"));
  }
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate)) {
    return OutOfRange("lr", "a positive number (the learning rate)", o.learning_rate);
  }
  if (!(o.momentum >= 0) || !std::isfinite(o.momentum)) {
    return OutOfRange("momentum", ">= 0", o.momentum);
  }
  if (o.name == "nesterov" && !(o.momentum > 0)) {
    return OutOfRange("momentum", "> 0 for --optimizer=nesterov", o.momentum);
  }
  if (!(o.beta1 >= 0 && o.beta1 < 1)) return OutOfRange("beta1", "in [0, 1)", o.beta1);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) return OutOfRange("beta2", "in [0, 1)", o.beta2);
  if (!(o.eps > 0) || !std::isfinite(o.eps)) return OutOfRange("eps", "> 0", o.eps);
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) {
    return OutOfRange("weight_decay", ">= 0", o.weight_decay);
  }
  return o.schedule.Validate(o.learning_rate);
}

absl::Status ApplyGradient(Optimizer* optimizer, int64_t step, absl::Span<const float> grad,
                           absl::Span<float> weights) {
  if (grad.size() != weights.size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient has ", grad.size(),
                                                   " elements, the weights have ",
                                                   weights.size()));
  }
  optimizer->ApplyMean(step, /*lr_scale=*/1.0, {grad.data()}, 0, weights.size(), weights.data());
  return absl::OkStatus();
}

void ApplyMeanInParallel(Optimizer* optimizer, int64_t step, double lr_scale,
                         absl::Span<const float* const> grads, size_t n, float* weights) {
  ParallelFor(n, kMinApplyChunk, [&](size_t begin, size_t end) {
    optimizer->ApplyMean(step, lr_scale, grads, begin, end, weights);
  });
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           int64_t num_elements,
                                                           int64_t start_version) {
  if (absl::Status s = ValidateOptimizerOptions(options); !s.ok()) return s;
  return internal::NewOptimizerRule(options, num_elements, start_version);
}

}  // namespace ps
