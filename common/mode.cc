#include "common/mode.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ps {

absl::Span<const Mode> AllModes() {
  static constexpr Mode kModes[] = {Mode::kSync, Mode::kAsync, Mode::kSsp};
  return kModes;
}

std::string ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSync:
      return "sync";
    case Mode::kAsync:
      return "async";
    case Mode::kSsp:
      return "ssp";
  }
  return absl::StrCat("mode(", static_cast<int>(mode), ")");
}

std::string KnownModeNames() {
  std::string names;
  for (Mode m : AllModes()) absl::StrAppend(&names, names.empty() ? "" : ", ", ModeName(m));
  return names;
}

absl::Status CheckMode(Mode mode) {
  for (Mode m : AllModes()) {
    if (m == mode) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode ", ModeName(mode), " (known: ", KnownModeNames(), ")"));
}

absl::StatusOr<Mode> ParseMode(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  for (Mode m : AllModes()) {
    if (t == ModeName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", text, "' (known: ", KnownModeNames(), ")"));
}

}  // namespace ps
