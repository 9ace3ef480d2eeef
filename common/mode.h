// Mode: how shards combine the workers' gradients (see proto/ps.proto).
#ifndef PS_COMMON_MODE_H_
#define PS_COMMON_MODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

enum class Mode {
  kSync,   // average one gradient per worker per step, then apply once
  kAsync,  // apply every gradient as it arrives
};

// "sync" / "async".
std::string ModeName(Mode mode);
// Accepts "sync" and "async" (any case); INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<Mode> ParseMode(absl::string_view text);

}  // namespace ps

#endif  // PS_COMMON_MODE_H_
