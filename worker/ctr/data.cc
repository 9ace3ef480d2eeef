#include "worker/ctr/data.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "worker/ctr/det_math.h"

namespace ps {
namespace {

// Hash streams: which random choice a hash decides.
enum Stream : uint64_t {
  kDenseStream = 1,       // (i, dense feature)
  kIdStream = 2,          // (i, feature, attempt)
  kLabelStream = 3,       // (i)
  kDenseWeightStream = 4, // (dense feature)
  kIdWeightStream = 5,    // (feature, raw id)
};

constexpr int kBiasSample = 20000;  // examples the bias is fitted on

// log1p(x) / x and expm1(x) / x, with their series near 0.
double Helper1(double x) {
  if (std::fabs(x) > 1e-8) return DetLog1p(x) / x;
  return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double Helper2(double x) {
  if (std::fabs(x) > 1e-8) return DetExpm1(x) / x;
  return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

// Rejection-inversion as in Hörmann & Derflinger (1996) and Apache Commons
// RNG's RejectionInversionZipfSampler: invert the integral of h(x) = x^-s
// over [1.5, n + 0.5], round to the nearest rank, accept by comparing with
// the integral over the rank's own cell.
ZipfSampler::ZipfSampler(uint64_t n, double s) : n_(static_cast<double>(n)), s_(s) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(n_ + 0.5);
  accept_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

double ZipfSampler::H(double x) const { return DetExp(-s_ * DetLog(x)); }

// (x^(1-s) - 1) / (1 - s), or log x when s = 1.
double ZipfSampler::HIntegral(double x) const {
  const double log_x = DetLog(x);
  return Helper2((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // rounding only
  return DetExp(Helper1(t) * x);
}

bool ZipfSampler::TryOnce(double u01, uint64_t* k) const {
  const double u = h_integral_n_ + u01 * (h_integral_x1_ - h_integral_n_);
  const double x = HIntegralInverse(u);
  double kd = std::floor(x + 0.5);
  if (kd < 1.0) kd = 1.0;
  if (kd > n_) kd = n_;
  *k = static_cast<uint64_t>(kd);
  return kd - x <= accept_ || u >= HIntegral(kd + 0.5) - H(kd);
}

absl::Status CtrGeneratorOptions::Validate() const {
  if (vocab_sizes.size() != 1 && vocab_sizes.size() != kCtrCategorical) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_sizes: expected 1 or ", kCtrCategorical, " values, got ",
                     vocab_sizes.size()));
  }
  for (uint64_t v : vocab_sizes) {
    if (v < 1 || v > kRawIdMask) {
      return absl::InvalidArgumentError(absl::StrCat(
          "vocab_sizes: each must be in [1, 2^52 - 1], got ", v));
    }
  }
  if (!(zipf_exponent > 0) || !std::isfinite(zipf_exponent)) {
    return absl::InvalidArgumentError(
        absl::StrCat("zipf_exponent: must be > 0, got ", zipf_exponent));
  }
  if (!(positive_rate > 0 && positive_rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("positive_rate: must be in (0, 1), got ", positive_rate));
  }
  if (!(dense_weight_scale >= 0) || !std::isfinite(dense_weight_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense_weight_scale: must be >= 0, got ", dense_weight_scale));
  }
  if (!(categorical_weight_scale >= 0) || !std::isfinite(categorical_weight_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "categorical_weight_scale: must be >= 0, got ", categorical_weight_scale));
  }
  if (num_examples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_examples: must be >= 0, got ", num_examples));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CtrGenerator>> CtrGenerator::Create(
    const CtrGeneratorOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<CtrGenerator>(new CtrGenerator(options));
}

CtrGenerator::CtrGenerator(const CtrGeneratorOptions& options) : options_(options) {
  for (int f = 0; f < kCtrCategorical; ++f) {
    vocab_.push_back(options.vocab_sizes.size() == 1 ? options.vocab_sizes[0]
                                                     : options.vocab_sizes[f]);
    zipf_.emplace_back(vocab_[f], options.zipf_exponent);
  }
  for (int j = 0; j < kCtrDense; ++j) {
    const double u = UnitFromBits(Hash4(options.seed, kDenseWeightStream, j, 0));
    dense_weight_[j] = options.dense_weight_scale * (2.0 * u - 1.0);
    dense_mean_[j] = 0.5 * static_cast<double>(1 << (j % 7));
  }
  // Fit the bias: mean sigmoid(bias + z) is increasing in the bias, so
  // bisect a fixed number of times (deterministic) on a fixed sample.
  std::vector<double> z(kBiasSample);
  for (int i = 0; i < kBiasSample; ++i) {
    CtrExample e;
    Features(i, &e);
    z[i] = UnbiasedLogit(e);
  }
  double lo = -40, hi = 40;
  for (int iter = 0; iter < 60; ++iter) {
    const double mid = 0.5 * (lo + hi);
    double sum = 0;
    for (double zi : z) sum += DetSigmoid(mid + zi);
    (sum / kBiasSample < options.positive_rate ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

void CtrGenerator::Features(int64_t i, CtrExample* e) const {
  const uint64_t seed = options_.seed;
  const uint64_t ui = static_cast<uint64_t>(i);
  for (int j = 0; j < kCtrDense; ++j) {
    const double u = UnitFromBits(Hash4(seed, kDenseStream, ui, j));
    const double count = std::floor(-dense_mean_[j] * DetLog(u));
    e->dense[j] = static_cast<float>(DetLog1p(count));
  }
  for (int f = 0; f < kCtrCategorical; ++f) {
    const uint64_t rank = zipf_[f].Sample([&](int attempt) {
      return UnitFromBits(
          Hash4(seed, kIdStream, ui, (static_cast<uint64_t>(f) << 32) | attempt));
    });
    e->ids[f] = CtrFeatureId(f, rank - 1);
  }
}

double CtrGenerator::CategoricalWeight(int feature, uint64_t raw) const {
  // Irwin-Hall: four 16-bit uniforms summed, centred and scaled to variance
  // one; roughly normal, bounded by +-2 sqrt(3).
  if (options_.signal_vocab_size > 0 && raw >= options_.signal_vocab_size) return 0;
  const uint64_t h = Hash4(options_.seed, kIdWeightStream, feature, raw);
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    sum += (static_cast<double>((h >> (16 * k)) & 0xffff) + 0.5) / 65536.0;
  }
  return options_.categorical_weight_scale * (sum - 2.0) * 1.7320508075688772;
}

double CtrGenerator::UnbiasedLogit(const CtrExample& e) const {
  double z = 0;
  for (int j = 0; j < kCtrDense; ++j) z += dense_weight_[j] * e.dense[j];
  for (int f = 0; f < kCtrCategorical; ++f) z += CategoricalWeight(f, CtrIdRaw(e.ids[f]));
  return z;
}

double CtrGenerator::Logit(const CtrExample& e) const { return bias_ + UnbiasedLogit(e); }

double CtrGenerator::BestProbability(const CtrExample& e) const {
  return DetSigmoid(Logit(e));
}

CtrExample CtrGenerator::Example(int64_t i) const {
  CtrExample e;
  Features(i, &e);
  const double u = UnitFromBits(Hash4(options_.seed, kLabelStream, static_cast<uint64_t>(i), 0));
  e.label = u < BestProbability(e) ? 1.0f : 0.0f;
  return e;
}

}  // namespace ps
