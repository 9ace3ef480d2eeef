// ShardTransport: how a PsClient's tensor traffic (push, pull, push-pull)
// and embedding rows (PullRows, PushRows, PushPullRows) travel to its shards. PsClient
// (client/ps_client.h) picks one implementation at Connect from
// ClientOptions::transport and is otherwise the same for both:
//   - unary (client/internal/unary_transport.h): one unary call per shard
//     per operation, on the raw path of rpc/raw_wire.h;
//   - stream (client/internal/stream_transport.h): one long-lived stream
//     per shard (client/internal/shard_stream.h), tensors in ~1 MB chunks
//     that are copied while the next is on the wire, and a layer-wise
//     push-pull whose gradient chunks go out as backward makes each tensor
//     final.
// Each operation addresses every shard at once and returns one handle.
//
// ClientState is what a transport shares with its PsClient: the options,
// the mode, the spec and partition set by Init, the version of each
// shard's weights last pulled, which a transport sends with its pushes and
// updates from the replies, and the canceller its calls register with.
//
// Thread safety: as PsClient's; one operation at a time, started from the
// training thread. Reply callbacks of distinct shards write distinct
// entries of ClientState::shard_version; the training thread reads them
// after Wait(). The canceller is thread-safe (PsClient::Cancel uses it from
// any thread). A transport borrows its ClientState, which must outlive it
// and every handle it returned.
#ifndef PS_CLIENT_INTERNAL_SHARD_TRANSPORT_H_
#define PS_CLIENT_INTERNAL_SHARD_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/client_options.h"
#include "client/internal/call_canceller.h"
#include "client/pending_op.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "common/table_spec.h"
#include "rpc/raw_wire.h"

namespace ps {

struct ClientState {
  // Constant after Connect.
  ClientOptions options;
  Mode mode = Mode::kSync;

  // Set by Init (cleared if it fails); constant while an operation is in
  // flight.
  ModelSpec spec;
  std::vector<std::shared_ptr<const SliceLayout>> layouts;  // by shard

  // By shard: the version of the weights last pulled.
  std::vector<int64_t> shard_version;

  // By shard: the incarnation and push outcome of the last reply to a push
  // or push-pull (written by reply callbacks, read after Wait()).
  std::vector<ReplyInfo> reply;
  // Async and SSP: the seq of the last push (each push-carrying operation
  // takes the next; PsClient starts it after the shards' last_seq). SSP
  // shards take it as the worker's step.
  int64_t seq = 0;
  // Embedding tables declared (PsClient::DeclareTables), sent with Init and
  // restores; and async, the seq of the last row push (as `seq`).
  std::vector<TableSpec> tables;
  int64_t row_seq = 0;
  // With options.retry_timeout: by shard, a copy of the slices last pulled
  // (flat, in layout order) and their version, for restoring a shard that
  // restarted behind it.
  std::vector<std::vector<float>> held;
  std::vector<int64_t> held_version;

  // Every call of an operation registers with it (PendingCalls does), so
  // that PsClient::Cancel can end them. Thread-safe, hence mutable: the
  // parts that only read the state register their calls too.
  mutable CallCanceller canceller;

  int num_shards() const { return static_cast<int>(options.servers.size()); }
};

// A push-pull whose gradient is handed over tensor by tensor; the checked
// half of PushPullInProgress (client/ps_client.h). Destroying it before
// Wait() returned cancels the calls and waits for them to end.
class LayerwisePushPull {
 public:
  virtual ~LayerwisePushPull() = default;

  // Sends the tensors marked in `now` (indexed like the spec; each marked
  // once over the whole push-pull), reading them from the `grads` views the
  // push-pull started with, which the caller sets before marking them;
  // `last` on the call that marks the final ones.
  virtual void Send(const std::vector<bool>& now, bool last) = 0;

  // After the Send with `last`: the result of the push-pull.
  virtual absl::Status Wait() = 0;
};

class ShardTransport {
 public:
  virtual ~ShardTransport() = default;

