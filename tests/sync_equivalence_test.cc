// Sync mode equals single-process SGD: W workers with batch b against S real
// gRPC shards end with the same weights as one process with batch W*b from the
// same initialization over the same data order.
#include <cmath>
#include <thread>

#include "gtest/gtest.h"
#include "tests/test_cluster.h"
#include "worker/dataset.h"
#include "worker/model.h"
#include "worker/trainer.h"

namespace ps {
namespace {

constexpr int kWorkers = 4;
constexpr int kShards = 2;
constexpr int kBatch = 16;
constexpr int kSteps = 20;
constexpr float kLr = 0.1f;

const FashionMnist& Data() {
  static const FashionMnist* data = [] {
    auto d = LoadFashionMnist(kDefaultDatasetDir);
    if (!d.ok()) {
      ADD_FAILURE() << d.status();
      return new FashionMnist();
    }
    return new FashionMnist(*std::move(d));
  }();
  return *data;
}

TrainerOptions Options(int worker_id, int num_workers, int batch) {
  TrainerOptions o;
  o.worker_id = worker_id;
  o.num_workers = num_workers;
  o.batch_size = batch;
  o.max_steps = kSteps;
  o.seed = 42;
  o.log_every = 0;
  return o;
}

double MaxAbsDiff(const TensorList& a, const TensorList& b) {
  double m = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    for (size_t i = 0; i < a[t].size(); ++i) m = std::max(m, std::fabs(double(a[t][i]) - b[t][i]));
  }
  return m;
}

class SyncEquivalence : public ::testing::TestWithParam<ClientOptions::Transport> {};

TEST_P(SyncEquivalence, FourWorkersTwoShardsMatchSingleProcessSgd) {
  const FashionMnist& data = Data();
  ASSERT_GT(data.train.size, 0);

  // Reference: one process, batch W*b, local SGD.
  auto expected = RunWorker(Options(0, 1, kWorkers * kBatch), &data, {"cpu", 1}, nullptr, kLr);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->steps, kSteps);

  TestCluster cluster(kShards, kWorkers, Mode::kSync, kLr);
  std::vector<absl::StatusOr<TrainResult>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co = cluster.ClientOptionsFor(w, kWorkers, GetParam());
      results[w] = RunWorker(Options(w, kWorkers, kBatch), &data, {"cpu", 1}, &co, 0);
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w].status();
    EXPECT_EQ(results[w]->steps, kSteps);
    EXPECT_EQ(results[w]->final_version, kSteps);
  }

  const double diff = MaxAbsDiff(results[0]->weights, expected->weights);
  EXPECT_LT(diff, 1e-5) << "sync weights differ from single-process SGD";
  for (int w = 1; w < kWorkers; ++w) {
    EXPECT_EQ(MaxAbsDiff(results[w]->weights, results[0]->weights), 0.0) << "worker " << w;
  }

  // Training really moved the weights, so the comparison means something.
  auto backend = CreateBackend({"cpu", 1});
  auto model = Mlp::Create(backend->get(), {784, 512, 256, 10}, 1);
  ASSERT_TRUE(model.ok());
  EXPECT_GT(MaxAbsDiff(expected->weights, (*model)->InitialValues(42)), 1e-3);
  std::cout << "max |sync - single process| = " << diff << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Transports, SyncEquivalence, AllTransports(), TransportName);

}  // namespace
}  // namespace ps
