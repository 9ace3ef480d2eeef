// The server's request pipeline: what both transports (the unary raw
// handlers in server/service.cc and the stream reactor) do with a decoded
// push, pull or push-pull, and how a waiting call is cancelled.
//
// A transport decodes its messages into a ShardCall, feeds it the gradient
// chunks as they arrive (AddChunk: the stream) or at once (AddMessage:
// unary), and completes it with a callback that encodes the CallResult for
// its wire. Complete assembles the gradient, pushes it into the Shard, then,
// for calls with a pull, pulls (possibly waiting), and runs the callback
// exactly once. It counts the tensor payload bytes received and sent in the
// shard's metrics (server/core/stats.h). Gradients are copied once, from the received bytes into the
// shard's buffer; the result's weights are the shard's immutable snapshot.
//
// CallWait is the one way a transport drops a call's wait in the shard when
// its client goes away.
//
// Knows nothing of gRPC. ShardCall is not thread-safe (one per call, moved
// along the read path) and borrows the Shard; CallWait is thread-safe and
// borrows the Shard. The Shard must outlive both and every callback.
#ifndef PS_SERVER_CORE_PIPELINE_H_
#define PS_SERVER_CORE_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/float_bytes.h"
#include "common/incarnation.h"
#include "common/slice_assembler.h"
#include "common/wire_dtype.h"
#include "server/core/gradient.h"
#include "server/core/shard.h"
#include "server/core/weights_snapshot.h"

namespace ps {

// The push part of a call: the gradient of `worker_id`, computed on weights
// of `version`.
struct PushArgs {
  int worker_id = 0;
  int64_t version = 0;
  int64_t seq = 0;  // async push number (0: not deduplicated)
};

// The pull part: weights at version >= min_version, waiting up to `wait`
// (zero: the shard's default).
struct PullArgs {
  int worker_id = 0;
  int64_t min_version = 0;
  absl::Duration wait;
  bool renews_lease = true;  // false: a reader's pull (Shard::Pull)
  // The type the weights travel in: counts the bytes sent (bytes_sent of
  // ShardMetrics); the transport encodes them.
  WireDtype weights_dtype = WireDtype::kF32;
};

// What a completed call produced.
struct CallResult {
  int64_t version = 0;  // the shard's version after the push (calls without a pull)
  std::optional<WeightsSnapshot> weights;  // calls with a pull
  PushOutcome outcome = PushOutcome::kApplied;  // calls with a push
  Incarnation incarnation;                      // the shard's
};

// A row push's gradient bytes (PushRowsRequest.grads, StreamRequest.
// row_grads: float32 little-endian, possibly in pieces) as floats, for
// Shard::PushRows: read in place when they lie in one piece aligned for
// floats (then valid while the bytes are), else copied once (not zeroed
// first). Both transports decode row pushes with RowGradients.
class RowGradientFloats {
 public:
  absl::Span<const float> floats() const { return view_; }

 private:
  friend absl::StatusOr<RowGradientFloats> RowGradients(absl::string_view, const Pieces&);
  std::unique_ptr<float[]> copy_;  // null: read in place
  absl::Span<const float> view_;
};
// INVALID_ARGUMENT naming `table` unless the bytes are whole float32s.
absl::StatusOr<RowGradientFloats> RowGradients(absl::string_view table, const Pieces& bytes);

// The wait of a transport's call in the shard, cancellable from any thread
// before, during or after the wait: the wait is dropped once.
class CallWait {
 public:
  explicit CallWait(Shard* shard) : shard_(shard) {}

  CallWait(const CallWait&) = delete;
  CallWait& operator=(const CallWait&) = delete;

  // Records the shard's ticket of a call that waits (0: it did not). After
  // Cancel, drops the wait at once.
  void Started(uint64_t ticket);
  // The call was answered: its ticket is forgotten (a stream's next call
  // gets the same CallWait).
  void Finished();
  // The client is gone: drops the current wait and every later one. Runs
  // the call's callback (CANCELLED) on this thread if it still waited.
  void Cancel();

 private:
  Shard* const shard_;
  absl::Mutex mu_;
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class ShardCall {
 public:
  using Done = std::function<void(absl::StatusOr<CallResult>)>;

  // A call with a push, a pull or both. A push is started at once
  // (Shard::StartPush); its error, if any, becomes the call's.
  ShardCall(Shard* shard, std::optional<PushArgs> push, std::optional<PullArgs> pull);

  // One chunk of the gradient. The call's first error is kept (and the
  // gradient buffer freed); later chunks are ignored. A call without a push
  // carries none: INVALID_ARGUMENT.
  void AddChunk(const RawTensorSlice& chunk);
  // The whole gradient in one message: every chunk is checked before the
  // buffer is taken.
  void AddMessage(const std::vector<RawTensorSlice>& chunks);

  // Pushes, then pulls, then runs `done` exactly once, possibly before
  // Complete returns: with the first error, or the result. A waiting pull's
  // ticket goes to `wait` (may be null: the call cannot be cancelled).
  void Complete(CallWait* wait, Done done) &&;

 private:
  Shard* shard_;
  std::optional<PullArgs> pull_;
  int64_t seq_ = 0;
  std::optional<GradientAssembly> push_;  // calls with a push, until an error
  absl::Status error_;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PIPELINE_H_
