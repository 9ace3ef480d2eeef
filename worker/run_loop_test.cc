// The run loop with a scripted workload and store: no servers, no clock
// that matters. Which steps it computes (from 0, from the servers' step on
// a sync resume, past steps the servers closed without it), when worker 0
// evaluates, the async pull of every worker's pushes before the final
// evaluation, and errors ending the run.
#include "worker/run_loop.h"

#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// A store that counts its calls; sync steps advance the version by one, or
// to `jump_to` at the step `jump_at` (the servers closed steps without this
// worker).
class ScriptedStore final : public ParamStore {
 public:
  explicit ScriptedStore(std::optional<Mode> mode, int64_t version = 0)
      : mode_(mode), version_(version) {}
  absl::Status DeclareTables(const std::vector<TableSpec>&) override { return absl::OkStatus(); }
  absl::Status Init(const ModelSpec&, const TensorList& initial, bool,
                    TensorList* weights) override {
    *weights = initial;
    return absl::OkStatus();
  }
  absl::Status PushPull(const TensorList&, TensorList* weights) override {
    ++pushes;
    version_ = pushes == jump_at ? jump_to : version_ + 1;
    (*weights)[0][0] = static_cast<float>(version_);
    return absl::OkStatus();
  }
  absl::Status BeginPushPull(const TensorList*, TensorList*) override {
    return absl::UnimplementedError("not used");
  }
  void SendGradients(const std::vector<int>&) override {}
  absl::Status FinishPushPull() override { return absl::UnimplementedError("not used"); }
  absl::Status PullRows(absl::string_view, absl::Span<const uint64_t>, absl::Span<float>) override {
    return absl::UnimplementedError("not used");
  }
  absl::Status PushRows(absl::string_view, absl::Span<const uint64_t>,
                        absl::Span<const float>) override {
    return absl::UnimplementedError("not used");
  }
  absl::Status Pull(int64_t min_version, TensorList* weights) override {
    pulls.push_back(min_version);
    (*weights)[0][0] = -1;  // the final pull's weights, for the evaluation
    return absl::OkStatus();
  }
  int64_t version() const override { return version_; }
  std::optional<Mode> mode() const override { return mode_; }

  int64_t pushes = 0;
  int64_t jump_at = -1, jump_to = 0;
  std::vector<int64_t> pulls;  // min_version of each Pull

 private:
  const std::optional<Mode> mode_;
  int64_t version_;
};

// One weight; a step's loss is its step number; an evaluation's field
// "weight" is the weight it sees.
class ScriptedWorkload final : public Workload {
 public:
  explicit ScriptedWorkload(int64_t total_steps) : total_steps_(total_steps) {}
  absl::StatusOr<WorkloadPlan> Init(ParamStore* store) override {
    store_ = store;
    spec_ = {{"w", {1}}};
    RETURN_IF_ERROR(store->Init(spec_, {{0.0f}}, true, &weights_));
    WorkloadPlan plan;
    plan.total_steps = total_steps_;
    plan.epochs = epochs;
    plan.max_steps = epochs > 0 ? 0 : total_steps_;
    plan.batch_size = 8;
    plan.steps_per_epoch = 4;
    plan.description = "scripted";
    return plan;
  }
  int64_t StepsPerEpoch(int workers) const override { return steps_per_epoch(workers); }
  absl::StatusOr<double> Compute(int64_t step, const DataShare& share) override {
    if (step == fail_at) return absl::DataLossError(absl::StrCat("step ", step, " failed"));
    computed.push_back(step);
    shares.push_back(absl::StrCat(share.epoch, ":", share.rank, "/", share.workers));
    return static_cast<double>(step);
  }
  absl::Status Exchange() override { return store_->PushPull({{1.0f}}, &weights_); }
  absl::StatusOr<Evaluation> Evaluate() override {
    evaluated_at_weight.push_back(weights_[0][0]);
    Evaluation e;
    e.fields = {{"weight", "The weight.", weights_[0][0]}};
    e.line = e.summary = absl::StrCat("weight ", weights_[0][0]);
    return e;
  }
  const ModelSpec& spec() const override { return spec_; }
  TensorList* weights() override { return &weights_; }

