// ServerCollector: ps_server's /metrics, built at each scrape from what the
// server already counts: the shard's ShardMetrics (server/core/stats.h) and its
// Stats() (which takes the shard's lock briefly), the RPC metrics
// (server/rpc_metrics.h) and the checkpointer's. Nothing is recorded on the
// call path for it beyond those atomics.
//
// The families (docs/metrics.md lists them with their meaning):
//   ps_build_info{version,mode,shard,num_shards}      gauge, 1
//   grpc_server_handled_total{grpc_service,grpc_method,grpc_type,grpc_code}
//   grpc_server_handling_seconds{grpc_service,grpc_method,grpc_type}  histogram
//   ps_server_received_bytes_total, ps_server_sent_bytes_total
//   ps_server_model_version, ps_server_model_elements, ps_server_learning_rate
//   ps_server_pushes_total{outcome="applied|duplicate|dropped"}, ps_server_pulls_total
//   ps_server_push_staleness (histogram, in versions), ps_server_max_step_staleness,
//   ps_server_pulls_held_total
//   ps_server_sync_barrier_wait_seconds, ps_server_push_duration_seconds,
//   ps_server_pull_duration_seconds                   histograms
//   ps_server_workers{state="live|dropped"}, ps_server_workers_dropped_total
//   ps_server_coordinator_reachable                   (only with a coordinator)
//   ps_server_waiting_calls, ps_server_pending_pushes
//   ps_server_checkpoint_duration_seconds (histogram),
//   ps_server_checkpoint_failures_total,
//   ps_server_last_checkpoint_timestamp_seconds       (only with checkpoints)
//   ps_server_incarnation_starts, ps_server_start_time_seconds
//
// Thread-safe. Borrows everything it reads, which must outlive the
// endpoint serving it (PsServer shuts the endpoint down first).
#ifndef PS_SERVER_METRICS_COLLECTOR_H_
#define PS_SERVER_METRICS_COLLECTOR_H_

#include <vector>

#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/checkpoint/checkpointer.h"
#include "server/rpc_metrics.h"
#include "server/core/shard.h"

namespace ps {

class ServerCollector final : public prometheus::Collectable {
 public:
  // `checkpointer` may be null (no --checkpoint_dir); `started` is when
  // the server started; `coordinator_reachable` (null without a
  // coordinator) says whether etcd answers now, called at each scrape.
  ServerCollector(const Shard* shard, const RpcMetrics* rpc, const Checkpointer* checkpointer,
                  absl::Time started, std::function<bool()> coordinator_reachable = nullptr)
      : shard_(shard),
        rpc_(rpc),
        checkpointer_(checkpointer),
        started_(started),
        coordinator_reachable_(std::move(coordinator_reachable)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Shard* const shard_;
  const RpcMetrics* const rpc_;
  const Checkpointer* const checkpointer_;
  const absl::Time started_;
  const std::function<bool()> coordinator_reachable_;
};

// A histogram family member from one of our fixed-bucket histograms;
// `scale` converts recorded values to the family's unit (1e-6 for
// microseconds to seconds).
prometheus::ClientMetric HistogramMetric(const Histogram::Snapshot& h, double scale,
                                         std::vector<prometheus::ClientMetric::Label> labels = {});

}  // namespace ps

#endif  // PS_SERVER_METRICS_COLLECTOR_H_
