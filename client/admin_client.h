// QueryStatus: the operator's view of the shards (ps_ctl status, and tests
// that watch a server's counters). It asks each server for its StatusResponse
// (proto/ps.proto: shard id, mode, version, workers seen, waiting calls,
// stats); no registration needed, so it does not count as a worker.
//
// Thread-safe (no shared state); each call opens its own channels, asks the
// servers one after the other and closes them.
#ifndef PS_CLIENT_ADMIN_CLIENT_H_
#define PS_CLIENT_ADMIN_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"

namespace ps {

// One reply per server, in the order of `servers`; each call has `timeout`.
// An error names the server that failed.
absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout);

}  // namespace ps

#endif  // PS_CLIENT_ADMIN_CLIENT_H_
