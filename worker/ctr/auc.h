// Auc and LogLoss: the click-prediction metrics, over a whole
// evaluation set held in memory.
//
// Auc is exact: the Mann-Whitney statistic, the probability that a random
// positive scores above a random negative, ties counting one half (the
// average-rank rule), computed by one sort and integer counts. LogLoss is the
// mean negative log-likelihood with probabilities clamped to
// [epsilon, 1 - epsilon], so a confident mistake costs -log(epsilon), not
// infinity. Labels are 0 or 1 (Auc counts a label > 0.5 as positive; LogLoss
// takes any label in [0, 1]). Pure functions: thread-safe.
#ifndef PS_WORKER_CTR_AUC_H_
#define PS_WORKER_CTR_AUC_H_

#include <vector>

#include "absl/status/statusor.h"

namespace ps {

// INVALID_ARGUMENT if the sizes differ, a score is NaN, or the labels are
// all of one class (AUC is undefined then).
absl::StatusOr<double> Auc(const std::vector<float>& scores,
                           const std::vector<float>& labels);
absl::StatusOr<double> Auc(const std::vector<double>& scores,
                           const std::vector<float>& labels);

// INVALID_ARGUMENT if the sizes differ, the set is empty, a probability is
// NaN, or a label is outside [0, 1].
inline constexpr double kLogLossEpsilon = 1e-7;
absl::StatusOr<double> LogLoss(const std::vector<float>& probs,
                               const std::vector<float>& labels,
                               double epsilon = kLogLossEpsilon);
absl::StatusOr<double> LogLoss(const std::vector<double>& probs,
                               const std::vector<float>& labels,
                               double epsilon = kLogLossEpsilon);

}  // namespace ps

#endif  // PS_WORKER_CTR_AUC_H_
