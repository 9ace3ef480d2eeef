// WorkerMetrics: what ps_worker shows on /metrics (--metrics_listen), kept
// in a prometheus-cpp Registry that the run's reporter (worker/reporter.h)
// updates once per step and an endpoint (rpc/metrics_endpoint.h)
// serializes at each scrape.
//
// The families (docs/metrics.md lists them with their meaning):
//   ps_build_info{version,mode,worker}        gauge, 1 (once the mode is known)
//   ps_worker_step_compute_seconds             histogram: forward and backward
//                                              of a step (with a straggler's sleep)
//   ps_worker_step_communication_seconds       histogram: the step's wait for its
//                                              push-pull after compute (network and
//                                              the other workers)
//   ps_worker_steps_total, ps_worker_samples_total   counters: steps trained here
//   ps_worker_loss                             gauge: the last step's training loss
//   ps_worker_<key>                            gauges: the last evaluation's fields
//                                              (worker 0; absent before one): the
//                                              MLP's test_accuracy and test_loss, the
//                                              CTR model's auc, log_loss, best_auc
//   ps_worker_retries_total                    counter: calls retried after a fault
//   ps_worker_recoveries_total                 counter: failed calls that went through
//                                              on a retry (faults survived)
//   ps_worker_model_version                    gauge: version of the weights held
//
// Thread-safe: prometheus-cpp's metrics are atomics, and the registry may
// be collected while the training thread records. Record* and Set* are
// meant for one training thread (the counters' totals are set from the client's
// totals by that thread).
#ifndef PS_WORKER_WORKER_METRICS_H_
#define PS_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ps {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(int worker_id);
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // What an endpoint serves (MetricsEndpoint::Start holds it weakly).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Adds ps_build_info's series with the servers' mode ("sync", "async",
  // "ssp", or "standalone"); once, the first call wins.
  void SetMode(const std::string& mode);
  // One trained step of `samples` examples.
  void RecordStep(absl::Duration compute, absl::Duration communication, int64_t samples,
                  double loss);
  void SetModelVersion(int64_t version);
  // The evaluation field `key` (a Prometheus name's tail: [a-z_]+) is now
  // `value`: the gauge ps_worker_<key>, with `help` (the first call's).
  void RecordEvaluation(const std::string& key, const std::string& help, double value);
  // The client's totals so far (they only grow).
  void SetRetries(int64_t total);
  void SetRecoveries(int64_t total);

 private:
  const std::string worker_;
  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  prometheus::Histogram& compute_;
  prometheus::Histogram& communication_;
  prometheus::Counter& steps_;
  prometheus::Counter& samples_;
  prometheus::Gauge& loss_;
  prometheus::Counter& retries_;
  prometheus::Counter& recoveries_;
  prometheus::Gauge& model_version_;

  absl::Mutex mu_;
  bool mode_set_ ABSL_GUARDED_BY(mu_) = false;
  // The evaluation gauges, by key, registered at their first value.
  std::map<std::string, prometheus::Gauge*> evaluation_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_WORKER_WORKER_METRICS_H_
