// Stats: a shard's counters, gauges and latency histograms, kept in atomics.
//
// The shard updates them on its push and pull paths without its lock (some
// under it, where the value is decided there), and readers, such as
// GetStatus or a future /metrics endpoint, read them without touching the
// shard. Each value is read on its own: a reader may see one counter of a
// push updated and the next not yet.
//
// Thread-safe; all relaxed atomics. ShardMetrics is shared (shared_ptr) by
// the shard and what outlives it briefly (push buffers still in a call).
#ifndef PS_SERVER_CORE_STATS_H_
#define PS_SERVER_CORE_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace ps {

// A value that only grows.
class Counter {
 public:
  void Add(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// A value that is set, raised or lowered.
class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  // Returns the new value.
  int64_t Add(int64_t n) { return value_.fetch_add(n, std::memory_order_relaxed) + n; }
  // Raises the value to `v` if it is lower.
  void RaiseTo(int64_t v);
  int64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Values counted in fixed buckets (cumulative upper bounds, then +Inf),
// with their sum. Durations are recorded in microseconds.
class Histogram {
 public:
  // Latencies: 1-2.5-5 steps from 50 us to 100 s.
  static constexpr std::array<int64_t, 20> kLatencyBoundsMicros = {
      50,     100,     250,     500,     1000,     2500,     5000,
      10000,  25000,   50000,   100000,  250000,   500000,   1000000,
      2500000, 5000000, 10000000, 25000000, 50000000, 100000000};
  // Small counts (staleness in versions).
  static constexpr std::array<int64_t, 9> kCountBounds = {0, 1, 2, 4, 8, 16, 32, 64, 128};
  static constexpr size_t kMaxBounds = 20;

  struct Snapshot {
    std::vector<int64_t> bounds;  // the upper bounds, ascending
    std::vector<int64_t> counts;  // per bucket (not cumulative), the last one +Inf
    int64_t count = 0;            // all buckets
    int64_t sum = 0;
  };

  // Latency buckets by default. `bounds` (ascending) must outlive it.
  Histogram() : Histogram(kLatencyBoundsMicros) {}
  template <size_t N>
  explicit Histogram(const std::array<int64_t, N>& bounds)
      : bounds_(bounds.data()), num_bounds_(N) {
    static_assert(N <= kMaxBounds, "too many buckets");
  }

  void Record(absl::Duration d) { RecordValue(absl::ToInt64Microseconds(d)); }
  void RecordValue(int64_t v);  // negative counts as 0
  Snapshot Read() const;

 private:
  const int64_t* const bounds_;
  const size_t num_bounds_;
  std::array<std::atomic<int64_t>, kMaxBounds + 1> buckets_{};
  std::atomic<int64_t> sum_{0};
};

// Everything one shard counts. Fields are updated by the shard, its waiters
// and its gradient pool; any thread may read them.
struct ShardMetrics {
  Counter pushes_accepted;  // pushes the consistency policy accepted
  Counter pulls_served;     // pulls answered with weights
  Counter pushes_dropped;   // sync pushes for a step that closed without them
  Counter pushes_duplicate; // pushes accepted before (retries), not applied again
  // Staleness of accepted pushes: shard version minus the version the
  // gradient was computed on.
  Counter staleness_sum;
  Counter staleness_count;
  Gauge staleness_max;
  // SSP: the largest staleness of an applied push in steps
  // (server/core/ssp_clocks.h), and pulls held for the slowest worker's step.
  Gauge step_staleness_max;
  Counter pulls_held;
  Gauge version;           // the shard's version
  Gauge waiting_calls;     // pulls and inits waiting for a version
  Gauge pending_pushes;    // pushes being received (holding a PushBuffer)
  Histogram push_latency;  // Shard::Push: from the call to its version
  Histogram pull_latency;  // Shard::Pull: from the call to its weights
  // Staleness of applied pushes, in versions.
  Histogram staleness{Histogram::kCountBounds};
  // Sync: per step, from its first push to its update (the barrier).
  Histogram barrier_wait;
  Counter workers_dropped;  // lease expiries (server/core/membership.h)
  // Tensor payload bytes (server/core/pipeline.h): gradient chunks received, and
  // weights answered in the dtype each pull asked for.
  Counter bytes_received;
  Counter bytes_sent;

  // Records one accepted push of staleness `s` >= 0.
  void RecordStaleness(int64_t s);
  double MeanStaleness() const;
};

// What a shard's Checkpointer (server/checkpoint/checkpointer.h) counts.
struct CheckpointMetrics {
  Histogram write_duration;        // each successful write
  Counter writes_failed;
  Gauge last_written_unix_micros;  // the last successful write's time; 0: none
};

}  // namespace ps

#endif  // PS_SERVER_CORE_STATS_H_
