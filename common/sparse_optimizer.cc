#include "common/sparse_optimizer.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ps {

absl::string_view SparseOptimizerName(SparseOptimizerKind kind) {
  switch (kind) {
    case SparseOptimizerKind::kSgd:
      return "sgd";
    case SparseOptimizerKind::kAdagrad:
      return "adagrad";
    case SparseOptimizerKind::kAdam:
      return "adam";
    case SparseOptimizerKind::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

absl::StatusOr<SparseOptimizerKind> ParseSparseOptimizerKind(absl::string_view name) {
  for (SparseOptimizerKind k : {SparseOptimizerKind::kSgd, SparseOptimizerKind::kAdagrad,
                                SparseOptimizerKind::kAdam, SparseOptimizerKind::kFtrl}) {
    if (name == SparseOptimizerName(k)) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown sparse optimizer \"", name, "\"; expected sgd, adagrad, adam or ftrl"));
}

namespace {

absl::Status Bad(absl::string_view field, absl::string_view range, float value) {
  return absl::InvalidArgumentError(
      absl::StrCat("sparse optimizer ", field, " must be ", range, ", got ", value));
}

}  // namespace

absl::Status SparseOptimizerOptions::Validate() const {
  if (!(lr > 0.0f) || !std::isfinite(lr)) return Bad("lr", "> 0 and finite", lr);
  switch (kind) {
    case SparseOptimizerKind::kSgd:
      break;
    case SparseOptimizerKind::kAdagrad:
      if (!(adagrad_initial_accumulator >= 0.0f) || !std::isfinite(adagrad_initial_accumulator)) {
        return Bad("adagrad_initial_accumulator", ">= 0 and finite", adagrad_initial_accumulator);
      }
      break;
    case SparseOptimizerKind::kAdam:
      if (!(adam_beta1 >= 0.0f && adam_beta1 < 1.0f)) return Bad("adam_beta1", "in [0, 1)", adam_beta1);
      if (!(adam_beta2 >= 0.0f && adam_beta2 < 1.0f)) return Bad("adam_beta2", "in [0, 1)", adam_beta2);
      if (!(adam_eps > 0.0f) || !std::isfinite(adam_eps)) return Bad("adam_eps", "> 0 and finite", adam_eps);
      break;
    case SparseOptimizerKind::kFtrl:
      if (!(ftrl_l1 >= 0.0f) || !std::isfinite(ftrl_l1)) return Bad("ftrl_l1", ">= 0 and finite", ftrl_l1);
      if (!(ftrl_l2 >= 0.0f) || !std::isfinite(ftrl_l2)) return Bad("ftrl_l2", ">= 0 and finite", ftrl_l2);
      if (!(ftrl_beta >= 0.0f) || !std::isfinite(ftrl_beta)) return Bad("ftrl_beta", ">= 0 and finite", ftrl_beta);
      break;
    default:
      return absl::InvalidArgumentError("sparse optimizer kind is not one of sgd, adagrad, adam, ftrl");
  }
  return absl::OkStatus();
}

int SparseOptimizerOptions::StateFloatsPerElement() const {
  switch (kind) {
    case SparseOptimizerKind::kSgd:
      return 0;
    case SparseOptimizerKind::kAdagrad:
      return 1;
    case SparseOptimizerKind::kAdam:
    case SparseOptimizerKind::kFtrl:
      return 2;
  }
  return 0;
}

void InitSparseState(const SparseOptimizerOptions& options, int dim, float* state) {
  const int n = options.StateFloatsPerElement() * dim;
  const float fill =
      options.kind == SparseOptimizerKind::kAdagrad ? options.adagrad_initial_accumulator : 0.0f;
  for (int i = 0; i < n; ++i) state[i] = fill;
}

void ApplySparseRow(const SparseOptimizerOptions& o, int dim, const float* grad, float* w,
                    float* state, uint32_t* step) {
  switch (o.kind) {
    case SparseOptimizerKind::kSgd:
      for (int i = 0; i < dim; ++i) w[i] -= o.lr * grad[i];
      return;
    case SparseOptimizerKind::kAdagrad: {
      float* a = state;
      for (int i = 0; i < dim; ++i) {
        const float g = grad[i];
        a[i] += g * g;
        w[i] -= o.lr * g / (std::sqrt(a[i]) + 1e-10f);
      }
      return;
    }
    case SparseOptimizerKind::kAdam: {
      if (*step < std::numeric_limits<uint32_t>::max()) ++*step;
      const double t = static_cast<double>(*step);
      const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(o.adam_beta1), t));
      const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(o.adam_beta2), t));
      float* m = state;
      float* v = state + dim;
      const float b1 = o.adam_beta1, b2 = o.adam_beta2;
      for (int i = 0; i < dim; ++i) {
        const float g = grad[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        w[i] -= o.lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + o.adam_eps);
      }
      return;
    }
    case SparseOptimizerKind::kFtrl: {
      float* z = state;
      float* n = state + dim;
      const float alpha = o.lr;
      for (int i = 0; i < dim; ++i) {
        const float g = grad[i];
        const float n_new = n[i] + g * g;
        const float sigma = (std::sqrt(n_new) - std::sqrt(n[i])) / alpha;
        z[i] = z[i] + g - sigma * w[i];  // (z + g) - sigma*w, as the paper writes it
        n[i] = n_new;
        if (std::fabs(z[i]) <= o.ftrl_l1) {
          w[i] = 0.0f;
        } else {
          const float sign = z[i] < 0.0f ? -1.0f : 1.0f;
          w[i] = -(z[i] - sign * o.ftrl_l1) / ((o.ftrl_beta + std::sqrt(n[i])) / alpha + o.ftrl_l2);
        }
      }
      return;
    }
  }
}

}  // namespace ps
