// SIGTERM stops the real ps_server binary within --shutdown_grace (plus its
// 5 s margin) whatever its clients do: streams that started a push and went
// silent, pulls that wait for a step that never comes, streams whose client
// never reads the weights it asked for (so the server's writes block on flow
// control), and the overflowing request that used to wedge a reactor.
//
// Usage (from Bazel): shutdown_test PATH_TO_ps_server
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <limits>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/admin_client.h"
#include "client/ps_client.h"
#include "common/testing/wait_until.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "tests/tensor_slice.h"
#include "tools/process/child_process.h"
#include "tools/process/server_process.h"

namespace ps {
namespace {

const char* g_server_binary = nullptr;

constexpr int kGraceSeconds = 2;

std::unique_ptr<grpc::ClientContext> Context(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

TEST(Shutdown, SigtermEndsTheServerWithinTheGraceWhateverClientsDo) {
  const char* dir = getenv("TEST_TMPDIR");
  ServerProcessOptions so;
  so.binary = g_server_binary;
  so.flags = {"--num_workers=2", "--mode=sync", "--pull_timeout=600", "--call_timeout=0",
              absl::StrCat("--shutdown_grace=", kGraceSeconds)};
  so.dir = dir != nullptr ? dir : "/tmp";
  so.name = "shutdown_server";
  auto started = ServerProcess::Start(so);
  ASSERT_TRUE(started.ok()) << started.status();
  std::cout << "started " << (*started)->command_line() << std::endl;
  ChildProcess& server = (*started)->process();
  const std::string address = (*started)->address();

  // Worker 0 creates a 16 MB model (big enough to block on flow control).
  const ModelSpec spec = {{"big", {4 << 20}}, {"fc1.bias", {10}}};
  ClientOptions co;
  co.servers = {address};
  co.num_workers = 2;
  auto client = PsClient::Connect(co);
  ASSERT_TRUE(client.ok()) << client.status();
  TensorList init = {std::vector<float>(4 << 20, 1.0f), std::vector<float>(10, 0.0f)};
  ASSERT_TRUE((*client)->Init(spec, &init).ok());

  auto stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(address, ps::MakeChannelCredentials()));
  struct Open {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>> rw;
  };
  std::vector<Open> open;
  auto stream = [&]() -> Open& {
    open.push_back(Open{Context(600), nullptr});
    open.back().rw = stub->Stream(open.back().ctx.get());
    return open.back();
  };
  // 20 streams that start a push and go silent.
  for (int i = 0; i < 20; ++i) {
    v1::StreamRequest req;
    req.set_call_id(1);
    req.set_kind(v1::CALL_PUSH);
    *req.add_gradients() = MakeTensorSlice("fc1.bias", {10}, 0, 5, std::string(20, '\0'));
    ASSERT_TRUE(stream().rw->Write(req));
  }
  // 5 streams that pull 16 MB and never read it.
  for (int i = 0; i < 5; ++i) {
    v1::StreamRequest req;
    req.set_call_id(1);
    req.set_kind(v1::CALL_PULL);
    req.set_last(true);
    ASSERT_TRUE(stream().rw->Write(req));
  }
  // The overflowing push that used to wedge a reactor.
  {
    Open& o = stream();
    int64_t offsets[] = {0, 1, std::numeric_limits<int64_t>::min()};
    int64_t lengths[] = {1, std::numeric_limits<int64_t>::max(), 0};
    for (int c = 0; c < 3; ++c) {
      v1::StreamRequest req;
      req.set_call_id(1);
      req.set_kind(v1::CALL_PUSH);
      *req.add_gradients() = MakeTensorSlice("fc1.bias", {10}, offsets[c], lengths[c],
                                             std::string(c == 1 ? 36 : 4 * lengths[c] % 64, '\0'));
      req.set_last(c == 2);
      o.rw->Write(req);
    }
  }
  // 20 unary pulls waiting for a step that never comes (worker 1 never pushes).
  std::vector<std::thread> pulls;
  std::vector<std::unique_ptr<grpc::ClientContext>> pull_ctx;
  for (int i = 0; i < 20; ++i) pull_ctx.push_back(Context(600));
  for (int i = 0; i < 20; ++i) {
    pulls.emplace_back([&, i] {
      v1::PullRequest req;
      req.set_min_version(1);
      v1::PullResponse resp;
      stub->Pull(pull_ctx[i].get(), req, &resp);
    });
  }
  // Let everything reach the server.
  auto st = QueryStatus({address}, absl::Seconds(10));
  EXPECT_EQ(WaitUntil(
                [&] {
                  if (!st.ok() || (*st)[0].waiting_calls() >= 20) return true;
                  st = QueryStatus({address}, absl::Seconds(10));
                  return false;
                },
                absl::Seconds(20), "20 waiting pulls on the server", absl::Milliseconds(20)),
            absl::OkStatus());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_GE((*st)[0].waiting_calls(), 20);

  const absl::Time sigterm = absl::Now();
  server.Signal(SIGTERM);
  const std::optional<int> status =
      server.Wait(absl::Now() + absl::Seconds(kGraceSeconds + 5 + 10));
  const absl::Duration took = absl::Now() - sigterm;
  std::cout << "ps_server: " << DescribeExit(status) << " " << absl::FormatDuration(took)
            << " after SIGTERM" << std::endl;
  EXPECT_LE(took, absl::Seconds(kGraceSeconds + 5)) << "shutdown took too long; the server's log:\n"
                                                     << server.LogTail(20);
  ASSERT_TRUE(status.has_value()) << server.LogTail(20);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << DescribeExit(status) << "\n" << server.LogTail(20);

  for (auto& c : pull_ctx) c->TryCancel();
  for (auto& t : pulls) t.join();
  for (Open& o : open) o.ctx->TryCancel();
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::cerr << "usage: shutdown_test PATH_TO_ps_server" << std::endl;
    return 2;
  }
  ps::g_server_binary = argv[1];
  return RUN_ALL_TESTS();
}