  std::vector<int64_t> computed;
  std::vector<std::string> shares;  // "epoch:rank/workers" of each step computed
  std::vector<float> evaluated_at_weight;
  int64_t fail_at = -1;
  int64_t epochs = 0;  // > 0: the plan ends by epochs, not at total_steps
  std::function<int64_t(int)> steps_per_epoch = [](int) { return 4; };

 private:
  const int64_t total_steps_;
  ParamStore* store_ = nullptr;
  ModelSpec spec_;
  TensorList weights_;
};

RunOptions Options(int worker_id, int num_workers) {
  RunOptions o;
  o.worker_id = worker_id;
  o.num_workers = num_workers;
  o.log_every = 0;
  return o;
}

// A reporter of worker `worker_id` whose lines go to `log`.
std::unique_ptr<Reporter> LoggingReporter(int worker_id, std::ostringstream* log) {
  ReporterOptions ro;
  ro.worker_id = worker_id;
  ro.log = log;
  absl::StatusOr<std::unique_ptr<Reporter>> reporter = Reporter::Create(ro);
  EXPECT_TRUE(reporter.ok()) << reporter.status();
  return reporter.ok() ? *std::move(reporter) : Reporter::Silent();
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST(RunLoop, TrainsEveryStepAndWorkerZeroEvaluatesEveryEvalEveryAndAtTheEnd) {
  ScriptedStore store(std::nullopt);
  ScriptedWorkload w(10);
  RunOptions o = Options(0, 1);
  o.eval_every = 4;
  std::ostringstream log;
  absl::StatusOr<RunResult> r = RunLoop(o, &w, &store, LoggingReporter(0, &log).get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(w.computed, Range(0, 10));
  EXPECT_EQ(r->steps, 10);
  EXPECT_EQ(r->final_version, 10);
  EXPECT_EQ(r->mode, "standalone");
  // At steps 4 and 8, then at the end after the final pull (of W * steps).
  EXPECT_EQ(w.evaluated_at_weight, (std::vector<float>{4, 8, -1}));
  EXPECT_EQ(store.pulls, std::vector<int64_t>{10});
  ASSERT_TRUE(r->evaluation.has_value());
  EXPECT_EQ(r->evaluation->Get("weight").value_or(0), -1.0);
  EXPECT_EQ(r->weights, (TensorList{{-1.0f}}));
  EXPECT_NE(log.str().find("worker 0/1: scripted\n"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("step 8 epoch 1 loss 5.5000 weight 8 samples/s"), std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("worker 0 done: mode standalone, steps 10, version 10, samples/s "),
            std::string::npos)
      << log.str();
}

TEST(RunLoop, OtherWorkersNeitherEvaluateNorPull) {
  ScriptedStore store(Mode::kAsync);
  ScriptedWorkload w(5);
  RunOptions o = Options(1, 2);
  o.eval_every = 1;
  absl::StatusOr<RunResult> r = RunLoop(o, &w, &store, Reporter::Silent().get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(w.computed, Range(0, 5));
  EXPECT_TRUE(w.evaluated_at_weight.empty());
  EXPECT_TRUE(store.pulls.empty());
  EXPECT_FALSE(r->evaluation.has_value());
}

TEST(RunLoop, AsyncWorkerZeroPullsEveryWorkersPushesBeforeItsFinalEvaluation) {
  ScriptedStore store(Mode::kAsync);
  ScriptedWorkload w(7);
  absl::StatusOr<RunResult> r = RunLoop(Options(0, 3), &w, &store, Reporter::Silent().get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(store.pulls, std::vector<int64_t>{21});
  EXPECT_EQ(w.evaluated_at_weight, std::vector<float>{-1});
}

TEST(RunLoop, SyncResumesAtTheServersStep) {
  ScriptedStore store(Mode::kSync, /*version=*/6);
  ScriptedWorkload w(10);
  std::ostringstream log;
  absl::StatusOr<RunResult> r = RunLoop(Options(1, 2), &w, &store, LoggingReporter(1, &log).get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(w.computed, Range(6, 10));
  EXPECT_EQ(r->steps, 10);
  EXPECT_EQ(r->final_version, 10);
  EXPECT_TRUE(store.pulls.empty());  // sync: the last step's weights are the model
  EXPECT_NE(log.str().find("worker 1: the servers are at step 6; resuming there\n"),
            std::string::npos)
      << log.str();
}

TEST(RunLoop, SyncFollowsTheServersPastStepsTheyClosedWithoutIt) {
  ScriptedStore store(Mode::kSync);
  store.jump_at = 3;  // the third push returns at version 7: steps 3..6 closed without it
  store.jump_to = 7;
  ScriptedWorkload w(10);
  absl::StatusOr<RunResult> r = RunLoop(Options(0, 2), &w, &store, Reporter::Silent().get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(w.computed, (std::vector<int64_t>{0, 1, 2, 7, 8, 9}));
  EXPECT_EQ(r->steps, 10);
  EXPECT_EQ(r->steps_skipped, 4);
}

// Shares as a coordinator hands them out: this worker joined at step 5,
// during epoch 1; it is share 2 of 3 of epoch 2 (from step 8) and share 0
// of 2 of every epoch after.
class ScriptedShares final : public DataShares {
 public:
  absl::StatusOr<DataShare> ShareAt(int64_t step, const EpochShape&) override {
    asked_at.push_back(step);
    return DataShare{2, 8, 2, 3};
  }
  absl::StatusOr<DataShare> Next(const DataShare& done, const EpochShape& shape) override {
    return DataShare{done.epoch + 1, shape.EndOf(done), 0, 2};
  }
  bool all_workers() const override { return false; }
  std::vector<int64_t> asked_at;
};

TEST(RunLoop, AWorkerThatJoinsStartsAtItsFirstShareWithThatStepsWeights) {
  ScriptedStore store(Mode::kSync, /*version=*/5);
  ScriptedWorkload w(100);
  w.epochs = 4;  // epochs 2 and 3 left
  w.steps_per_epoch = [](int workers) { return 12 / workers; };
  ScriptedShares shares;
  std::ostringstream log;
  absl::StatusOr<RunResult> r =
      RunLoop(Options(1, 4), &w, &store, LoggingReporter(1, &log).get(), &shares);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(shares.asked_at, std::vector<int64_t>{5});
  // Epoch 2: 12 / 3 steps from 8; epoch 3: 12 / 2 steps from 12.
  EXPECT_EQ(w.computed, Range(8, 18));
  EXPECT_EQ(w.shares, (std::vector<std::string>{"2:2/3", "2:2/3", "2:2/3", "2:2/3", "3:0/2",
                                                "3:0/2", "3:0/2", "3:0/2", "3:0/2", "3:0/2"}));
  EXPECT_EQ(store.pulls, std::vector<int64_t>{8});  // the weights of step 8
  EXPECT_EQ(r->steps, 18);
  EXPECT_NE(log.str().find(
                "worker 1: takes share 2 of 3 of epoch 2, from step 8 on (it joined at step 5)"),
            std::string::npos)
      << log.str();
}

TEST(RunLoop, EpochsEndTheRunWithFixedShares) {
  ScriptedStore store(std::nullopt);
  ScriptedWorkload w(100);
  w.epochs = 3;  // 3 epochs of 4 steps, whatever total_steps says
  absl::StatusOr<RunResult> r = RunLoop(Options(0, 1), &w, &store, Reporter::Silent().get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(w.computed, Range(0, 12));
  EXPECT_EQ(w.shares.back(), "2:0/1");
}

TEST(RunLoop, AWorkloadErrorEndsTheRun) {
  ScriptedStore store(std::nullopt);
  ScriptedWorkload w(10);
  w.fail_at = 3;
  absl::StatusOr<RunResult> r = RunLoop(Options(0, 1), &w, &store, Reporter::Silent().get());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_EQ(w.computed, Range(0, 3));
}

TEST(RunLoop, OptionsNameTheFlag) {
  ScriptedStore store(std::nullopt);
  ScriptedWorkload w(1);
  RunOptions o = Options(2, 2);
  EXPECT_NE(RunLoop(o, &w, &store, Reporter::Silent().get()).status().message().find("--worker_id"),
            std::string::npos);
  o = Options(0, 1);
  o.slowdown_every = 0;
  EXPECT_NE(o.Validate().message().find("--slowdown_every"), std::string::npos);
  o = Options(0, 2);
  EXPECT_NE(RunWorker(o, &w, nullptr, LocalStoreOptions()).status().message().find("--standalone"),
            std::string::npos);
}

}  // namespace
}  // namespace ps
