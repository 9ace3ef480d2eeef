#include "common/optimizer_rules.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace internal {
namespace {

// Calls f(i, g) for i in [begin, end) with g the mean of the gradients at i,
// as Optimizer::ApplyMean defines it (summed in order; a power-of-two count
// divides by multiplying with its reciprocal, which is exact).
template <typename F>
inline void ForEachMean(absl::Span<const float* const> grads, size_t begin, size_t end, F f) {
  const size_t n = grads.size();
  if (n == 1) {
    const float* __restrict g = grads[0];
    for (size_t i = begin; i < end; ++i) f(i, g[i]);
    return;
  }
  if ((n & (n - 1)) == 0) {
    const float inv = 1.0f / static_cast<float>(n);
    for (size_t i = begin; i < end; ++i) {
      float s = grads[0][i];
      for (size_t k = 1; k < n; ++k) s += grads[k][i];
      f(i, s * inv);
    }
    return;
  }
  const float count = static_cast<float>(n);
  for (size_t i = begin; i < end; ++i) {
    float s = grads[0][i];
    for (size_t k = 1; k < n; ++k) s += grads[k][i];
    f(i, s / count);
  }
}

// The scheduled, scaled learning rate of `step`, in double as torch's lr.
double Rate(const OptimizerOptions& o, int64_t step, double lr_scale) {
  return o.schedule.At(o.learning_rate, step) * lr_scale;
}

constexpr char kMagic[] = "psopt1";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
bool Get(absl::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

// The name in a state's header, or "" where there is none.
std::string WriterName(absl::string_view state) {
  uint32_t len = 0;
  if (state.substr(0, kMagicSize) != kMagic) return "";
  state.remove_prefix(kMagicSize);
  if (!Get(&state, &len) || state.size() < len) return "";
  return std::string(state.substr(0, len));
}

// A stateful rule's SaveState bytes: the header, then the buffers.
std::string WriteState(const std::string& name, int64_t start, int64_t elements,
                       const std::vector<std::vector<float>>& buffers) {
  std::string out(kMagic, kMagicSize);
  Put<uint32_t>(&out, static_cast<uint32_t>(name.size()));
  out += name;
  Put<int64_t>(&out, start);
  Put<int64_t>(&out, elements);
  Put<uint32_t>(&out, static_cast<uint32_t>(buffers.size()));
  for (const std::vector<float>& b : buffers) {
    out.append(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(float));
  }
  return out;
}

// Plain SGD: g += wd * w; w -= lr * g. No state.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& o) : o_(o) {}

  void ApplyMean(int64_t step, double lr_scale, absl::Span<const float* const> grads,
                 size_t begin, size_t end, float* weights_in) override {
    float* __restrict weights = weights_in;
    const float lr = static_cast<float>(Rate(o_, step, lr_scale));
    if (o_.weight_decay != 0) {
      const float wd = static_cast<float>(o_.weight_decay);
      ForEachMean(grads, begin, end, [&](size_t i, float g) {
        weights[i] -= lr * (g + wd * weights[i]);
      });
      return;
    }
    const size_t n = grads.size();
    if (n == 1) {  // g / 1 == g exactly
      const float* __restrict g = grads[0];
      for (size_t i = begin; i < end; ++i) weights[i] -= lr * g[i];
      return;
    }
    if (n == 2) {  // the common sync case, kept as one tight loop
      const float inv = 0.5f;
      const float* __restrict g0 = grads[0];
      const float* __restrict g1 = grads[1];
      for (size_t i = begin; i < end; ++i) weights[i] -= lr * ((g0[i] + g1[i]) * inv);
      return;
    }
    ForEachMean(grads, begin, end, [&](size_t i, float g) { weights[i] -= lr * g; });
  }

  absl::StatusOr<std::string> SaveState() const override { return std::string(); }

  absl::Status RestoreState(absl::string_view state) override {
    if (state.empty()) return absl::OkStatus();
    const std::string writer = WriterName(state);
    if (!writer.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the optimizer state was written by \"", writer, "\", this optimizer is \"sgd\""));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "sgd keeps no optimizer state, but the state to restore has ", state.size(), " bytes"));
  }

  std::string name() const override { return "sgd"; }

 private:
  const OptimizerOptions o_;
};

