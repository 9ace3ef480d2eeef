// PsClient: a worker's connection to all parameter-server shards.
//
// Hides the sharding: callers work with whole named tensors (a TensorList
// parallel to the ModelSpec) and the client splits them by the partition of
// common/partition.h, talks to every shard in parallel, and reassembles the
// replies. It tracks the version of each shard's weights it last pulled and
// sends it with each push (the step in sync mode; for staleness in async
// mode). How the tensors travel is the transport's business
// (ClientOptions::transport, client/internal/shard_transport.h); this header is the
// whole public API and includes no gRPC or generated code.
//
// Every call has a deadline; a shard that does not answer yields an error
// naming it, never a hang. With ClientOptions::retry_timeout, Pull, Push and
// the push-pulls survive a shard that restarts or a link that drops for up
// to that long: they register again, restore a shard that came back behind
// from the client's copy of its slices, and retry (the shards deduplicate
// pushes). Where a shard's RegisterResponse asks for heartbeats (sync
// leases), a background thread sends them while the client lives.
//
// Thread safety: one training thread per client. The *Async calls return a
// PendingOp (client/pending_op.h) to wait on; start at most one at a time
// and wait for it before the next call. The client must outlive its
// PendingOps and PushPullInProgress handles.
//
// Example:
//   ASSIGN_OR_RETURN(auto client, PsClient::Connect(options));
//   RETURN_IF_ERROR(client->Init(spec, worker_id == 0 ? &init : nullptr));
//   RETURN_IF_ERROR(client->Pull(0, &weights));
//   for (...) { compute grads; RETURN_IF_ERROR(client->PushPull(grads, &weights)); }
#ifndef PS_CLIENT_PS_CLIENT_H_
#define PS_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/client_options.h"
#include "client/pending_op.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "common/model_spec.h"

namespace ps {

class LayerwisePushPull;
class PsClient;

// A push-pull whose gradient is sent tensor by tensor as it becomes final
// (layer by layer during backward), so that communication overlaps the rest
// of the backward pass. Send() every tensor exactly once, in any order; the
// new weights arrive once the last was sent. `grads` (and the weights) must
// stay alive until Wait() returns, and a tensor must not change once sent.
// With the unary transport everything is sent with the last tensor.
class PushPullInProgress {
 public:
  ~PushPullInProgress();  // waits (cancelling if need be)
  PushPullInProgress(const PushPullInProgress&) = delete;
  PushPullInProgress& operator=(const PushPullInProgress&) = delete;

  // Sends tensors `indices` (into the model spec) of the gradient.
  void Send(const std::vector<int>& indices);
  // After the last Send: the result of the push-pull.
  absl::Status Wait();

 private:
  friend class PsClient;  // makes them
  // `client` and its `spec` are borrowed; `calls` is the transport's half,
  // null when `error` is not OK.
  PushPullInProgress(PsClient* client, const ModelSpec* spec, const TensorList* grads,
                     TensorList* weights, std::unique_ptr<LayerwisePushPull> calls,
                     absl::Status error);

  PsClient* const client_;       // not owned; retries a failed push-pull
  const ModelSpec* const spec_;  // not owned
  const TensorList* const grads_;
  TensorList* const weights_;
  std::vector<bool> sent_;  // by tensor
  int remaining_;           // tensors not sent yet
  absl::Status error_;      // a bad Send, or a failed start
  std::unique_ptr<LayerwisePushPull> calls_;  // reset (cancelled) on error
};

class PsClient {
 public:
  // Opens a channel per server and registers with each, waiting up to
  // connect_timeout for servers that are not up yet. Fails if the servers
  // disagree with each other or with the options (mode, worker count, shard
  // count or order).
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const ClientOptions& options);

  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;
  ~PsClient();  // closes the streams

  Mode mode() const;
  int num_shards() const;
  float server_learning_rate() const;
  const ModelSpec& spec() const;

  // Worker 0 passes `initial` values and creates the parameters on every
  // shard; other workers pass nullptr and wait for worker 0, getting
  // FAILED_PRECONDITION if their spec differs from the one worker 0 created.
  absl::Status Init(const ModelSpec& spec, const TensorList* initial);

  // Fills `weights` (resized to the spec) from every shard once each is at
  // version >= min_version.
  absl::Status Pull(int64_t min_version, TensorList* weights);
  std::unique_ptr<PendingOp> PullAsync(int64_t min_version, TensorList* weights);

  // Pushes one gradient per tensor, computed on the weights last pulled.
  absl::Status Push(const TensorList& grads);

  // Pushes, then pulls the next weights: sync mode waits for the step every
  // worker contributes to (version + 1); async mode returns the shard's
  // weights right after this push. `weights` may alias nothing in `grads`;
  // both must stay alive until the PendingOp is waited on.
  absl::Status PushPull(const TensorList& grads, TensorList* weights);
  std::unique_ptr<PendingOp> PushPullAsync(const TensorList& grads, TensorList* weights);

  // PushPull with the gradient sent tensor by tensor; see PushPullInProgress.
  std::unique_ptr<PushPullInProgress> StartPushPull(const TensorList* grads, TensorList* weights);

  // The smallest version pulled from any shard (in sync mode: the step).
  int64_t version() const;

  // By shard: what became of this client's last push (Push or a push-pull).
  std::vector<PushOutcome> LastPushOutcomes() const;

 private:
  friend class PushPullInProgress;
  struct Rep;  // the state, the control stubs and the transport
  explicit PsClient(std::unique_ptr<Rep> rep);

  // Retries `attempt` after `status` failed it, as ClientOptions::
  // retry_timeout says; returns the last status.
  absl::Status Retry(const char* what, absl::Status status,
                     const std::function<absl::Status()>& attempt);
  // Registers with every shard again (waiting for those that are down) and
  // restores those behind the version this client holds. Sets `*restarted`
  // if a shard's incarnation changed. Fails once `deadline` passes.
  absl::Status Recover(absl::Time deadline, bool* restarted);
  // Sync: when Init found the shards at different versions (they restarted
  // from checkpoints of different versions), asks those ahead to roll back
  // to the newest checkpoint they all have (InitRequest.rollback).
  void RollBackToCommonVersion(std::vector<int64_t> versions);
  void Log(const std::string& line) const;

  absl::Status CheckGrads(const TensorList& grads) const;
  void Resize(TensorList* weights) const;

  std::unique_ptr<Rep> rep_;
};

}  // namespace ps

#endif  // PS_CLIENT_PS_CLIENT_H_