  // Every operation REQUIRES: Init succeeded, `grads` and `weights` have
  // the spec's tensors and sizes, and do not overlap. The gradients are
  // read during the call that takes them (during Send for StartPushPull);
  // the weights are written until the handle's Wait() returned, and their
  // memory must stay alive until then.

  // Fills `weights` from every shard once each is at version >= min_version.
  virtual std::unique_ptr<PendingOp> Pull(int64_t min_version, TensorViews weights) = 0;

  // Pushes each shard its slices of `grads`.
  virtual std::unique_ptr<PendingOp> Push(const ConstTensorViews& grads) = 0;

  // Pushes, then pulls: sync mode the weights of the next step, async mode
  // the shard's weights right after this push.
  virtual std::unique_ptr<PendingOp> PushPull(const ConstTensorViews& grads,
                                              TensorViews weights) = 0;

  // PushPull with `*grads` sent as LayerwisePushPull::Send marks its
  // tensors; `grads` (borrowed) must outlive the handle.
  virtual std::unique_ptr<LayerwisePushPull> StartPushPull(const ConstTensorViews* grads,
                                                           TensorViews weights) = 0;

  // Embedding rows (PsClient groups the ids, client/sparse_ids.h, and
  // retries). Blocking, with the RPC timeout; the first error names its
  // shard and address. Both need only Connect, not Init.
  //
  // PullRows: rows of `table`: shard s is asked for shard_ids[s] (none:
  // not called) and its rows go to rows[s], which holds exactly what they
  // take (shard_ids[s].size() * dim floats; INTERNAL naming the shard when
  // it answers another size). On error rows[s] may hold part of an answer.
  virtual absl::Status PullRows(absl::string_view table,
                                const std::vector<std::vector<uint64_t>>& shard_ids,
                                const std::vector<absl::Span<float>>& rows) = 0;

  // PrefetchRows: shard s is told shard_ids[s] are the ids of a pull to
  // come (PullRowsRequest.prefetch); it answers at once, without rows.
  virtual absl::Status PrefetchRows(absl::string_view table,
                                    const std::vector<std::vector<uint64_t>>& shard_ids) = 0;

  // PushRows: gradients grads[s] of shard_ids[s] to every shard with ids,
  // for the step shard_version[s] (sync) with the async row-push `seq`;
  // outcomes[s] says what each shard did (kApplied for shards not called).
  virtual absl::Status PushRows(absl::string_view table,
                                const std::vector<std::vector<uint64_t>>& shard_ids,
                                const std::vector<absl::Span<const float>>& grads, int64_t seq,
                                std::vector<PushOutcome>* outcomes) = 0;

  // PushPullRows (async and SSP): PushRows, then each shard's rows after
  // the push into rows[s], as PullRows, in one round trip per shard.
  virtual absl::Status PushPullRows(absl::string_view table,
                                    const std::vector<std::vector<uint64_t>>& shard_ids,
                                    const std::vector<absl::Span<const float>>& grads, int64_t seq,
                                    std::vector<PushOutcome>* outcomes,
                                    const std::vector<absl::Span<float>>& rows) = 0;
};

// ---- Helpers of both transports.

// After shard `shard`'s pull into `weights` succeeded: keeps a copy of its
// slices in state->held (when retries are on).
void HoldShard(ClientState* state, int shard, const TensorViews& weights);

// Where slice `r` of `values` (borrowed) starts.
SliceValues TensorValues(const ConstTensorViews& values);

// Reads shard `shard`'s pulled weights into `weights`, in one or more
// batches of chunks, checking them against the shard's layout. A reply
// that breaks the assembler's rules (common/slice_assembler.h) is INTERNAL
// naming the shard. Not thread-safe; one per shard and call.
class WeightReader {
 public:
  WeightReader(int shard, std::shared_ptr<const SliceLayout> layout, TensorViews weights);

  absl::Status Add(const std::vector<RawTensorSlice>& chunks);
  // OK once every slice of the layout arrived.
  absl::Status Finish() const;

 private:
  absl::Status BadReply(const absl::Status& s) const;

  const int shard_;
  SliceAssembler assembler_;
  const TensorViews weights_;
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_SHARD_TRANSPORT_H_
