#include "worker/ctr/auc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

template <typename T>
absl::StatusOr<double> AucImpl(const std::vector<T>& scores, const std::vector<float>& labels) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Auc: ", scores.size(), " scores but ", labels.size(), " labels"));
  }
  const size_t n = scores.size();
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(absl::StrCat("Auc: score ", i, " is NaN"));
    }
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Twice the Mann-Whitney U: for each group of tied scores, every positive
  // beats the negatives below the group (2 each) and ties its own (1 each).
  // Exact in 64 bits up to about 3 billion examples.
  uint64_t twice_u = 0, negatives_below = 0, positives = 0;
  for (size_t start = 0; start < n;) {
    size_t end = start;
    uint64_t pos = 0, neg = 0;
    while (end < n && scores[order[end]] == scores[order[start]]) {
      (labels[order[end]] > 0.5f ? pos : neg) += 1;
      ++end;
    }
    twice_u += pos * (2 * negatives_below + neg);
    negatives_below += neg;
    positives += pos;
    start = end;
  }
  if (positives == 0 || negatives_below == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Auc: undefined with ", positives, " positives and ", negatives_below,
        " negatives"));
  }
  return static_cast<double>(twice_u) /
         (2.0 * static_cast<double>(positives) * static_cast<double>(negatives_below));
}

template <typename T>
absl::StatusOr<double> LogLossImpl(const std::vector<T>& probs, const std::vector<float>& labels,
                                   double epsilon) {
  if (probs.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LogLoss: ", probs.size(), " probabilities but ", labels.size(), " labels"));
  }
  if (probs.empty()) return absl::InvalidArgumentError("LogLoss: no examples");
  double sum = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double y = labels[i];
    if (std::isnan(static_cast<double>(probs[i]))) {
      return absl::InvalidArgumentError(absl::StrCat("LogLoss: probability ", i, " is NaN"));
    }
    if (!(y >= 0 && y <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("LogLoss: label ", i, " is ", y, ", expected 0 or 1"));
    }
    const double p = std::min(std::max(static_cast<double>(probs[i]), epsilon), 1.0 - epsilon);
    sum -= y * std::log(p) + (1.0 - y) * std::log(1.0 - p);
  }
  return sum / static_cast<double>(probs.size());
}

}  // namespace

absl::StatusOr<double> Auc(const std::vector<float>& scores, const std::vector<float>& labels) {
  return AucImpl(scores, labels);
}
absl::StatusOr<double> Auc(const std::vector<double>& scores, const std::vector<float>& labels) {
  return AucImpl(scores, labels);
}
absl::StatusOr<double> LogLoss(const std::vector<float>& probs, const std::vector<float>& labels,
                               double epsilon) {
  return LogLossImpl(probs, labels, epsilon);
}
absl::StatusOr<double> LogLoss(const std::vector<double>& probs, const std::vector<float>& labels,
                               double epsilon) {
  return LogLossImpl(probs, labels, epsilon);
}

}  // namespace ps
