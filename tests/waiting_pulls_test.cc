// Waiting pulls hold no server thread: hundreds of pulls parked on a sync
// step that has not completed leave the server's thread count flat, and all
// of them complete once the step does. Pulls whose clients cancel stop
// waiting on the server too.
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/admin_client.h"
#include "common/testing/wait_until.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "tests/test_cluster.h"
#include "tools/process/proc.h"

namespace ps {
namespace {

// A server that parked a thread per waiting pull would add kPulls threads.
// gRPC's own pools may grow under a burst of calls, but by a bounded amount
// that scales with the cores, not the calls: its two executors up to 2
// threads per core each, its event engine pool by about one thread a second
// while backlogged. So kPulls is made large against the core count, and a
// quarter of it is allowed: more than gRPC can add, far less than a thread
// per pull.
const int kPulls = std::max<int>(400, 32 * sysconf(_SC_NPROCESSORS_CONF));

int ThreadCount() {
  const absl::StatusOr<int> n = ProcThreadCount(getpid());
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : 0;
}

TEST(WaitingPulls, DoNotParkServerThreads) {
  TestCluster cluster(1, 2, Mode::kSync, 0.5f);
  const ModelSpec spec = {{"w", {8}}};
  auto w0 = cluster.Connect(0, 2);
  auto w1 = cluster.Connect(1, 2);
  ASSERT_TRUE(w0.ok() && w1.ok());
  TensorList init = {std::vector<float>(8, 1.0f)};
  ASSERT_TRUE((*w0)->Init(spec, &init).ok());
  ASSERT_TRUE((*w1)->Init(spec, nullptr).ok());
  TensorList weights;
  ASSERT_TRUE((*w0)->Pull(0, &weights).ok());
  ASSERT_TRUE((*w1)->Pull(0, &weights).ok());

  // Many pulls of version 1 from one channel, all waiting.
  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(cluster.addresses()[0], ps::MakeChannelCredentials()));
  struct Call {
    grpc::ClientContext ctx;
    v1::PullRequest req;
    v1::PullResponse resp;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::atomic<int> ok{0}, done{0};
  absl::Notification all_done;
  const int threads_before = ThreadCount();
  for (int i = 0; i < kPulls; ++i) {
    calls.push_back(std::make_unique<Call>());
    Call* c = calls.back().get();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    c->req.set_worker_id(i % 2);
    c->req.set_min_version(1);
    c->req.set_wait_timeout_ms(50000);
    stub->async()->Pull(&c->ctx, &c->req, &c->resp, [&, c](grpc::Status s) {
      if (s.ok() && c->resp.version() == 1) ++ok;
      if (++done == kPulls) all_done.Notify();
    });
  }
  // Wait (bounded) until the server holds every pull.
  int64_t waiting = 0;
  EXPECT_EQ(WaitUntil(
                [&] {
                  auto st = QueryStatus(cluster.addresses(), absl::Seconds(5));
                  waiting = st.ok() ? (*st)[0].waiting_calls() : -1;
                  return waiting == kPulls;
                },
                absl::Seconds(30), absl::StrCat(kPulls, " waiting pulls on the server"),
                absl::Milliseconds(20)),
            absl::OkStatus());
  ASSERT_EQ(waiting, kPulls);
  const int threads_waiting = ThreadCount();
  std::cout << "threads: " << threads_before << " before, " << threads_waiting << " with "
            << kPulls << " waiting pulls" << std::endl;
  EXPECT_LT(threads_waiting - threads_before, kPulls / 4);
  EXPECT_EQ(done.load(), 0);

  // Completing the step releases every one of them with version 1.
  TensorList grad = {std::vector<float>(8, 1.0f)};
  ASSERT_TRUE((*w0)->Push(grad).ok());
  ASSERT_TRUE((*w1)->Push(grad).ok());
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(ok.load(), kPulls);
}

TEST(WaitingPulls, CancelledPullsStopWaiting) {
  TestCluster cluster(1, 2, Mode::kSync, 0.5f);
  const ModelSpec spec = {{"w", {8}}};
  auto w0 = cluster.Connect(0, 2);
  ASSERT_TRUE(w0.ok());
  TensorList init = {std::vector<float>(8, 1.0f)};
  ASSERT_TRUE((*w0)->Init(spec, &init).ok());

  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(cluster.addresses()[0], ps::MakeChannelCredentials()));
  constexpr int kCalls = 20;
  grpc::ClientContext ctx[kCalls];
  v1::PullRequest req;
  req.set_min_version(1);
  req.set_wait_timeout_ms(600000);  // would hold the call for 10 minutes
  v1::PullResponse resp[kCalls];
  std::atomic<int> cancelled{0}, done{0};
  absl::Notification all_done;
  for (int i = 0; i < kCalls; ++i) {
    stub->async()->Pull(&ctx[i], &req, &resp[i], [&](grpc::Status s) {
      if (s.error_code() == grpc::StatusCode::CANCELLED) ++cancelled;
      if (++done == kCalls) all_done.Notify();
    });
  }
  auto waiting = [&]() -> int64_t {
    auto st = QueryStatus(cluster.addresses(), absl::Seconds(5));
    return st.ok() ? (*st)[0].waiting_calls() : -1;
  };
  ASSERT_EQ(WaitUntil([&] { return waiting() == kCalls; }, absl::Seconds(30),
                      absl::StrCat(kCalls, " waiting pulls on the server"), absl::Milliseconds(20)),
            absl::OkStatus());

  for (auto& c : ctx) c.TryCancel();
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(cancelled.load(), kCalls);
  // The server noticed and dropped every wait, long before their deadlines.
  EXPECT_EQ(WaitUntil([&] { return waiting() == 0; }, absl::Seconds(30),
                      "no waiting pulls on the server", absl::Milliseconds(20)),
            absl::OkStatus());
}

}  // namespace
}  // namespace ps
