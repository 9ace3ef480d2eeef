// Transport conformance: the same cases over both client transports (the
// per-shard stream and unary calls), against real in-process servers on
// 127.0.0.1 and on unix sockets (in a 0700 folder under TEST_TMPDIR). Whatever the transport, Init creates or waits, pulls return the
// values exactly, a sync step is w - lr * mean(g), an async push is applied at
// once, every push-pull call (blocking, async, tensor by tensor in any order)
// gives the same weights, tensors split over several shards (one owning
// nothing) and tensors of many stream chunks come back exact, and errors (bad
// gradients, a pull that waits too long, servers that are down) come back as
// the same status codes, within a bound, never as a hang. The fixture is
// tests/conformance.h; the bf16 wire's cases are
// transport_bf16_conformance_test.cc.
//
// Exact by construction: every value is a small integer or a half-integer,
// the learning rate is 1/2 and a sync step averages 2 gradients, so every sum,
// mean and update is exact in float32 on any CPU, in any order.
//
// What only the stream transport has (the stream staying usable after a
// failed call, waiting calls on a stream dropped when the client goes away or
// failed when the server shuts down) is in stream_test.cc.
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"

namespace ps {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

using namespace conformance;  // NOLINT: the shared fixture and helpers

TEST_P(Conformance, PullAfterInitReturnsTheInitialValuesExactly) {
  const TensorList init = Values(kSpec, 1);
  Running run = Start(2, 2, Mode::kSync, kSpec, init);
  ASSERT_EQ(run.workers.size(), 2u);
  auto& workers = run.workers;
  for (int w = 0; w < 2; ++w) {
    TensorList weights;
    ASSERT_TRUE(workers[w]->Pull(0, &weights).ok());
    EXPECT_EQ(weights, init) << "worker " << w;
    EXPECT_EQ(workers[w]->version(), 0);
  }
}

TEST_P(Conformance, OtherWorkersInitWaitsForWorkerZero) {
  TestCluster cluster = MakeCluster(2, 2, Mode::kSync);
  // Alone, worker 1 waits out its wait_timeout: the parameters are not there.
  {
    ClientOptions o = Options(cluster, 1, 2);
    o.wait_timeout = absl::Milliseconds(300);
    std::unique_ptr<PsClient> early = Connect(o);
    ASSERT_NE(early, nullptr);
    absl::Status s = early->Init(kSpec, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(), HasSubstr("worker 0 has not initialized them")) << s;
  }
  // Started before worker 0 (or not: either order must work), it returns once
  // worker 0 created the parameters, and pulls what worker 0 sent.
  std::unique_ptr<PsClient> w1 = Connect(Options(cluster, 1, 2));
  ASSERT_NE(w1, nullptr);
  absl::Status w1_init = absl::UnknownError("not run");
  std::thread waiter([&] { w1_init = w1->Init(kSpec, nullptr); });
  const TensorList init = Values(kSpec, 2);
  std::unique_ptr<PsClient> w0 = Connect(Options(cluster, 0, 2));
  ASSERT_NE(w0, nullptr);
  EXPECT_TRUE(w0->Init(kSpec, &init).ok());
  waiter.join();
  ASSERT_TRUE(w1_init.ok()) << w1_init;
  TensorList weights;
  ASSERT_TRUE(w1->Pull(0, &weights).ok());
  EXPECT_EQ(weights, init);
}

TEST_P(Conformance, InitWithAnotherSpecThanWorkerZerosIsFailedPrecondition) {
  TestCluster cluster = MakeCluster(2, 2, Mode::kSync);
  const TensorList init = Values(kSpec, 1);
  std::unique_ptr<PsClient> w0 = Connect(Options(cluster, 0, 2));
  ASSERT_NE(w0, nullptr);
  ASSERT_TRUE(w0->Init(kSpec, &init).ok());
  std::unique_ptr<PsClient> w1 = Connect(Options(cluster, 1, 2));
  ASSERT_NE(w1, nullptr);
  ModelSpec other = kSpec;
  other[1].shape = {8};
  absl::Status s = w1->Init(other, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // The same spec still works afterwards.
  EXPECT_TRUE(w1->Init(kSpec, nullptr).ok());
}

// Two sync steps of 2 workers over 2 shards, with each way of pushing.
TEST_P(Conformance, SyncStepIsWeightsMinusLrTimesMeanGradientWhateverTheCall) {
  const TensorList init = Values(kSpec, 3);
  ForEachVia(Mode::kSync, init, [&](Via via, const Workers& workers) {
    TensorList expected = init;
    for (int step = 1; step <= 2; ++step) {
      const std::vector<TensorList> grads = {Values(kSpec, 10 * step),
                                             Values(kSpec, 10 * step + 1)};
      std::vector<TensorList> weights(2);
      std::vector<absl::Status> status(2);
      std::vector<std::thread> threads;
      for (int w = 0; w < 2; ++w) {
        threads.emplace_back(
            [&, w] { status[w] = PushPullVia(via, workers[w].get(), grads[w], &weights[w]); });
      }
      for (auto& t : threads) t.join();
      expected = SgdStep(expected, grads);
      for (int w = 0; w < 2; ++w) {
        ASSERT_TRUE(status[w].ok()) << "worker " << w << ", step " << step << ": " << status[w];
        EXPECT_EQ(weights[w], expected) << "worker " << w << ", step " << step;
        EXPECT_EQ(workers[w]->version(), step);
      }
    }
  });
}

TEST_P(Conformance, AsyncPushIsAppliedAtOnce) {
  const TensorList init = Values(kSpec, 4);
  ForEachVia(Mode::kAsync, init, [&](Via via, const Workers& workers) {
    // Plain pushes from both workers, then a pull sees both.
    const TensorList g0 = Values(kSpec, 5), g1 = Values(kSpec, 6);
    ASSERT_TRUE(workers[0]->Push(g0).ok());
    ASSERT_TRUE(workers[1]->Push(g1).ok());
    const TensorList expected = SgdStep(SgdStep(init, {g0}), {g1});
    TensorList weights;
    ASSERT_TRUE(workers[1]->Pull(0, &weights).ok());
    EXPECT_EQ(weights, expected);
    EXPECT_EQ(workers[1]->version(), 2);
    // A push-pull returns the weights right after its own push.
    const TensorList g2 = Values(kSpec, 7);
    ASSERT_TRUE(PushPullVia(via, workers[0].get(), g2, &weights).ok());
    EXPECT_EQ(weights, SgdStep(expected, {g2}));
    EXPECT_EQ(workers[0]->version(), 3);
  });
}

// 3 shards: the tensors are split three ways, and a model of tensors smaller
// than the shard count leaves shard 0 owning no element at all
// (common/partition.h), which must still count the steps.
TEST_P(Conformance, TensorsSplitOverThreeShardsIncludingOneThatOwnsNothing) {
  const ModelSpec tiny = {{"a", {1}}, {"b", {2}}};
  for (const ModelSpec& spec : {kSpec, tiny}) {
    SCOPED_TRACE(spec == tiny ? "shard 0 owns nothing" : "every shard owns a part");
    TensorList expected = Values(spec, 8);
    Running run = Start(3, 2, Mode::kSync, spec, expected);
    ASSERT_EQ(run.workers.size(), 2u);
    auto& workers = run.workers;
    TensorList weights;
    ASSERT_TRUE(workers[1]->Pull(0, &weights).ok());
    EXPECT_EQ(weights, expected);
    for (int step = 1; step <= 2; ++step) {
      const std::vector<TensorList> grads = {Values(spec, step), Values(spec, step + 5)};
      std::unique_ptr<PendingOp> op = workers[0]->PushPullAsync(grads[0], &weights);
      TensorList other;
      ASSERT_TRUE(workers[1]->PushPull(grads[1], &other).ok());
      ASSERT_TRUE(op->Wait().ok());
      expected = SgdStep(expected, grads);
      EXPECT_EQ(weights, expected) << "step " << step;
      EXPECT_EQ(other, expected) << "step " << step;
      EXPECT_EQ(workers[0]->version(), step);  // the smallest of the 3 shards' versions
    }
  }
}

// More than a megabyte per shard: several chunks on the stream transport, one
// large message on the unary one.
TEST_P(Conformance, LargeTensorsRoundTripExactly) {
  // 3,000,001 floats: about 12 MB, an odd size, over 2 shards.
  const ModelSpec spec = {{"big", {3000001}}, {"small", {3}}};
  TensorList init = {std::vector<float>(3000001), {1, 2, 3}};
  TensorList grads = {std::vector<float>(3000001), {2, 2, 2}};
  for (size_t i = 0; i < init[0].size(); ++i) {
    init[0][i] = float(i % 1000);
    grads[0][i] = float(i % 7);
  }
  Running run = Start(2, 1, Mode::kAsync, spec, init);
  ASSERT_EQ(run.workers.size(), 1u);
  auto& workers = run.workers;
  TensorList weights;
  ASSERT_TRUE(workers[0]->Pull(0, &weights).ok());
  EXPECT_TRUE(weights == init);
  ASSERT_TRUE(workers[0]->PushPull(grads, &weights).ok());
  EXPECT_TRUE(weights == SgdStep(init, {grads}));
  EXPECT_EQ(workers[0]->version(), 1);
}

TEST_P(Conformance, PullOfAVersionNeverReachedIsDeadlineExceededNamingTheMissingWorker) {
  Running run = Start(2, 2, Mode::kSync, kSpec, Values(kSpec, 1));
  ASSERT_EQ(run.workers.size(), 2u);
  auto& workers = run.workers;
  ASSERT_TRUE(workers[0]->Push(Values(kSpec, 2)).ok());  // worker 1 never pushes
  ClientOptions o = Options(*run.cluster, 0, 2);
  o.wait_timeout = absl::Milliseconds(300);
  std::unique_ptr<PsClient> impatient = Connect(o);
  ASSERT_NE(impatient, nullptr);
  ASSERT_TRUE(impatient->Init(kSpec, nullptr).ok());
  TensorList weights;
  const absl::Time start = absl::Now();
  absl::Status s = impatient->Pull(1, &weights);
  EXPECT_LT(absl::Now() - start, kNoHang);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("missing gradients from workers [1]")) << s;
  // The step still completes once worker 1 pushes.
  ASSERT_TRUE(workers[1]->Push(Values(kSpec, 3)).ok());
  ASSERT_TRUE(impatient->Pull(1, &weights).ok());
  EXPECT_EQ(impatient->version(), 1);
}

// Checked by the client before anything is sent: the servers see nothing.
TEST_P(Conformance, GradientsOfTheWrongCountOrSizeAreInvalidArgument) {
  const TensorList init = Values(kSpec, 1);
  Running run = Start(2, 1, Mode::kAsync, kSpec, init);
  ASSERT_EQ(run.workers.size(), 1u);
  PsClient* client = run.workers[0].get();
  TensorList too_few = Values(kSpec, 2);
  too_few.pop_back();
  TensorList wrong_size = Values(kSpec, 2);
  wrong_size[1].push_back(1);
  for (const TensorList* bad : {&too_few, &wrong_size}) {
    SCOPED_TRACE(bad == &too_few ? "one tensor too few" : "one value too many");
    TensorList weights;
    for (const absl::Status& s : {client->Push(*bad), client->PushPull(*bad, &weights),
                                  client->PushPullAsync(*bad, &weights)->Wait()}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_THAT(s.message(), AnyOf(HasSubstr("the model has 4"), HasSubstr("b[7] got 8"))) << s;
    }
  }
  // Tensor by tensor, the bad tensor's Send fails the push-pull.
  TensorList weights;
  std::unique_ptr<PushPullInProgress> p = client->StartPushPull(&wrong_size, &weights);
  p->Send({0});
  p->Send({1});
  absl::Status s = p->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  p.reset();
  // Views: a gradient or a weight tensor of the wrong size names the tensor.
  TensorList good_weights = init;
  TensorList short_weights = init;
  short_weights[1].pop_back();
  for (const absl::Status& v :
       {client->PushPull(ConstViewsOf(wrong_size), ViewsOf(&good_weights)),
        client->PushPull(ConstViewsOf(init), ViewsOf(&short_weights)),
        client->Pull(0, ViewsOf(&short_weights)), client->Push(ConstViewsOf(wrong_size))}) {
    EXPECT_EQ(v.code(), absl::StatusCode::kInvalidArgument) << v;
    EXPECT_THAT(v.message(), HasSubstr("b[7] got")) << v;
  }
  p = client->StartPushPull(ViewsOf(&good_weights));
  p->Send(0, wrong_size[0]);
  p->Send(1, wrong_size[1]);
  s = p->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("b[7] got 8")) << s;
  p = client->StartPushPull(ViewsOf(&short_weights));
  s = p->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  p.reset();
  // Nothing was applied.
  ASSERT_TRUE(client->Pull(0, &weights).ok());
  EXPECT_EQ(weights, init);
  EXPECT_EQ(client->version(), 0);
}

