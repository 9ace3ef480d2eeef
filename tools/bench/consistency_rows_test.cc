#include "tools/bench/consistency_rows.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(ParseModes, KeepsTheListsOrderAndRefusesUnknownOrRepeatedKeys) {
  auto m = ParseModes("async, sync_q3", "modes");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].key, "async");
  EXPECT_EQ((*m)[1].name, "sync, quorum 3");
  EXPECT_EQ((*m)[1].server_flags, (std::vector<std::string>{"--mode=sync", "--sync_quorum=3"}));
  for (const char* bad : {"", "sync,sync", "bsp"}) {
    auto r = ParseModes(bad, "modes");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--modes"), std::string::npos) << r.status();
  }
}

TEST(ParseModes, AllSixModesOfTheIssue) {
  auto m = ParseModes("sync,sync_q3,ssp1,ssp3,async,async_inverse", "modes");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->size(), AllConsistencyModes().size());
  EXPECT_EQ((*m)[3].server_flags, (std::vector<std::string>{"--mode=ssp", "--staleness=3"}));
  EXPECT_EQ((*m)[5].server_flags,
            (std::vector<std::string>{"--mode=async", "--staleness_lr=inverse"}));
}

TEST(ParseOptimizers, NameColonPositiveLearningRate) {
  auto o = ParseOptimizers("sgd:0.1,adam:1e-3", "optimizers");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[1].name, "adam");
  EXPECT_DOUBLE_EQ((*o)[1].lr, 0.001);
  for (const char* bad : {"sgd", "sgd:0", "sgd:-1", "sgd:x", "Adam:0.1", "sgd:0.1,sgd:0.2", ""}) {
    EXPECT_FALSE(ParseOptimizers(bad, "optimizers").ok()) << bad;
  }
}

TEST(FlagNamesFromHelp, ReadsAbseilUsageLinesOnly) {
  const char* help =
      "ps_server: usage\n"
      "  Flags from server/server_flags.cc:\n"
      "    --lr (SGD learning rate applied by this shard.); default: 0.1;\n"
      "    --mode (sync or async: see\n"
      "      --sync_quorum and the docs); default: \"sync\";\n"
      "    --sync_quorum (the first N gradients); default: 0;\n";
  EXPECT_EQ(FlagNamesFromHelp(help), (std::set<std::string>{"lr", "mode", "sync_quorum"}));
}

TEST(ServerFlagsFor, NamesTheFirstFlagTheServerLacks) {
  const std::set<std::string> today = {"mode", "lr", "sync_quorum"};
  const auto& modes = AllConsistencyModes();
  RowFlags sync = ServerFlagsFor(modes[1], {"sgd", 0.1}, today);
  EXPECT_EQ(sync.unsupported_flag, "");
  EXPECT_EQ(sync.flags, (std::vector<std::string>{"--mode=sync", "--sync_quorum=3", "--lr=0.1"}));
  EXPECT_EQ(ServerFlagsFor(modes[0], {"adam", 0.001}, today).unsupported_flag, "--optimizer=adam");
  RowFlags ssp = ServerFlagsFor(modes[2], {"sgd", 0.1}, today);
  EXPECT_EQ(ssp.unsupported_flag, "--staleness=1");
  EXPECT_TRUE(ssp.flags.empty());
  EXPECT_EQ(ServerFlagsFor(modes[5], {"sgd", 0.1}, today).unsupported_flag,
            "--staleness_lr=inverse");
}

TEST(ServerFlagsFor, PassesTheOptimizerWhereTheServerHasTheFlag) {
  const std::set<std::string> later = {"mode", "lr", "optimizer", "staleness"};
  RowFlags r = ServerFlagsFor(AllConsistencyModes()[3], {"sgd", 0.5}, later);
  EXPECT_EQ(r.unsupported_flag, "");
  EXPECT_EQ(r.flags, (std::vector<std::string>{"--mode=ssp", "--staleness=3", "--optimizer=sgd",
                                               "--lr=0.5"}));
}