// A rule with `kBuffers` float buffers of the weights' size and a start
// version; the subclasses write the update.
class Stateful : public Optimizer {
 public:
  Stateful(const OptimizerOptions& o, int64_t n, int64_t start, int buffers)
      : o_(o), start_(start), buffers_(buffers, std::vector<float>(n, 0.0f)) {}

  absl::StatusOr<std::string> SaveState() const override {
    return WriteState(o_.name, start_, size(), buffers_);
  }

  absl::Status RestoreState(absl::string_view state) override {
    if (state.substr(0, kMagicSize) != kMagic) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the optimizer state (", state.size(), " bytes) was not written by \"", o_.name,
          "\"", state.empty() ? " (it is empty, as sgd's)" : ""));
    }
    const std::string writer = WriterName(state);
    if (writer != o_.name) {
      return absl::InvalidArgumentError(absl::StrCat("the optimizer state was written by \"",
                                                     writer, "\", this optimizer is \"",
                                                     o_.name, "\""));
    }
    absl::string_view in = state.substr(kMagicSize + sizeof(uint32_t) + writer.size());
    int64_t start = 0, elements = 0;
    uint32_t buffers = 0;
    if (!Get(&in, &start) || !Get(&in, &elements) || !Get(&in, &buffers) ||
        elements != size() || buffers != buffers_.size() ||
        in.size() != buffers_.size() * buffers_[0].size() * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", o_.name, " state does not fit: it is truncated or of another size (this "
          "buffer has ", size(), " elements)"));
    }
    start_ = start;
    for (std::vector<float>& b : buffers_) {
      std::memcpy(b.data(), in.data(), b.size() * sizeof(float));
      in.remove_prefix(b.size() * sizeof(float));
    }
    return absl::OkStatus();
  }

  std::string name() const override { return o_.name; }

 protected:
  int64_t size() const { return static_cast<int64_t>(buffers_[0].size()); }
  float* buffer(int k) { return buffers_[k].data(); }

  const OptimizerOptions o_;
  int64_t start_;  // the version the state started from

 private:
  std::vector<std::vector<float>> buffers_;
};

// torch.optim.SGD(momentum=mu, dampening=0, nesterov=...):
//   g += wd * w;  b = mu * b + g;  g = nesterov ? g + mu * b : b;  w -= lr * g.
// torch starts b as a copy of the first g, which mu * 0 + g equals exactly.
class Momentum final : public Stateful {
 public:
  Momentum(const OptimizerOptions& o, int64_t n, int64_t start, bool nesterov)
      : Stateful(o, n, start, 1), nesterov_(nesterov) {}

  void ApplyMean(int64_t step, double lr_scale, absl::Span<const float* const> grads,
                 size_t begin, size_t end, float* weights_in) override {
    float* __restrict w = weights_in;
    float* __restrict b = buffer(0);
    const float lr = static_cast<float>(Rate(o_, step, lr_scale));
    const float mu = static_cast<float>(o_.momentum);
    const float wd = static_cast<float>(o_.weight_decay);
    const bool decay = o_.weight_decay != 0;
    const bool nesterov = nesterov_;
    ForEachMean(grads, begin, end, [&](size_t i, float g) {
      if (decay) g = g + wd * w[i];
      b[i] = b[i] * mu + g;
      const float d = nesterov ? g + mu * b[i] : b[i];
      w[i] = w[i] + (-lr) * d;
    });
  }

 private:
  const bool nesterov_;
};

// torch.optim.Adagrad(lr_decay=0, initial_accumulator_value=0):
//   g += wd * w;  s += g * g;  w -= lr * g / (sqrt(s) + eps).
class Adagrad final : public Stateful {
 public:
  Adagrad(const OptimizerOptions& o, int64_t n, int64_t start) : Stateful(o, n, start, 1) {}

  void ApplyMean(int64_t step, double lr_scale, absl::Span<const float* const> grads,
                 size_t begin, size_t end, float* weights_in) override {
    float* __restrict w = weights_in;
    float* __restrict s = buffer(0);
    const float neg_lr = static_cast<float>(-Rate(o_, step, lr_scale));
    const float eps = static_cast<float>(o_.eps);
    const float wd = static_cast<float>(o_.weight_decay);
    const bool decay = o_.weight_decay != 0;
    ForEachMean(grads, begin, end, [&](size_t i, float g) {
      if (decay) g = g + wd * w[i];
      s[i] = s[i] + g * g;
      const float denom = std::sqrt(s[i]) + eps;
      w[i] = w[i] + neg_lr * g / denom;
    });
  }
};

