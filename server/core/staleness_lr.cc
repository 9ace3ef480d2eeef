#include "server/core/staleness_lr.h"

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<StalenessLr> ParseStalenessLr(absl::string_view name) {
  if (name == "none") return StalenessLr::kNone;
  if (name == "inverse") return StalenessLr::kInverse;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --staleness_lr '", name, "' (known: none, inverse)"));
}

absl::string_view StalenessLrName(StalenessLr rule) {
  return rule == StalenessLr::kInverse ? "inverse" : "none";
}

double StalenessLrScale(StalenessLr rule, Mode mode, int64_t staleness) {
  if (rule == StalenessLr::kNone || mode == Mode::kSync || staleness <= 0) return 1.0;
  return 1.0 / (1.0 + static_cast<double>(staleness));
}

}  // namespace ps
