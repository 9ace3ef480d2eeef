// The route stamp (rpc/route.h) through real ps_server processes (the
// binary is argv[1]): two shards on unix sockets are killed and come back
// on each other's socket. A client that still routes by the old list sends
// its push for shard 0 to the socket that now serves shard 1: the server
// refuses it before acting, naming both shards, and the weights stay as
// they were; a client routing by the new list trains as usual.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unix_socket_dir.h"
#include "tools/process/server_process.h"

namespace ps {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

std::string server_binary;  // argv[1]

// One tensor cut 4 and 4: each shard's slice is as long as the other's, so
// only the route tells a push for shard 0 from one for shard 1.
const ModelSpec kSpec = {{"w", {8}}};
const TensorList kInit = {{1, 2, 3, 4, 5, 6, 7, 8}};

class ShardRouteTest : public ::testing::TestWithParam<ClientOptions::Transport> {
 protected:
  std::unique_ptr<ServerProcess> Start(int shard, const std::string& socket) {
    static int started = 0;
    ServerProcessOptions o;
    o.binary = server_binary;
    o.dir = ::testing::TempDir();
    o.name = absl::StrCat("route", started++);
    o.listen = sockets_.Address(socket);
    o.flags = {absl::StrCat("--shard_id=", shard),
               "--num_shards=2",
               "--num_workers=1",
               "--mode=async",
               "--lr=1",
               "--worker_timeout=0"};
    absl::StatusOr<std::unique_ptr<ServerProcess>> p = ServerProcess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  std::unique_ptr<PsClient> Connect(const std::vector<std::string>& servers) {
    ClientOptions o;
    o.servers = servers;
    o.transport = GetParam();
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  UnixSocketDir sockets_;
};

TEST_P(ShardRouteTest, APushThatReachesAnotherShardsServerIsRefusedUnapplied) {
  const std::string a = absl::StrCat("a", static_cast<int>(GetParam()), ".sock");
  const std::string b = absl::StrCat("b", static_cast<int>(GetParam()), ".sock");
  std::unique_ptr<ServerProcess> s0 = Start(0, a);
  std::unique_ptr<ServerProcess> s1 = Start(1, b);
  ASSERT_TRUE(s0 != nullptr && s1 != nullptr);
  const std::vector<std::string> before = {s0->address(), s1->address()};
  std::unique_ptr<PsClient> stale = Connect(before);
  ASSERT_NE(stale, nullptr);
  ASSERT_TRUE(stale->Init(kSpec, &kInit).ok());

  // Both die, and come back on each other's socket, where a client
  // routing by the new list creates the parameters again.
  for (auto* s : {&s0, &s1}) {
    (*s)->process().Signal(SIGKILL);
    (*s)->process().Wait(absl::Now() + absl::Seconds(5));
  }
  s0 = Start(0, b);
  s1 = Start(1, a);
  ASSERT_TRUE(s0 != nullptr && s1 != nullptr);
  ASSERT_EQ(s0->address(), before[1]);
  std::unique_ptr<PsClient> fresh = Connect({s0->address(), s1->address()});
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(fresh->Init(kSpec, &kInit).ok());

  // The stale client's push: its connections broke with the servers (a
  // call may fail UNAVAILABLE while they reconnect), then the calls reach
  // the swapped servers, which refuse them.
  const TensorList grads = {{1, 1, 1, 1, 1, 1, 1, 1}};
  absl::Status pushed;
  for (int i = 0; i < 20; ++i) {
    pushed = stale->Push(grads);
    if (pushed.code() != absl::StatusCode::kUnavailable) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(pushed.code(), absl::StatusCode::kFailedPrecondition) << pushed;
  // Either shard's refusal may come first.
  EXPECT_THAT(std::string(pushed.message()),
              AnyOf(HasSubstr("meant for shard 0 of 2 but reached the server of shard 1 of 2"),
                    HasSubstr("meant for shard 1 of 2 but reached the server of shard 0 of 2")));
  TensorList weights;
  ASSERT_TRUE(fresh->Pull(0, &weights).ok());
  EXPECT_EQ(weights, kInit);  // nothing was applied

  // The new list trains: lr 1, gradient 1 everywhere.
  ASSERT_TRUE(fresh->Push(grads).ok());
  ASSERT_TRUE(fresh->Pull(1, &weights).ok());
  EXPECT_EQ(weights, (TensorList{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

INSTANTIATE_TEST_SUITE_P(Transports, ShardRouteTest,
                         ::testing::Values(ClientOptions::Transport::kStream,
                                           ClientOptions::Transport::kUnary));

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: shard_route_test PS_SERVER\n");
    return 2;
  }
  ps::server_binary = argv[1];
  return RUN_ALL_TESTS();
}
