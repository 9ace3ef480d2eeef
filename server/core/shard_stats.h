// ShardStats: a shard's counters for operators, as one plain value (what
// StatusResponse in proto/ps.proto carries), and the part of it that comes
// from the options and ShardMetrics (server/core/stats.h) without the shard's
// lock. Shard::Stats adds what its lock guards.
//
// A plain struct: copyable, no thread safety of its own. StatsFrom reads
// the metrics' atomics and may run on any thread.
#ifndef PS_SERVER_CORE_SHARD_STATS_H_
#define PS_SERVER_CORE_SHARD_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "server/core/shard_options.h"
#include "server/core/stats.h"

namespace ps {

// Counters for operators; see StatusResponse in proto/ps.proto.
struct ShardStats {
  Mode mode = Mode::kSync;
  int shard_id = 0;
  int num_shards = 1;
  int num_workers = 1;
  bool initialized = false;
  int64_t version = 0;
  std::vector<int> workers_seen;
  // Pushes accepted (in sync mode, the pushes of a step make one update).
  int64_t pushes_accepted = 0;
  int64_t max_staleness = 0;
  double mean_staleness = 0;
  std::vector<int> waiting_for;
  int64_t num_elements = 0;
  float learning_rate = 0;
  int64_t waiting_calls = 0;  // pulls/inits waiting for a version
  int64_t pending_pushes = 0;  // pushes being received (holding a PushBuffer)
  int64_t pulls_served = 0;
  Incarnation incarnation;
  // Sync membership: live (not dropped) and dropped workers among those
  // seen in this incarnation (with a worker registry: registered); the step
  // rule; the lease (zero: none); whether a registry decides.
  std::vector<int> live_workers;
  std::vector<int> dropped_workers;
  int sync_quorum = 0;  // num_workers unless a quorum was set
  int min_workers = 1;
  absl::Duration worker_timeout;
  bool worker_registry = false;
  int64_t pushes_dropped = 0;
  int64_t pushes_duplicate = 0;
  // SSP: the bound S, each worker's step (by worker id), the largest
  // staleness applied in steps, and the pulls held for the slowest step.
  int staleness_bound = 0;
  std::vector<int64_t> worker_steps;
  int64_t max_step_staleness = 0;
  int64_t pulls_held = 0;
  Histogram::Snapshot push_latency;
  Histogram::Snapshot pull_latency;
  // Tensor payload bytes received (gradients) and sent (weights).
  int64_t bytes_received = 0;
  int64_t bytes_sent = 0;
  // Async: by worker id, the last push seq accepted (empty otherwise).
  std::vector<int64_t> worker_last_seq;
  // Embedding tables: rows and memory of each, in declaration order.
  std::vector<TableUsage> tables;
};

// The stats that `options` and `metrics` give: position, mode, learning
// rate and sync rule; pushes, staleness, waiting calls, pending pushes,
// pulls served, latencies. The rest is left at its default.
ShardStats StatsFrom(const ShardOptions& options, const ShardMetrics& metrics);

}  // namespace ps

#endif  // PS_SERVER_CORE_SHARD_STATS_H_