// torch.optim.Adam / AdamW (amsgrad=False), with t = step - start:
//   adam:  g += wd * w        adamw: w *= 1 - lr * wd
//   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g
//   w -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam final : public Stateful {
 public:
  Adam(const OptimizerOptions& o, int64_t n, int64_t start, bool decoupled)
      : Stateful(o, n, start, 2), decoupled_(decoupled) {}

  void ApplyMean(int64_t step, double lr_scale, absl::Span<const float* const> grads,
                 size_t begin, size_t end, float* weights_in) override {
    float* __restrict w = weights_in;
    float* __restrict m = buffer(0);
    float* __restrict v = buffer(1);
    const double lr = Rate(o_, step, lr_scale);
    const double t = static_cast<double>(step - start_);
    const float b1 = static_cast<float>(o_.beta1);
    const float b2 = static_cast<float>(o_.beta2);
    const float one_minus_b1 = static_cast<float>(1 - o_.beta1);
    const float one_minus_b2 = static_cast<float>(1 - o_.beta2);
    const double bias_correction1 = 1 - std::pow(o_.beta1, t);
    const double bias_correction2 = 1 - std::pow(o_.beta2, t);
    const float neg_step_size = static_cast<float>(-(lr / bias_correction1));
    const float bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    const float eps = static_cast<float>(o_.eps);
    const bool l2 = !decoupled_ && o_.weight_decay != 0;
    const bool decay_weights = decoupled_ && o_.weight_decay != 0;
    const float wd = static_cast<float>(o_.weight_decay);
    const float shrink = static_cast<float>(1 - lr * o_.weight_decay);
    ForEachMean(grads, begin, end, [&](size_t i, float g) {
      if (decay_weights) w[i] = w[i] * shrink;
      if (l2) g = g + wd * w[i];
      m[i] = m[i] * b1 + one_minus_b1 * g;
      v[i] = v[i] * b2 + one_minus_b2 * g * g;
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      w[i] = w[i] + neg_step_size * m[i] / denom;
    });
  }

 private:
  const bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> NewOptimizerRule(const OptimizerOptions& o, int64_t n,
                                            int64_t start) {
  if (o.name == "sgd") return std::make_unique<Sgd>(o);
  if (o.name == "momentum") return std::make_unique<Momentum>(o, n, start, false);
  if (o.name == "nesterov") return std::make_unique<Momentum>(o, n, start, true);
  if (o.name == "adagrad") return std::make_unique<Adagrad>(o, n, start);
  if (o.name == "adam") return std::make_unique<Adam>(o, n, start, false);
  if (o.name == "adamw") return std::make_unique<Adam>(o, n, start, true);
  return nullptr;
}

}  // namespace internal

absl::StatusOr<OptimizerStateParts> SplitOptimizerState(absl::string_view state) {
  using internal::Get;
  using internal::kMagicSize;
  OptimizerStateParts parts;
  if (state.empty()) return parts;  // SGD's
  parts.name = internal::WriterName(state);
  if (parts.name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an optimizer state of ", state.size(), " bytes without its header"));
  }
  absl::string_view in = state.substr(kMagicSize + sizeof(uint32_t) + parts.name.size());
  uint32_t buffers = 0;
  // Checked by division: a product of hostile counts could wrap around.
  if (!Get(&in, &parts.start) || !Get(&in, &parts.elements) || !Get(&in, &buffers) || buffers < 1 ||
      parts.elements < 0 ||
      static_cast<uint64_t>(parts.elements) > in.size() / sizeof(float) / buffers ||
      in.size() != uint64_t{buffers} * static_cast<uint64_t>(parts.elements) * sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", parts.name, " state is truncated or of another size"));
  }
  parts.buffers.assign(buffers, std::vector<float>(parts.elements));
  for (std::vector<float>& b : parts.buffers) {
    std::memcpy(b.data(), in.data(), b.size() * sizeof(float));
    in.remove_prefix(b.size() * sizeof(float));
  }
  return parts;
}

std::string JoinOptimizerState(const OptimizerStateParts& parts) {
  if (parts.name.empty()) return std::string();
  return internal::WriteState(parts.name, parts.start, parts.elements, parts.buffers);
}

}  // namespace ps
