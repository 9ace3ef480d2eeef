// Optimizers through real servers (2 shards, 2 sync workers, ephemeral
// ports):
//
// - For every optimizer, with weight decay and a warmup + cosine schedule,
//   the servers' weights after each step equal, bit for bit, the optimizer
//   of common/optimizer.h applied in this process to the two workers'
//   gradients in worker-id order (the mean the sync policy hands over). The
//   shards apply the same elementwise code to their slices, so any
//   difference is a bug: a lost or reordered gradient, a wrong step or
//   learning rate, state that is not the slice's own.
// - Adam's state goes into checkpoints: servers stopped after 10 of 20 steps
//   and restarted on their checkpoints end with the same bits as the
//   uninterrupted run, and a run whose state restarts from zero at step 10
//   does not (so the check can fail).
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ps_server.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

const ModelSpec kSpec = {{"w", {7, 5}}, {"b", {5}}, {"emb", {131}}};
constexpr int kShards = 2;
constexpr int kWorkers = 2;

TensorList Initial() {
  TensorList t;
  for (const TensorSpec& s : kSpec) {
    std::vector<float> v(s.num_elements());
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + 0.01f * static_cast<float>(i % 17);
    t.push_back(std::move(v));
  }
  return t;
}

// Worker `w`'s gradient at step t (1-based): fixed, different per worker.
TensorList Gradient(int w, int t) {
  TensorList g;
  for (size_t k = 0; k < kSpec.size(); ++k) {
    std::vector<float> v(kSpec[k].num_elements());
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(std::sin(0.37 * (i + 1) + 1.3 * t + 0.71 * w + k) * (0.5 + w));
    }
    g.push_back(std::move(v));
  }
  return g;
}

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base != nullptr ? base : "/tmp") + "/optim-XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

using Cluster = LoggedServers;

Cluster Start(const OptimizerOptions& optimizer, const std::string& checkpoint_dir = "") {
  ServerOptions o;
  o.shard.num_workers = kWorkers;
  o.shard.mode = Mode::kSync;
  o.shard.optimizer = optimizer;
  o.checkpoints.dir = checkpoint_dir;
  o.checkpoints.every_versions = 5;
  return StartLoggedServers(o, kShards);
}

std::unique_ptr<PsClient> Connect(const Cluster& c, int worker) {
  return ConnectWorker(c, worker, kWorkers);
}

// Sync steps first..last through the servers; `each` sees the weights after
// every step. Worker 0 creates the parameters when `init`.
TensorList Train(const Cluster& c, bool init, int first, int last,
                 const std::function<void(int, const TensorList&)>& each = nullptr) {
  auto w0 = Connect(c, 0), w1 = Connect(c, 1);
  if (w0 == nullptr || w1 == nullptr) return {};
  const TensorList initial = Initial();
  EXPECT_TRUE(w0->Init(kSpec, init ? &initial : nullptr).ok());
  EXPECT_TRUE(w1->Init(kSpec, nullptr).ok());
  TensorList weights0, weights1;
  EXPECT_TRUE(w0->Pull(0, &weights0).ok());
  EXPECT_TRUE(w1->Pull(0, &weights1).ok());
  for (int t = first; t <= last; ++t) {
    const TensorList g0 = Gradient(0, t), g1 = Gradient(1, t);
    auto op = w1->PushPullAsync(g1, &weights1);
    EXPECT_TRUE(w0->PushPull(g0, &weights0).ok());
    EXPECT_TRUE(op->Wait().ok());
    EXPECT_EQ(weights0, weights1);
    if (each) each(t, weights0);
  }
  return weights0;
}

// The same steps in this process: one optimizer per tensor, started at
// version `start`, applied to the mean of the workers' gradients.
class Reference {
 public:
  Reference(const OptimizerOptions& o, TensorList weights, int64_t start = 0)
      : weights_(std::move(weights)) {
    for (const std::vector<float>& t : weights_) {
      auto opt = CreateOptimizer(o, static_cast<int64_t>(t.size()), start);
      EXPECT_TRUE(opt.ok()) << opt.status();
      opts_.push_back(*std::move(opt));
    }
  }
  void Step(int t) {
    const TensorList g0 = Gradient(0, t), g1 = Gradient(1, t);
    for (size_t k = 0; k < weights_.size(); ++k) {
      const float* grads[] = {g0[k].data(), g1[k].data()};
      opts_[k]->ApplyMean(t, 1.0, grads, 0, weights_[k].size(), weights_[k].data());
    }
  }
  const TensorList& weights() const { return weights_; }

 private:
  TensorList weights_;
  std::vector<std::unique_ptr<Optimizer>> opts_;
};

OptimizerOptions Options(const std::string& name) {
  OptimizerOptions o;
  o.name = name;
  o.learning_rate = (name == "adam" || name == "adamw" || name == "adagrad") ? 0.01 : 0.05;
  o.weight_decay = 0.01;
  o.schedule.name = "cosine";
  o.schedule.warmup_steps = 3;
  o.schedule.decay_steps = 20;
  o.schedule.min_lr = o.learning_rate / 10;
  return o;
}

TEST(OptimizerEquivalence, SyncShardsEqualTheOptimizerOnTheMeanGradientBitForBit) {
  constexpr int kSteps = 25;
  for (const std::string& name : OptimizerNames()) {
    SCOPED_TRACE(name);
    const OptimizerOptions o = Options(name);
    Cluster c = Start(o);
    ASSERT_EQ(c.servers.size(), kShards);
    Reference ref(o, Initial());
    int mismatched_at = 0;
    const TensorList end = Train(c, /*init=*/true, 1, kSteps, [&](int t, const TensorList& w) {
      ref.Step(t);
      if (w != ref.weights() && mismatched_at == 0) mismatched_at = t;
    });
    EXPECT_EQ(mismatched_at, 0) << "first step whose weights differ";
    EXPECT_TRUE(end == ref.weights());
    EXPECT_NE(end, Initial());
  }
}

TEST(OptimizerCheckpoint, AdamRestoredMidRunEndsWithTheSameBits) {
  OptimizerOptions o = Options("adam");
  o.schedule = LrSchedule();
  o.weight_decay = 0;
  TensorList uninterrupted;
  {
    Cluster c = Start(o);
    uninterrupted = Train(c, /*init=*/true, 1, 20);
  }
  const std::string dir = TempDir();
  {
    Cluster c = Start(o, dir);
    Train(c, /*init=*/true, 1, 10);
    for (auto& s : c.servers) ASSERT_TRUE(s->Shutdown().ok());  // writes version 10
  }
  Cluster c = Start(o, dir);
  for (int s = 0; s < kShards; ++s) {
    EXPECT_THAT(c.Lines(), Contains(HasSubstr(absl::StrCat("shard ", s, ": restored checkpoint"))));
  }
  const TensorList resumed = Train(c, /*init=*/false, 11, 20);
  EXPECT_TRUE(resumed == uninterrupted);

  // Without its state (moments and step count) Adam would end elsewhere.
  Reference first(o, Initial());
  for (int t = 1; t <= 10; ++t) first.Step(t);
  Reference fresh(o, first.weights(), /*start=*/10);
  for (int t = 11; t <= 20; ++t) fresh.Step(t);
  EXPECT_FALSE(fresh.weights() == uninterrupted);
}

}  // namespace
}  // namespace ps
