// Shard: one parameter server's slice of the model and the rules that update it.
//
// A Shard owns the weights of its slices (see common/partition.h) as one flat
// float32 buffer, an Optimizer and a ConsistencyPolicy. Workers push
// gradients, which the policy releases for applying (sync: once per step after
// every worker pushed; async: each push), and pull weights, optionally waiting
// for a minimum version.
//
// Waiting never parks a thread: a waiting pull leaves a callback that runs
// when the version arrives (on the thread of the push that completed it) or
// when its deadline passes (on the shard's single timer thread). Readers get an
// immutable snapshot of the weights: an update replaces the buffer when a
// reader still holds the old one, so nobody ever sees a half-applied update.
//
// Knows nothing of gRPC. Thread-safe: every public method may be called
// concurrently. Callbacks are never invoked with the shard's lock held.
#ifndef PS_SERVER_SHARD_H_
#define PS_SERVER_SHARD_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/float_bytes.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "server/buffer_pool.h"
#include "server/consistency.h"
#include "server/optimizer.h"

namespace ps {

struct ShardOptions {
  int shard_id = 0;     // 0 <= shard_id < num_shards
  int num_shards = 1;   // S, >= 1
  int num_workers = 1;  // W, >= 1
  Mode mode = Mode::kSync;
  OptimizerOptions optimizer;
  // Longest wait of a pull (or a non-creating init) whose request names no
  // timeout; requests may ask for less or more, up to max_wait.
  absl::Duration default_wait = absl::Seconds(60);
  absl::Duration max_wait = absl::Minutes(30);
};

// One slice of a request, borrowed from the caller for the duration of the
// call: `data` is 4 * length bytes of little-endian float32, possibly in
// several pieces (as received).
struct SliceData {
  absl::string_view name;
  std::vector<int64_t> shape;  // of the full tensor
  int64_t offset = 0;
  int64_t length = 0;
  Pieces data;
};

// The model spec and where each of the shard's slices sits in its flat
// buffer. Immutable once built; shared with readers.
struct ShardLayout {
  ModelSpec spec;
  std::vector<SliceRange> slices;                // spec order
  std::unordered_map<std::string, int> by_name;  // tensor name -> index in slices
  int64_t num_elements = 0;                      // sum of slice lengths
};

// An immutable view of the weights at one version.
struct WeightsSnapshot {
  int64_t version = 0;
  std::shared_ptr<const ShardLayout> layout;
  std::shared_ptr<const std::vector<float>> weights;  // flat, in layout order
};

// Counters for operators; see StatusResponse in proto/ps.proto.
struct ShardStats {
  Mode mode = Mode::kSync;
  int shard_id = 0;
  int num_shards = 1;
  int num_workers = 1;
  bool initialized = false;
  int64_t version = 0;
  std::vector<int> workers_seen;
  int64_t pushes_applied = 0;
  int64_t max_staleness = 0;
  double mean_staleness = 0;
  std::vector<int> waiting_for;
  int64_t num_elements = 0;
  float learning_rate = 0;
  int64_t waiting_calls = 0;  // pulls/inits waiting for a version
};

// A shard's full state: enough to rebuild it (checkpoints).
struct ShardState {
  ModelSpec spec;
  int64_t version = 0;
  std::vector<float> weights;  // flat, in layout order
};

class Shard {
 public:
  using SnapshotCallback = std::function<void(absl::StatusOr<WeightsSnapshot>)>;

  // INVALID_ARGUMENT for inconsistent options.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const ShardOptions& options);

  // Fails all waiting calls with UNAVAILABLE and stops the timer thread.
  ~Shard();

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const ShardOptions& options() const { return options_; }

  // Records a worker. INVALID_ARGUMENT if worker_id is out of range or
  // num_workers differs from the server's.
  absl::Status Register(int worker_id, int num_workers);

  // Worker 0 creates the parameters from `values` (every slice this shard
  // owns, exactly once; none if it owns no elements). Other workers send no
  // values: their spec is checked against the parameters, waiting up to
  // `wait` for worker 0 to create them. Once created, parameters are never
  // overwritten: a repeated init only checks the spec. `done` receives the
  // version and whether this call created the parameters; it runs exactly
  // once, possibly before Init returns.
  //
  // Returns a ticket for CancelWait while the call waits; 0 if it is done.
  uint64_t Init(int worker_id, const ModelSpec& spec, const std::vector<SliceData>& values,
                absl::Duration wait,
                std::function<void(absl::StatusOr<int64_t> version, bool created)> done);

