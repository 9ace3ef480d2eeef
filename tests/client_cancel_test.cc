// PsClient::Cancel through real ps_server processes (the binary is argv[1]):
// a call blocked on another thread, on either transport, ends with
// CANCELLED soon after Cancel(), whether it waits for other workers (a
// pull, a layer-wise push-pull, Init) or retries a shard that is down; and
// the client stays usable.
#include <signal.h>

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "tools/process/server_process.h"

namespace ps {
namespace {

std::string server_binary;  // argv[1]

// How soon a cancelled call must return: the cancel itself takes
// milliseconds; the margin is for a busy machine.
constexpr absl::Duration kPrompt = absl::Seconds(3);

const ModelSpec kSpec = {{"w", {4}}, {"b", {2}}};

class CancelTest : public ::testing::TestWithParam<ClientOptions::Transport> {
 protected:
  // Two sync shards for two workers.
  void SetUp() override {
    static int started = 0;
    for (int s = 0; s < 2; ++s) {
      ServerProcessOptions o;
      o.binary = server_binary;
      o.dir = ::testing::TempDir();
      o.name = absl::StrCat("server", started++);
      o.flags = {absl::StrCat("--shard_id=", s),
                 "--num_shards=2",
                 "--num_workers=2",
                 "--mode=sync",
                 "--lr=0.5",
                 "--worker_timeout=0",
                 "--pull_timeout=60"};
      auto p = ServerProcess::Start(o);
      ASSERT_TRUE(p.ok()) << p.status();
      servers_.push_back(*std::move(p));
    }
  }

  std::unique_ptr<PsClient> Connect(int worker,
                                    absl::Duration retry_timeout = absl::ZeroDuration()) {
    ClientOptions o;
    for (const auto& s : servers_) o.servers.push_back(s->address());
    o.worker_id = worker;
    o.num_workers = 2;
    o.transport = GetParam();
    o.wait_timeout = absl::Seconds(60);  // far longer than any wait below
    o.retry_timeout = retry_timeout;
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Worker 0, with the parameters created.
  std::unique_ptr<PsClient> InitializedWorker0(
      absl::Duration retry_timeout = absl::ZeroDuration()) {
    std::unique_ptr<PsClient> c = Connect(0, retry_timeout);
    if (c == nullptr) return nullptr;
    const TensorList init = {{1, 2, 3, 4}, {5, 6}};
    EXPECT_TRUE(c->Init(kSpec, &init).ok());
    return c;
  }

  // Runs `call` on another thread, checks that it is still blocked after
  // 300 ms, cancels, and returns its status, which must come within kPrompt.
  absl::Status CancelBlocked(PsClient* client, std::function<absl::Status()> call) {
    std::packaged_task<absl::Status()> task(std::move(call));
    std::shared_future<absl::Status> result = task.get_future().share();
    std::thread t(std::move(task));
    const bool blocked =
        result.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
    const absl::Time cancelled = absl::Now();
    client->Cancel();
    const bool prompt =
        result.wait_for(absl::ToChronoNanoseconds(kPrompt)) == std::future_status::ready;
    const absl::Duration took = absl::Now() - cancelled;
    t.join();  // returns by the call's own deadline at the latest
    EXPECT_TRUE(blocked) << "the call did not block: " << result.get();
    EXPECT_TRUE(prompt) << "returned " << took << " after Cancel()";
    return result.get();
  }

  void ExpectCancelled(const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "cancelled (PsClient::Cancel)")) << s;
  }

  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

TEST_P(CancelTest, APullWaitingForAStepThatNeverComesEndsCancelled) {
  std::unique_ptr<PsClient> c = InitializedWorker0();
  ASSERT_NE(c, nullptr);
  TensorList weights;
  // Worker 1 never pushes: step 1 never closes.
  ExpectCancelled(CancelBlocked(c.get(), [&] { return c->Pull(1, &weights); }));
  // Usable again: the streams the cancel broke are reopened.
  ASSERT_TRUE(c->Pull(0, &weights).ok());
  EXPECT_EQ(weights, (TensorList{{1, 2, 3, 4}, {5, 6}}));
}

TEST_P(CancelTest, ALayerwisePushPullWaitingForTheOtherWorkerEndsCancelled) {
  std::unique_ptr<PsClient> c = InitializedWorker0();
  ASSERT_NE(c, nullptr);
  const TensorList grads = {{1, 1, 1, 1}, {1, 1}};
  TensorList weights;
  std::unique_ptr<PushPullInProgress> p = c->StartPushPull(&grads, &weights);
  p->Send({0, 1});
  ExpectCancelled(CancelBlocked(c.get(), [&] { return p->Wait(); }));
  p.reset();
  // Worker 1 comes after all: the step closes over both gradients, worker
  // 0's pushed again (a duplicate where it had arrived).
  std::unique_ptr<PsClient> w1 = Connect(1);
  ASSERT_NE(w1, nullptr);
  ASSERT_TRUE(w1->Init(kSpec, nullptr).ok());
  TensorList w1_weights;
  std::future<absl::Status> other =
      std::async(std::launch::async, [&] { return w1->PushPull(grads, &w1_weights); });
  ASSERT_TRUE(c->PushPull(grads, &weights).ok());
  ASSERT_TRUE(other.get().ok());
  EXPECT_EQ(weights, (TensorList{{0.5, 1.5, 2.5, 3.5}, {4.5, 5.5}}));
  EXPECT_EQ(c->version(), 1);
}

TEST_P(CancelTest, AnInitWaitingForWorker0EndsCancelled) {
  std::unique_ptr<PsClient> c = Connect(1);
  ASSERT_NE(c, nullptr);
  ExpectCancelled(CancelBlocked(c.get(), [&] { return c->Init(kSpec, nullptr); }));
}

TEST_P(CancelTest, ACallRetryingAShardThatIsDownEndsCancelled) {
  std::unique_ptr<PsClient> c = InitializedWorker0(/*retry_timeout=*/absl::Seconds(60));
  ASSERT_NE(c, nullptr);
  servers_[1]->process().Signal(SIGKILL);
  servers_[1]->process().Wait(absl::Now() + absl::Seconds(10));
  TensorList weights;
  // Shard 1 is gone: the pull fails and is retried, registering again and
  // backing off, for up to a minute.
  ExpectCancelled(CancelBlocked(c.get(), [&] { return c->Pull(0, &weights); }));
}

TEST_P(CancelTest, ACancelWithNothingInFlightLeavesTheNextCallAlone) {
  std::unique_ptr<PsClient> c = InitializedWorker0();
  ASSERT_NE(c, nullptr);
  c->Cancel();
  TensorList weights;
  ASSERT_TRUE(c->Pull(0, &weights).ok());
  EXPECT_EQ(weights, (TensorList{{1, 2, 3, 4}, {5, 6}}));
}

INSTANTIATE_TEST_SUITE_P(Transports, CancelTest,
                         ::testing::Values(ClientOptions::Transport::kStream,
                                           ClientOptions::Transport::kUnary),
                         [](const ::testing::TestParamInfo<ClientOptions::Transport>& info) {
                           return info.param == ClientOptions::Transport::kStream ? "stream"
                                                                                  : "unary";
                         });

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    fprintf(stderr, "usage: client_cancel_test PS_SERVER\n");
    return 2;
  }
  ps::server_binary = argv[1];
  return RUN_ALL_TESTS();
}
