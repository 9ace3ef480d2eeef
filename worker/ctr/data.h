// CtrData: examples of Criteo's shape (13 dense features, 26 categorical
// ones, a 0/1 click label) and a deterministic synthetic generator of them
// whose best achievable AUC is known.
//
// Feature ids. A categorical id is 64 bits: the feature's index (0..25) in
// the top 12 bits and a 52-bit raw id below (PERSIA's layout), so ids of
// different features never collide and one key space holds all 26 tables.
// Raw id kMissingRawId (all 52 bits set) is reserved for "no value" (the file
// readers, worker/ctr/reader.h, use it; the generator never does).
//
// The generator. Example i is a pure function of (options, i): every random
// choice is a uniform made from Hash4(seed, stream, i, j) (counter-based, no
// RNG state), and every function of it uses worker/ctr/det_math.h rather than
// libm, so the examples are bit-identical on any x86-64 machine.
//   - dense[j] = log(1 + c), c = floor(-mean_j * log u): a geometric count
//     with mean mean_j = 2^(j mod 7) / 2, log-transformed as the readers do;
//   - ids[f]: a rank k in [1, vocab_f] from a Zipf(s) distribution,
//     P(k) ~ k^-s, drawn by rejection-inversion (Hörmann & Derflinger 1996:
//     O(1) memory and expected time for any vocabulary); raw id = k - 1, so
//     raw 0 is the most frequent id of every feature;
//   - the label: a hidden logistic model, logit = bias + sum_j a_j dense[j] +
//     sum_f w(f, raw id), with a_j uniform in [-dense_weight_scale,
//     dense_weight_scale] and w(f, r) roughly normal with standard deviation
//     categorical_weight_scale (0 for r >= signal_vocab_size when that is
//     set), both derived from a hash of the seed and the index (never
//     stored); label = 1 iff u < sigmoid(logit). The bias is
//     fitted once, at construction (bisection on 20,000 examples), so that
//     the mean probability is positive_rate.
// BestProbability(example) = sigmoid(logit) is the Bayes-optimal prediction,
// so the AUC of those probabilities on held-out examples is the best any
// model can reach there.
//
// Held-out examples are Example(num_examples + j): same distribution, never
// in the training range [0, num_examples).
//
// Cost: Create about 0.15 s (the bias fit); Example about 7 us (145,000
// examples/s on one core of the development machine, -O2).
//
// Thread-safe: a CtrGenerator is immutable after Create.
#ifndef PS_WORKER_CTR_DATA_H_
#define PS_WORKER_CTR_DATA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ps {

inline constexpr int kCtrDense = 13;
inline constexpr int kCtrCategorical = 26;
inline constexpr int kRawIdBits = 52;
inline constexpr uint64_t kRawIdMask = (uint64_t{1} << kRawIdBits) - 1;
inline constexpr uint64_t kMissingRawId = kRawIdMask;

// The id of raw id `raw` (masked to 52 bits) of feature `feature`.
// REQUIRES: 0 <= feature < 4096.
inline uint64_t CtrFeatureId(int feature, uint64_t raw) {
  return (static_cast<uint64_t>(feature) << kRawIdBits) | (raw & kRawIdMask);
}
inline int CtrIdFeature(uint64_t id) { return static_cast<int>(id >> kRawIdBits); }
inline uint64_t CtrIdRaw(uint64_t id) { return id & kRawIdMask; }

struct CtrExample {
  float dense[kCtrDense] = {};
  float label = 0;                     // 0 or 1
  uint64_t ids[kCtrCategorical] = {};  // ids[f] has feature prefix f
};
static_assert(sizeof(CtrExample) == 264, "CtrExample has no padding");

// Zipf(s) over ranks 1..n, P(k) = k^-s / H(n, s), by rejection-inversion.
// Immutable, thread-safe; Sample is a pure function of its uniforms.
class ZipfSampler {
 public:
  // REQUIRES: n >= 1, s > 0 (the caller validates).
  ZipfSampler(uint64_t n, double s);

  // A rank in [1, n]. `uniform(a)` must return the a-th uniform in (0, 1)
  // (a = 0, 1, ...); one is used per attempt, about 1.1 on average.
  template <typename UniformFn>
  uint64_t Sample(UniformFn uniform) const {
    for (int attempt = 0;; ++attempt) {
      uint64_t k = 0;
      if (TryOnce(uniform(attempt), &k) || attempt >= kMaxAttempts) return k;
    }
  }

 private:
  static constexpr int kMaxAttempts = 64;  // never reached in practice
  bool TryOnce(double u01, uint64_t* k) const;
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  double n_, s_;
  double h_integral_x1_, h_integral_n_, accept_;
};

struct CtrGeneratorOptions {
  uint64_t seed = 1;
  // Ids per feature: one value for all 26 features, or 26 values. Each in
  // [1, 2^52 - 1].
  std::vector<uint64_t> vocab_sizes = {1000000};
  // The Zipf exponent s > 0 (Criteo's categorical features are near 1).
  double zipf_exponent = 1.05;
  // Target mean probability of a click, in (0, 1).
  double positive_rate = 0.25;
  // Scales of the hidden model's weights, >= 0.
  double dense_weight_scale = 0.3;
  double categorical_weight_scale = 0.35;
  // When > 0, only the signal_vocab_size most frequent ids of each feature
  // (raw id < signal_vocab_size) have a weight in the hidden model; rarer
  // ids carry none. A model sees a rare id too seldom to learn its weight:
  // with every id weighted (0) and a million ids a feature, ids seen fewer
  // than 10 times in 1M training examples hold 27% of the slots, and the
  // best AUC (0.85) is 0.05 beyond a model that knows only the others'
  // weights. With 1000 (the default) the best AUC is about 0.81, and a model
  // that knows only the weights of ids seen 100 times in 1M examples comes
  // within 0.007 of it.
  uint64_t signal_vocab_size = 1000;
  // Training examples are [0, num_examples); held-out ones come after.
  int64_t num_examples = 1000000;

  // INVALID_ARGUMENT naming the field and the expected values.
  absl::Status Validate() const;
};

class CtrGenerator {
 public:
  static absl::StatusOr<std::unique_ptr<CtrGenerator>> Create(
      const CtrGeneratorOptions& options);

  CtrGenerator(const CtrGenerator&) = delete;
  CtrGenerator& operator=(const CtrGenerator&) = delete;

  // Example i, for any i >= 0 (not only below num_examples).
  CtrExample Example(int64_t i) const;
  CtrExample HeldOutExample(int64_t j) const {
    return Example(options_.num_examples + j);
  }

  // The hidden model's logit and sigmoid(logit) for an example of this
  // generator's shape (ids with the feature prefix).
  double Logit(const CtrExample& example) const;
  double BestProbability(const CtrExample& example) const;

  uint64_t vocab_size(int feature) const { return vocab_[feature]; }
  double bias() const { return bias_; }
  const CtrGeneratorOptions& options() const { return options_; }

 private:
  explicit CtrGenerator(const CtrGeneratorOptions& options);
  // The example's features, and its logit without the bias.
  void Features(int64_t i, CtrExample* example) const;
  double UnbiasedLogit(const CtrExample& example) const;
  double CategoricalWeight(int feature, uint64_t raw) const;

  CtrGeneratorOptions options_;
  std::vector<uint64_t> vocab_;      // per feature
  std::vector<ZipfSampler> zipf_;    // per feature
  double dense_weight_[kCtrDense];
  double dense_mean_[kCtrDense];
  double bias_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_CTR_DATA_H_
