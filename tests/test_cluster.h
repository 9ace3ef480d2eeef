// TestCluster: S real parameter servers started in-process on 127.0.0.1 with
// ephemeral ports, for RPC tests, and clients for them. Stops the servers on
// destruction.
#ifndef PS_TESTS_TEST_CLUSTER_H_
#define PS_TESTS_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "tools/local_servers.h"

namespace ps {

class TestCluster {
 public:
  TestCluster(int num_shards, int num_workers, Mode mode, float lr,
              absl::Duration default_wait = absl::Seconds(60)) {
    auto started = LocalServers::Start(num_shards, num_workers, mode, lr, default_wait);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) local_ = *std::move(started);
  }

  const std::vector<std::string>& addresses() const { return local_.addresses; }

  // A client for worker `worker_id` of `num_workers`, connected to every shard.
  absl::StatusOr<std::unique_ptr<PsClient>> Connect(
      int worker_id, int num_workers,
      ClientOptions::Transport transport = ClientOptions::Transport::kStream) const {
    return PsClient::Connect(ClientOptionsFor(worker_id, num_workers, transport));
  }

  ClientOptions ClientOptionsFor(int worker_id, int num_workers,
                                 ClientOptions::Transport transport) const {
    ClientOptions co;
    co.servers = local_.addresses;
    co.worker_id = worker_id;
    co.num_workers = num_workers;
    co.transport = transport;
    return co;
  }
  PsServer* server(int s) { return local_.servers[s].get(); }

 private:
  LocalServers local_;
};

// For tests parameterized over the client transports.
inline auto AllTransports() {
  return ::testing::Values(ClientOptions::Transport::kStream, ClientOptions::Transport::kUnary);
}
inline std::string TransportName(const ::testing::TestParamInfo<ClientOptions::Transport>& info) {
  return info.param == ClientOptions::Transport::kStream ? "stream" : "unary";
}

}  // namespace ps

#endif  // PS_TESTS_TEST_CLUSTER_H_