TEST(ParseEvalLine, WorkerZerosEvaluationLinesOnly) {
  auto e = ParseEvalLine(
      "step 250 epoch 1 loss 0.4321 test_accuracy 0.8512 test_loss 0.4100 samples/s 2800");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->step, 250);
  EXPECT_DOUBLE_EQ(e->accuracy, 0.8512);
  EXPECT_FALSE(ParseEvalLine("worker 0 done: mode sync, steps 100, version 100").has_value());
  EXPECT_FALSE(
      ParseEvalLine("step x epoch 1 loss 0.4 test_accuracy 0.8 test_loss 0.4 s").has_value());
  EXPECT_FALSE(ParseEvalLine("").has_value());
}

TEST(Summarize, TimeToTargetIsTheFirstPointAtOrAboveIt) {
  std::vector<AccuracyPoint> pts = {
      {1.0, 10, 0.70}, {2.0, 20, 0.85}, {3.0, 30, 0.84}, {4.5, 40, 0.86}};
  AccuracySummary s = Summarize(pts, 0.85);
  ASSERT_TRUE(s.time_to_target_s.has_value());
  EXPECT_DOUBLE_EQ(*s.time_to_target_s, 2.0);
  EXPECT_EQ(s.step_at_target, 20);
  EXPECT_DOUBLE_EQ(s.final_accuracy, 0.86);
  EXPECT_DOUBLE_EQ(s.final_t_s, 4.5);
  AccuracySummary never = Summarize(pts, 0.9);
  EXPECT_FALSE(never.time_to_target_s.has_value());
  EXPECT_EQ(Summarize({}, 0.85).final_accuracy, -1);
}

TEST(CombineStaleness, MeanOverAllPushesAndLargestOverShards) {
  StalenessSummary s = CombineStaleness({{100, 1.0, 3}, {300, 3.0, 7}});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_EQ(s.max, 7);
  StalenessSummary none = CombineStaleness({});
  EXPECT_EQ(none.mean, 0);
  EXPECT_EQ(none.max, 0);
}

AccuracySummary RunOf(std::optional<double> t, int64_t step, double final_acc, double final_t) {
  AccuracySummary s;
  s.time_to_target_s = t;
  s.step_at_target = t ? step : -1;
  s.final_accuracy = final_acc;
  s.final_t_s = final_t;
  return s;
}

TEST(CombineRuns, MediansOverRunsWithNotReachedCountingAsLatest) {
  RepeatedRow r = CombineRuns({RunOf(9.0, 260, 0.851, 9.0), RunOf(std::nullopt, 0, 0.84, 30.0),
                               RunOf(12.0, 280, 0.852, 12.0)},
                              {{1.0, 3}, {2.0, 9}, {3.0, 4}});
  ASSERT_TRUE(r.median_time_to_target_s.has_value());
  EXPECT_DOUBLE_EQ(*r.median_time_to_target_s, 12.0);  // 9, 12, never
  EXPECT_EQ(r.reached, 2);
  EXPECT_EQ(r.median_step_at_target, 270);  // of the two that reached it
  EXPECT_DOUBLE_EQ(r.median_final_accuracy, 0.851);
  EXPECT_DOUBLE_EQ(r.median_final_t_s, 12.0);
  EXPECT_DOUBLE_EQ(r.staleness.mean, 2.0);
  EXPECT_EQ(r.staleness.max, 9);
}

TEST(CombineRuns, NoMedianWhenHalfTheRunsDidNotReachTheTarget) {
  RepeatedRow r = CombineRuns({RunOf(9.0, 260, 0.86, 9.0), RunOf(std::nullopt, 0, 0.84, 30.0)},
                              {{0, 0}, {0, 0}});
  EXPECT_FALSE(r.median_time_to_target_s.has_value());
  EXPECT_EQ(r.reached, 1);
  RepeatedRow one = CombineRuns({RunOf(7.5, 200, 0.855, 7.5)}, {{2.5, 80}});
  ASSERT_TRUE(one.median_time_to_target_s.has_value());
  EXPECT_DOUBLE_EQ(*one.median_time_to_target_s, 7.5);
  EXPECT_EQ(one.median_step_at_target, 200);
}

}  // namespace
}  // namespace ps
