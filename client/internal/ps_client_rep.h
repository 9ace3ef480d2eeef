// PsClient::Rep: a PsClient's state and the parts it owns, shared by the
// files that implement PsClient (client/ps_client.cc, ps_client_rows.cc,
// ps_client_recovery.cc). Not thread-safe: the client's one training thread
// uses it (the heartbeater only reads the options through ShardControl;
// PsClient::Cancel only uses state.canceller, which is thread-safe).
#ifndef PS_CLIENT_INTERNAL_PS_CLIENT_REP_H_
#define PS_CLIENT_INTERNAL_PS_CLIENT_REP_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/internal/heartbeater.h"
#include "client/internal/shard_control.h"
#include "client/internal/shard_rows.h"
#include "client/internal/shard_transport.h"
#include "client/ps_client.h"
#include "common/incarnation.h"

namespace ps {

struct PsClient::Rep {
  ClientState state;
  // The shard map version every call is stamped with (rpc/route.h): the
  // channels' stamps read it as each call starts, and recovery raises it
  // when it reads the map again (it starts at ClientOptions::
  // shard_map_version, which stays as given).
  std::shared_ptr<std::atomic<int64_t>> map_version = std::make_shared<std::atomic<int64_t>>(0);
  float learning_rate = 0;
  // By shard: the incarnation seen at the last Register.
  std::vector<Incarnation> incarnation;
  // What the operation in progress started from: a retry pushes the same
  // gradient for the same versions, with the same async seq, even where a
  // shard already answered the failed try (it then answers "duplicate").
  std::vector<int64_t> op_versions;
  int64_t op_seq = 0;
  // Sync: by table, the step its rows were last pushed for (a second push
  // in one step would be answered "duplicate" and lost: refused instead).
  std::map<std::string, int64_t, std::less<>> rows_pushed_step;
  // PsClient::retries() and recoveries().
  int64_t retries = 0;
  int64_t recoveries = 0;
  // As each operation begins: PsClient::Cancel ends it from now on.
  void StartOp() {
    state.canceller.BeginOperation();
    op_versions = state.shard_version;
    op_seq = state.seq;
  }
  // The status of operation `what`: CANCELLED, saying so, if it failed after
  // PsClient::Cancel ended it.
  absl::Status Outcome(const char* what, absl::Status status) const {
    if (status.ok() || !state.canceller.cancelled()) return status;
    return absl::CancelledError(
        absl::StrCat(what, " cancelled (PsClient::Cancel): ", status.message()));
  }
  // With leases: the heartbeats' period (zero: none).
  absl::Duration heartbeat_period = absl::ZeroDuration();
  // (Re)opens the channels to state.options.servers and the parts below on
  // them (at Connect, and when recovery finds a shard's server moved), and
  // (re)starts the heartbeats (client/ps_client.cc).
  absl::Status Open();
  // (Re)starts the heartbeater on `control`, if heartbeat_period is set.
  void StartHeartbeats();
  // These borrow `state`; declared after it so that they go first.
  std::unique_ptr<ShardControl> control;  // Register, InitParams, Heartbeat
  std::unique_ptr<ShardTransport> transport;
  // PushPullRowsAsync's calls: unary, beside the transport (whose streams
  // run one call at a time), so that a sync step's push can go while they
  // wait for the step to close.
  std::unique_ptr<ShardRows> rows_beside;
  // Those replaced by Open while a push-pull of rows may still run on them
  // (its step's push failed over): kept until the client goes.
  std::vector<std::unique_ptr<ShardRows>> retired_rows;
  // Null without leases; declared last so that it stops first.
  std::unique_ptr<Heartbeater> heartbeater;
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_PS_CLIENT_REP_H_
