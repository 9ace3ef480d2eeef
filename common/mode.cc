#include "common/mode.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ps {

std::string ModeName(Mode mode) { return mode == Mode::kSync ? "sync" : "async"; }

absl::StatusOr<Mode> ParseMode(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "sync") return Mode::kSync;
  if (t == "async") return Mode::kAsync;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", text, "': expected 'sync' or 'async'"));
}

}  // namespace ps
