// CtrTrainer and CtrWorkload through real servers: two sync workers on
// disjoint halves of each batch train the same model as one standalone
// CtrTrainer (a LocalParamStore) on the whole batch (the servers average the
// workers' dense and row gradients; each worker's are of its half's mean
// loss), and the run's errors name the flag.
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_cluster.h"
#include "worker/ctr/data.h"
#include "worker/ctr/trainer.h"
#include "worker/ctr/workload.h"
#include "worker/run_loop.h"
#include "worker/train/param_store.h"

namespace ps {
namespace {

constexpr int kWorkers = 2, kHalf = 32, kSteps = 12;

CtrModelConfig Model() {
  CtrModelConfig m;
  m.dim = 8;
  m.hidden = {16, 8};
  return m;
}

std::unique_ptr<CtrGenerator> Generator() {
  CtrGeneratorOptions g;
  g.vocab_sizes = {500};
  g.signal_vocab_size = 100;
  g.num_examples = 100000;
  auto gen = CtrGenerator::Create(g);
  EXPECT_TRUE(gen.ok()) << gen.status();
  return gen.ok() ? *std::move(gen) : nullptr;
}

TEST(CtrTrainer, TwoSyncWorkersTrainAsOneStandaloneTrainerOnTheWholeBatch) {
  std::unique_ptr<CtrGenerator> gen = Generator();
  ASSERT_NE(gen, nullptr);
  ServerOptions so;
  so.shard.num_workers = kWorkers;
  so.shard.mode = Mode::kSync;
  // CtrStandaloneStore's defaults: Adam 1e-3 for the MLP, AdaGrad 0.05 for the rows.
  so.shard.optimizer.name = "adam";
  so.shard.optimizer.learning_rate = 1e-3;
  so.shard.tables.optimizer.kind = SparseOptimizerKind::kAdagrad;
  so.shard.tables.optimizer.lr = 0.05f;
  absl::StatusOr<LocalServers> servers = LocalServers::Start(so, 2);
  ASSERT_TRUE(servers.ok()) << servers.status();

  LocalStoreOptions standalone = CtrStandaloneStore();
  standalone.rows.adagrad_initial_accumulator =
      so.shard.tables.optimizer.adagrad_initial_accumulator;
  LocalParamStore local_store(standalone);
  CtrTrainerOptions lo;
  lo.model = Model();
  auto local = CtrTrainer::Create(lo, &local_store);
  ASSERT_TRUE(local.ok()) << local.status();

  std::vector<std::unique_ptr<RemoteParamStore>> stores(kWorkers);
  std::vector<std::unique_ptr<CtrTrainer>> remote(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co;
      co.servers = servers->addresses;
      co.worker_id = w;
      co.num_workers = kWorkers;
      co.wait_timeout = absl::Seconds(30);
      auto c = PsClient::Connect(co);
      ASSERT_TRUE(c.ok()) << c.status();
      stores[w] = std::make_unique<RemoteParamStore>(*std::move(c));
      CtrTrainerOptions ro;
      ro.model = Model();
      ro.creator = w == 0;
      auto t = CtrTrainer::Create(ro, stores[w].get());
      ASSERT_TRUE(t.ok()) << t.status();
      remote[w] = *std::move(t);
      for (int step = 0; step < kSteps; ++step) {
        std::vector<CtrExample> half(kHalf);
        for (int i = 0; i < kHalf; ++i) half[i] = gen->Example((2 * step + w) * kHalf + i);
        ASSERT_TRUE(remote[w]->Step(half).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(remote[0] && remote[1]);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<CtrExample> whole(2 * kHalf);
    for (int i = 0; i < 2 * kHalf; ++i) whole[i] = gen->Example(2 * step * kHalf + i);
    ASSERT_TRUE((*local)->Step(whole).ok());
  }

  // Same weights up to float rounding (the sums run in another order).
  const TensorList& want = (*local)->model().params();
  for (int w = 0; w < kWorkers; ++w) {
    const TensorList& got = remote[w]->model().params();
    ASSERT_EQ(got.size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      for (size_t i = 0; i < want[t].size(); ++i) {
        ASSERT_NEAR(got[t][i], want[t][i], 2e-5) << "worker " << w << " tensor " << t;
      }
    }
  }
  // Same predictions, rows included (pulled from the servers).
  std::vector<CtrExample> held(200);
  for (int j = 0; j < 200; ++j) held[j] = gen->HeldOutExample(j);
  std::vector<float> want_p, got_p;
  ASSERT_TRUE((*local)->Predict(held, &want_p).ok());
  ASSERT_TRUE(remote[0]->Predict(held, &got_p).ok());
  ASSERT_EQ(got_p.size(), want_p.size());
  double moved = 0;
  for (size_t j = 0; j < want_p.size(); ++j) {
    EXPECT_NEAR(got_p[j], want_p[j], 1e-4) << "example " << j;
    moved = std::max(moved, std::fabs(double(want_p[j]) - 0.5));
  }
  EXPECT_GT(moved, 0.01) << "the model did not train: the comparison proves nothing";
}

// One standalone worker's run of `o` through ps_worker's run loop.
absl::StatusOr<RunResult> RunStandalone(const CtrOptions& o) {
  auto workload = CtrWorkload::Create(o);
  if (!workload.ok()) return workload.status();
  RunOptions r;
  r.worker_id = o.worker_id;
  r.num_workers = o.num_workers;
  r.log_every = 0;
  return RunWorker(r, workload->get(), nullptr, CtrStandaloneStore());
}

TEST(CtrWorkload, ErrorsNameTheFlag) {
  CtrOptions o;
  o.num_workers = 2;
  o.worker_id = 2;
  EXPECT_NE(o.Validate().message().find("--worker_id"), std::string::npos);
  o.worker_id = 1;
  auto r = RunStandalone(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--standalone"), std::string::npos) << r.status();
  o = CtrOptions();
  o.eval_examples = 1;
  EXPECT_NE(o.Validate().message().find("--ctr_eval_examples"), std::string::npos);
  o = CtrOptions();
  o.model.dim = 0;
  EXPECT_NE(o.Validate().message().find("--ctr_dim"), std::string::npos);
  o = CtrOptions();
  o.data.num_examples = 100;
  o.batch_size = 256;
  o.eval_examples = 10;
  r = RunStandalone(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--max_steps"), std::string::npos) << r.status();
}

TEST(CtrWorkload, StandaloneTrainsAboveChanceAndReportsTheBest) {
  CtrOptions o;
  o.data.vocab_sizes = {500};
  o.data.signal_vocab_size = 100;
  o.data.num_examples = 100000;
  o.batch_size = 128;
  o.steps = 150;
  o.eval_examples = 2000;
  o.threads = 1;
  auto r = RunStandalone(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 150);
  EXPECT_EQ(r->final_version, 150);
  ASSERT_TRUE(r->evaluation.has_value());
  const std::optional<double> auc = r->evaluation->Get("auc");
  const std::optional<double> best = r->evaluation->Get("best_auc");
  ASSERT_TRUE(auc.has_value() && best.has_value());
  EXPECT_GT(*best, 0.7);
  EXPECT_GT(*auc, 0.6);  // untrained: about 0.5
  EXPECT_LT(*auc, *best + 0.02);
}

}  // namespace
}  // namespace ps
