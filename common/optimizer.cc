#include "common/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace ps {
namespace {

// Plain SGD: w -= lr * g. No state; the step does not matter.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(float lr) : lr_(lr) {}

  void ApplyMean(int64_t /*step*/, absl::Span<const float* const> grads, size_t begin,
                 size_t end, float* weights_in) override {
    float* __restrict weights = weights_in;
    const float lr = lr_;
    const size_t n = grads.size();
    if (n == 1) {  // g / 1 == g exactly
      const float* __restrict g = grads[0];
      for (size_t i = begin; i < end; ++i) weights[i] -= lr * g[i];
      return;
    }
    if ((n & (n - 1)) == 0) {
      // Dividing by a power of two is exactly multiplying by its reciprocal,
      // which vectorizes better.
      const float inv = 1.0f / static_cast<float>(n);
      if (n == 2) {
        const float* __restrict g0 = grads[0];
        const float* __restrict g1 = grads[1];
        for (size_t i = begin; i < end; ++i) weights[i] -= lr * ((g0[i] + g1[i]) * inv);
        return;
      }
      for (size_t i = begin; i < end; ++i) {
        float s = grads[0][i];
        for (size_t k = 1; k < n; ++k) s += grads[k][i];
        weights[i] -= lr * (s * inv);
      }
      return;
    }
    const float count = static_cast<float>(n);
    for (size_t i = begin; i < end; ++i) {
      float s = grads[0][i];
      for (size_t k = 1; k < n; ++k) s += grads[k][i];
      weights[i] -= lr * (s / count);
    }
  }

  absl::StatusOr<std::string> SaveState() const override { return std::string(); }

  absl::Status RestoreState(absl::string_view state) override {
    if (state.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "sgd keeps no optimizer state, but the state to restore has ", state.size(), " bytes"));
  }

  std::string name() const override { return "sgd"; }

 private:
  const float lr_;
};

// Applies smaller than this many elements stay on one thread.
constexpr size_t kMinApplyChunk = 1 << 20;

}  // namespace

absl::Status ApplyGradient(Optimizer* optimizer, int64_t step, absl::Span<const float> grad,
                           absl::Span<float> weights) {
  if (grad.size() != weights.size()) {
    return absl::InvalidArgumentError(absl::StrCat("gradient has ", grad.size(),
                                                   " elements, the weights have ",
                                                   weights.size()));
  }
  optimizer->ApplyMean(step, {grad.data()}, 0, weights.size(), weights.data());
  return absl::OkStatus();
}

void ApplyMeanInParallel(Optimizer* optimizer, int64_t step, absl::Span<const float* const> grads,
                         size_t n, float* weights) {
  ParallelFor(n, kMinApplyChunk, [&](size_t begin, size_t end) {
    optimizer->ApplyMean(step, grads, begin, end, weights);
  });
}

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
