#include "tools/bench/train_processes.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

// A worker's last --metrics_file line, as worker/reporter.cc writes it.
constexpr char kLine[] =
    "{\"worker_id\": 0, \"step\": 20, \"epoch\": 0, \"train_loss\": 0.912345, "
    "\"samples_per_sec\": 5123.4, \"wall_s\": 0.250, \"test_accuracy\": 0.712300, "
    "\"test_loss\": 0.801000}";

TEST(MetricsValue, ReadsTheNumberOfAKey) {
  EXPECT_EQ(MetricsValue(kLine, "samples_per_sec"), 5123.4);
  EXPECT_EQ(MetricsValue(kLine, "test_accuracy"), 0.7123);
  EXPECT_EQ(MetricsValue(kLine, "step"), 20);
}

TEST(MetricsValue, MissingKeyOrNumberIsNullopt) {
  EXPECT_EQ(MetricsValue(kLine, "accuracy"), std::nullopt);  // only "test_accuracy"
  EXPECT_EQ(MetricsValue("", "samples_per_sec"), std::nullopt);
  EXPECT_EQ(MetricsValue("{\"samples_per_sec\": null}", "samples_per_sec"), std::nullopt);
}

TEST(RunTrainProcesses, MissingBinaryIsNotFound) {
  TrainProcessesOptions o;
  o.server_binary = "/nonexistent/ps_server";
  o.worker_binary = "/nonexistent/ps_worker";
  EXPECT_EQ(RunTrainProcesses(o).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ps
