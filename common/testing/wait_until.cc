#include "common/testing/wait_until.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status WaitUntil(const std::function<bool()>& condition, absl::Duration timeout,
                       absl::string_view what, absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("gave up after ", absl::FormatDuration(timeout), " waiting for ", what));
    }
    absl::SleepFor(std::min(interval, deadline - now));
  }
  return absl::OkStatus();
}

}  // namespace ps
