// Flag values that every binary parses the same way, with the same error
// messages: comma-separated lists of positive integers (--hidden=512,256,
// --sizes=4096,1048576, --dims=784,512,10) and durations given in seconds
// (--pull_timeout=60). Stateless; thread-safe.
#ifndef PS_COMMON_FLAG_LISTS_H_
#define PS_COMMON_FLAG_LISTS_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/strings/string_view.h"

namespace ps {

// The integers of `text` ("8,16, 32"; empty items and spaces around items
// are ignored, so "" gives an empty list: callers say what an empty list
// means), each in [1, max]. INVALID_ARGUMENT naming --`flag`, the text and
// the bad item.
absl::StatusOr<std::vector<int64_t>> ParsePositiveList(
    absl::string_view flag, absl::string_view text,
    int64_t max = std::numeric_limits<int64_t>::max());

// The same, as ints.
absl::StatusOr<std::vector<int>> ParsePositiveIntList(absl::string_view flag,
                                                      absl::string_view text);

// `seconds`, the value of --`flag`, as a Duration; +-inf as infinite ones.
// INVALID_ARGUMENT naming the flag for NaN (which absl::Seconds would make
// an infinite duration, an endless wait). The range is for the options
// types to check.
absl::StatusOr<absl::Duration> SecondsFromFlag(absl::string_view flag, double seconds);

}  // namespace ps

#endif  // PS_COMMON_FLAG_LISTS_H_