TEST_P(Conformance, ServersThatAreDownGiveAnErrorNotAHang) {
  // Servers that were started and stopped: their ports are closed.
  std::vector<std::string> down = MakeCluster(2, 1, Mode::kSync).addresses();
  ASSERT_EQ(down.size(), 2u);
  ClientOptions o;
  o.servers = down;
  o.transport = GetParam().transport;
  o.connect_timeout = absl::Seconds(1);
  absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<PsClient>> never = PsClient::Connect(o);
  EXPECT_LT(absl::Now() - start, kNoHang);
  EXPECT_THAT(never.status().code(),
              AnyOf(absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kUnavailable))
      << never.status();

  // Servers that go away under a connected client fail its next calls.
  std::optional<TestCluster> cluster;
  cluster.emplace(MakeCluster(2, 1, Mode::kSync));
  ClientOptions live = Options(*cluster, 0, 1);
  live.rpc_timeout = absl::Seconds(5);
  live.wait_timeout = absl::Seconds(5);
  std::unique_ptr<PsClient> client = Connect(live);
  ASSERT_NE(client, nullptr);
  const TensorList init = Values(kSpec, 1);
  ASSERT_TRUE(client->Init(kSpec, &init).ok());
  cluster.reset();
  TensorList weights;
  start = absl::Now();
  absl::Status s = client->Pull(0, &weights);
  EXPECT_LT(absl::Now() - start, kNoHang);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("shard ")) << s;
}

