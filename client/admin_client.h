// The operator's calls to the shards (ps_ctl, and tests that watch a
// server's counters): QueryStatus asks each server for its StatusResponse
// (proto/ps.proto: shard id, mode, version, workers seen, waiting calls,
// stats), RequestCheckpoints has each write a checkpoint now. No
// registration needed, so neither counts as a worker.
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
#include "rpc/credentials.h"

namespace ps {

// One reply per server, in the order of `servers`; each call has `timeout`.
// An error names the server that failed.
// `security`: as the client library's (rpc/credentials.h); the calls need
// an admin identity (status also a reader) on a server that authenticates.
absl::StatusOr<std::vector<v1::StatusResponse>> QueryStatus(
    const std::vector<std::string>& servers, absl::Duration timeout,
    const SecurityOptions& security = {});

// The same for the Checkpoint RPC: each server writes one and answers once
// it is on disk. FAILED_PRECONDITION from a server without --checkpoint_dir.
absl::StatusOr<std::vector<v1::CheckpointResponse>> RequestCheckpoints(
    const std::vector<std::string>& servers, absl::Duration timeout,
    const SecurityOptions& security = {});


}  // namespace ps

#endif  // PS_CLIENT_ADMIN_CLIENT_H_
