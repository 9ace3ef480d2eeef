// Comma-separated lists of positive integers in command-line flags
// (--hidden=512,256, --sizes=4096,1048576, --dims=784,512,10), parsed the same
// way by every binary, with the same error messages. Stateless; thread-safe.
#ifndef PS_COMMON_FLAG_LISTS_H_
#define PS_COMMON_FLAG_LISTS_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
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

}  // namespace ps

#endif  // PS_COMMON_FLAG_LISTS_H_
