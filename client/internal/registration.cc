#include "client/internal/registration.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rpc/wire.h"

namespace ps {

absl::StatusOr<Registration> ReadRegistration(const std::vector<std::string>& servers,
                                              const std::vector<v1::RegisterResponse>& replies) {
  const int S = static_cast<int>(servers.size());
  for (int s = 0; s < S; ++s) {
    const v1::RegisterResponse& r = replies[s];
    if (r.num_shards() != S || r.shard_id() != s) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--servers lists ", S, " servers, but ", servers[s], " (position ", s, ") is shard ",
          r.shard_id(), " of ", r.num_shards(), "; list every shard once, in shard order"));
    }
    if (r.mode() != replies[0].mode()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "servers disagree on the mode: ", servers[0], " runs ", v1::Mode_Name(replies[0].mode()),
          ", ", servers[s], " runs ", v1::Mode_Name(r.mode())));
    }
  }
  absl::StatusOr<Mode> mode = ModeFromProto(replies[0].mode());
  if (!mode.ok()) {
    return absl::Status(mode.status().code(),
                        absl::StrCat(servers[0], " reports ", mode.status().message()));
  }
  Registration out;
  out.mode = *mode;
  out.learning_rate = replies[0].learning_rate();
  int64_t lease_ms = 0;
  for (const v1::RegisterResponse& r : replies) {
    out.incarnations.push_back(IncarnationFromProto(r.incarnation()));
    out.last_seq = std::max(out.last_seq, r.last_seq());
    out.last_row_seq = std::max(out.last_row_seq, r.last_row_seq());
    if (r.worker_timeout_ms() > 0) {
      lease_ms = lease_ms == 0 ? r.worker_timeout_ms() : std::min(lease_ms, r.worker_timeout_ms());
    }
  }
  out.lease = absl::Milliseconds(lease_ms);
  return out;
}

std::vector<ShardRegistration> ToShardRegistrations(
    const std::vector<v1::RegisterResponse>& replies) {
  std::vector<ShardRegistration> out;
  for (const v1::RegisterResponse& r : replies) {
    out.push_back({IncarnationFromProto(r.incarnation()), r.initialized(), r.version()});
  }
  return out;
}

absl::Status ConnectTimeoutError(absl::Duration connect_timeout, const absl::Status& why) {
  return absl::DeadlineExceededError(absl::StrCat(
      "no answer within --connect_timeout=", absl::FormatDuration(connect_timeout), "; then ",
      why.message(),
      absl::StrContains(why.message(), "Socket closed")
          ? " (the server closed the connection while it was set up: do this worker's TLS "
            "flags match the server's, and does its --tls_ca trust this worker's --tls_cert?)"
          : ""));
}

}  // namespace ps
