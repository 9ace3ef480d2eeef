#include "client/client_options.h"

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<ClientOptions::Transport> ParseTransport(absl::string_view text) {
  if (text == "stream") return ClientOptions::Transport::kStream;
  if (text == "unary") return ClientOptions::Transport::kUnary;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "': expected 'stream' or 'unary'"));
}

}  // namespace ps
