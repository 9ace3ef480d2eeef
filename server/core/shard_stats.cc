#include "server/core/shard_stats.h"

namespace ps {

ShardStats StatsFrom(const ShardOptions& options, const ShardMetrics& metrics) {
  ShardStats s;
  s.mode = options.mode;
  s.shard_id = options.shard_id;
  s.num_shards = options.num_shards;
  s.num_workers = options.num_workers;
  s.learning_rate = options.optimizer.learning_rate;
  if (options.mode == Mode::kSync) {
    s.sync_quorum = options.sync_rule.quorum > 0 ? options.sync_rule.quorum : options.num_workers;
    s.min_workers = options.sync_rule.min_workers;
    s.worker_timeout = options.worker_timeout;
  }
  s.worker_registry = options.mode != Mode::kAsync && options.worker_registry;
  s.pushes_accepted = metrics.pushes_accepted.Get();
  s.max_staleness = metrics.staleness_max.Get();
  s.mean_staleness = metrics.MeanStaleness();
  s.waiting_calls = metrics.waiting_calls.Get();
  s.pending_pushes = metrics.pending_pushes.Get();
  s.pulls_served = metrics.pulls_served.Get();
  s.pushes_dropped = metrics.pushes_dropped.Get();
  s.pushes_duplicate = metrics.pushes_duplicate.Get();
  if (options.mode == Mode::kSsp) {
    s.staleness_bound = options.staleness;
    s.worker_timeout = options.worker_timeout;
  }
  s.max_step_staleness = metrics.step_staleness_max.Get();
  s.pulls_held = metrics.pulls_held.Get();
  s.push_latency = metrics.push_latency.Read();
  s.pull_latency = metrics.pull_latency.Read();
  s.bytes_received = metrics.bytes_received.Get();
  s.bytes_sent = metrics.bytes_sent.Get();
  return s;
}

}  // namespace ps
