#include "client/client_options.h"

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<ClientOptions::Transport> ParseTransport(absl::string_view text) {
  if (text == "stream") return ClientOptions::Transport::kStream;
  if (text == "unary") return ClientOptions::Transport::kUnary;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "': expected 'stream' or 'unary'"));
}

absl::Status ValidateClientOptions(const ClientOptions& o) {
  if (o.servers.empty()) return absl::InvalidArgumentError("no servers given");
  if (o.num_workers < 1 || o.worker_id < 0 || o.worker_id >= o.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_id must be in [0, num_workers=", o.num_workers, "), got ", o.worker_id));
  }
  if (o.keepalive != absl::ZeroDuration() &&
      !(o.keepalive >= absl::Seconds(1) && o.keepalive <= absl::Hours(24))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keepalive must be 0 (off) or 1..86400 seconds, got ",
                     absl::ToDoubleSeconds(o.keepalive)));
  }
  if (o.interrupt && o.interrupt_every <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("interrupt_every must be > 0 when interrupt is set");
  }
  if (o.retry_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--retry_timeout must be >= 0");
  }
  if (!IsKnownWireDtype(o.wire_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--wire_dtype: ", WireDtypeName(o.wire_dtype), " (expected f32 or bf16)"));
  }
  return absl::OkStatus();
}

}  // namespace ps