  // Validates and offers one worker's gradient (every owned slice exactly
  // once) computed on weights of `computed_version`. Returns the version after
  // the push.
  absl::StatusOr<int64_t> Push(int worker_id, int64_t computed_version,
                               const std::vector<SliceData>& gradients);

  // OK once worker 0 created the parameters; else FAILED_PRECONDITION saying
  // that pushes must wait for it.
  absl::Status CheckInitialized() const;

  // Push with the gradient already in flat layout order: `layout` is the
  // shard's Layout() the caller assembled `grad` for. ABORTED if the
  // parameters were replaced (restored) since.
  absl::StatusOr<int64_t> PushFlat(int worker_id, int64_t computed_version,
                                   const std::shared_ptr<const ShardLayout>& layout,
                                   std::vector<float> grad);

  // A buffer of layout.num_elements floats to assemble a gradient in for
  // PushFlat, recycled from applied pushes when one is spare (so large pushes
  // neither allocate nor page-fault). Its contents are unspecified: the caller
  // must overwrite every element.
  std::vector<float> GradientBuffer(const ShardLayout& layout);

  // Calls `done` with the weights once the shard is initialized and at
  // version >= min_version, or with DEADLINE_EXCEEDED after `wait` (0 = the
  // default wait) naming the workers that have not pushed. Runs exactly once,
  // possibly before Pull returns. Returns a ticket for CancelWait while the
  // pull waits; 0 if it is done.
  uint64_t Pull(int worker_id, int64_t min_version, absl::Duration wait, SnapshotCallback done);

  // Ends a waiting Init or Pull (e.g. its client went away): its callback
  // runs with CANCELLED. No-op if the call already completed.
  void CancelWait(uint64_t ticket);

  ShardStats Stats() const;

  // The layout of this shard's slices; empty until initialized.
  std::shared_ptr<const ShardLayout> Layout() const;

  // Checkpoint support: a copy of the full state, and its restoration (which
  // replaces spec, weights and version, and drops pending sync gradients).
  absl::StatusOr<ShardState> ExportState() const;
  absl::Status RestoreState(const ShardState& state);

  // Fails every waiting call with UNAVAILABLE; later waits fail at once.
  void Close();

 private:
  struct Waiter {
    uint64_t ticket;      // > 0, unique
    int64_t min_version;  // ready when initialized_ && version_ >= min_version
    absl::Duration wait;  // as granted, for the timeout message
    absl::Time deadline;
    SnapshotCallback done;
  };


  explicit Shard(const ShardOptions& options, std::unique_ptr<Optimizer> optimizer);

  absl::Status CheckWorker(int worker_id) const;
  absl::Status CheckInitializedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const ShardLayout> MakeLayout(const ModelSpec& spec) const;
  // Decodes `slices` (every slice of `p` exactly once) into `flat`, a buffer
  // of p.num_elements floats.
  absl::StatusOr<std::vector<float>> Gather(const ShardLayout& p,
                                            const std::vector<SliceData>& slices,
                                            absl::string_view what,
                                            std::vector<float> flat) const;
  absl::Status InstallLocked(std::shared_ptr<const ShardLayout> layout, std::vector<float> weights, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WeightsSnapshot SnapshotLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Moves the waiters that are now ready into `ready`, with their snapshots.
  void CollectReadyLocked(std::vector<std::pair<SnapshotCallback, WeightsSnapshot>>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string WaitTimeoutMessage(int64_t min_version, absl::Duration waited) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Duration ClampWait(absl::Duration wait) const;
  // Queues a waiter and returns its ticket.
  uint64_t AddWaiterLocked(int64_t min_version, absl::Duration wait, SnapshotCallback done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  // Constant after construction.
  const ShardOptions options_;

  mutable absl::Mutex mu_;
  absl::CondVar timer_cv_;  // signalled when a waiter is added or on Close
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const ShardLayout> layout_ ABSL_GUARDED_BY(mu_);  // never null
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // Replaced, not mutated, while a reader may still hold it. Comes from
  // weights_pool_, and returns there when the last reader lets go.
  std::shared_ptr<std::vector<float>> weights_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<BufferPool> weights_pool_ = BufferPool::Create(2);
  // Gradient buffers (GradientBuffer), back here once applied.
  const std::shared_ptr<BufferPool> gradient_pool_;
  std::unique_ptr<Optimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ConsistencyPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::set<int> workers_seen_ ABSL_GUARDED_BY(mu_);
  int64_t pushes_applied_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t staleness_sum_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t staleness_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_staleness_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t last_ticket_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread timer_;  // fails waiters whose deadline passed
};

}  // namespace ps

#endif  // PS_SERVER_SHARD_H_
