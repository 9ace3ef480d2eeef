// What only the streaming transport has: a failed call leaves the stream
// usable, a pull that waits on a stream is dropped on the server when the
// client goes away, and a server that shuts down fails the calls waiting on
// it instead of leaving them hanging. What both transports must do alike
// (tensors of many chunks arriving intact among them) is in
// transport_conformance_test.cc.
#include <cmath>
#include "client/admin_client.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

int64_t WaitingCalls(const TestCluster& cluster) {
  auto st = QueryStatus(cluster.addresses(), absl::Seconds(5));
  return st.ok() ? (*st)[0].waiting_calls() : -1;
}

// Polls (bounded) until the server reports `n` waiting calls.
bool AwaitWaitingCalls(const TestCluster& cluster, int64_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (WaitingCalls(cluster) == n) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// One sync shard of a 4-element tensor with 2 workers; worker 0 connected
// over the stream transport and initialized.
class StreamSync : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = cluster_.Connect(0, 2);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    ASSERT_TRUE(client_->Init({{"w", {4}}}, &init_).ok());
  }

  TestCluster cluster_{1, 2, Mode::kSync, 0.5f};
  const TensorList init_ = {{1, 2, 3, 4}};
  std::unique_ptr<PsClient> client_;
};

TEST_F(StreamSync, AFailedCallLeavesTheStreamUsable) {
  TensorList grad = {{1, 1, 1, 1}};
  ASSERT_TRUE(client_->Push(grad).ok());
  // The same step twice is taken for a retry: answered, not applied again.
  ASSERT_TRUE(client_->Push(grad).ok());
  EXPECT_EQ(client_->LastPushOutcomes(), std::vector<PushOutcome>{PushOutcome::kDuplicate});
  TensorList bad = {{1, std::nanf(""), 1, 1}};
  absl::Status refused = client_->Push(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  TensorList weights;
  EXPECT_TRUE(client_->Pull(0, &weights).ok());
  EXPECT_EQ(weights, init_);
}

TEST_F(StreamSync, WaitingPullIsDroppedWhenTheClientGoesAway) {
  TensorList weights;
  {
    std::unique_ptr<PendingOp> op = client_->PullAsync(1, &weights);  // never completes
    ASSERT_TRUE(AwaitWaitingCalls(cluster_, 1));
  }  // abandoning the op cancels it
  EXPECT_TRUE(AwaitWaitingCalls(cluster_, 0));
  // The client reconnects and keeps working.
  EXPECT_TRUE(client_->Pull(0, &weights).ok());
  client_.reset();  // closing the client closes its streams cleanly
  EXPECT_EQ(WaitingCalls(cluster_), 0);
}

TEST_F(StreamSync, ServerShutdownFailsWaitingCallsPromptly) {
  TensorList weights;
  std::unique_ptr<PendingOp> op = client_->PullAsync(1, &weights);  // waits for worker 1
  ASSERT_TRUE(AwaitWaitingCalls(cluster_, 1));
  EXPECT_TRUE(cluster_.server(0)->Shutdown().ok());
  // The status says who ended the pull, so no clock is needed: left waiting,
  // it would have ended at its wait timeout with DEADLINE_EXCEEDED, and
  // "shutting down" comes only from the shard failing its waiting calls.
  absl::Status s = op->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("shutting down"), absl::string_view::npos) << s;
  // That later calls to a server that is gone fail, naming the shard, is
  // checked for both transports in transport_conformance_test.cc.
}

}  // namespace
}  // namespace ps
