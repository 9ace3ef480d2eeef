// The reporter with times passed in: the lines of each kind of workload
// (with epochs and an evaluation, as the MLP's; without epochs and with loss
// lines, as the CTR model's), exactly as tests, tools/plot_run.py and
// operators read them; the JSON lines; /metrics counting steps and showing
// the evaluation's fields; the progress line and the last line.
#include "worker/reporter.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rpc/metrics_endpoint.h"

namespace ps {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

StepReport Step(int64_t step, int64_t samples, double loss) {
  StepReport s;
  s.step = step;
  s.samples = samples;
  s.loss = loss;
  s.compute = absl::Milliseconds(3);
  s.communication = absl::Milliseconds(1);
  s.version = step;
  return s;
}

Evaluation Eval(const std::string& key, double value) {
  Evaluation e;
  e.fields = {{key, "Help.", value}, {"other", "Other.", 0.25}};
  e.line = absl::StrCat(key, " line");
  e.summary = absl::StrCat(key, " summary");
  return e;
}

TEST(Reporter, WithEpochsAnEvaluationLineAndJsonLineEachPoint) {
  std::ostringstream log;
  ReporterOptions o;
  o.worker_id = 0;
  o.log = &log;
  o.metrics_file = TempPath("epochs.jsonl");
  auto r = Reporter::Create(o);
  ASSERT_TRUE(r.ok()) << r.status();
  WorkloadPlan plan;
  plan.total_steps = 4;
  plan.batch_size = 64;
  plan.steps_per_epoch = 2;
  (*r)->Start(plan, "sync", 0, 0, kT0);
  (*r)->Step(Step(1, 64, 0.5), kT0 + absl::Seconds(1));
  (*r)->Step(Step(2, 64, 0.7), kT0 + absl::Seconds(2));
  const Evaluation e = Eval("test_accuracy", 0.875);
  // 128 samples in the 2 s before the point; the evaluation's 3 s are not
  // training, so the next window starts after them.
  (*r)->Point(2, 0, &e, kT0 + absl::Seconds(2), kT0 + absl::Seconds(5));
  (*r)->Step(Step(3, 64, 0.25), kT0 + absl::Seconds(6));
  (*r)->Point(3, 1, nullptr, kT0 + absl::Seconds(7), kT0 + absl::Seconds(7));
  (*r)->EndSteps();
  RunResult result;
  result.mode = "sync";
  result.steps = 3;
  result.final_version = 3;
  result.samples_per_sec = 48;
  result.wall_s = 7;
  result.evaluation = e;
  (*r)->Done(result);
  EXPECT_EQ(log.str(),
            "step 2 epoch 0 loss 0.6000 test_accuracy line samples/s 64\n"
            "worker 0 done: mode sync, steps 3, version 3, samples/s 48, wall_s 7.0, final "
            "test_accuracy summary\n");
  r->reset();  // closes the file
  EXPECT_EQ(Lines(o.metrics_file),
            (std::vector<std::string>{
                "{\"worker_id\": 0, \"step\": 2, \"epoch\": 0, \"train_loss\": 0.600000, "
                "\"samples_per_sec\": 64.0, \"wall_s\": 2.000, \"test_accuracy\": 0.875000, "
                "\"other\": 0.250000}",
                "{\"worker_id\": 0, \"step\": 3, \"epoch\": 1, \"train_loss\": 0.250000, "
                "\"samples_per_sec\": 32.0, \"wall_s\": 7.000}"}));
}

TEST(Reporter, WithoutEpochsLossLinesAndTheDroppedSteps) {
  std::ostringstream log;
  ReporterOptions o;
  o.worker_id = 1;
  o.log = &log;
  o.metrics_file = TempPath("no_epochs.jsonl");
  auto r = Reporter::Create(o);
  ASSERT_TRUE(r.ok()) << r.status();
  WorkloadPlan plan;
  plan.total_steps = 100;
  plan.batch_size = 10;
  plan.log_loss_lines = true;
  (*r)->Start(plan, "async", 0, 0, kT0);
  (*r)->Step(Step(1, 10, 0.5), kT0 + absl::Seconds(1));
  (*r)->Point(1, 0, nullptr, kT0 + absl::Seconds(2), kT0 + absl::Seconds(2));
  const Evaluation e = Eval("auc", 0.75);
  (*r)->Point(1, 0, &e, kT0 + absl::Seconds(2), kT0 + absl::Seconds(3));
  RunResult result;
  result.mode = "async";
  result.steps = 100;
  result.final_version = 190;
  result.samples_per_sec = 1234.4;
  result.wall_s = 12.34;
  result.steps_dropped = 2;
  result.steps_skipped = 5;
  (*r)->Done(result);
  EXPECT_EQ(log.str(),
            "worker 1 step 1 loss 0.5000 samples/s 5\n"
            "step 1 loss 0.0000 auc line samples/s 0\n"
            "worker 1 done: mode async, steps 100, version 190, samples/s 1234, wall_s 12.3, "
            "gradients dropped 2, steps skipped 5\n");
  r->reset();
  EXPECT_EQ(
      Lines(o.metrics_file),
      (std::vector<std::string>{"{\"worker_id\": 1, \"step\": 1, \"train_loss\": 0.500000, "
                                "\"samples_per_sec\": 5.0, \"wall_s\": 2.000}",
                                "{\"worker_id\": 1, \"step\": 1, \"train_loss\": 0.000000, "
                                "\"samples_per_sec\": 0.0, \"wall_s\": 2.000, \"auc\": 0.750000, "
                                "\"other\": 0.250000}"}));
}

TEST(Reporter, MetricsCountStepsAndShowTheEvaluationsFields) {
  WorkerMetrics metrics(0);
  ReporterOptions o;
  o.external_metrics = &metrics;
  auto r = Reporter::Create(o);
  ASSERT_TRUE(r.ok()) << r.status();
  WorkloadPlan plan;
  plan.total_steps = 10;
  plan.batch_size = 32;
  (*r)->Start(plan, "sync", 0, 0, kT0);
  const std::string before = SerializeMetrics({metrics.registry()});
  EXPECT_NE(before.find("\nps_worker_steps_total 0\n"), std::string::npos) << before;
  EXPECT_EQ(before.find("ps_worker_auc"), std::string::npos) << before;
  for (int i = 1; i <= 3; ++i) (*r)->Step(Step(i, 32, 0.5), kT0 + absl::Seconds(i));
  const Evaluation e = Eval("auc", 0.75);
  (*r)->Point(3, 0, &e, kT0 + absl::Seconds(3), kT0 + absl::Seconds(4));
  const std::string after = SerializeMetrics({metrics.registry()});
  for (const char* line :
       {"ps_worker_steps_total 3", "ps_worker_samples_total 96", "ps_worker_model_version 3",
        "ps_worker_auc 0.75", "ps_worker_other 0.25"}) {
    EXPECT_NE(after.find(absl::StrCat("\n", line, "\n")), std::string::npos) << line << after;
  }
}

TEST(Reporter, ProgressLineIsClearedForPlainLinesAndEndedAfterTheLastStep) {
  std::ostringstream log;
  ReporterOptions o;
  o.log = &log;
  o.progress_line = true;
  auto r = Reporter::Create(o);
  ASSERT_TRUE(r.ok()) << r.status();
  WorkloadPlan plan;
  plan.total_steps = 2;
  plan.batch_size = 4;
  (*r)->Start(plan, "sync", 0, 0, kT0);
  (*r)->Step(Step(1, 4, 0.5), kT0 + absl::Seconds(1));
  (*r)->Line("a plain line");
  (*r)->Step(Step(2, 4, 0.5), kT0 + absl::Seconds(2));
  (*r)->EndSteps();
  (*r)->Line("after");
  const std::string s = log.str();
  const size_t first = s.find("\rstep 1/2 (50%)");
  const size_t plain = s.find("\ra plain line\n");
  const size_t last = s.find("\rstep 2/2 (100%)");
  const size_t after = s.find("  ETA 0s\nafter\n");
  ASSERT_NE(first, std::string::npos) << s;
  ASSERT_NE(plain, std::string::npos) << s;  // the line blanked, back to its start
  ASSERT_NE(last, std::string::npos) << s;
  ASSERT_NE(after, std::string::npos) << s;  // the last progress stays, ended
  EXPECT_LT(first, plain);
  EXPECT_LT(plain, last);
  EXPECT_LT(last, after);
}

TEST(Reporter, AMetricsFileThatCannotBeWrittenNamesTheFlag) {
  ReporterOptions o;
  o.metrics_file = "/nonexistent/dir/m.jsonl";
  auto r = Reporter::Create(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--metrics_file=/nonexistent/dir/m.jsonl"),
            std::string::npos);
}

}  // namespace
}  // namespace ps
