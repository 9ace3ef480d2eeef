#include "server/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Plain SGD: w -= lr * g.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(float lr) : lr_(lr) {}
  void Apply(absl::Span<const float> grad, absl::Span<float> weights) override {
    const float lr = lr_;
    const float* g = grad.data();
    float* w = weights.data();
    const size_t n = weights.size();
    for (size_t i = 0; i < n; ++i) w[i] -= lr * g[i];
  }
  std::string name() const override { return "sgd"; }

 private:
  const float lr_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options,
                                                           int64_t /*num_elements*/) {
  if (!(options.learning_rate > 0) || !std::isfinite(options.learning_rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate must be a positive number, got ", options.learning_rate));
  }
  if (options.name == "sgd") return std::unique_ptr<Optimizer>(new Sgd(options.learning_rate));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", options.name, "' (known: sgd)"));
}

}  // namespace ps
