// Mode: how shards combine the workers' gradients (see proto/types.proto and
// server/core/consistency.h, which maps each mode to its ConsistencyPolicy).
//
// The enum is the one list of modes. Every way into it rejects what it does
// not know instead of falling back to a default: ParseMode for text (flags),
// ModeFromProto (rpc/wire.h) for the wire, CheckMode for a value cast
// from an integer.
#ifndef PS_COMMON_MODE_H_
#define PS_COMMON_MODE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ps {

enum class Mode {
  kSync,   // average one gradient per worker per step, then apply once
  kAsync,  // apply every gradient as it arrives
  kSsp,    // as async, but no worker runs more than a bound of steps ahead
           // of the slowest live one (stale synchronous parallel)
};

// Every mode, in declaration order.
absl::Span<const Mode> AllModes();

// "sync" / "async" / "ssp"; "mode(N)" for a value that is not an enumerator.
std::string ModeName(Mode mode);

// "sync, async, ssp": the known names, for error messages.
std::string KnownModeNames();

// OK for an enumerator; INVALID_ARGUMENT naming the value and the known
// modes otherwise.
absl::Status CheckMode(Mode mode);

// Accepts "sync", "async" and "ssp" (any case); INVALID_ARGUMENT naming the text and
// the known modes otherwise.
absl::StatusOr<Mode> ParseMode(absl::string_view text);

}  // namespace ps

#endif  // PS_COMMON_MODE_H_
