#include "worker/worker_metrics.h"

#include <string>

#include "absl/time/time.h"
#include "common/version.h"
#include "gtest/gtest.h"
#include "rpc/metrics_endpoint.h"

namespace ps {
namespace {

std::string Text(const WorkerMetrics& m) { return SerializeMetrics({m.registry()}); }

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(WorkerMetrics, CountsRecordedSteps) {
  WorkerMetrics m(3);
  m.RecordStep(absl::Milliseconds(30), absl::Milliseconds(4), 64, 0.75);
  m.RecordStep(absl::Milliseconds(20), absl::Seconds(3), 64, 0.5);
  const std::string t = Text(m);
  EXPECT_TRUE(Has(t, "ps_worker_steps_total 2")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_samples_total 128")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_loss 0.5")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_compute_seconds_count 2")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_compute_seconds_sum 0.05")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_compute_seconds_bucket{le=\"0.02\"} 1")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_compute_seconds_bucket{le=\"0.05\"} 2")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_communication_seconds_bucket{le=\"0.005\"} 1")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_communication_seconds_bucket{le=\"2\"} 1")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_communication_seconds_bucket{le=\"5\"} 2")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_step_communication_seconds_bucket{le=\"+Inf\"} 2")) << t;
}

TEST(WorkerMetrics, BuildInfoOnceTheModeIsKnown) {
  WorkerMetrics m(3);
  EXPECT_EQ(Text(m).find("ps_build_info{"), std::string::npos);
  m.SetMode("sync");
  m.SetMode("async");  // the first wins
  const std::string t = Text(m);
  EXPECT_TRUE(Has(t, std::string("ps_build_info{mode=\"sync\",version=\"") + Version() +
                         "\",worker=\"3\"} 1"))
      << t;
  EXPECT_EQ(t.find("async"), std::string::npos) << t;
}

TEST(WorkerMetrics, EvaluationAppearsAfterTheFirst) {
  WorkerMetrics m(0);
  EXPECT_EQ(Text(m).find("ps_worker_test_accuracy "), std::string::npos);
  m.RecordEvaluation("test_accuracy", "Accuracy.", 0.5);
  m.RecordEvaluation("test_loss", "Loss.", 2.0);
  m.RecordEvaluation("test_accuracy", "Accuracy.", 0.875);
  m.RecordEvaluation("test_loss", "Loss.", 0.25);
  m.RecordEvaluation("auc", "Area under the ROC curve.", 0.75);
  const std::string t = Text(m);
  EXPECT_TRUE(Has(t, "ps_worker_test_accuracy 0.875")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_test_loss 0.25")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_auc 0.75")) << t;
  EXPECT_TRUE(Has(t, "# HELP ps_worker_auc Area under the ROC curve.")) << t;
}

TEST(WorkerMetrics, VersionRetriesAndRecoveriesFollowTheClientsTotals) {
  WorkerMetrics m(0);
  m.SetModelVersion(41);
  m.SetRetries(3);
  m.SetRetries(5);
  m.SetRetries(5);
  m.SetRecoveries(2);
  const std::string t = Text(m);
  EXPECT_TRUE(Has(t, "ps_worker_model_version 41")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_retries_total 5")) << t;
  EXPECT_TRUE(Has(t, "ps_worker_recoveries_total 2")) << t;
}

}  // namespace
}  // namespace ps
