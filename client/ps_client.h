// PsClient: a worker's connection to all parameter-server shards.
//
// Hides the sharding: callers work with whole named tensors (a TensorList
// parallel to the ModelSpec) and the client splits them by the partition of
// common/partition.h, talks to every shard in parallel, and reassembles the
// replies. It tracks the version of each shard's weights it last pulled and
// sends it with each push (the step in sync mode; for staleness in async
// mode). How the tensors travel is the transport's business
// (ClientOptions::transport). This header, with those it includes
// (client_options.h, pending_op.h, push_pull_in_progress.h), is the whole
// public API for training; it includes no gRPC or generated code.
// (client/admin_client.h and client/channel.h serve operators' tools.)
//
// Every call has a deadline; a shard that does not answer yields an error
// naming it, never a hang. With ClientOptions::retry_timeout, Pull, Push,
// the push-pulls, PullAsync and PushPullAsync survive a shard that restarts
// or a link that drops for up to that long: they register again, restore a
// shard that came back behind from the client's copy of its slices, and
// retry (the shards deduplicate pushes). The *Async calls retry inside
// PendingOp::Wait(), on the waiting thread, so that Wait() may take up to
// retry_timeout longer. Where a shard's RegisterResponse asks for
// heartbeats (sync leases), a background thread sends them while the
// client lives.
//
// Every tensor call comes in two forms: with TensorLists, which the client
// sizes and fills, and with borrowed views (ConstTensorViews/TensorViews of
// common/model_spec.h) of the caller's memory, which go to and from the
// wire without an extra copy (the Python package's numpy arrays and torch
// tensors). Views must have the spec's tensors and sizes; a mismatch is
// INVALID_ARGUMENT naming the tensor, and nothing is sent.
//
// Thread safety: one training thread per client. The *Async calls return a
// PendingOp (client/pending_op.h) to wait on; start at most one at a time
// and wait for it before the next call. The client must outlive its
// PendingOps and PushPullInProgress handles. The one exception is
// Cancel(), which any thread may call at any time: it ends the operation in
// progress (e.g. the training thread's blocked Pull, on Ctrl-C) with
// CANCELLED, and the client stays usable.
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
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/client_options.h"
#include "client/pending_op.h"
#include "client/push_pull_in_progress.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/table_spec.h"

namespace ps {

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
  // Init from the worker that creates the parameters, from views.
  absl::Status Init(const ModelSpec& spec, const ConstTensorViews& initial);

  // Fills `weights` (resized to the spec) from every shard once each is at
  // version >= min_version.
  absl::Status Pull(int64_t min_version, TensorList* weights);
  std::unique_ptr<PendingOp> PullAsync(int64_t min_version, TensorList* weights);
  // The same into the caller's memory, which must stay alive until the
  // PendingOp was waited on.
  absl::Status Pull(int64_t min_version, const TensorViews& weights);
  std::unique_ptr<PendingOp> PullAsync(int64_t min_version, const TensorViews& weights);

  // Pushes one gradient per tensor, computed on the weights last pulled.
  absl::Status Push(const TensorList& grads);
  absl::Status Push(const ConstTensorViews& grads);

  // Pushes, then pulls the next weights: sync mode waits for the step every
  // worker contributes to (version + 1); async mode returns the shard's
  // weights right after this push; SSP mode too, once this worker is no
  // more than the servers' --staleness steps ahead of the slowest live one
  // (the shards hold the pull, up to ClientOptions::wait_timeout).
  // `weights` may alias nothing in `grads`; both must stay alive until the
  // PendingOp is waited on.
  absl::Status PushPull(const TensorList& grads, TensorList* weights);
  std::unique_ptr<PendingOp> PushPullAsync(const TensorList& grads, TensorList* weights);
  // The same with views; the memory they view (not the vectors) must stay
  // alive until the PendingOp was waited on. The weights must not overlap
  // the gradients.
  absl::Status PushPull(const ConstTensorViews& grads, const TensorViews& weights);
  std::unique_ptr<PendingOp> PushPullAsync(const ConstTensorViews& grads,
                                           const TensorViews& weights);

