// The operator's calls to the shards (ps_ctl, and tests that watch a
// server's counters): QueryStatus asks each server for its StatusResponse
// (proto/ps.proto: shard id, mode, version, workers seen, waiting calls,
// stats), RequestCheckpoints has each write a checkpoint now. No
// registration needed, so neither counts as a worker. StatusPoller asks the
// same servers again and again (ps_ctl top), all at once, keeping its
// channels, and reports each server's answer or error on its own.
//
// The functions are thread-safe (no shared state); each call opens its own
// channels, asks the servers one after the other and closes them.
#ifndef PS_CLIENT_ADMIN_CLIENT_H_
#define PS_CLIENT_ADMIN_CLIENT_H_

#include <memory>
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

// Polls GetStatus on a fixed list of servers. Not thread-safe: one Poll at a
// time. Owns its channels; a call still in flight when Poll gives up on it
// (it cannot outlive its deadline by much) keeps what it needs alive itself.
class StatusPoller {
 public:
  // One channel per server (no connection yet). An error for a bad address
  // or unreadable credentials, naming them.
  static absl::StatusOr<std::unique_ptr<StatusPoller>> Create(
      const std::vector<std::string>& servers, const SecurityOptions& security);

  StatusPoller(const StatusPoller&) = delete;
  StatusPoller& operator=(const StatusPoller&) = delete;
  ~StatusPoller();

  // Asks every server at once; one entry per server, in order: its reply,
  // or the error (its RPC status, naming the server; DEADLINE_EXCEEDED if it
  // did not answer within `timeout`). Returns within about `timeout`.
  std::vector<absl::StatusOr<v1::StatusResponse>> Poll(absl::Duration timeout);

 private:
  struct Shard;
  explicit StatusPoller(std::vector<std::unique_ptr<Shard>> shards);
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace ps

#endif  // PS_CLIENT_ADMIN_CLIENT_H_
