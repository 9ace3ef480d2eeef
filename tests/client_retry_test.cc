// PsClient's retries through a real server that restarts (empty, on the same
// address) while a call is in flight: PullAsync and PushPullAsync retry
// inside Wait() as the blocking calls do (client/ps_client.h): the client
// registers again, restores the shard from its copy and tries again, and the
// gradient is applied once. PullRows and PushRows retry too: the restored
// shard has the model's embedding table again (its rows afresh).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "common/embedding_shard.h"
#include "common/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ps_server.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

const ModelSpec kSpec = {{"w", {2, 2}}, {"b", {2}}};
const TensorList kInitial = {{1, 2, 3, 4}, {-1, -2}};
constexpr float kLearningRate = 0.5f;
const TableSpec kTable{"emb", 3, /*seed=*/5, /*init_scale=*/0.5f};

ServerOptions OneShard(const std::string& listen) {
  ServerOptions o;
  o.listen = listen;
  o.shard.num_workers = 1;
  o.shard.mode = Mode::kSync;
  o.shard.optimizer.learning_rate = kLearningRate;
  o.shard.tables.optimizer = {SparseOptimizerKind::kSgd, 1.0f};
  o.shutdown_grace = absl::Milliseconds(100);  // the client's stream stays open
  return o;
}

class RestartedShard : public ::testing::TestWithParam<ClientOptions::Transport> {
 protected:
  void SetUp() override {
    auto server = PsServer::Start(OneShard("127.0.0.1:0"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = server_->address();
    ClientOptions o;
    o.servers = {address_};
    o.transport = GetParam();
    o.retry_timeout = absl::Seconds(60);
    o.log = [this](absl::string_view line) {
      absl::MutexLock l(&mu_);
      lines_.emplace_back(line);
      if (absl::StrContains(line, "failed (a shard unavailable") && !failed_.HasBeenNotified()) {
        failed_.Notify();
      }
    };
    auto client = PsClient::Connect(o);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    ASSERT_TRUE(client_->DeclareTables({kTable}).ok());
    ASSERT_TRUE(client_->Init(kSpec, &kInitial).ok());
    TensorList weights;
    ASSERT_TRUE(client_->Pull(0, &weights).ok());  // the copy to restore from
    ASSERT_EQ(weights, kInitial);
  }

  void TearDown() override {
    gave_up_ = true;
    if (restarter_.joinable()) restarter_.join();
    client_.reset();
    server_.reset();
  }

  // Stops the server now, and starts an empty one on its address once the
  // client says a call failed, i.e. after the call's first try.
  void RestartWhenACallFails() {
    ASSERT_TRUE(server_->Shutdown().ok());
    server_.reset();
    restarter_ = std::thread([this] {
      while (!failed_.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
        if (gave_up_) return;
      }
      const absl::Status started = WaitUntil(  // the port may linger a moment
          [this] {
            auto server = PsServer::Start(OneShard(address_));
            if (server.ok()) server_ = *std::move(server);
            return server.ok();
          },
          absl::Seconds(5), "the server to start again on " + address_, absl::Milliseconds(50));
      if (!started.ok()) ADD_FAILURE() << started;
    });
  }

  std::vector<std::string> Lines() {
    absl::MutexLock l(&mu_);
    return lines_;
  }

  std::unique_ptr<PsServer> server_;
  std::string address_;
  std::unique_ptr<PsClient> client_;
  std::thread restarter_;
  std::atomic<bool> gave_up_{false};
  absl::Notification failed_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

TEST_P(RestartedShard, PullAsyncRetriesInWait) {
  RestartWhenACallFails();
  TensorList weights;
  std::unique_ptr<PendingOp> op = client_->PullAsync(0, &weights);
  const absl::Status status = op->Wait();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(weights, kInitial);
  EXPECT_THAT(Lines(), Contains(HasSubstr("restored it to version 0 from this worker's copy")));
  EXPECT_THAT(Lines(), Contains(HasSubstr("pull went through after")));
}

TEST_P(RestartedShard, PushPullAsyncRetriesInWaitAndAppliesTheGradientOnce) {
  RestartWhenACallFails();
  const TensorList grads = {{2, 2, 2, 2}, {4, 4}};
  TensorList weights;
  std::unique_ptr<PendingOp> op = client_->PushPullAsync(grads, &weights);
  const absl::Status status = op->Wait();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(weights, (TensorList{{0, 1, 2, 3}, {-3, -4}}));
  EXPECT_EQ(client_->version(), 1);
  EXPECT_THAT(Lines(), Contains(HasSubstr("push-pull went through after")));
}

std::vector<float> InitialRow(uint64_t id) {
  std::vector<float> row(kTable.dim);
  InitRow(kTable.seed, id, kTable.dim, kTable.init_scale, row.data());
  return row;
}

TEST_P(RestartedShard, PullRowsRetriesAndTheRestoredShardHasTheTable) {
  RestartWhenACallFails();
  const uint64_t id = 77;
  std::vector<float> row(kTable.dim);
  const absl::Status status = client_->PullRows("emb", {&id, 1}, absl::MakeSpan(row));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(row, InitialRow(id));
  EXPECT_THAT(Lines(), Contains(HasSubstr("pull of rows went through after")));
}

TEST_P(RestartedShard, PushRowsRetriesAndTheStepAppliesThemOnce) {
  RestartWhenACallFails();
  const std::vector<uint64_t> ids = {4, 4};  // summed: 2 * g
  const std::vector<float> g = {1, 2, 3, 1, 2, 3};
  const absl::Status status = client_->PushRows("emb", ids, g);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(Lines(), Contains(HasSubstr("push of rows went through after")));
  TensorList weights;
  ASSERT_TRUE(client_->PushPull({{0, 0, 0, 0}, {0, 0}}, &weights).ok());  // closes step 0
  std::vector<float> row(kTable.dim);
  ASSERT_TRUE(client_->PullRows("emb", {&ids[0], 1}, absl::MakeSpan(row)).ok());
  const std::vector<float> init = InitialRow(4);
  EXPECT_EQ(row, (std::vector<float>{init[0] - 2, init[1] - 4, init[2] - 6}));
}

INSTANTIATE_TEST_SUITE_P(Transports, RestartedShard, AllTransports(), TransportName);

}  // namespace
}  // namespace ps