  // PushPull with the gradient sent tensor by tensor
  // (client/push_pull_in_progress.h): from `*grads` as
  // PushPullInProgress::Send(indices) names them, or, started from the
  // weights' views alone, from the views given to Send(index, values).
  std::unique_ptr<PushPullInProgress> StartPushPull(const TensorList* grads, TensorList* weights);
  std::unique_ptr<PushPullInProgress> StartPushPull(const TensorViews& weights);

  // Embedding tables (common/table_spec.h; docs/embeddings.md). Declared
  // before Init, which sends them with the spec: every worker declares the
  // same tables (FAILED_PRECONDITION naming the difference otherwise).
  // INVALID_ARGUMENT for tables ValidateTableSpecs refuses;
  // FAILED_PRECONDITION after Init.
  absl::Status DeclareTables(const std::vector<TableSpec>& tables);
  const std::vector<TableSpec>& tables() const;

  // Writes the rows of `ids` (any order, repeats allowed) of `table` to
  // out[i * dim, (i + 1) * dim) for caller position i. Each id is sent once,
  // to the shard that owns it (client/sparse_ids.h). In sync mode call it
  // after the step's Pull: the rows are those of that step. Strictly
  // ascending ids on one shard land in `out` straight from the wire; on an
  // error `out` may hold part of the rows (as for every rows call).
  absl::Status PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        absl::Span<float> out);
  // Names the ids of a pull to come (the next batch's): each shard checks
  // them as a pull's and answers at once, without rows, then reads those of
  // its rows that are on disk (--table_memory_budget) back into memory
  // while this worker computes, so that the pull finds them there. Changes
  // no row and no answer; not retried (a prefetch lost costs the pull a
  // disk read, nothing more).
  absl::Status PrefetchRows(absl::string_view table, absl::Span<const uint64_t> ids);
  // Pushes the gradient rows grads[i * dim, (i + 1) * dim) of `ids` (any
  // order; the rows of a repeated id are summed, in caller order). Sync:
  // they join this worker's gradient of the current step and are applied
  // with it, so push the rows of each table once per step, before the
  // step's Push or PushPull (a second push of a table in one step is
  // FAILED_PRECONDITION). Async: applied on arrival. Retried and
  // deduplicated as Push.
  absl::Status PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                        absl::Span<const float> grads);
  // PushRows, then the rows of the same ids after that push, written to
  // `out` as PullRows writes them, in one round trip per shard (async and
  // SSP; FAILED_PRECONDITION in sync, where the rows change when the step
  // closes, after this worker's Push: use PushPullRowsAsync). Retried and
  // deduplicated as PushRows: a retry answers the rows without applying the
  // gradient twice.
  absl::Status PushPullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                            absl::Span<const float> grads, absl::Span<float> out);
  // PushPullRows as an operation in flight, so that other calls can go
  // while it waits. Sync: call it for the step, then make the step's Push
  // or PushPull, then Wait(): `out` gets the rows of the step that closed
  // (with this push, unless the step closed without this worker's dense
  // gradient, e.g. its lease ran out). It pushes the rows as PushRows does
  // (blocking: every shard holds them before it returns), then pulls them
  // with calls that each shard answers when its step closes
  // (PullRowsRequest.min_version): the step's push and this pull overlap,
  // two round trips where PushRows, PushPull, PullRows take three. Async and
  // SSP: PushPullRows' one round trip, in flight. `ids` and `grads` are
  // read before it returns; `out` must stay alive until Wait() returns.
  // Its calls are unary, beside the transport, and wait up to
  // ClientOptions::wait_timeout. Wait() retries as PushPullRows does; call
  // it after the step's push returned.
  std::unique_ptr<PendingOp> PushPullRowsAsync(absl::string_view table,
                                               absl::Span<const uint64_t> ids,
                                               absl::Span<const float> grads,
                                               absl::Span<float> out);

  // Cancels the operation in progress (Init, a pull, push or push-pull, a
  // PendingOp or PushPullInProgress not waited on yet, a rows call): its
  // calls in flight on every shard end at once (grpc TryCancel: the unary
  // calls, or the calls on the streams, which the cancel breaks), it starts
  // no retry and no further call (a recovery's backoff wakes), and it
  // returns CANCELLED, saying "cancelled (PsClient::Cancel)". An operation
  // that began after Cancel() returned is not affected, and with none in
  // progress Cancel() does nothing. Connect cannot be cancelled.
  //
  // The client stays usable: the next call reopens the streams the cancel
  // broke. A cancelled push or push-pull may have reached some shards and
  // not others, as after any failed call: the client's versions are those
  // of the replies it got, and a push of the same gradient again is
  // answered as a duplicate by the shards that applied it (sync).
  //
  // Thread-safe: may be called from any thread, concurrently with the
  // training thread's call; it does not wait for that call to return.
  void Cancel();

  // The smallest version pulled from any shard (in sync mode: the step).
  int64_t version() const;

  // By shard: what became of this client's last push (Push or a push-pull).
  std::vector<PushOutcome> LastPushOutcomes() const;

  // Since Connect: calls retried after a fault (each try after the first),
  // and failed calls that went through on a retry (ClientOptions::
  // retry_timeout). From the training thread, like the calls.
  int64_t retries() const;
  int64_t recoveries() const;

 private:
  struct Rep;  // the state, the control calls, the transport, heartbeats
  explicit PsClient(std::unique_ptr<Rep> rep);

  // Recovery (client/ps_client_recovery.cc).
  // Starts an operation with `start` (again for each retry) and returns its
  // PendingOp, whose Wait() retries it with Retry.
  std::unique_ptr<PendingOp> Retried(const char* what,
                                     std::function<std::unique_ptr<PendingOp>()> start);
  // Retries `attempt` after `status` failed it, as ClientOptions::
  // retry_timeout says; returns the last status.
  absl::Status Retry(const char* what, absl::Status status,
                     const std::function<absl::Status()>& attempt);
  // Registers with every shard again (waiting for those that are down) and
  // carries out the recovery plan (client/internal/recovery.h): adopts new
  // incarnations and restores shards behind the version this client holds.
  // Sets `*restarted` if a shard's incarnation changed or the client now
  // routes by a newer shard map. Fails once `deadline` passes.
  absl::Status Recover(absl::Time deadline, bool* restarted);
  // With ClientOptions::find_servers: reads the job's shard map again and,
  // when a shard's server moved to another address, connects there instead
  // (logged). True if the client now routes by another map version.
  bool FollowMovedServers();
  // FollowMovedServers when the job's servers now serve another shard
  // count: the client's layouts, copy and versions re-cut for it, unless
  // it has tables or shards at different versions (logged, not followed).
  bool FollowReshard(ServersAt now);
  // Routes by `servers` at `map_version` from now on: `cut(false)` first
  // sizes the client's per-shard state for them, then the channels open;
  // if they cannot, logs it naming `what`, `cut(true)` puts the state back
  // and the old servers are reopened. Whether the switch held.
  bool SwitchServers(std::vector<std::string> servers, int64_t map_version, absl::string_view what,
                     const std::function<void(bool back)>& cut);
  // Sync: when Init found the shards at different versions (they restarted
  // from checkpoints of different versions), asks those ahead to roll back
  // to the newest checkpoint they all have (InitRequest.rollback), as
  // CommonVersionRollback (client/internal/recovery.h) plans it.
  void RollBackToCommonVersion(std::vector<int64_t> versions);
  // Both Inits: `initial` is null but from the worker that creates them.
  absl::Status InitFrom(const ModelSpec& spec, const ConstTensorViews* initial);
  // Both StartPushPulls: `grads` is null when the gradients come as views.
  std::unique_ptr<PushPullInProgress> BeginPushPull(const TensorList* grads,
                                                    const TensorViews& weights);
  void Log(const std::string& line) const;
  // The dim of a declared table; NOT_FOUND naming it otherwise.
  absl::StatusOr<int> TableDim(absl::string_view table) const;

  std::unique_ptr<Rep> rep_;
};

}  // namespace ps

#endif  // PS_CLIENT_PS_CLIENT_H_