TEST_P(Conformance, AShardThatFailsEndsTheOtherShardsCallsAtOnce) {
  // Worker 0's sync push-pull waits on both shards for worker 1. Shard 1
  // goes away: the operation has failed, so the wait on shard 0 is
  // cancelled instead of held to its wait timeout (here 5 min), where it
  // could wait on workers that wait for this one to retry shard 1.
  const TensorList init = Values(kSpec, 1);
  TestCluster cluster = MakeCluster(2, 2, Mode::kSync);
  ClientOptions o = Options(cluster, 0, 2);
  o.wait_timeout = absl::Minutes(5);
  std::unique_ptr<PsClient> client = Connect(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Init(kSpec, &init).ok());
  TensorList weights;
  ASSERT_TRUE(client->Pull(0, &weights).ok());
  const TensorList grads = Values(kSpec, 2);
  std::unique_ptr<PendingOp> op = client->PushPullAsync(grads, &weights);
  EXPECT_EQ(WaitUntil(
                [&] {
                  return cluster.server(0)->shard()->Stats().waiting_calls +
                             cluster.server(1)->shard()->Stats().waiting_calls >=
                         2;
                },
                kNoHang, "the push-pull's pull waiting on both shards"),
            absl::OkStatus());
  ASSERT_TRUE(cluster.server(1)->Shutdown().ok());
  const absl::Time start = absl::Now();
  absl::Status s = op->Wait();
  EXPECT_LT(absl::Now() - start, kNoHang);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("shard 1")) << s;
  // Shard 0 let go of the pull: nothing waits there any more.
  EXPECT_EQ(WaitUntil([&] { return cluster.server(0)->shard()->Stats().waiting_calls == 0; },
                      kNoHang, "no waiting calls on shard 0"),
            absl::OkStatus());
}

INSTANTIATE_TEST_SUITE_P(Transports, Conformance, AllSetups(), SetupName);

}  // namespace
}  // namespace ps
