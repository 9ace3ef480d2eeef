#include "common/flag_lists.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ps {

absl::StatusOr<std::vector<int64_t>> ParsePositiveList(absl::string_view flag,
                                                       absl::string_view text, int64_t max) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", text, ": '", part, "' is not a positive integer"));
    }
    if (v > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", text, ": ", v, " is larger than ", max));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParsePositiveIntList(absl::string_view flag,
                                                      absl::string_view text) {
  absl::StatusOr<std::vector<int64_t>> wide =
      ParsePositiveList(flag, text, std::numeric_limits<int>::max());
  if (!wide.ok()) return wide.status();
  return std::vector<int>(wide->begin(), wide->end());
}

absl::StatusOr<absl::Duration> SecondsFromFlag(absl::string_view flag, double seconds) {
  if (std::isnan(seconds)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=nan is not a number of seconds"));
  }
  return absl::Seconds(seconds);
}

}  // namespace ps
