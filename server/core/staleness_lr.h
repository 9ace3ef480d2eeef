// StalenessLr: how a non-sync gradient's learning rate depends on its
// staleness (after Zhang et al. 2016, "Staleness-aware async-SGD").
//
// The staleness of a gradient is the shard's version when it is applied
// minus the version it was computed on; the shard knows both. With
// kInverse, every mode but sync (async now, bounded-staleness modes too)
// applies the gradient at lr / (1 + staleness); sync steps, whose
// gradients are all computed on the version they update, keep the rate.
// A pure function; thread-safe.
#ifndef PS_SERVER_CORE_STALENESS_LR_H_
#define PS_SERVER_CORE_STALENESS_LR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mode.h"

namespace ps {

enum class StalenessLr {
  kNone,     // every gradient at the scheduled rate
  kInverse,  // non-sync modes: rate / (1 + staleness)
};

// "none" or "inverse"; INVALID_ARGUMENT naming --staleness_lr otherwise.
absl::StatusOr<StalenessLr> ParseStalenessLr(absl::string_view name);
absl::string_view StalenessLrName(StalenessLr rule);

// The factor on the learning rate of a gradient of staleness `staleness`
// (>= 0) applied in `mode`.
double StalenessLrScale(StalenessLr rule, Mode mode, int64_t staleness);

}  // namespace ps

#endif  // PS_SERVER_CORE_STALENESS_LR_H_
