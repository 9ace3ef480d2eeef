#include "worker/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace ps {
namespace {

// Steps take from about a millisecond (a small model on a GPU) to seconds
// (a straggler, or a sync step waiting for one).
prometheus::Histogram::BucketBoundaries StepBuckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};
}

}  // namespace

WorkerMetrics::WorkerMetrics(int worker_id)
    : worker_(absl::StrCat(worker_id)),
      registry_(std::make_shared<prometheus::Registry>()),
      build_info_(prometheus::BuildGauge()
                      .Name("ps_build_info")
                      .Help("The build: always 1, with the version, the servers' consistency "
                            "mode and this worker's id as labels.")
                      .Register(*registry_)),
      compute_(prometheus::BuildHistogram()
                   .Name("ps_worker_step_compute_seconds")
                   .Help("Time of a step's forward and backward pass (and a straggler's "
                         "sleep), in seconds.")
                   .Register(*registry_)
                   .Add({}, StepBuckets())),
      communication_(prometheus::BuildHistogram()
                         .Name("ps_worker_step_communication_seconds")
                         .Help("Time a step waited for its push-pull once its compute was "
                               "done (the network and, in sync mode, the other workers), "
                               "in seconds.")
                         .Register(*registry_)
                         .Add({}, StepBuckets())),
      steps_(prometheus::BuildCounter()
                 .Name("ps_worker_steps_total")
                 .Help("Steps this worker trained.")
                 .Register(*registry_)
                 .Add({})),
      samples_(prometheus::BuildCounter()
                   .Name("ps_worker_samples_total")
                   .Help("Training examples this worker computed gradients on.")
                   .Register(*registry_)
                   .Add({})),
      loss_(prometheus::BuildGauge()
                .Name("ps_worker_loss")
                .Help("Training loss of the last step (mean over its batch).")
                .Register(*registry_)
                .Add({})),
      retries_(prometheus::BuildCounter()
                   .Name("ps_worker_retries_total")
                   .Help("Calls to the servers retried after a fault (--retry_timeout).")
                   .Register(*registry_)
                   .Add({})),
      recoveries_(prometheus::BuildCounter()
                      .Name("ps_worker_recoveries_total")
                      .Help("Failed calls to the servers that went through on a retry.")
                      .Register(*registry_)
                      .Add({})),
      model_version_(prometheus::BuildGauge()
                         .Name("ps_worker_model_version")
                         .Help("Version of the weights this worker holds (in sync mode, the "
                               "step).")
                         .Register(*registry_)
                         .Add({})) {}

void WorkerMetrics::SetMode(const std::string& mode) {
  absl::MutexLock lock(&mu_);
  if (mode_set_) return;
  mode_set_ = true;
  build_info_.Add({{"version", Version()}, {"mode", mode}, {"worker", worker_}}).Set(1);
}

void WorkerMetrics::RecordStep(absl::Duration compute, absl::Duration communication,
                               int64_t samples, double loss) {
  compute_.Observe(absl::ToDoubleSeconds(compute));
  communication_.Observe(absl::ToDoubleSeconds(communication));
  steps_.Increment();
  samples_.Increment(static_cast<double>(samples));
  loss_.Set(loss);
}

void WorkerMetrics::SetModelVersion(int64_t version) {
  model_version_.Set(static_cast<double>(version));
}

void WorkerMetrics::RecordEvaluation(const std::string& key, const std::string& help,
                                     double value) {
  absl::MutexLock lock(&mu_);
  prometheus::Gauge*& gauge = evaluation_[key];
  if (gauge == nullptr) {
    gauge = &prometheus::BuildGauge()
                 .Name(absl::StrCat("ps_worker_", key))
                 .Help(help)
                 .Register(*registry_)
                 .Add({});
  }
  gauge->Set(value);
}

void WorkerMetrics::SetRetries(int64_t total) {
  const double more = static_cast<double>(total) - retries_.Value();
  if (more > 0) retries_.Increment(more);
}

void WorkerMetrics::SetRecoveries(int64_t total) {
  const double more = static_cast<double>(total) - recoveries_.Value();
  if (more > 0) recoveries_.Increment(more);
}

}  // namespace ps
